import { Data, Either, Schema } from "effect"
import { EngineConfig, Observations } from "./Observations.js"
import { redactArgv } from "./Redact.js"

/**
 * Serving benchmarks: the leased command (a plain argv, or a serving command: a server, its
 * readiness check and a client), the serving runner's flags and defaults, what the runner records
 * in `<attempt>/serve.json`, and the session's environment record (`<session>/environment.json`).
 */

export const SERVE_STATUS_FILE = "serve.json"
export const SERVER_LOG = "server.log"
export const CLIENT_LOG = "client.log"
export const ENVIRONMENT_FILE = "environment.json"

/**
 * The serving runner's flags and their defaults, in one place: the runner is always given every
 * flag, so its own defaults never decide anything.
 */
export const RUNNER_DEFAULTS = {
  readyPath: "/health",
  readyTimeoutSec: 1800,
  /** Grace between TERM and KILL when the server is stopped. */
  stopGraceSec: 1.5,
  /** Seconds between progress lines while the server loads. */
  progressEverySec: 5,
  /**
   * Requests sent at once after each engine start, answers discarded, before anything is measured
   * (`--warmup`, docs/trust.md#is-the-number-valid): vLLM compiles and captures its CUDA graphs
   * before /health answers (compile_or_warm_up_model) and SGLang captures its graphs and sends
   * itself one request before it is up, so what is still cold is per shape: a prefill of several
   * sequences, the sampler above batch size one, the first JIT'd kernels. Eight together (request i asking
   * for i + 1 tokens) meet a multi-sequence prefill, then every decode batch size from 8 down to 1
   * as one finishes per step: seconds on a real engine.
   */
  warmup: 8
} as const

/**
 * The most warm-up requests one engine start takes: they are sent at once, a thread each on the
 * node (python/hyperloom/ready.py), and no engine batches more than a few thousand sequences.
 */
export const MAX_WARMUP = 1024

export const DEFAULT_READY_PATH = RUNNER_DEFAULTS.readyPath
export const DEFAULT_READY_TIMEOUT_SEC = RUNNER_DEFAULTS.readyTimeoutSec

/**
 * A serving engine's readiness check: GET `path` (always starting with `/`) until it answers 200,
 * for at most `timeoutSec`. Built once from the CLI's options (`readiness`) and carried whole to the
 * leased command.
 */
export interface Readiness {
  readonly path: string
  readonly timeoutSec: number
}

/** What a lease runs: a plain argv, or a serving command (the runner starts the server, waits, runs the client). */
export type LeasedCommand = Data.TaggedEnum<{
  Argv: { readonly argv: ReadonlyArray<string> }
  Serving: {
    /** The server command line (one string, run with `sh -c` in a process group of its own). */
    readonly server: string
    readonly readiness: Readiness
    /** The client's argv, run once the server is ready. */
    readonly client: ReadonlyArray<string>
    /** Where the runner keeps server.log, client.log and serve.json. */
    readonly dir: string
    readonly stopGraceSec?: number | undefined
    readonly progressEverySec?: number | undefined
    /** `--check`: run once after readiness, before the client (docs/trust.md#is-the-number-valid). */
    readonly check?: string | undefined
    /** `--warmup`: requests after readiness, discarded (default RUNNER_DEFAULTS.warmup). */
    readonly warmup?: number | undefined
  }
  /**
   * A sweep's engine: the sweep runner starts the server, waits for it and keeps it up, running
   * the client runs hyperloom asks for on its stdin (no client of its own; domain/Sweep/Runner.ts).
   */
  Engine: {
    readonly server: string
    readonly readiness: Readiness
    /**
     * The engine's folder on hyperloom's host (server.log, engine.json, control/): the runner never
     * touches it; it names it in the files it sends back through the lease (services/SweepControl.ts).
     */
    readonly dir: string
    readonly stopGraceSec?: number | undefined
    readonly progressEverySec?: number | undefined
    readonly check?: string | undefined
    readonly warmup?: number | undefined
  }
}>
export const LeasedCommand = Data.taggedEnum<LeasedCommand>()
export type ServingCommand = Data.TaggedEnum.Value<LeasedCommand, "Serving">
export type EngineCommand = Data.TaggedEnum.Value<LeasedCommand, "Engine">
/** A command the Python runner leads (serving or engine): its server can run alone on other ranks. */
export type RunnerCommand = ServingCommand | EngineCommand

/** A readiness check with the defaults filled in; the path always starts with `/`. */
export const readiness = (path?: string, timeoutSec?: number): Readiness => {
  const p = path ?? RUNNER_DEFAULTS.readyPath
  return { path: p.startsWith("/") ? p : `/${p}`, timeoutSec: timeoutSec ?? RUNNER_DEFAULTS.readyTimeoutSec }
}

/**
 * The runner's arguments for a serving or engine command (after the runner itself): every flag,
 * then for a serving command the client after `--`.
 */
