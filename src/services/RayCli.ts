import { CommandExecutor } from "@effect/platform"
import { Cause, Clock, Context, Effect, Exit, Layer } from "effect"
import { RayCommandFailed, RayCommandTimeout, type RayNotFound } from "../domain/Errors.js"
import type { ResourceMap } from "../domain/Snapshot.js"
import { ClusterInspector, type ClusterInspectorShape } from "./ClusterInspector.js"
import { rayExecutable } from "./RayInstall.js"
import { Settings } from "./Settings.js"
import { runBounded } from "./Subprocess.js"

/** What `ray status` said when used as the probe. */
export interface ProbeResult {
  /** True when `ray status` exited 0 within the timeout. */
  readonly answered: boolean
  readonly exitCode: number | undefined
  readonly timedOut: boolean
  readonly output: string
  readonly elapsedMs: number
}

/** A `ray start --head` invocation, as data; rendered to an argv array, never a shell string. */
export interface HeadStartSpec {
  readonly port: number
  readonly numCpus: number | undefined
  readonly numGpus: number | undefined
  /** Custom resources, `serving_slot` included when wanted; one JSON argv element. */
  readonly resources: ResourceMap
  readonly timeoutSec: number
}

export interface RayCliShape {
  /** The `ray` executable that will be run (HYPERLOOM_RAY, the project's venv, else PATH). */
  readonly executable: Effect.Effect<string, RayNotFound>
  /** `ray status` with HYPERLOOM_RAY_STATUS_TIMEOUT_SEC; never fails for a cluster that does not answer. */
  readonly probe: () => Effect.Effect<ProbeResult, RayNotFound>
  readonly start: (
    spec: HeadStartSpec
  ) => Effect.Effect<void, RayNotFound | RayCommandFailed | RayCommandTimeout>
  /** `ray stop --force`: kills every Ray process on the host. */
  readonly stop: (
    timeoutSec?: number
  ) => Effect.Effect<void, RayNotFound | RayCommandFailed | RayCommandTimeout>
}

export class RayCli extends Context.Tag("hyperloom/services/RayCli")<RayCli, RayCliShape>() {}

/** The argv (after the executable) of a head start, as docs/design.md#ensuring-a-cluster writes it. */
export const headStartArgs = (spec: HeadStartSpec): ReadonlyArray<string> => [
  "start",
  "--head",
  `--port=${spec.port}`,
  ...(spec.numCpus !== undefined ? [`--num-cpus=${spec.numCpus}`] : []),
  ...(spec.numGpus !== undefined ? [`--num-gpus=${spec.numGpus}`] : []),
  `--resources=${JSON.stringify(spec.resources)}`,
  "--disable-usage-stats",
  "--include-dashboard=false"
]

/** Ray's own chatter that is no use to an operator. */
const RAY_ENV = { RAY_USAGE_STATS_ENABLED: "0" } as const

/**
 * A head serves the whole host: it must not inherit the caller's device mask (an empty
 * CUDA_VISIBLE_DEVICES makes `ray start --num-gpus=N` fail, a partial one hides GPUs from every
 * lease). Leases get their devices from Ray, per actor.
 */
export const DEVICE_VARIABLES = [
  "CUDA_VISIBLE_DEVICES",
  "HIP_VISIBLE_DEVICES",
  "ROCR_VISIBLE_DEVICES"
] as const

/**
 * The live RayCli over a resolved `ray` executable. Every call has a timeout and terminates the
 * child's process tree on timeout or interruption (see Subprocess.runBounded).
 */
export const make = (options: {
  readonly executable: Effect.Effect<string, RayNotFound>
  readonly statusTimeoutSec: number
  /** The environment `ray` runs in (the Settings layer's `env`), less the device mask. */
  readonly env: Readonly<Record<string, string | undefined>>
}) =>
  Effect.gen(function* () {
    const executor = yield* CommandExecutor.CommandExecutor
    const env = { ...options.env, ...RAY_ENV }
    const executable = yield* Effect.cached(options.executable)
    const run = (args: ReadonlyArray<string>, timeoutSec: number) =>
      Effect.flatMap(executable, (exe) =>
        runBounded([exe, ...args], { timeoutSec, env, unsetEnv: DEVICE_VARIABLES }).pipe(
          Effect.provideService(CommandExecutor.CommandExecutor, executor),
          // The executable was found a moment ago; failing to spawn it now is an OS impossibility.
          Effect.orDie,
          Effect.map((r) => ({ ...r, argv: ["ray", ...args] }))
        )
      )
    const checked = (args: ReadonlyArray<string>, timeoutSec: number) =>
      Effect.flatMap(
        run(args, timeoutSec),
        (r): Effect.Effect<void, RayCommandTimeout | RayCommandFailed> =>
          r.timedOut
            ? Effect.fail(new RayCommandTimeout({ argv: r.argv, timeoutSec }))
            : r.exitCode !== 0
              ? Effect.fail(
                  new RayCommandFailed({
                    argv: r.argv,
                    exitCode: r.exitCode ?? -1,
                    output: `${r.stdout}\n${r.stderr}`
                  })
                )
              : Effect.void
      )
    return RayCli.of({
      executable,
      probe: Effect.fn("RayCli.probe")(function* () {
        const r = yield* run(["status"], options.statusTimeoutSec)
        return {
          answered: !r.timedOut && r.exitCode === 0,
          exitCode: r.exitCode,
          timedOut: r.timedOut,
          output: `${r.stdout}${r.stderr}`.trim(),
          elapsedMs: r.elapsedMs
        }
      }),
      start: Effect.fn("RayCli.start")(function* (spec: HeadStartSpec) {
        yield* checked(headStartArgs(spec), spec.timeoutSec)
      }),
      stop: Effect.fn("RayCli.stop")(function* (timeoutSec = 90) {
        yield* checked(["stop", "--force"], timeoutSec)
      })
    })
  })

