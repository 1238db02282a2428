import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, Logger, LogLevel, Option, TestClock } from "effect"
import { EnsureRefused, RayClusterInfeasible } from "../../src/domain/Errors.js"
import { LeasedCommand } from "../../src/domain/Serving.js"
import type { ClusterSnapshot } from "../../src/domain/Snapshot.js"
import { beginAttempt, initialState, renderState, type SessionState } from "../../src/domain/State.js"
import * as AttemptRunner from "../../src/programs/AttemptRunner.js"
import {
  attemptPaths,
  type BaselineOptions,
  describeAttempt,
  runBaseline
} from "../../src/programs/Baseline.js"
import * as AttemptFiles from "../../src/services/AttemptFiles.js"
import * as Enablement from "../../src/services/Enablement.js"
import * as GroupBridge from "../../src/services/GroupBridge.js"
import * as LeaseBridge from "../../src/services/LeaseBridge.js"
import * as ServingRunner from "../../src/services/ServingRunner.js"
import * as StateStore from "../../src/services/StateStore.js"
import * as Testing from "../../src/Testing.js"
import { node, nodeId, nodeResources } from "../support/snapshots.js"

const SESSION = "/sessions/s1"

/** A serving attempt's folder, where the runner leaves its files. */
const servingDir = (spec: AttemptRunner.AttemptSpec) =>
  spec.command._tag === "Serving" ? spec.command.dir : assert.fail("not a serving command")

/** What the fake attempt runner does for one attempt. */
interface FakeAttempt {
  readonly output?: ReadonlyArray<string>
  /** Seconds the attempt takes (on the Clock) and reports as its runtime. */
  readonly runtimeSec?: number
  readonly exitCode?: number
  /** Written to HYPERLOOM_RESULT_FILE as `{"throughput": …}` when defined. */
  readonly throughput?: unknown
  /** Lines with their stream, in arrival order (instead of `output`, which is all stderr). */
  readonly lines?: ReadonlyArray<{ readonly stream: "stdout" | "stderr"; readonly line: string }>
  /** The lease fails with this. */
  readonly error?: RayClusterInfeasible | EnsureRefused
  readonly timedOut?: boolean
  /** Never ends on its own; `started` is completed once it runs. */
  readonly hang?: boolean
}

const infeasible = () =>
  new RayClusterInfeasible({
    reason: "no_serving_slot",
    detail:
      "existing Ray head has no serving_slot resource; restart it with: ray stop --force && ray start --head",
    refusals: ["RAY_ADDRESS=10.0.0.5:6379 is explicit"],
    restartFailure: undefined
  })

/** The test's shorthand as the AttemptRunner test layer's script (`started` completes once it runs). */
const toFake = (a: FakeAttempt, started: Deferred.Deferred<void> | undefined): AttemptRunner.FakeAttempt => ({
  error: a.error,
  output: [...(a.output ?? []).map((line) => ({ stream: "stderr" as const, line })), ...(a.lines ?? [])],
  effect: started !== undefined ? Deferred.succeed(started, undefined).pipe(Effect.asVoid) : undefined,
  hang: a.hang,
  runFor: a.runtimeSec !== undefined ? Duration.seconds(a.runtimeSec) : undefined,
  // the command's own runtime (1 s unless said); the lease's would include ensure and the bridge
  commandSec: a.runtimeSec ?? 1,
  exitCode: a.exitCode,
  timedOut: a.timedOut,
  throughput: a.throughput
})

/** The attempts, scripted through AttemptRunner.layerTest; `specs` are the attempts' specs so far. */
const makeRunner = (script: (n: number) => FakeAttempt) => {
  const specs: Array<AttemptRunner.AttemptSpec> = []
  let started: Deferred.Deferred<void> | undefined
  return {
    specs,
    layer: AttemptRunner.layerTest((spec, n) => {
      specs.push(spec)
      return toFake(script(n), started)
    }),
    /** What the fake runner saw: specs, released leases, interrupted attempts. */
    log: Effect.flatten(AttemptRunner.FakeAttemptRunnerLog),
    onStart: (d: Deferred.Deferred<void>) => {
      started = d
    }
  }
}

interface Setup {
  readonly script: (n: number) => FakeAttempt
  readonly enablement?: (spec: Enablement.EnablementSpec, n: number) => Enablement.FakeEnablement
  readonly seed?: Readonly<Record<string, string>>
}

const setup = (s: Setup) => {
  const memory = AttemptFiles.makeMemoryAttemptFiles()
  const runner = makeRunner(s.script)
  const enablement = { runs: [] as Array<Enablement.EnablementSpec> }
  const lines: Array<string> = []
  const layer = Layer.mergeAll(
    StateStore.layerTest(s.seed),
    Enablement.layerTest(s.enablement, enablement.runs),
    Logger.minimumLogLevel(LogLevel.None)
  ).pipe(Layer.provideMerge(runner.layer), Layer.provideMerge(AttemptFiles.layerTest(memory)))
  const options = (extra: Partial<BaselineOptions> = {}): BaselineOptions => ({
    sessionDir: SESSION,
    request: { gpus: 1, servingSlot: true },
    argv: ["bench", "--model", "m"],
    env: { PATH: "/usr/bin" },
    cwd: "/srv/bench",
    onOutput: (line) => Effect.sync(() => lines.push(line)),
    ...extra
  })
  const loadState = Effect.flatMap(StateStore.StateStore, (store) => store.load(SESSION)).pipe(
    Effect.map(Option.getOrThrow)
  )
  return { memory, runner, enablement, lines, layer, options, loadState }
}

const classes = (s: SessionState) => s.baseline_attempts.map((a) => a.error_class)

const crash = (n: number): FakeAttempt => ({
  exitCode: 1,
  runtimeSec: 40 + n,
  output: [
    `loading model on gpu ${n % 2}`,
    `RuntimeError: worker pid ${4000 + n * 17} lost its connection to 10.0.${n}.7:${40000 + n} ` +
      `(actor ${n.toString(16).repeat(32).slice(0, 32)}, request 0x${(n * 4099).toString(16)}, at 2024-06-0${n}T12:00:0${n}Z)`
  ]
})

describe("Baseline.run on a sweep's session folder (issue 27 item 6)", () => {
  it.effect(
    "is refused (SessionHoldsOther, exit 2) naming the sweep; nothing runs, nothing is written",
    () => {
      const t = setup({ script: () => ({ exitCode: 0, throughput: 10 }) })
      t.memory.files.set(`${SESSION}/sweep.json`, "{}")
      return Effect.gen(function* () {
        const exit = yield* Effect.exit(runBaseline(t.options()))
        assert.isTrue(Exit.isFailure(exit))
        const error = Exit.isFailure(exit)
          ? (exit.cause as { error?: { _tag: string; message: string } }).error
          : undefined
        assert.strictEqual(error?._tag, "SessionHoldsOther")
        assert.include(error?.message, "holds a sweep (sweep.json), not a baseline")
        assert.strictEqual(t.runner.specs.length, 0)
        const state = yield* Effect.flatMap(StateStore.StateStore, (store) => store.load(SESSION))
        assert.isTrue(Option.isNone(state))
      }).pipe(Effect.provide(t.layer))
    }
  )
})

