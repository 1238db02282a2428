import { assert, describe, it } from "@effect/vitest"
import { INFEASIBLE_MARKER, RayClusterInfeasible } from "../../src/domain/Errors.js"
import {
  AttemptOutcome,
  boundedErrorText,
  classifyAttempt,
  type FailureClass,
  hasArgErrorText,
  isCounted,
  isKvCacheOom,
  MAX_ERROR_CHARS
} from "../../src/domain/Failure.js"

const exited = (exitCode: number, outputTail: string, runtimeSec = 120, throughput?: unknown) =>
  classifyAttempt(AttemptOutcome.Exited({ exitCode, runtimeSec, outputTail, throughput }))

describe("classifyAttempt", () => {
  it("a RayClusterInfeasible lease is ray_cluster_infeasible with the marker first", () => {
    const err = new RayClusterInfeasible({
      reason: "no_serving_slot",
      detail: "existing Ray head has no serving_slot resource; restart it with --resources",
      refusals: ["a live driver"],
      restartFailure: undefined
    })
    const r = classifyAttempt(AttemptOutcome.LeaseInfeasible({ message: err.message }))
    assert.strictEqual(r.errorClass, "ray_cluster_infeasible")
    assert.isTrue(r.error!.startsWith(`${INFEASIBLE_MARKER}: existing Ray head`))
    assert.include(r.error!, "not restarting it automatically: a live driver")
    assert.isNull(r.exitCode)
  })

  it("a lease message without the marker gets it in front", () => {
    const r = classifyAttempt(
      AttemptOutcome.LeaseInfeasible({ message: "cluster has 0 GPU(s), 1 requested" })
    )
    assert.strictEqual(r.error, `${INFEASIBLE_MARKER}: cluster has 0 GPU(s), 1 requested`)
  })

  it("a timeout is timeout, with a header and the tail; its launch log is the bare tail", () => {
    const r = classifyAttempt(
      AttemptOutcome.TimedOut({ runtimeSec: 600.2, timeoutSec: 600, outputTail: "loading\n" })
    )
    assert.strictEqual(r.errorClass, "timeout")
    assert.strictEqual(r.error, "attempt timed out after 600 s and was killed\nloading")
    assert.strictEqual(r.launchLog, "loading")
    assert.strictEqual(r.runtimeSec, 600.2)
  })

  it("a silent timeout has an empty launch log", () => {
    const r = classifyAttempt(AttemptOutcome.TimedOut({ runtimeSec: 5, timeoutSec: 5, outputTail: "  \n" }))
    assert.strictEqual(r.launchLog, "")
    assert.strictEqual(r.error, "attempt timed out after 5 s and was killed")
  })

  it.each([
    ["deadline", "session_time_exhausted"],
    ["cancel", "orchestrator_cancelled"]
  ] as const)("stopped by the run (%s) is %s and not counted", (cause, cls) => {
    const r = classifyAttempt(AttemptOutcome.StoppedByRun({ cause, runtimeSec: 3, outputTail: "" }))
    assert.strictEqual(r.errorClass, cls)
    assert.isFalse(isCounted(r.errorClass!))
  })

  const nonzero: ReadonlyArray<readonly [string, string, number, FailureClass]> = [
    ["kv: no gpu memory", "ValueError: No GPU memory for the KV cache", 100, "kv_cache_oom"],
    ["kv: leave no gpu memory", "settings would LEAVE NO GPU MEMORY for it", 5, "kv_cache_oom"],
    ["kv: mem fraction", "Try to raise --mem-fraction-static above 0.8", 400, "kv_cache_oom"],
    [
      "kv wins over arg error",
      "unrecognized arguments: --x\nno gpu memory for the kv cache",
      2,
      "kv_cache_oom"
    ],
    ["unrecognized arguments", "error: unrecognized arguments: --foo", 3, "fast_exit_arg_error"],
    ["invalid choice", "argument --dtype: invalid choice: 'fp9'", 3, "fast_exit_arg_error"],
    ["unknown attention backend", "Unknown attention backend FLASHX", 29.9, "fast_exit_arg_error"],
    ["not a valid", "'abc' is not a valid DType", 1, "fast_exit_arg_error"],
    ["valueerror + argument", "ValueError: bad argument tp=3", 1, "fast_exit_arg_error"],
    ["valueerror + argparse", "ValueError: argparse failed", 1, "fast_exit_arg_error"],
    ["valueerror + backend", "ValueError: backend xyz", 1, "fast_exit_arg_error"],
    ["valueerror + choice", "ValueError: choices are a, b", 1, "fast_exit_arg_error"],
    ["valueerror + cli", "ValueError: CLI flag rejected", 1, "fast_exit_arg_error"],
    ["valueerror + invalid", "valueerror: Invalid value 7", 1, "fast_exit_arg_error"],
    ["valueerror + option", "ValueError: option --x needs a value", 1, "fast_exit_arg_error"],
    ["valueerror + flag", "ValueError: flag conflict", 1, "fast_exit_arg_error"],
    ["valueerror + unknown", "ValueError: Unknown model type", 1, "fast_exit_arg_error"],
    ["valueerror alone", "ValueError: math domain error", 1, "subprocess_nonzero"],
    [
      "valueerror, keyword on another line",
      "ValueError: math domain error\nUsing FLASH backend",
      1,
      "subprocess_nonzero"
    ],
    ["valueerror + client is not cli", "ValueError: client closed", 1, "subprocess_nonzero"],
    ["arg error text but at 30 s", "error: unrecognized arguments: --foo", 30, "subprocess_nonzero"],
    ["arg error text but slow", "error: unrecognized arguments: --foo", 300, "subprocess_nonzero"],
    ["anything else", "Segmentation fault", 1, "subprocess_nonzero"],
    ["nothing printed", "", 1, "subprocess_nonzero"]
  ]
  it.each(nonzero)("non-zero exit, %s", (_name, tail, runtime, cls) => {
    assert.strictEqual(exited(1, tail, runtime).errorClass, cls)
  })

  it("a silent non-zero exit gets a one-line error and an empty launch log", () => {
    const r = exited(137, "")
    assert.strictEqual(r.error, "exited with code 137 and printed nothing")
    assert.strictEqual(r.launchLog, "")
    assert.strictEqual(r.exitCode, 137)
  })

  it("the output tail of a non-zero exit is both the error and the launch log", () => {
    const r = exited(1, "Traceback\nRuntimeError: boom\n")
    assert.strictEqual(r.error, "Traceback\nRuntimeError: boom")
    assert.strictEqual(r.launchLog, r.error)
  })

  it("exit 0 without a throughput is no_report", () => {
    const r = exited(0, "done", 50, undefined)
    assert.strictEqual(r.errorClass, "no_report")
    assert.include(r.error!, "no throughput")
  })

  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY, "12.5", null, { v: 1 }, true])(
    "exit 0 with throughput %s is invalid_measurement",
    (value) => {
      const r = exited(0, "done", 50, value)
      assert.strictEqual(r.errorClass, "invalid_measurement")
      assert.include(r.error!, "not a positive finite number")
    }
  )

  it("exit 0 with a positive throughput is a success", () => {
    const r = exited(0, "ok", 50, 1234.5)
    assert.isNull(r.errorClass)
    assert.isNull(r.error)
    assert.strictEqual(r.throughput, 1234.5)
  })

  it("a non-zero exit is a failure even with a throughput reported", () => {
    assert.strictEqual(exited(2, "crash", 50, 99).errorClass, "subprocess_nonzero")
  })
})

