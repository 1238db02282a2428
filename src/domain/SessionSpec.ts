/**
 * What a baseline session measures, kept in its state so that a later `baseline run` on the same
 * session can tell a resume from a different experiment: the command, the lease (GPUs, the slot)
 * and, for a serving benchmark, the server and its readiness path. Run controls (timeouts, the
 * deadline, the enablement command) may change between runs; these may not. Pure.
 */
import { Data, Either, Schema } from "effect"
import { redactArgv, redactText } from "./Redact.js"

export const BaselineSpec = Schema.Struct({
  argv: Schema.Array(Schema.String),
  gpus: Schema.Number,
  serving_slot: Schema.Boolean,
  server: Schema.NullOr(Schema.String),
  ready_path: Schema.NullOr(Schema.String)
})
export type BaselineSpec = typeof BaselineSpec.Type

export const baselineSpec = (options: {
  readonly argv: ReadonlyArray<string>
  readonly request: { readonly gpus: number; readonly servingSlot: boolean }
  readonly serving?: { readonly server: string; readonly readiness: { readonly path: string } } | undefined
}): BaselineSpec => ({
  // kept in state.json and compared redacted: the command runs as given (Redact.ts)
  argv: redactArgv(options.argv),
  gpus: options.request.gpus,
  serving_slot: options.request.servingSlot,
  server: options.serving === undefined ? null : redactText(options.serving.server),
  ready_path: options.serving?.readiness.path ?? null
})

const quoteArgv = (argv: ReadonlyArray<string>) =>
  argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", "'\\''")}'`)).join(" ")

/** What differs between the session's spec and this run's, one phrase each (empty: the same). */
export const specDifferences = (session: BaselineSpec, run: BaselineSpec): Array<string> => {
  const out: Array<string> = []
  if (quoteArgv(session.argv) !== quoteArgv(run.argv)) {
    out.push(`the command (session: -- ${quoteArgv(session.argv)}; now: -- ${quoteArgv(run.argv)})`)
  }
  if (session.gpus !== run.gpus) out.push(`--gpus (session: ${session.gpus}; now: ${run.gpus})`)
  if (session.serving_slot !== run.serving_slot) {
    out.push(
      `--no-serving-slot (session: ${session.serving_slot ? "absent" : "given"}; now: ${run.serving_slot ? "absent" : "given"})`
    )
  }
  if (session.server !== run.server) {
    out.push(`--server (session: ${session.server ?? "none"}; now: ${run.server ?? "none"})`)
  }
  if (session.server !== null && run.server !== null && session.ready_path !== run.ready_path) {
    out.push(`--ready-path (session: ${session.ready_path}; now: ${run.ready_path})`)
  }
  return out
}

/** A `baseline run` on a session that measured something else: nothing runs (exit 2). */
export class SessionSpecMismatch extends Data.TaggedError("SessionSpecMismatch")<{
  readonly sessionDir: string
  readonly differences: ReadonlyArray<string>
}> {
  override get message(): string {
    return (
      `session ${this.sessionDir} was run with other arguments: ${this.differences.join("; ")}; ` +
      "two experiments never share a session: run the same command to resume it, or use a new --session directory"
    )
  }
}

/**
 * A run's spec against its session's: the state to run from (the spec recorded in it, adopted by
 * a session from before specs were kept), or the mismatch.
 */
export const checkSessionSpec = <S extends { readonly baseline_spec?: BaselineSpec | undefined }>(
  sessionDir: string,
  state: S,
  spec: BaselineSpec
): Either.Either<S, SessionSpecMismatch> => {
  if (state.baseline_spec === undefined) return Either.right({ ...state, baseline_spec: spec })
  const differences = specDifferences(state.baseline_spec, spec)
  return differences.length === 0
    ? Either.right(state)
    : Either.left(new SessionSpecMismatch({ sessionDir, differences }))
}