describe("Baseline.run", () => {
  it.effect(
    "ray_cluster_infeasible: one attempt, baseline_failed, no enablement round and no launch log",
    () => {
      const t = setup({ script: () => ({ error: infeasible() }) })
      return Effect.gen(function* () {
        const report = yield* runBaseline(t.options({ enablementCmd: "fix-it --now" }))
        assert.strictEqual(report.state.status, "stopped")
        assert.strictEqual(report.state.stop_reason, "baseline_failed")
        assert.strictEqual(report.state.baseline_attempts.length, 1)
        const a = report.state.baseline_attempts[0]!
        assert.strictEqual(a.error_class, "ray_cluster_infeasible")
        assert.isTrue(
          a.error!.startsWith("ray_cluster_infeasible: existing Ray head has no serving_slot"),
          a.error!
        )
        assert.strictEqual(t.runner.specs.length, 1)
        assert.strictEqual(t.enablement.runs.length, 0)
        assert.strictEqual(report.state.enablement.attempts, 0)
        assert.isFalse([...t.memory.files.keys()].some((f) => f.endsWith("launch.log")))
        assert.include(report.why, "ray_cluster_infeasible")
        assert.deepStrictEqual(yield* t.loadState, report.state)
      }).pipe(Effect.provide(t.layer))
    }
  )

  it.effect(
    "the same failure with changing pids, ports, hex ids and times stops at the second with a v2 signature",
    () => {
      const t = setup({ script: crash })
      return Effect.gen(function* () {
        const fiber = yield* Effect.fork(runBaseline(t.options()))
        yield* TestClock.adjust(Duration.minutes(5))
        const report = yield* Fiber.join(fiber)
        assert.strictEqual(report.state.stop_reason, "baseline_failed")
        assert.deepStrictEqual(classes(report.state), ["subprocess_nonzero", "subprocess_nonzero"])
        const [a1, a2] = report.state.baseline_attempts
        assert.notStrictEqual(a1!.error, a2!.error)
        assert.strictEqual(a1!.signature, a2!.signature)
        const sig = report.state.baseline_last_failure_signature
        assert.isNotNull(sig)
        assert.isTrue(sig!.startsWith("v1:"), sig!)
        assert.strictEqual(sig, a2!.signature)
        assert.include(report.why, "the same way")
        assert.strictEqual(a1!.runtime_sec, 41)
        assert.strictEqual(a1!.exit_code, 1)
      }).pipe(Effect.provide(t.layer))
    }
  )

  it.effect("really different failures stop at the third", () => {
    const messages = [
      "CUDA error: an illegal memory access",
      "tokenizer file missing",
      "NCCL timeout in allreduce"
    ]
    const t = setup({ script: (n) => ({ exitCode: 1, runtimeSec: 45, output: [messages[n - 1] ?? "?"] }) })
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runBaseline(t.options()))
      yield* TestClock.adjust(Duration.minutes(5))
      const report = yield* Fiber.join(fiber)
      assert.strictEqual(report.state.stop_reason, "baseline_failed")
      assert.strictEqual(report.state.baseline_attempts.length, 3)
      assert.strictEqual(report.state.baseline_total_failures, 3)
      assert.include(report.why, "3 failures")
    }).pipe(Effect.provide(t.layer))
  })

  it.effect(
    "two different root causes followed by the same long traceback are different failures (whole output, not the tail)",
    () => {
      // vLLM's shape: the engine core logs the root cause, then the API server's long traceback
      // ends every such failure the same way. The tails (2000 characters) are identical.
      const traceback = [
        "Traceback (most recent call last):",
        ...Array.from(
          { length: 60 },
          (_, i) =>
            `  File "/usr/lib/python3/dist-packages/vllm/v1/engine/core_client.py", line ${100 + i}, in frame_${i}`
        ),
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
      ]
      const causes = [
        "ValueError: some model-specific setting the engine core rejected at load time",
        "torch.OutOfMemoryError: CUDA out of memory while compiling the graph of the model",
        "OSError: the tokenizer files of the model could not be read from the cache"
      ]
      const t = setup({
        script: (n) => ({
          exitCode: 1,
          runtimeSec: 45,
          lines: [
            { stream: "stdout", line: `(EngineCore pid=${300 + n}) ${causes[n - 1] ?? "?"}` },
            ...traceback.map((line) => ({ stream: "stderr" as const, line }))
          ]
        })
      })
      return Effect.gen(function* () {
        const fiber = yield* Effect.fork(runBaseline(t.options()))
        yield* TestClock.adjust(Duration.minutes(5))
        const report = yield* Fiber.join(fiber)
        const [a1, a2, a3] = report.state.baseline_attempts
        // the displayed errors are the same tail, the signatures are not
        assert.strictEqual(a1!.error, a2!.error)
        assert.notStrictEqual(a1!.signature, a2!.signature)
        assert.isTrue(a1!.signature!.startsWith("v1:"), a1!.signature!)
        assert.strictEqual(report.state.baseline_attempts.length, 3)
        assert.deepStrictEqual(classes(report.state), [
          "subprocess_nonzero",
          "subprocess_nonzero",
          "subprocess_nonzero"
        ])
        assert.isDefined(a3)
        assert.include(report.why, "3 failures")
      }).pipe(Effect.provide(t.layer))
    }
  )

  it.effect("the same whole output on other pipes' interleaving is still the same failure", () => {
    const t = setup({
      script: (n) => ({
        exitCode: 1,
        runtimeSec: 45,
        lines:
          n % 2 === 1
            ? [
                { stream: "stdout", line: `step ${n} loading` },
                { stream: "stderr", line: `worker ${n} crashed at 10.0.0.${n}:5000` },
                { stream: "stdout", line: "giving up" }
              ]
            : [
                { stream: "stderr", line: `worker ${n} crashed at 10.0.0.${n}:5000` },
                { stream: "stdout", line: `step ${n} loading` },
                { stream: "stdout", line: "giving up" }
              ]
      })
    })
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runBaseline(t.options()))
      yield* TestClock.adjust(Duration.minutes(5))
      const report = yield* Fiber.join(fiber)
      assert.strictEqual(report.state.baseline_attempts.length, 2)
      assert.include(report.why, "the same way")
    }).pipe(Effect.provide(t.layer))
  })

  it.effect("two argument errors in a row stop as baseline_arg_error", () => {
    const t = setup({
      script: () => ({
        exitCode: 2,
        runtimeSec: 1,
        output: ["bench: error: unrecognized arguments: --bogus"]
      })
    })
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runBaseline(t.options({ enablementCmd: "fix" })))
      yield* TestClock.adjust(Duration.minutes(1))
      const report = yield* Fiber.join(fiber)
      assert.strictEqual(report.state.stop_reason, "baseline_arg_error")
      assert.deepStrictEqual(classes(report.state), ["fast_exit_arg_error", "fast_exit_arg_error"])
      assert.strictEqual(report.state.baseline_arg_error_streak, 2)
    }).pipe(Effect.provide(t.layer))
  })

  it.effect(
    "the same failure whose stdout and stderr lines arrive in another order is still the same failure",
    () => {
      // The two pipes race: the crash line may come before or after the last progress line.
      const progress = (n: number) => ({ stream: "stdout" as const, line: `bench: attempt ${n}; warmup 4/4` })
      const crash = (n: number) => ({
        stream: "stderr" as const,
        line: `RuntimeError: worker pid ${1000 + n} lost 10.0.0.${n}:${4000 + n}`
      })
      const t = setup({
        script: (n) => ({
          exitCode: 1,
          lines: n % 2 === 1 ? [crash(n), progress(n)] : [progress(n), crash(n)]
        })
      })
      return Effect.gen(function* () {
        const fiber = yield* Effect.fork(runBaseline(t.options({})))
        yield* TestClock.adjust(Duration.minutes(1))
        const report = yield* Fiber.join(fiber)
        assert.deepStrictEqual(classes(report.state), ["subprocess_nonzero", "subprocess_nonzero"])
        assert.strictEqual(
          report.state.baseline_attempts[0]!.signature,
          report.state.baseline_attempts[1]!.signature
        )
        assert.isTrue(
          report.state.baseline_attempts[0]!.error!.endsWith("lost 10.0.0.1:4001"),
          "stderr comes last"
        )
      }).pipe(Effect.provide(t.layer))
    }
  )

  it.effect(
    "an argument error is fast by the command's own runtime, not the lease's (ensure and bridge excluded)",
    () => {
      // 29 s of command, 30.5 s of lease: still a fast exit.
      const t = setup({
        script: () => ({
          exitCode: 2,
          runtimeSec: 29,
          output: ["bench: error: unrecognized arguments: --bogus"]
        })
      })
      return Effect.gen(function* () {
        const fiber = yield* Effect.fork(runBaseline(t.options({})))
        yield* TestClock.adjust(Duration.minutes(5))
        const report = yield* Fiber.join(fiber)
        assert.deepStrictEqual(classes(report.state), ["fast_exit_arg_error", "fast_exit_arg_error"])
        assert.strictEqual(report.state.baseline_attempts[0]!.runtime_sec, 29)
      }).pipe(Effect.provide(t.layer))
    }
  )

  it.effect(
    "success records the throughput; the command gets the result file, session dir and attempt number",
    () => {
      const t = setup({ script: () => ({ exitCode: 0, runtimeSec: 3, throughput: 812.5, output: ["done"] }) })
      return Effect.gen(function* () {
        const fiber = yield* Effect.fork(runBaseline(t.options({ attemptTimeoutSec: 600 })))
        yield* TestClock.adjust(Duration.seconds(3))
        const report = yield* Fiber.join(fiber)
        assert.strictEqual(report.state.status, "succeeded")
        assert.strictEqual(report.state.baseline_tput, 812.5)
        assert.strictEqual(report.state.baseline_attempts[0]!.throughput, 812.5)
        assert.isNull(report.state.baseline_attempts[0]!.error_class)
        const spec = t.runner.specs[0]!
        assert.strictEqual(spec.env.HYPERLOOM_RESULT_FILE, `${SESSION}/attempts/1/result.json`)
        // its folder, for a client that writes a directory (AIPerf's --output-artifact-dir)
        assert.strictEqual(spec.env.HYPERLOOM_ATTEMPT_DIR, `${SESSION}/attempts/1`)
        assert.strictEqual(spec.env.HYPERLOOM_SESSION_DIR, SESSION)
        assert.strictEqual(spec.env.HYPERLOOM_ATTEMPT, "1")
        assert.strictEqual(spec.env.PATH, "/usr/bin")
        assert.strictEqual(spec.timeoutSec, 600)
        assert.deepStrictEqual(spec.command, LeasedCommand.Argv({ argv: ["bench", "--model", "m"] }))
        assert.deepStrictEqual(spec.request, { gpus: 1, servingSlot: true })
        assert.isTrue(t.memory.dirs.has(`${SESSION}/attempts/1`))
        assert.deepStrictEqual(t.lines, ["[attempt 1] done"])
      }).pipe(Effect.provide(t.layer))
    }
  )

  it.effect("exit 0 without a result is no_report; a zero throughput is invalid_measurement", () => {
    const t = setup({
      script: (n) =>
        n === 1 ? { exitCode: 0, output: ["ok"] } : { exitCode: 0, throughput: 0, output: ["ok"] }
    })
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runBaseline(t.options()))
      yield* TestClock.adjust(Duration.minutes(1))
      const report = yield* Fiber.join(fiber)
      assert.deepStrictEqual(classes(report.state).slice(0, 2), ["no_report", "invalid_measurement"])
    }).pipe(Effect.provide(t.layer))
  })

  it.effect("an attempt past --attempt-timeout is a timeout failure", () => {
    const t = setup({ script: () => ({ timedOut: true, runtimeSec: 30, output: ["still loading"] }) })
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runBaseline(t.options({ attemptTimeoutSec: 30 })))
      yield* TestClock.adjust(Duration.minutes(5))
      const report = yield* Fiber.join(fiber)
      assert.deepStrictEqual(classes(report.state), ["timeout", "timeout", "timeout"])
      assert.include(report.state.baseline_attempts[0]!.error!, "timed out after 30 s")
    }).pipe(Effect.provide(t.layer))
  })

  it.effect("an enablement command that fixes the failure leads to a successful revalidation", () => {
    let fixed = false
    const t = setup({
      script: () =>
        fixed
          ? { exitCode: 0, runtimeSec: 2, throughput: 99 }
          : { exitCode: 1, runtimeSec: 50, output: ["ImportError: flash_attn is not installed"] },
      enablement: () => ({
        exitCode: 0,
        runFor: Duration.seconds(5),
        output: ["installing flash_attn"],
        effect: Effect.sync(() => {
          fixed = true
        })
      })
    })
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runBaseline(t.options({ enablementCmd: "pip install flash_attn" })))
      yield* TestClock.adjust(Duration.minutes(5))
      const report = yield* Fiber.join(fiber)
      assert.strictEqual(report.state.status, "succeeded")
      assert.strictEqual(report.state.baseline_tput, 99)
      assert.deepStrictEqual(classes(report.state), ["subprocess_nonzero", null])
      assert.isTrue(report.state.enablement.succeeded)
      assert.strictEqual(report.state.enablement.attempts, 1)
      assert.isFalse(report.state.enablement.inflight)
      const launchLog = attemptPaths(SESSION, 1).launchLog
      assert.strictEqual(report.state.enablement.launch_log_path, launchLog)
      assert.include(t.memory.files.get(launchLog)!, "ImportError: flash_attn is not installed")
      assert.strictEqual(t.enablement.runs.length, 1)
      const run = t.enablement.runs[0]!
      assert.strictEqual(run.command, "pip install flash_attn")
      assert.strictEqual(run.env.HYPERLOOM_LAUNCH_LOG, launchLog)
      assert.strictEqual(run.env.HYPERLOOM_SESSION_DIR, SESSION)
      assert.include(t.lines, "[enablement 1] installing flash_attn")
    }).pipe(Effect.provide(t.layer))
  })

  it.effect("an enablement that never fixes it stalls after 5 failed revalidations", () => {
    const t = setup({ script: (n) => ({ exitCode: 1, runtimeSec: 50, output: [`worker ${n} crashed`] }) })
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runBaseline(t.options({ enablementCmd: "try-fix" })))
      yield* TestClock.adjust(Duration.hours(1))
      const report = yield* Fiber.join(fiber)
      assert.strictEqual(report.state.stop_reason, "enablement_stalled")
      assert.strictEqual(report.state.baseline_attempts.length, 6)
      assert.strictEqual(report.state.enablement.stall_streak, 5)
    }).pipe(Effect.provide(t.layer))
  })

  it.effect(
    "--deadline stops the attempt in flight as session_time_exhausted, not charged, lease released",
    () => {
      const t = setup({
        script: (n) => (n === 1 ? { ...crash(1), runtimeSec: 50 } : { hang: true, output: ["serving…"] })
      })
      return Effect.gen(function* () {
        const fiber = yield* Effect.fork(runBaseline(t.options({ deadlineSec: 120 })))
        yield* TestClock.adjust(Duration.seconds(50))
        yield* TestClock.adjust(Duration.seconds(70))
        const report = yield* Fiber.join(fiber)
        assert.strictEqual(report.state.status, "stopped")
        assert.strictEqual(report.state.stop_reason, "session_time_exhausted")
        assert.deepStrictEqual(classes(report.state), ["subprocess_nonzero", "session_time_exhausted"])
        // Only the first attempt is charged; the signature of the first failure stays.
        assert.strictEqual(report.state.baseline_failure_streak, 1)
        assert.strictEqual(report.state.baseline_total_failures, 1)
        assert.strictEqual(
          report.state.baseline_last_failure_signature,
          report.state.baseline_attempts[0]!.signature
        )
        assert.isNull(report.state.baseline_attempts[1]!.signature)
        assert.strictEqual(report.state.baseline_attempts[1]!.runtime_sec, 70)
        assert.include(report.state.baseline_attempts[1]!.error!, "serving…")
        const log = yield* t.runner.log
        assert.strictEqual(log.interrupted, 1)
        assert.strictEqual(log.released, 2)
        assert.deepStrictEqual(yield* t.loadState, report.state)
      }).pipe(Effect.provide(t.layer))
    }
  )

  it.effect("a deadline that passes during the enablement command stops the session, not charged", () => {
    const t = setup({
      script: () => ({ exitCode: 1, runtimeSec: 10, output: ["boom"] }),
      enablement: () => ({ runFor: Duration.minutes(10) })
    })
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runBaseline(t.options({ deadlineSec: 60, enablementCmd: "slow-fix" })))
      yield* TestClock.adjust(Duration.seconds(10))
      yield* TestClock.adjust(Duration.seconds(50))
      const report = yield* Fiber.join(fiber)
      assert.strictEqual(report.state.stop_reason, "session_time_exhausted")
      assert.deepStrictEqual(classes(report.state), ["subprocess_nonzero"])
      assert.isFalse(report.state.enablement.inflight)
      assert.include(report.why, "enablement")
    }).pipe(Effect.provide(t.layer))
  })

  it.effect(
    "interruption (Ctrl-C) ends as cancelled / orchestrator_cancelled, not charged, lease released, state written",
    () => {
      const t = setup({ script: () => ({ hang: true, output: ["warming up"] }) })
      return Effect.gen(function* () {
        const started = yield* Deferred.make<void>()
        t.runner.onStart(started)
        const fiber = yield* Effect.fork(runBaseline(t.options()))
        yield* Deferred.await(started)
        yield* TestClock.adjust(Duration.seconds(7))
        const exit = yield* Fiber.interrupt(fiber)
        assert.isTrue(Exit.isInterrupted(exit))
        const state = yield* t.loadState
        assert.strictEqual(state.status, "cancelled")
        assert.strictEqual(state.stop_reason, "orchestrator_cancelled")
        assert.deepStrictEqual(classes(state), ["orchestrator_cancelled"])
        assert.strictEqual(state.baseline_attempts[0]!.runtime_sec, 7)
        assert.isNotNull(state.baseline_attempts[0]!.ended_at)
        assert.include(state.baseline_attempts[0]!.error!, "warming up")
        assert.strictEqual(state.baseline_failure_streak, 0)
        assert.strictEqual(state.baseline_total_failures, 0)
        assert.strictEqual((yield* t.runner.log).released, 1)
        // The session lock was released: a new run can take the session and resumes it.
        const resumed = yield* Effect.fork(runBaseline(t.options()))
        yield* Effect.yieldNow()
        yield* Fiber.interrupt(resumed)
        const after = yield* t.loadState
        assert.strictEqual(after.baseline_attempts.length, 2)
      }).pipe(Effect.provide(t.layer))
    }
  )

  it.effect(
    "resume after a crash: the in-flight attempt becomes interrupted, not charged, and the run goes on",
    () => {
      const crashed: SessionState = {
        ...beginAttempt(
          {
            ...initialState(),
            baseline_attempts: [],
            baseline_failure_streak: 0
          },
          "1970-01-01T00:00:00.000Z"
        )
      }
      const t = setup({
        seed: { [SESSION]: renderState(crashed) },
        script: () => ({ exitCode: 0, throughput: 10 })
      })
      return Effect.gen(function* () {
        yield* TestClock.adjust(Duration.seconds(30))
        const report = yield* runBaseline(t.options())
        assert.deepStrictEqual(classes(report.state), ["interrupted", null])
        assert.strictEqual(report.state.baseline_attempts[0]!.runtime_sec, 30)
        assert.strictEqual(report.state.baseline_total_failures, 0)
        assert.strictEqual(report.state.status, "succeeded")
        assert.strictEqual(t.runner.specs[0]!.env.HYPERLOOM_ATTEMPT, "2")
      }).pipe(Effect.provide(t.layer))
    }
  )

  it.effect("a session that ended by a stop rule is final: reported again, nothing runs", () => {
    const ended: SessionState = {
      ...initialState(),
      status: "stopped",
      stop_reason: "baseline_arg_error",
      stop_ts: "2024-01-01T00:00:00.000Z"
    }
    const t = setup({
      seed: { [SESSION]: renderState(ended) },
      script: () => ({ exitCode: 0, throughput: 1 })
    })
    return Effect.gen(function* () {
      const report = yield* runBaseline(t.options())
      assert.isTrue(report.alreadyEnded)
      assert.strictEqual(report.attemptsRun, 0)
      assert.strictEqual(report.state.stop_reason, "baseline_arg_error")
      assert.strictEqual(t.runner.specs.length, 0)
      assert.include(report.why, "new --session")
    }).pipe(Effect.provide(t.layer))
  })

  it.effect("a cancelled session resumes, counters as they were", () => {
    const cancelled: SessionState = {
      ...initialState(),
      status: "cancelled",
      stop_reason: "orchestrator_cancelled",
      stop_ts: "2024-01-01T00:00:00.000Z",
      baseline_failure_streak: 1,
      baseline_total_failures: 1
    }
    const t = setup({
      seed: { [SESSION]: renderState(cancelled) },
      script: () => ({ exitCode: 1, output: ["x"] })
    })
    return Effect.gen(function* () {
      const report = yield* runBaseline(t.options())
      // 1 failure before + 2 now = 3 failures.
      assert.strictEqual(report.state.baseline_total_failures, 3)
      assert.strictEqual(report.attemptsRun, 2)
      assert.strictEqual(report.state.stop_reason, "baseline_failed")
    }).pipe(Effect.provide(t.layer))
  })

  it.effect(
    "another lease failure ends the run with its typed error; the attempt is interrupted, not charged",
    () => {
      const t = setup({
        script: (n) =>
          n === 1
            ? { exitCode: 1, output: ["boom"] }
            : { error: new EnsureRefused({ detail: "RAY_ADDRESS=10.0.0.5:6379 is an explicit address" }) }
      })
      return Effect.gen(function* () {
        const exit = yield* Effect.exit(runBaseline(t.options()))
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isFailure(exit)) {
          const failure = exit.cause._tag === "Fail" ? exit.cause.error : undefined
          assert.strictEqual(failure?._tag, "EnsureRefused")
        }
        const state = yield* t.loadState
        assert.strictEqual(state.status, "running")
        assert.deepStrictEqual(classes(state), ["subprocess_nonzero", "interrupted"])
        assert.include(state.baseline_attempts[1]!.error!, "not starting a local Ray head")
        assert.strictEqual(state.baseline_total_failures, 1)
      }).pipe(Effect.provide(t.layer))
    }
  )

  it.effect("a corrupt state is refused: StateCorrupt, nothing runs, the file is left as it was", () => {
    const t = setup({ seed: { [SESSION]: "{ not json" }, script: () => ({ exitCode: 0, throughput: 1 }) })
    return Effect.gen(function* () {
      const exit = yield* Effect.exit(runBaseline(t.options()))
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit) && exit.cause._tag === "Fail") {
        assert.strictEqual(exit.cause.error._tag, "StateCorrupt")
      }
      assert.strictEqual(t.runner.specs.length, 0)
      const again = yield* Effect.exit(Effect.flatMap(StateStore.StateStore, (s) => s.load(SESSION)))
      assert.isTrue(Exit.isFailure(again))
    }).pipe(Effect.provide(t.layer))
  })

  it.live("a corrupt state file on disk stays byte-identical (live store)", () =>
    Effect.gen(function* () {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-baseline-"))
      const file = path.join(dir, "state.json")
      const bytes = '{"schema_version": 2, "status": "running", "broken": tru'
      fs.writeFileSync(file, bytes)
      const runner = makeRunner(() => ({ exitCode: 0, throughput: 1 }))
      const exit = yield* Effect.exit(
        runBaseline({
          sessionDir: dir,
          request: { gpus: 0, servingSlot: true },
          argv: ["true"],
          env: {},
          cwd: dir
        }).pipe(
          Effect.provide(
            Layer.mergeAll(
              StateStore.layer.pipe(Layer.provide(NodeContext.layer)),
              runner.layer.pipe(Layer.provide(AttemptFiles.layerTest())),
              AttemptFiles.layerTest(),
              Enablement.layerTest(),
              Logger.minimumLogLevel(LogLevel.None)
            )
          )
        )
      )
      assert.isTrue(Exit.isFailure(exit))
      assert.strictEqual(fs.readFileSync(file, "utf8"), bytes)
      assert.strictEqual(runner.specs.length, 0)
      // Nothing but the state and the session's lock file (LockFile.ts: the lock is flock(2) on it).
      assert.deepStrictEqual(fs.readdirSync(dir).sort(), [".lock", "state.json"])
      fs.rmSync(dir, { recursive: true, force: true })
    })
  )

  it.effect("a second run on a session in use is refused (SessionLocked)", () => {
    const t = setup({ script: () => ({ hang: true }) })
    return Effect.gen(function* () {
      const started = yield* Deferred.make<void>()
      t.runner.onStart(started)
      const first = yield* Effect.fork(runBaseline(t.options()))
      yield* Deferred.await(started)
      const second = yield* Effect.exit(runBaseline(t.options()))
      assert.isTrue(Exit.isFailure(second))
      if (Exit.isFailure(second) && second.cause._tag === "Fail") {
        assert.strictEqual(second.cause.error._tag, "SessionLocked")
      }
      yield* Fiber.interrupt(first)
    }).pipe(Effect.provide(t.layer))
  })
})

