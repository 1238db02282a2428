import { Either, Schema } from "effect"

/**
 * Serving benchmarks (SPEC §10): what the serving runner (`python/hyperloom/serve.py`, the leased
 * command of a `baseline run --server` attempt) records in `<attempt>/serve.json`, and the session's
 * environment record (`<session>/environment.json`).
 */

export const SERVE_STATUS_FILE = "serve.json"
export const SERVER_LOG = "server.log"
export const CLIENT_LOG = "client.log"
export const ENVIRONMENT_FILE = "environment.json"

export const DEFAULT_READY_PATH = "/health"
export const DEFAULT_READY_TIMEOUT_SEC = 1800

const NullableNumber = Schema.NullOr(Schema.Number)

export const NodeFacts = Schema.Struct({
  hostname: Schema.optional(Schema.String),
  python: Schema.optional(Schema.String),
  ray_version: Schema.optional(Schema.String),
  cuda_visible_devices: Schema.optional(Schema.NullOr(Schema.String)),
  engines: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  gpus: Schema.optional(Schema.Array(Schema.String))
})
export type NodeFacts = typeof NodeFacts.Type

export const ServeStatus = Schema.Struct({
  version: Schema.Literal(1),
  port: NullableNumber,
  base_url: Schema.NullOr(Schema.String),
  outcome: Schema.NullOr(
    Schema.Literal("client_exited", "server_exited", "ready_timeout", "stopped", "start_failed")
  ),
  server: Schema.Struct({
    argv: Schema.Array(Schema.String),
    pid: NullableNumber,
    pgid: NullableNumber,
    ready_sec: NullableNumber,
    exit_code: NullableNumber,
    runtime_sec: NullableNumber,
    stopped_with: Schema.NullOr(Schema.String),
    gone: Schema.Boolean
  }),
  client: Schema.NullOr(
    Schema.Struct({
      argv: Schema.Array(Schema.String),
      exit_code: NullableNumber,
      runtime_sec: NullableNumber
    })
  ),
  node: Schema.optional(NodeFacts)
})
export type ServeStatus = typeof ServeStatus.Type

const decodeStatus = Schema.decodeUnknownEither(Schema.parseJson(ServeStatus))

/** The runner's status file; undefined when missing or unreadable (the runner did not get that far). */
export const parseServeStatus = (text: string): ServeStatus | undefined =>
  Either.getOrUndefined(decodeStatus(text))

/** The session's environment record (SPEC §10): what ran on what. */
export interface EnvironmentRecord {
  readonly recorded_at: string
  readonly attempt: number
  readonly hyperloom_version: string
  readonly ray_version: string | null
  readonly node: {
    readonly id: string | null
    readonly hostname: string | null
    readonly gpu_count: number
    readonly cuda_visible_devices: string | null
    readonly accelerators: ReadonlyArray<string>
  }
  readonly server_argv: ReadonlyArray<string> | null
  readonly client_argv: ReadonlyArray<string>
  /** The serving engines the lease's Python can import, with their versions (`{"vllm": "0.9.2"}`). */
  readonly engines: Readonly<Record<string, string>>
  readonly python: string | null
}

export const environmentRecord = (input: {
  readonly now: string
  readonly attempt: number
  readonly hyperloomVersion: string
  readonly requestedGpus: number
  readonly nodeId: string | undefined
  readonly status: ServeStatus | undefined
  readonly serverArgv: ReadonlyArray<string> | null
  readonly clientArgv: ReadonlyArray<string>
}): EnvironmentRecord => {
  const facts = input.status?.node
  const cvd = facts?.cuda_visible_devices ?? null
  const visible = cvd === null ? [] : cvd.split(",").filter((d) => d.trim() !== "")
  return {
    recorded_at: input.now,
    attempt: input.attempt,
    hyperloom_version: input.hyperloomVersion,
    ray_version: facts?.ray_version ?? null,
    node: {
      id: input.nodeId ?? null,
      hostname: facts?.hostname ?? null,
      gpu_count: visible.length > 0 ? visible.length : input.requestedGpus,
      cuda_visible_devices: cvd,
      accelerators: facts?.gpus ?? []
    },
    server_argv: input.status?.server.argv ?? input.serverArgv,
    client_argv: input.clientArgv,
    engines: facts?.engines ?? {},
    python: facts?.python ?? null
  }
}
