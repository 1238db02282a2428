/**
 * The protocol between the sweep program and the sweep runner (the leased command of one server
 * combination, `python -m hyperloom.sweep_runner`, on the leased node). The runner starts the
 * engine once, waits until it is ready, then runs client invocations one at a time on request,
 * until asked to stop. Everything goes through the engine directory (`<session>/combinations/<i>/
 * engine-<n>/`), which the node and hyperloom share (as the serving runner's attempt directory):
 *
 * - `engine.json` (the runner writes it atomically): `state` `starting` → `ready` | `failed`, then
 *   `stopped` | `exited` (the engine died with no request pending); the port, the readiness time,
 *   the engine's exit code and runtime, and the node's facts.
 * - `control/<seq>.json` (hyperloom writes it atomically, seq 1, 2, …): a client run
 *   `{"argv", "dir", "env", "between", "timeout_sec"}` or `{"stop": true}`.
 * - `control/<seq>.done.json` (the runner): how it went (exit code, timed out, runtimes, whether the
 *   engine was still alive after it, epoch times of the client's start and end).
 *
 * Pure: schemas and names only.
 */
import { Either, Schema } from "effect"
import { NodeFacts } from "../Serving.js"

export const ENGINE_STATUS_FILE = "engine.json"
export const CONTROL_DIR = "control"

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
  node: Schema.optional(NodeFacts)
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
  client_ended: N
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
