import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import { foldSignature } from "../../src/domain/Signature.js"
import {
  beginAttempt,
  CURRENT_SCHEMA_VERSION,
  decodeState,
  finishEnablement,
  INTERRUPTED_ERROR,
  inflightAttempt,
  initialState,
  parseState,
  recoverInterrupted,
  renderState,
  type SessionState,
  type StateProblem
} from "../../src/domain/State.js"

const problem = (text: string): StateProblem => {
  const r = parseState(text)
  if (Either.isRight(r)) return assert.fail(`expected a problem, got a state for ${text.slice(0, 80)}`)
  return r.left
}
const parsed = (text: string): SessionState => {
  const r = parseState(text)
  if (Either.isLeft(r)) return assert.fail(`expected a state, got ${JSON.stringify(r.left)}`)
  return r.right
}

const T0 = "2024-06-01T12:00:00.000Z"
const T1 = "2024-06-01T12:01:30.000Z"

const finished = (number: number, over: Partial<SessionState["baseline_attempts"][number]> = {}) => ({
  number,
  started_at: T0,
  ended_at: T1,
  runtime_sec: 90,
  error_class: "subprocess_nonzero" as const,
  exit_code: 1,
  error: "worker 3 died",
  signature: foldSignature("worker 3 died"),
  throughput: null,
  result_format: null,
  metrics: null,
  ...over
})

/** A v1 file as the first releases wrote it. */
const v1File = {
  schema_version: 1,
  status: "running",
  stop_reason: null,
  stop_ts: null,
  baseline_tput: null,
  baseline_failure_streak: 2,
  baseline_arg_error_streak: 0,
  baseline_total_failures: 2,
  baseline_failure_signature: "worker <n> died at <ip>",
  baseline_attempts: [
    {
      number: 1,
      started_at: T0,
      ended_at: T1,
      runtime_sec: 90,
      error_class: "subprocess_nonzero",
      exit_code: 1,
      error: "worker 3 died at 10.0.0.1:6379",
      throughput: null
    },
    {
      number: 2,
      started_at: T0,
      ended_at: T1,
      runtime_sec: 1,
      error_class: "session_time_exhausted",
      exit_code: null,
      error: "stopped",
      throughput: null
    },
    {
      number: 3,
      started_at: T0,
      ended_at: T1,
      runtime_sec: 90,
      error_class: "subprocess_nonzero",
      exit_code: 1,
      error: "worker 4 died at 10.0.0.2:6379",
      throughput: null
    }
  ]
}

describe("state schema", () => {
  it("the initial state is running, empty and of the current version", () => {
    const s = initialState()
    assert.strictEqual(s.schema_version, 3)
    assert.strictEqual(CURRENT_SCHEMA_VERSION, 3)
    assert.strictEqual(s.status, "running")
    assert.deepStrictEqual(s.enablement, {
      attempts: 0,
      stall_streak: 0,
      inflight: false,
      launch_log_path: null,
      succeeded: false
    })
    assert.deepStrictEqual(s.baseline_attempts, [])
  })

  it("renders exactly the state's field names (docs/design.md#session-state), and parses back to the same state", () => {
    const s: SessionState = {
      ...initialState(),
      status: "stopped",
      stop_reason: "baseline_failed",
      stop_ts: T1,
      baseline_failure_streak: 1,
      baseline_total_failures: 1,
      baseline_last_failure_signature: foldSignature("worker 3 died"),
      baseline_attempts: [finished(1)]
    }
    const text = renderState(s)
    assert.isTrue(text.endsWith("}\n"))
    const json = JSON.parse(text)
    assert.deepStrictEqual(Object.keys(json).sort(), [
      "baseline_arg_error_streak",
      "baseline_attempts",
      "baseline_failure_streak",
      "baseline_last_failure_signature",
      "baseline_total_failures",
      "baseline_tput",
      "enablement",
      "schema_version",
      "status",
      "stop_reason",
      "stop_ts"
    ])
    assert.deepStrictEqual(Object.keys(json.enablement).sort(), [
      "attempts",
      "inflight",
      "launch_log_path",
      "stall_streak",
      "succeeded"
    ])
    assert.deepStrictEqual(Object.keys(json.baseline_attempts[0]).sort(), [
      "ended_at",
      "error",
      "error_class",
      "exit_code",
      "metrics",
      "number",
      "result_format",
      "runtime_sec",
      "signature",
      "started_at",
      "throughput"
    ])
    assert.deepStrictEqual(parsed(text), s)
  })

  it("refuses to render a state that breaks the schema", () => {
    const bad = { ...initialState(), baseline_total_failures: -1 }
    assert.throws(() => renderState(bad))
  })
})

