/**
 * AttemptRunner: runs one baseline attempt's command under a serving lease and says
 * how it ended, with the lease's failures in a typed error channel: the baseline program catches
 * `RayClusterInfeasible` by its tag (the attempt is then `ray_cluster_infeasible`, its message
 * starting with the marker) and ends the run on any other lease failure.
 *
 * The live runner is the lease entry (`Leased.runLeasedCommand`: one node, or a group of `--nodes`
 * ranks). It lives beside the programs it runs; the baseline program sees only this tag, so tests
 * script attempts with `layerTest`.
 */
import { Context, Duration, Effect, Layer, Ref } from "effect"
import type {
  ClusterUnreachable,
  EnsureRefused,
  InvalidAddress,
  InvalidSetting,
  MultipleClusters,
  NoClusterFound,
  RayClusterInfeasible,
  RayCommandFailed,
  RayCommandTimeout,
  RayNotFound
} from "../domain/Errors.js"
import type { LeaseWaitExpired } from "../domain/Queue.js"
import { AttemptFiles } from "../services/AttemptFiles.js"
import type { ClusterInspector } from "../services/ClusterInspector.js"
import type { GroupBridge } from "../services/GroupBridge.js"
import type { HostQueue } from "../services/HostQueue.js"
import type { LeaseBridge, LeaseBridgeError, LeaseOutput, LeaseStarted } from "../services/LeaseBridge.js"
import type { ProcFs } from "../services/ProcFs.js"
import type { RayCli } from "../services/RayCli.js"
import type { Settings } from "../services/Settings.js"
import type { LockHeld, LockUnavailable, WorkGate } from "../services/WorkGate.js"
import { appendToTail, type LeaseRunResult } from "./Lease.js"
import { type LeasedSpec, runLeasedCommand } from "./Leased.js"

/** One attempt: the leased command, its environment, its timeout and its output callback. */
export type AttemptSpec = LeasedSpec

/**
 * Every way the lease around an attempt can fail: the cluster cannot serve the request
 * (`RayClusterInfeasible`, the marker), cannot be found, reached or started (`ray`, addresses,
 * settings, a refused ensure), the host lock, or the bridge and its actor.
 */
export type AttemptError =
  | RayClusterInfeasible
  | RayNotFound
  | RayCommandFailed
  | RayCommandTimeout
  | InvalidAddress
  | InvalidSetting
  | NoClusterFound
  | MultipleClusters
  | ClusterUnreachable
  | EnsureRefused
  | LockHeld
  | LockUnavailable
  | LeaseWaitExpired
  | LeaseBridgeError

export interface AttemptRunnerShape {
  /**
   * Holds a lease for the attempt, runs its command, and releases the lease on every exit path
   * (interruption included). The command's timeout starts when it starts (waiting is not failing).
   */
  readonly run: (spec: AttemptSpec) => Effect.Effect<LeaseRunResult, AttemptError>
}

export class AttemptRunner extends Context.Tag("hyperloom/programs/AttemptRunner")<
  AttemptRunner,
  AttemptRunnerShape
>() {}

/** What the live runner needs: the lease program's services. */
export type AttemptRunnerServices =
  | Settings
  | WorkGate
  | LeaseBridge
  | GroupBridge
  | HostQueue
  | ClusterInspector
  | RayCli
  | ProcFs

/** The live runner: the lease entry (one node, or a group when the settings' `nodes` is 2 or more). */
export const layer: Layer.Layer<AttemptRunner, never, AttemptRunnerServices> = Layer.effect(
  AttemptRunner,
  Effect.map(Effect.context<AttemptRunnerServices>(), (services) =>
    AttemptRunner.of({ run: (spec) => Effect.provide(runLeasedCommand(spec), services) })
  )
)

// ---------------------------------------------------------------------------------------------
// Test implementation: a scripted fake