export const runnerArgs = (command: RunnerCommand, cwd: string): Array<string> => [
  "--server",
  command.server,
  "--ready-path",
  command.readiness.path,
  "--ready-timeout",
  String(command.readiness.timeoutSec),
  "--stop-grace",
  String(command.stopGraceSec ?? RUNNER_DEFAULTS.stopGraceSec),
  "--progress-every",
  String(command.progressEverySec ?? RUNNER_DEFAULTS.progressEverySec),
  "--check",
  command.check ?? "",
  "--warmup",
  String(command.warmup ?? RUNNER_DEFAULTS.warmup),
  "--dir",
  command.dir,
  "--cwd",
  cwd,
  ...(command._tag === "Serving" ? ["--", ...command.client] : [])
]

/** The command line a serving command's server runs with (on a rank of its own, or in the runner's group). */
export const serverArgv = (command: { readonly server: string }): ReadonlyArray<string> => [
  "sh",
  "-c",
  command.server
]

const NullableNumber = Schema.NullOr(Schema.Number)

export const NodeFacts = Schema.Struct({
  hostname: Schema.optional(Schema.String),
  python: Schema.optional(Schema.String),
  ray_version: Schema.optional(Schema.String),
  cuda_visible_devices: Schema.optional(Schema.NullOr(Schema.String)),
  engines: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  gpus: Schema.optional(Schema.Array(Schema.String)),
  /** Ray's id of the node (the lease's actor tells it), docs/design.md#sweeps-at-cluster-scale. */
  ray_node_id: Schema.optional(Schema.NullOr(Schema.String)),
  gpu_driver: Schema.optional(Schema.NullOr(Schema.String)),
  cpu_model: Schema.optional(Schema.NullOr(Schema.String)),
  cpu_count: Schema.optional(Schema.NullOr(Schema.Number))
})
export type NodeFacts = typeof NodeFacts.Type

/** What the runner recorded of a `--check` run (python/hyperloom/ready.py). */
export const CheckRun = Schema.Struct({
  /** null when it was stopped or ran past its time. */
  exit_code: NullableNumber,
  runtime_sec: Schema.Number,
  last_line: Schema.String,
  /** Its whole output, beside serve.json / engine.json. */
  log: Schema.String
})
export type CheckRun = typeof CheckRun.Type

/** What the runner recorded of the `--warmup` requests. */
export const WarmupRun = Schema.Struct({
  requests: Schema.Number,
  ok: Schema.Number,
  failed: Schema.Number,
  sec: Schema.Number
})
export type WarmupRun = typeof WarmupRun.Type

export const ServeStatus = Schema.Struct({
  version: Schema.Literal(1),
  port: NullableNumber,
  base_url: Schema.NullOr(Schema.String),
  outcome: Schema.NullOr(
    Schema.Literal(
      "client_exited",
      "server_exited",
      "ready_timeout",
      "stopped",
      "start_failed",
      "port_taken",
      /** `--check` exited non-zero: the client never ran (docs/trust.md#is-the-number-valid). */
      "check_failed"
    )
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
  node: Schema.optional(NodeFacts),
  /** The `--check` run after readiness; absent when there was none. */
  check: Schema.optional(Schema.NullOr(CheckRun)),
  /** The `--warmup` requests after readiness; absent or null when none were sent. */
  warmup: Schema.optional(Schema.NullOr(WarmupRun)),
  /** The engine's effective configuration, read once after readiness (python/hyperloom's samplers). */
  engine_config: Schema.optional(Schema.NullOr(EngineConfig)),
  /** What the samplers saw while the client ran. */
  observations: Schema.optional(Schema.NullOr(Observations))
})
export type ServeStatus = typeof ServeStatus.Type

const decodeStatus = Schema.decodeUnknownEither(Schema.parseJson(ServeStatus))

/** The runner's status file; undefined when missing or unreadable (the runner did not get that far). */
export const parseServeStatus = (text: string): ServeStatus | undefined =>
  Either.getOrUndefined(decodeStatus(text))

/** A session's environment.json as read (unknown JSON): its record when it has one (a `node` object), else undefined. */
export const environmentOf = (v: unknown): EnvironmentRecord | undefined =>
  typeof v === "object" && v !== null && typeof (v as { node?: unknown }).node === "object"
    ? (v as EnvironmentRecord)
    : undefined

/** The session's environment record (docs/design.md#what-a-serving-session-keeps): what ran on what. */
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

const nullableArgv = (argv: ReadonlyArray<string> | null): ReadonlyArray<string> | null =>
  argv === null ? null : redactArgv(argv)

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
    // kept in the session: known secret shapes redacted (Redact.ts)
    server_argv: nullableArgv(input.status?.server.argv ?? input.serverArgv),
    client_argv: redactArgv(input.clientArgv),
    engines: facts?.engines ?? {},
    python: facts?.python ?? null
  }
}