describe("parseState refusals", () => {
  it.each([
    ["not JSON", "{ half", "invalid JSON"],
    ["empty file", "", "invalid JSON"],
    ["not an object", "[1,2]", "not a JSON object"],
    ["no version", JSON.stringify({ status: "running" }), "schema_version is missing"],
    ["string version", JSON.stringify({ ...initialState(), schema_version: "2" }), 'schema_version is "2"'],
    ["version 0", JSON.stringify({ ...initialState(), schema_version: 0 }), "schema_version is 0"],
    ["unknown status", JSON.stringify({ ...initialState(), status: "paused" }), "at status"],
    ["missing enablement", JSON.stringify({ ...initialState(), enablement: undefined }), "at enablement"],
    [
      "bad timestamp",
      JSON.stringify({ ...initialState(), baseline_attempts: [finished(1, { started_at: "yesterday" })] }),
      "at baseline_attempts.0.started_at"
    ],
    [
      "error over 2000 characters",
      JSON.stringify({ ...initialState(), baseline_attempts: [finished(1, { error: "x".repeat(2001) })] }),
      "at baseline_attempts.0.error"
    ],
    [
      "unknown failure class",
      JSON.stringify({
        ...initialState(),
        baseline_attempts: [finished(1, { error_class: "oops" as never })]
      }),
      "at baseline_attempts.0.error_class"
    ],
    [
      "v1 missing its attempts",
      JSON.stringify({ ...v1File, baseline_attempts: undefined }),
      "schema_version 1: at baseline_attempts"
    ]
  ])("%s is corrupt", (_name, text, detail) => {
    const p = problem(text)
    assert.strictEqual(p.kind, "corrupt")
    if (p.kind === "corrupt") {
      assert.include(p.detail, detail)
      assert.notInclude(p.detail, "\n")
    }
  })

  it("a newer schema_version is from the future, whatever else it holds", () => {
    assert.deepStrictEqual(problem(JSON.stringify({ schema_version: 4, anything: true })), {
      kind: "future",
      version: 4
    })
  })

  it("decodeState refuses null", () => {
    assert.isTrue(Either.isLeft(decodeState(null)))
  })
})

describe("migration from version 1", () => {
  it("renames the signature with its version, adds enablement and attempt signatures", () => {
    const s = parsed(JSON.stringify(v1File))
    assert.strictEqual(s.schema_version, 3)
    assert.isTrue(s.baseline_attempts.every((a) => a.result_format === null && a.metrics === null))
    assert.strictEqual(s.baseline_last_failure_signature, "v1:worker <n> died at <ip>")
    assert.strictEqual(s.baseline_last_failure_signature, foldSignature("worker 4 died at 10.0.0.2:6379"))
    assert.deepStrictEqual(s.enablement, initialState().enablement)
    assert.strictEqual(s.baseline_attempts[0]!.signature, foldSignature("worker 3 died at 10.0.0.1:6379"))
    // Uncharged rounds carry no signature.
    assert.isNull(s.baseline_attempts[1]!.signature)
    assert.strictEqual(s.baseline_attempts[2]!.signature, s.baseline_attempts[0]!.signature)
    // Everything else carries over.
    assert.strictEqual(s.baseline_failure_streak, 2)
    assert.strictEqual(s.baseline_total_failures, 2)
    assert.strictEqual(s.baseline_attempts.length, 3)
    assert.strictEqual(s.baseline_attempts[2]!.error, "worker 4 died at 10.0.0.2:6379")
    assert.notProperty(s, "baseline_failure_signature")
  })

  it("keeps a signature that already has the prefix, and a null one", () => {
    assert.strictEqual(
      parsed(JSON.stringify({ ...v1File, baseline_failure_signature: "v1:x <n>" }))
        .baseline_last_failure_signature,
      "v1:x <n>"
    )
    assert.isNull(
      parsed(JSON.stringify({ ...v1File, baseline_failure_signature: null })).baseline_last_failure_signature
    )
  })

  it("the migrated state renders as version 3 and reads back unchanged", () => {
    const s = parsed(JSON.stringify(v1File))
    const again = parsed(renderState(s))
    assert.deepStrictEqual(again, s)
    assert.strictEqual(JSON.parse(renderState(s)).schema_version, 3)
  })
})