describe("Baseline.run on the live AttemptRunner (the lease program over the package's test layers)", () => {
  const quiet = <A, E>(layer: Layer.Layer<A, E>) => Layer.merge(layer, Logger.minimumLogLevel(LogLevel.None))
  const base: BaselineOptions = {
    sessionDir: SESSION,
    request: { gpus: 1, servingSlot: true },
    argv: ["bench"],
    env: {},
    cwd: "/srv/bench",
    onOutput: () => Effect.void
  }
  const loadState = Effect.flatMap(StateStore.StateStore, (store) => store.load(SESSION)).pipe(
    Effect.map(Option.getOrThrow)
  )

  it.effect(
    "the lease's RayClusterInfeasible (a head without the slot, repair refused) is caught by its tag: the first attempt stops the session with the marker",
    () =>
      Effect.gen(function* () {
        const report = yield* runBaseline({ ...base, enablementCmd: "fix-it" })
        assert.strictEqual(report.state.status, "stopped")
        assert.strictEqual(report.state.stop_reason, "baseline_failed")
        assert.deepStrictEqual(classes(report.state), ["ray_cluster_infeasible"])
        const error = report.state.baseline_attempts[0]!.error!
        assert.isTrue(
          error.startsWith("ray_cluster_infeasible: existing Ray head has no serving_slot"),
          error
        )
        assert.include(error, "not restarting it automatically")
        assert.include(report.why, "ray_cluster_infeasible")
        // never an enablement round, never a lease actor
        assert.strictEqual(report.state.enablement.attempts, 0)
        assert.strictEqual((yield* Effect.flatten(LeaseBridge.FakeLeaseBridgeLog)).opened.length, 0)
      }).pipe(
        // no raylet of the head in /proc: one_local_node refuses the repair
        Effect.provide(
          quiet(Testing.layer({ snapshot: Testing.idleHead({ CPU: 8, GPU: 1 }), processes: [] }))
        )
      )
  )

  it.effect(
    "any other lease failure ends the run with its own typed error; the attempt is interrupted, not charged",
    () =>
      Effect.gen(function* () {
        const exit = yield* Effect.exit(runBaseline(base))
        assert.isTrue(Exit.isFailure(exit) && exit.cause._tag === "Fail")
        if (Exit.isFailure(exit) && exit.cause._tag === "Fail") {
          assert.strictEqual(exit.cause.error._tag, "LeaseBridgeStartFailed")
        }
        const state = yield* loadState
        assert.strictEqual(state.status, "running")
        assert.deepStrictEqual(classes(state), ["interrupted"])
        assert.include(state.baseline_attempts[0]!.error!, "the lease failed: cannot start the lease bridge")
        assert.strictEqual(state.baseline_total_failures, 0)
      }).pipe(
        Effect.provide(
          quiet(
            Testing.layer({
              lease: () => ({
                openError: new LeaseBridge.LeaseBridgeStartFailed({
                  python: "/usr/bin/python3",
                  detail: "No module named 'ray'"
                })
              })
            })
          )
        )
      )
  )

  it.effect(
    "attempts scripted whole inside Testing.layer (the README's recipe): the result goes through its AttemptFiles",
    () =>
      Effect.gen(function* () {
        const report = yield* runBaseline(base)
        assert.strictEqual(report.state.status, "succeeded")
        assert.strictEqual(report.state.baseline_tput, 42)
        assert.strictEqual((yield* Effect.flatten(AttemptRunner.FakeAttemptRunnerLog)).specs.length, 1)
        assert.strictEqual((yield* Effect.flatten(LeaseBridge.FakeLeaseBridgeLog)).opened.length, 0)
      }).pipe(
        Effect.provide(AttemptRunner.layerTest(() => ({ exitCode: 0, throughput: 42 }))),
        Effect.provide(quiet(Testing.layer()))
      )
  )

  const twoNodes = (): ClusterSnapshot => {
    const slot = { CPU: 2, GPU: 2, serving_slot: 1 }
    const head = Testing.idleHead(slot)
    const id = nodeId(0x200)
    return {
      ...head,
      nodes: [...head.nodes, node({ nodeId: id, isHead: false, address: "192.0.2.3", resourcesTotal: slot })],
      resources: [...head.resources, nodeResources({ nodeId: id, total: slot, available: slot })]
    }
  }

  it.effect(
    "--nodes 2 with --server: the engine runs as every rank, the serving runner as rank 0, the group ends with it",
    () =>
      Effect.gen(function* () {
        yield* runBaseline({
          ...base,
          serving: {
            server: "engine --port $HYPERLOOM_PORT",
            readiness: { path: "/health", timeoutSec: 60 }
          }
        })
        const group = (yield* Effect.flatten(GroupBridge.FakeGroupBridgeLog)).opened[0]!
        assert.deepStrictEqual(group.argv, ["sh", "-c", "engine --port $HYPERLOOM_PORT"])
        assert.deepStrictEqual(group.leaderArgv?.slice(0, 4), [
          "py",
          "serve.py",
          "--server",
          "engine --port $HYPERLOOM_PORT"
        ])
        assert.deepStrictEqual(group.leaderArgv?.slice(-2), ["--", "bench"])
        assert.isTrue(group.endWithLeader)
        assert.isTrue(group.rankPorts)
        assert.strictEqual(group.nodes, 2)
        assert.strictEqual((yield* Effect.flatten(LeaseBridge.FakeLeaseBridgeLog)).opened.length, 0)
      }).pipe(
        Effect.provide(quiet(Testing.layer({ settings: { nodes: 2 }, snapshot: twoNodes() }))),
        Effect.provide(ServingRunner.layerTest(["py", "serve.py"]))
      )
  )

  it.effect("--nodes 2 without --server: every rank runs the command", () =>
    Effect.gen(function* () {
      yield* runBaseline(base)
      const group = (yield* Effect.flatten(GroupBridge.FakeGroupBridgeLog)).opened[0]!
      assert.deepStrictEqual(group.argv, ["bench"])
      assert.isUndefined(group.leaderArgv)
      assert.notStrictEqual(group.endWithLeader, true)
    }).pipe(Effect.provide(quiet(Testing.layer({ settings: { nodes: 2 }, snapshot: twoNodes() }))))
  )
})