/** What a fake attempt does; every field optional (default: exits 0 at once, prints nothing). */
export interface FakeAttempt {
  /** The lease fails with this (before the command runs). */
  readonly error?: AttemptError | undefined
  /** The command's output lines, in arrival order (each goes to the spec's `onOutput`). */
  readonly output?: ReadonlyArray<LeaseOutput> | undefined
  /** Time the command takes, on the Clock (TestClock works). */
  readonly runFor?: Duration.DurationInput | undefined
  /** The command's runtime it reports (default: `runFor`'s seconds). */
  readonly commandSec?: number | undefined
  /** Seconds the lease reports it waited for the slot before the command started (default 0). */
  readonly waitedSec?: number | undefined
  readonly exitCode?: number | undefined
  /** The command outlived the spec's timeout (its exit code is then null). */
  readonly timedOut?: boolean | undefined
  /** Written to the spec's HYPERLOOM_RESULT_FILE as `{"throughput": …}` (through AttemptFiles). */
  readonly throughput?: unknown
  /** Runs when the command does, after its output (e.g. writes the files a serving runner leaves). */
  readonly effect?: Effect.Effect<void> | undefined
  /** The command never ends on its own (until the attempt is stopped). */
  readonly hang?: boolean | undefined
  /** Where the command ran (default: none reported). */
  readonly started?: LeaseStarted | undefined
}

export interface FakeAttemptLog {
  /** Every attempt's spec, in order. */
  readonly specs: ReadonlyArray<AttemptSpec>
  /** Leases released (every attempt, however it ended). */
  readonly released: number
  /** Attempts stopped from outside (a deadline, Ctrl-C). */
  readonly interrupted: number
}

export class FakeAttemptRunnerLog extends Context.Tag("hyperloom/programs/AttemptRunner/FakeLog")<
  FakeAttemptRunnerLog,
  Effect.Effect<FakeAttemptLog>
>() {}

/**
 * A fake AttemptRunner following `script(spec, n)` for the n-th attempt (1-based, like attempt
 * numbers), plus FakeAttemptRunnerLog to read what happened. Writes result files through
 * AttemptFiles (give it `AttemptFiles.layerTest(memory)` to read them back). Fresh per build.
 */
export const layerTest = (
  script: (spec: AttemptSpec, n: number) => FakeAttempt = () => ({})
): Layer.Layer<AttemptRunner | FakeAttemptRunnerLog, never, AttemptFiles> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const files = yield* AttemptFiles
      const log = yield* Ref.make<FakeAttemptLog>({ specs: [], released: 0, interrupted: 0 })
      const run = Effect.fn("AttemptRunner.run")(function* (spec: AttemptSpec) {
        const n = (yield* Ref.updateAndGet(log, (l) => ({ ...l, specs: [...l.specs, spec] }))).specs.length
        const fake = script(spec, n)
        if (fake.error !== undefined) return yield* Effect.fail(fake.error)
        const tails = { stdout: "", stderr: "" }
        for (const o of fake.output ?? []) {
          tails[o.stream] = appendToTail(tails[o.stream], o.line)
          if (spec.onOutput !== undefined) yield* spec.onOutput(o)
        }
        if (fake.effect !== undefined) yield* fake.effect
        if (fake.hang === true) return yield* Effect.never
        yield* Effect.sleep(fake.runFor ?? Duration.zero)
        const resultFile = spec.env.HYPERLOOM_RESULT_FILE
        if (fake.throughput !== undefined && resultFile !== undefined) {
          yield* Effect.orDie(files.writeJson(resultFile, { throughput: fake.throughput }))
        }
        const commandSec = fake.commandSec ?? Duration.toSeconds(fake.runFor ?? Duration.zero)
        const waitedSec = fake.waitedSec ?? 0
        const result: LeaseRunResult = {
          exitCode: fake.timedOut === true ? null : (fake.exitCode ?? 0),
          timedOut: fake.timedOut === true,
          stdoutTail: tails.stdout.trimEnd(),
          stderrTail: tails.stderr.trimEnd(),
          runtimeSec: waitedSec + commandSec,
          waitedSec,
          commandSec,
          gcsAddress: "127.0.0.1:6379",
          started: fake.started ?? null
        }
        return result
      })
      const runner = AttemptRunner.of({
        run: (spec) =>
          run(spec).pipe(
            Effect.onInterrupt(() => Ref.update(log, (l) => ({ ...l, interrupted: l.interrupted + 1 }))),
            Effect.ensuring(Ref.update(log, (l) => ({ ...l, released: l.released + 1 })))
          )
      })
      return Context.make(AttemptRunner, runner).pipe(Context.add(FakeAttemptRunnerLog, Ref.get(log)))
    })
  )