/**
 * The probe as the live layer runs it: the cluster's GCS first (the same resolution and read the
 * inspector does, milliseconds on a warm process), and only when the GCS does not answer,
 * `ray status` (a Python start, ~0.4-1 s). A GCS that answers is a cluster `ray status` would
 * report, so the verdict is the same; `ray status` keeps the last word whenever the GCS is silent.
 */
const gcsFirst = (inspector: ClusterInspectorShape, fallback: RayCliShape["probe"]): RayCliShape["probe"] =>
  Effect.fn("RayCli.probe")(function* () {
    const started = yield* Clock.currentTimeMillis
    // Any failure to read the GCS (a defect included: e.g. no proto to load) leaves it to `ray status`.
    const read = yield* inspector.resolve.pipe(
      Effect.flatMap((cluster) => inspector.snapshot(cluster.gcsAddress)),
      Effect.exit
    )
    if (Exit.isSuccess(read)) {
      return {
        answered: true,
        exitCode: 0,
        timedOut: false,
        output: `the GCS at ${read.value.gcsAddress} answered`,
        elapsedMs: (yield* Clock.currentTimeMillis) - started
      } satisfies ProbeResult
    }
    yield* Effect.logDebug(`GCS probe: ${Cause.pretty(read.cause).split("\n")[0]}; asking \`ray status\``)
    return yield* fallback()
  })

/** The live layer: the `ray` executable and probe timeout the settings name, the GCS probed first. */
export const layer: Layer.Layer<
  RayCli,
  never,
  Settings | ClusterInspector | CommandExecutor.CommandExecutor
> = Layer.effect(
  RayCli,
  Effect.gen(function* () {
    const settings = yield* Settings
    const inspector = yield* ClusterInspector
    const cli = yield* make({
      executable: rayExecutable(settings),
      statusTimeoutSec: settings.statusTimeoutSec,
      env: settings.env
    })
    return RayCli.of({ ...cli, probe: gcsFirst(inspector, cli.probe) })
  })
)

// ---- the test layer --------------------------------------------------------------------------

/** One call a test RayCli received. */
export interface RayCliCall {
  readonly op: "probe" | "start" | "stop"
  readonly spec?: HeadStartSpec
}

/** What a test RayCli answers (defaults: the probe answers, start and stop succeed). */
export interface TestScript {
  readonly probe?: () => ProbeResult
  readonly start?: (spec: HeadStartSpec) => Effect.Effect<void, RayCommandFailed | RayCommandTimeout>
  readonly stop?: () => Effect.Effect<void, RayCommandFailed | RayCommandTimeout>
}

/**
 * A scripted RayCli: answers from `script` and appends every call to `calls` (pass your own
 * array to read them back). Nothing is run.
 */
export const layerTest = (script: TestScript = {}, calls: Array<RayCliCall> = []): Layer.Layer<RayCli> => {
  const answered: ProbeResult = { answered: true, exitCode: 0, timedOut: false, output: "", elapsedMs: 1 }
  return Layer.succeed(
    RayCli,
    RayCli.of({
      executable: Effect.succeed("ray"),
      probe: () =>
        Effect.sync(() => {
          calls.push({ op: "probe" })
          return script.probe?.() ?? answered
        }),
      start: (spec) =>
        Effect.suspend(() => {
          calls.push({ op: "start", spec })
          return script.start?.(spec) ?? Effect.void
        }),
      stop: () =>
        Effect.suspend(() => {
          calls.push({ op: "stop" })
          return script.stop?.() ?? Effect.void
        })
    })
  )
}