describe("AttemptFiles (live)", () => {
  it.live(
    "prepare makes the attempt folder and removes a stale result; readThroughput reads the raw value",
    () =>
      Effect.gen(function* () {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-attempt-"))
        const paths = attemptPaths(dir, 3)
        const files = yield* AttemptFiles.AttemptFiles
        fs.mkdirSync(paths.dir, { recursive: true })
        fs.writeFileSync(paths.resultFile, '{"throughput": 1}')
        yield* files.prepare(paths.dir, paths.resultFile)
        assert.isFalse(fs.existsSync(paths.resultFile))
        assert.isUndefined(yield* files.readThroughput(paths.resultFile))
        fs.writeFileSync(paths.resultFile, '{"throughput": 12.5}\n')
        assert.strictEqual(yield* files.readThroughput(paths.resultFile), 12.5)
        fs.writeFileSync(paths.resultFile, '{"throughput": "fast"}')
        assert.strictEqual(yield* files.readThroughput(paths.resultFile), "fast")
        fs.writeFileSync(paths.resultFile, "not json")
        assert.isUndefined(yield* files.readThroughput(paths.resultFile))
        fs.writeFileSync(paths.resultFile, '{"tput": 3}')
        assert.isUndefined(yield* files.readThroughput(paths.resultFile))
        yield* files.writeLaunchLog(paths.launchLog, "line one\nline two")
        assert.strictEqual(fs.readFileSync(paths.launchLog, "utf8"), "line one\nline two\n")
        fs.rmSync(dir, { recursive: true, force: true })
      }).pipe(Effect.provide(AttemptFiles.layer.pipe(Layer.provide(NodeContext.layer))))
  )
})

