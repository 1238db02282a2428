import { Context, type Effect } from "effect"
import type { RayCommandFailed, RayCommandTimeout, RayNotFound } from "../domain/Errors.js"
import type { ResourceMap } from "../domain/Snapshot.js"

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
  readonly start: (spec: HeadStartSpec) => Effect.Effect<void, RayNotFound | RayCommandFailed | RayCommandTimeout>
  /** `ray stop --force`: kills every Ray process on the host. */
  readonly stop: (timeoutSec?: number) => Effect.Effect<void, RayNotFound | RayCommandFailed | RayCommandTimeout>
}

export class RayCli extends Context.Tag("hyperloom/services/RayCli")<RayCli, RayCliShape>() {}

/** The argv (after the executable) of a head start, as SPEC §3 writes it. */
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
