/**
 * The protocol between the sweep program and the sweep runner (the leased command of one server
 * combination, python/hyperloom/sweep.py, started as `<Ray's python> <package>/python sweep` on the
 * leased node: services/PackagePaths.ts `pythonEntry`). The runner starts the engine once, waits
 * until it is ready, then runs client invocations one at a time on request, until asked to stop.
 * The node shares nothing with hyperloom's host but Ray (docs/design.md#sweeps-at-cluster-scale),
 * so everything goes through the lease (services/SweepControl.ts):
 *
 * - requests, one JSON line each on the runner's stdin: a client run `{"seq", "argv", "dir",
 *   "env", "between", "timeout_sec"}` (`dir` is the run's folder on hyperloom's host) or
 *   `{"stop": true}`;
 * - messages, lines of the runner's stdout that start with RUNNER_MESSAGE_PREFIX, then JSON:
 *   `{"engine": EngineStatus}` (`state` `starting` → `ready` | `failed`, then `stopped` |
 *   `exited`: the engine died with no request pending; the port, the readiness time, the engine's
 *   exit code and runtime, the node's facts), `{"file": PATH, "at": OFFSET, "data": BASE64}` (bytes
 *   of a file kept under the engine's or a run's folder: server.log, client.log, the result file,
 *   between.log; at 0 the file starts anew) and `{"done": RunDone}` (how a run went: exit code,
 *   timed out, runtimes, whether the engine was still alive after it, epoch times of the client's
 *   start and end), sent after the run's files.
 *
 * Pure: schemas and names only.
 */
import { Either, Schema } from "effect"
import { EngineConfig } from "../Observations.js"
import { CheckRun, NodeFacts, WarmupRun } from "../Serving.js"

/** What starts a runner's message line (an ASCII record separator, then a name no output has). */
export const RUNNER_MESSAGE_PREFIX = "\u001ehyperloom-sweep "

const N = Schema.NullOr(Schema.Number)

export const EngineStatus = Schema.Struct({
  version: Schema.Literal(1),
  state: Schema.Literal("starting", "ready", "failed", "stopped", "exited"),
  /** Why it failed before ready. */
  outcome: Schema.NullOr(
    Schema.Literal("server_exited", "ready_timeout", "start_failed", "stopped", "port_taken")
  ),
  port: N,
  base_url: Schema.NullOr(Schema.String),
  ready_sec: N,
  exit_code: N,
  runtime_sec: N,
  gone: Schema.Boolean,
  node: Schema.optional(NodeFacts),
  /** What the engine reported of its effective configuration once ready (python/hyperloom/sampler.py). */
  engine_config: Schema.optional(Schema.NullOr(EngineConfig)),
  /** The `--check` run after readiness, before `ready` was said (docs/trust.md#is-the-number-valid). */
  check: Schema.optional(Schema.NullOr(CheckRun)),
  /** The `--warmup` requests after the check. */
  warmup: Schema.optional(Schema.NullOr(WarmupRun))
})
export type EngineStatus = typeof EngineStatus.Type

export const RunDone = Schema.Struct({
  seq: Schema.Number,
  exit_code: N,
  timed_out: Schema.Boolean,
  runtime_sec: N,
  between_exit_code: N,
  between_sec: N,
  engine_alive: Schema.Boolean,
  engine_exit_code: N,
  client_started: N,
  client_ended: N,
  /** What the samplers saw during the run, by sampler name (python/hyperloom/clientrun.py's seam). */
  observations: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})
export type RunDone = typeof RunDone.Type

export interface ClientRequest {
  readonly argv: ReadonlyArray<string>
  /** The run's directory: client.log goes there. */
  readonly dir: string
  /** Added to the client's environment (HYPERLOOM_RESULT_FILE, …). */
  readonly env: Readonly<Record<string, string>>
  /** A shell command line run (`sh -c`) before the client, e.g. a prefix-cache reset. */
  readonly between: string | null
  readonly timeout_sec: number | null
}

export type ControlRequest = ClientRequest | { readonly stop: true }

const decodeEngine = Schema.decodeUnknownEither(Schema.parseJson(EngineStatus))
const decodeDone = Schema.decodeUnknownEither(Schema.parseJson(RunDone))

export const parseEngineStatus = (text: string): EngineStatus | undefined =>
  Either.getOrUndefined(decodeEngine(text))

export const parseRunDone = (text: string): RunDone | undefined => Either.getOrUndefined(decodeDone(text))

const RunnerMessage = Schema.Union(
  Schema.Struct({ engine: EngineStatus }),
  Schema.Struct({ done: RunDone }),
  Schema.Struct({ file: Schema.String, at: Schema.Number, data: Schema.String })
)
const decodeMessage = Schema.decodeUnknownEither(Schema.parseJson(RunnerMessage))

export type RunnerMessage =
  | { readonly _tag: "engine"; readonly status: EngineStatus }
  | { readonly _tag: "done"; readonly done: RunDone }
  | { readonly _tag: "file"; readonly file: string; readonly at: number; readonly data: string }

/** A runner's message line (RUNNER_MESSAGE_PREFIX, JSON); undefined when it is not one. */
export const parseRunnerMessage = (line: string): RunnerMessage | undefined => {
  if (!line.startsWith(RUNNER_MESSAGE_PREFIX)) return undefined
  const m = Either.getOrUndefined(decodeMessage(line.slice(RUNNER_MESSAGE_PREFIX.length)))
  if (m === undefined) return undefined
  if ("engine" in m) return { _tag: "engine", status: m.engine }
  if ("done" in m) return { _tag: "done", done: m.done }
  return { _tag: "file", file: m.file, at: m.at, data: m.data }
}