describe("Enablement (live)", () => {
  it.live(
    "runs the command line with /bin/sh -c, its environment and working directory, streaming lines",
    () =>
      Effect.gen(function* () {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-enable-"))
        const enablement = yield* Enablement.Enablement
        const lines: Array<string> = []
        const run = yield* enablement.run({
          command: 'echo "log=$HYPERLOOM_LAUNCH_LOG" && pwd && echo oops >&2 && touch fixed && exit 3',
          env: { PATH: process.env.PATH, HYPERLOOM_LAUNCH_LOG: "/x/launch.log" },
          cwd: dir,
          onOutput: (line, stream) => Effect.sync(() => lines.push(`${stream}: ${line}`))
        })
        assert.strictEqual(run.exitCode, 3)
        assert.include(lines, "stdout: log=/x/launch.log")
        assert.include(lines, `stdout: ${fs.realpathSync(dir)}`)
        assert.include(lines, "stderr: oops")
        assert.isTrue(fs.existsSync(path.join(dir, "fixed")))
        assert.include(run.outputTail, "oops")
        fs.rmSync(dir, { recursive: true, force: true })
      }).pipe(Effect.provide(Enablement.layer.pipe(Layer.provide(NodeContext.layer))))
  )

  it.live("interruption stops the command's whole process group", () =>
    Effect.gen(function* () {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-enable-"))
      const enablement = yield* Enablement.Enablement
      const started = yield* Deferred.make<void>()
      const fiber = yield* Effect.fork(
        enablement.run({
          command: "sleep 30 & echo $! > child.pid; echo ready; wait",
          env: { PATH: process.env.PATH },
          cwd: dir,
          onOutput: () => Deferred.succeed(started, undefined).pipe(Effect.asVoid)
        })
      )
      yield* Deferred.await(started)
      const pid = Number(fs.readFileSync(path.join(dir, "child.pid"), "utf8").trim())
      const t0 = Date.now()
      yield* Fiber.interrupt(fiber)
      assert.isBelow(Date.now() - t0, 5_000)
      // Gone, or a zombie waiting for its new parent to reap it.
      const alive = () => {
        try {
          const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
          return !stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")
        } catch {
          return false
        }
      }
      for (let i = 0; i < 40 && alive(); i++) yield* Effect.sleep(Duration.millis(50))
      assert.isFalse(alive(), `sleep ${pid} survived`)
      fs.rmSync(dir, { recursive: true, force: true })
    }).pipe(Effect.provide(Enablement.layer.pipe(Layer.provide(NodeContext.layer))))
  )

  it.live("a missing working directory is reported, not a failure", () =>
    Effect.gen(function* () {
      const enablement = yield* Enablement.Enablement
      const run = yield* enablement.run({ command: "true", env: {}, cwd: "/nonexistent/hyperloom-test-dir" })
      assert.isNull(run.exitCode)
      assert.isString(run.startError)
    }).pipe(Effect.provide(Enablement.layer.pipe(Layer.provide(NodeContext.layer))))
  )
})