describe("pattern helpers", () => {
  it("kv_cache_oom patterns are case-insensitive and exact", () => {
    assert.isTrue(isKvCacheOom("NO GPU MEMORY FOR THE KV CACHE"))
    assert.isFalse(isKvCacheOom("no gpu memory"))
  })
  it("arg-error patterns", () => {
    assert.isTrue(hasArgErrorText("x\nInvalid Choice: y"))
    assert.isFalse(hasArgErrorText("invalid"))
  })
})

describe("boundedErrorText", () => {
  it("keeps the tail of a long text within the limit", () => {
    const text = "HEAD" + "x".repeat(5000) + "END"
    const r = boundedErrorText(text)
    assert.strictEqual(r.length, MAX_ERROR_CHARS)
    assert.isTrue(r.endsWith("END"))
    assert.isFalse(r.includes("HEAD"))
    assert.isTrue(r.startsWith("…"))
  })

  it("moves the marker line first and keeps it when the rest is cut", () => {
    const text = `${"a".repeat(3000)}\nERROR ${INFEASIBLE_MARKER}: no serving_slot\n${"b".repeat(3000)}\nLAST`
    const r = boundedErrorText(text)
    assert.isAtMost(r.length, MAX_ERROR_CHARS)
    assert.isTrue(r.startsWith(`${INFEASIBLE_MARKER}: no serving_slot\n`))
    assert.isTrue(r.endsWith("LAST"))
  })

  it("leaves a short text that starts with the marker as it is", () => {
    const text = `${INFEASIBLE_MARKER}: cluster has 0 GPU(s)\nmore`
    assert.strictEqual(boundedErrorText(text), text)
  })

  it("cuts an overlong marker line itself to the limit", () => {
    const r = boundedErrorText(`${INFEASIBLE_MARKER}: ${"z".repeat(4000)}`)
    assert.strictEqual(r.length, MAX_ERROR_CHARS)
    assert.isTrue(r.startsWith(INFEASIBLE_MARKER))
  })

  it("puts a header after the marker and before the tail", () => {
    assert.strictEqual(
      boundedErrorText(`x\n${INFEASIBLE_MARKER}: y\nz`, "H"),
      `${INFEASIBLE_MARKER}: y\nH\nx\nz`
    )
  })
})