describe("migration from version 2", () => {
  it("every attempt gets result_format and metrics null; nothing else changes", () => {
    const v3 = parsed(JSON.stringify(v1File))
    const v2File = {
      ...JSON.parse(renderState(v3)),
      schema_version: 2,
      baseline_attempts: v3.baseline_attempts.map(({ result_format: _f, metrics: _m, ...rest }) => rest)
    }
    const s = parsed(JSON.stringify(v2File))
    assert.strictEqual(s.schema_version, 3)
    assert.deepStrictEqual(s, v3)
  })

  it("a v3 attempt with a result format and metrics round-trips; a bad metric is corrupt", () => {
    const s: SessionState = {
      ...initialState(),
      baseline_attempts: [
        finished(1, {
          error_class: null,
          error: null,
          signature: null,
          throughput: 4101.9,
          result_format: "vllm",
          metrics: { output_throughput: 4101.9, p99_ttft_ms: 611.2, completed: 1000 }
        })
      ]
    }
    assert.deepStrictEqual(parsed(renderState(s)), s)
    const bad = JSON.parse(renderState(s))
    bad.baseline_attempts[0].metrics.p99_ttft_ms = "slow"
    assert.strictEqual(problem(JSON.stringify(bad)).kind, "corrupt")
  })
})

describe("in-flight attempts", () => {
  it("beginAttempt opens one in-flight record, once", () => {
    const s1 = beginAttempt(initialState(), T0)
    const open = inflightAttempt(s1)
    assert.isDefined(open)
    assert.strictEqual(open!.number, 1)
    assert.isNull(open!.ended_at)
    assert.isNull(open!.error_class)
    assert.strictEqual(beginAttempt(s1, T1), s1)
    assert.isUndefined(inflightAttempt(initialState()))
  })

  it("an in-flight record survives a round trip through the file", () => {
    const s1 = beginAttempt(initialState(), T0)
    assert.deepStrictEqual(parsed(renderState(s1)), s1)
  })

  it("recoverInterrupted records it as interrupted without charging anything", () => {
    const before: SessionState = {
      ...initialState(),
      baseline_failure_streak: 1,
      baseline_total_failures: 1,
      baseline_last_failure_signature: "v1:worker <n> died",
      baseline_attempts: [finished(1)]
    }
    const s = recoverInterrupted(beginAttempt(before, T0), T1)
    const a = s.baseline_attempts[1]!
    assert.strictEqual(a.error_class, "interrupted")
    assert.strictEqual(a.ended_at, T1)
    assert.strictEqual(a.runtime_sec, 90)
    assert.strictEqual(a.error, INTERRUPTED_ERROR)
    assert.isNull(a.signature)
    assert.isUndefined(inflightAttempt(s))
    assert.strictEqual(s.baseline_failure_streak, 1)
    assert.strictEqual(s.baseline_total_failures, 1)
    assert.strictEqual(s.baseline_last_failure_signature, "v1:worker <n> died")
    assert.deepStrictEqual(s.baseline_attempts[0], before.baseline_attempts[0])
    assert.strictEqual(s.status, "running")
  })

  it("recoverInterrupted leaves a state without an in-flight attempt as it is", () => {
    const s = { ...initialState(), baseline_attempts: [finished(1)] }
    assert.strictEqual(recoverInterrupted(s, T1), s)
  })

  it("finishEnablement clears inflight only", () => {
    const s = { ...initialState(), enablement: { ...initialState().enablement, attempts: 2, inflight: true } }
    const f = finishEnablement(s)
    assert.isFalse(f.enablement.inflight)
    assert.strictEqual(f.enablement.attempts, 2)
  })
})