describe("describeAttempt", () => {
  it("names the attempt, its class, the streaks and what comes next", () => {
    const state: SessionState = {
      ...initialState(),
      baseline_failure_streak: 2,
      baseline_total_failures: 2,
      baseline_attempts: [
        {
          number: 2,
          started_at: "2024-01-01T00:00:00.000Z",
          ended_at: "2024-01-01T00:00:03.000Z",
          runtime_sec: 3,
          error_class: "subprocess_nonzero",
          exit_code: 1,
          error: "boom",
          signature: "v1:boom",
          throughput: null,
          result_format: null,
          metrics: null
        }
      ]
    }
    const line = describeAttempt(state, {
      _tag: "retry",
      why: "attempt 2 failed (subprocess_nonzero); retrying"
    })
    assert.include(line, "attempt 2: subprocess_nonzero, exit 1, 3.0 s")
    assert.include(line, "failure 2")
    assert.include(line, "next: retry")
    assert.include(line, "retrying")
  })
})

describe("Baseline.run with --server (docs/design.md#the-engines-life-in-an-attempt, through test layers)", () => {
  const oomLog = fs.readFileSync(
    path.join(import.meta.dirname, "..", "fixtures", "serving", "vllm-kv-cache-oom.log"),
    "utf8"
  )
  const vllmResult = fs.readFileSync(
    path.join(import.meta.dirname, "..", "fixtures", "serving", "vllm-bench-serve.json"),
    "utf8"
  )
  const status = (outcome: string, over: Record<string, unknown> = {}) =>
    JSON.stringify({
      version: 1,
      port: 40000,
      base_url: "http://127.0.0.1:40000",
      outcome,
      server: {
        argv: ["sh", "-c", "vllm serve m"],
        pid: 10,
        pgid: 9,
        ready_sec: null,
        exit_code: 1,
        runtime_sec: 52.3,
        stopped_with: null,
        gone: true,
        ...over
      },
      client: outcome === "client_exited" ? { argv: ["bench"], exit_code: 0, runtime_sec: 61 } : null,
      node: {
        hostname: "gpu-7",
        ray_version: "2.58.0",
        cuda_visible_devices: "0,1",
        engines: { vllm: "0.9.2" },
        gpus: ["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"]
      }
    })

  const serving = {
    server: "vllm serve m --port $HYPERLOOM_PORT",
    readiness: { path: "/health", timeoutSec: 1800 }
  }

  it.effect(
    "the leased command is the runner; a server dying with vLLM's KV-cache OOM is kv_cache_oom from server.log",
    () => {
      const memory = AttemptFiles.makeMemoryAttemptFiles()
      // the runner leaves the server's log and its serve.json in the attempt's folder
      const runner = AttemptRunner.layerTest((spec) => ({
        effect: Effect.sync(() => {
          const dir = servingDir(spec)
          memory.files.set(`${dir}/server.log`, oomLog)
          memory.files.set(`${dir}/serve.json`, status("server_exited"))
        }),
        output: [{ stream: "stderr", line: "hyperloom-serve: the server exited with code 1" }],
        exitCode: 3,
        commandSec: 53,
        started: { pid: 1, pgid: 1, actorPid: 2, nodeId: "ab".repeat(28), cudaVisibleDevices: "0,1" }
      }))
      return Effect.gen(function* () {
        const report = yield* runBaseline({
          sessionDir: SESSION,
          request: { gpus: 2, servingSlot: true },
          argv: ["vllm", "bench", "serve"],
          env: {},
          cwd: "/srv/bench",
          onOutput: () => Effect.void,
          serving,
          version: "9.9.9"
        })
        const a = report.state.baseline_attempts[0]!
        assert.strictEqual(a.error_class, "kv_cache_oom")
        assert.isTrue(
          a.error!.startsWith("the server exited with code 1 after 52.3 s, before it was ready"),
          a.error!
        )
        assert.include(a.error!, "No available memory for the cache blocks")
        assert.match(a.signature!, /^v1:[0-9a-f]{64}$/)
        assert.strictEqual(a.runtime_sec, 52.3)
        // the leased command: the runner, the server, the attempt's folder, then the client
        const spec = (yield* Effect.flatten(AttemptRunner.FakeAttemptRunnerLog)).specs[0]!
        assert.strictEqual(spec.command._tag, "Serving")
        if (spec.command._tag !== "Serving") return
        assert.strictEqual(spec.command.server, serving.server)
        assert.deepStrictEqual(spec.command.readiness, { path: "/health", timeoutSec: 1800 })
        assert.deepStrictEqual(spec.command.client, ["vllm", "bench", "serve"])
        assert.strictEqual(spec.command.dir, `${SESSION}/attempts/1`)
        const env = JSON.parse(memory.files.get(`${SESSION}/environment.json`)!)
        assert.deepStrictEqual(env.engines, { vllm: "0.9.2" })
        assert.strictEqual(env.node.gpu_count, 2)
        assert.deepStrictEqual(env.node.accelerators, ["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"])
        assert.strictEqual(env.hyperloom_version, "9.9.9")
        assert.strictEqual(env.ray_version, "2.58.0")
        assert.deepStrictEqual(env.client_argv, ["vllm", "bench", "serve"])
      }).pipe(
        Effect.provide(
          Layer.mergeAll(
            StateStore.layerTest(),
            Enablement.layerTest(),
            Logger.minimumLogLevel(LogLevel.None)
          ).pipe(Layer.provideMerge(runner), Layer.provideMerge(AttemptFiles.layerTest(memory)))
        )
      )
    }
  )

  it.effect("a client that ran: the vLLM result's output throughput and metrics are recorded", () => {
    const memory = AttemptFiles.makeMemoryAttemptFiles()
    const runner = AttemptRunner.layerTest((spec) => ({
      effect: Effect.sync(() => {
        const dir = servingDir(spec)
        memory.files.set(`${dir}/server.log`, "INFO ready\n")
        memory.files.set(`${dir}/client.log`, "============ Serving Benchmark Result ============\n")
        memory.files.set(
          `${dir}/serve.json`,
          status("client_exited", { ready_sec: 30, exit_code: 0, stopped_with: "TERM" })
        )
        memory.files.set(spec.env.HYPERLOOM_RESULT_FILE!, vllmResult)
      }),
      exitCode: 0,
      commandSec: 92
    }))
    return Effect.gen(function* () {
      const report = yield* runBaseline({
        sessionDir: SESSION,
        request: { gpus: 1, servingSlot: true },
        argv: ["vllm", "bench", "serve"],
        env: {},
        cwd: "/srv/bench",
        onOutput: () => Effect.void,
        serving
      })
      assert.strictEqual(report.state.status, "succeeded")
      assert.strictEqual(report.state.baseline_tput, 4101.9)
      const a = report.state.baseline_attempts[0]!
      assert.strictEqual(a.result_format, "vllm")
      assert.strictEqual(a.metrics?.p99_itl_ms, 41.3)
      assert.strictEqual(a.metrics?.completed, 1000)
    }).pipe(
      Effect.provide(
        Layer.mergeAll(
          StateStore.layerTest(),
          Enablement.layerTest(),
          Logger.minimumLogLevel(LogLevel.None)
        ).pipe(Layer.provideMerge(runner), Layer.provideMerge(AttemptFiles.layerTest(memory)))
      )
    )
  })

  const fixtureText = (name: string) =>
    fs.readFileSync(path.join(import.meta.dirname, "..", "fixtures", "serving", name), "utf8")
  /** A serving baseline whose every attempt leaves these logs, serve.json and result file. */
  const servingRun = (attempt: {
    readonly serverAlive: boolean
    readonly clientExit: number
    readonly clientLog: string
    readonly result?: string
  }) => {
    const memory = AttemptFiles.makeMemoryAttemptFiles()
    const runner = AttemptRunner.layerTest((spec) => ({
      effect: Effect.sync(() => {
        const dir = servingDir(spec)
        memory.files.set(`${dir}/server.log`, "INFO Application startup complete.\n")
        memory.files.set(`${dir}/client.log`, attempt.clientLog)
        memory.files.set(
          `${dir}/serve.json`,
          status(
            "client_exited",
            attempt.serverAlive
              ? { ready_sec: 3, exit_code: 0, stopped_with: "TERM" }
              : { ready_sec: 3, exit_code: 1, stopped_with: null }
          ).replace('"exit_code":0,"runtime_sec":61', `"exit_code":${attempt.clientExit},"runtime_sec":6`)
        )
        if (attempt.result !== undefined) memory.files.set(spec.env.HYPERLOOM_RESULT_FILE!, attempt.result)
      }),
      exitCode: attempt.clientExit,
      commandSec: 9
    }))
    return runBaseline({
      sessionDir: SESSION,
      request: { gpus: 1, servingSlot: true },
      argv: ["python", "-m", "sglang.bench_serving"],
      env: {},
      cwd: "/srv/bench",
      onOutput: () => Effect.void,
      serving
    }).pipe(
      Effect.provide(
        Layer.mergeAll(
          StateStore.layerTest(),
          Enablement.layerTest(),
          Logger.minimumLogLevel(LogLevel.None)
        ).pipe(Layer.provideMerge(runner), Layer.provideMerge(AttemptFiles.layerTest(memory)))
      )
    )
  }

  it.effect(
    "SGLang's warm-up failure against a live engine is not an argument error: no baseline_arg_error",
    () =>
      Effect.gen(function* () {
        const report = yield* servingRun({
          serverAlive: true,
          clientExit: 1,
          clientLog: fixtureText("sglang-bench-serving-warmup-failed.log")
        })
        assert.notStrictEqual(report.state.stop_reason, "baseline_arg_error")
        assert.isTrue(report.state.baseline_attempts.every((a) => a.error_class !== "fast_exit_arg_error"))
      })
  )

  it.effect(
    "an engine dying under the client is one class for vLLM's client (exit 0, completed 0) and SGLang's (raises)",
    () =>
      Effect.gen(function* () {
        const vllm = yield* servingRun({
          serverAlive: false,
          clientExit: 0,
          clientLog: "============ Serving Benchmark Result ============\n",
          result: fixtureText("vllm-bench-serve-engine-died.json")
        })
        const sglang = yield* servingRun({
          serverAlive: false,
          clientExit: 1,
          clientLog: fixtureText("sglang-bench-serving-engine-died.log")
        })
        const classes = (r: typeof vllm) => [...new Set(r.state.baseline_attempts.map((a) => a.error_class))]
        assert.deepStrictEqual(classes(vllm), ["subprocess_nonzero"])
        assert.deepStrictEqual(classes(sglang), ["subprocess_nonzero"])
        assert.isNull(vllm.state.baseline_tput)
        assert.match(
          vllm.state.baseline_attempts[0]?.error ?? "",
          /^the server exited with code 1 while the client ran/
        )
      })
  )
})
