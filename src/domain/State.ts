import { Either, ParseResult, Schema } from "effect"
import { FAILURE_CLASSES, isCounted } from "./Failure.js"
import { EngineConfig, Observations } from "./Observations.js"
import { METRIC_KEYS, type MetricKey, RESULT_FORMATS, WorkloadSchema } from "./Results.js"
import { CheckRun, WarmupRun } from "./Serving.js"
import { BaselineSpec } from "./SessionSpec.js"
import { foldText, SIGNATURE_PREFIX } from "./Signature.js"
import { oneLine, parseJson } from "./Text.js"
import { ClientCountsSchema, RunValidity } from "./Validity.js"

/**
 * The persisted state of a baseline session (`<session>/state.json`, docs/design.md#session-state),
 * with its documented field names. Versioned: `schema_version` is CURRENT_SCHEMA_VERSION; older
 * versions are migrated on read (see `parseState`), newer ones are refused.
 *
 * An attempt is written to the state *before* its command runs, as an in-flight record:
 * `ended_at: null` and every result field null (`runtime_sec`, `error_class`, `exit_code`, `error`,
 * `signature`, `throughput`). A finished attempt always has `ended_at`. A success is a finished
 * record with `error_class: null`. If the process dies mid-attempt, the next run finds the in-flight
 * record and `recoverInterrupted` turns it into an `interrupted` record, which is never charged.
 *
 * `enablement.inflight` is true from the moment the stop rules decide to run the enablement command
 * until it has finished (`finishEnablement`); a run that resumes with it set runs the enablement
 * command again with the launch log at `enablement.launch_log_path`, then revalidates.
 */

export const CURRENT_SCHEMA_VERSION = 3

/** An ISO-8601 timestamp string (anything `Date.parse` reads). */
export const IsoTimestamp = Schema.String.pipe(
  Schema.filter((s) => !Number.isNaN(Date.parse(s)), { message: () => "expected an ISO-8601 timestamp" })
)

/** A literal union whose decode error lists every allowed value. */
const oneOf = <const L extends ReadonlyArray<string>>(...values: L) =>
  Schema.Literal(...values).annotations({
    message: (issue) => ({
      message: `expected one of ${values.join(", ")}, got ${JSON.stringify(issue.actual)}`,
      override: true
    })
  })

export const SessionStatus = oneOf("running", "succeeded", "stopped", "cancelled")
export type SessionStatus = typeof SessionStatus.Type

export const StopReason = oneOf(
  "baseline_failed",
  "baseline_arg_error",
  "enablement_stalled",
  "session_time_exhausted",
  "orchestrator_cancelled"
)
export type StopReason = typeof StopReason.Type

export const FailureClassSchema = oneOf(...FAILURE_CLASSES)

const Count = Schema.NonNegativeInt
const Measure = Schema.NullOr(Schema.Finite)

/**
 * The serving metrics (docs/design.md#results-and-metrics) of an attempt (each where the result
 * file had it).
 */
export const AttemptMetrics = Schema.Struct(
  Object.fromEntries(METRIC_KEYS.map((k) => [k, Schema.optional(Schema.Finite)])) as {
    readonly [K in MetricKey]: Schema.optional<typeof Schema.Finite>
  }
)
export type AttemptMetrics = typeof AttemptMetrics.Type

export const ResultFormatSchema = oneOf(...RESULT_FORMATS)

export const AttemptRecord = Schema.Struct({
  /** 1-based, in order. */
  number: Schema.Int.pipe(Schema.positive()),
  started_at: IsoTimestamp,
  /** null while the attempt is in flight. */
  ended_at: Schema.NullOr(IsoTimestamp),
  runtime_sec: Schema.NullOr(Schema.Finite.pipe(Schema.nonNegative())),
  /** null on success (and while in flight). */
  error_class: Schema.NullOr(FailureClassSchema),
  exit_code: Schema.NullOr(Schema.Int),
  /** The error text tail, at most 2000 characters, marker first when there is one. */
  error: Schema.NullOr(Schema.String.pipe(Schema.maxLength(2000))),
  /** The folded error text (`v1:…`) of a counted failure. */
  signature: Schema.NullOr(Schema.String),
  throughput: Measure,
  /** The result file's format (`hyperloom`, `vllm`, `sglang`); null when it had none (v3). */
  result_format: Schema.NullOr(ResultFormatSchema),
  /**
   * Request/token throughputs and latencies from the result file
   * (docs/design.md#results-and-metrics); null when none (v3).
   */
  metrics: Schema.NullOr(AttemptMetrics),
  /**
   * Is the number what it claims (docs/trust.md#is-the-number-valid): `valid`, or its findings;
   * absent for attempts that measured nothing and in records written before.
   */
  validity: Schema.optional(RunValidity),
  /** The `--max-failed` share (a fraction) it was judged with; absent: the default (1 %). */
  max_failed: Schema.optional(Schema.Number),
  /** The client's own counts from its result (completed, failed, output tokens, duration). */
  client: Schema.optional(ClientCountsSchema),
  /** What the client sent, from its report (docs/clients.md#the-workload-on-record). */
  workload: Schema.optional(WorkloadSchema),
  /** What reading its result left out, computed or doubted, naming field and file (docs/clients.md). */
  result_notes: Schema.optional(Schema.Array(Schema.String)),
  /** The `--check` run after the engine was ready. */
  check: Schema.optional(Schema.NullOr(CheckRun)),
  /** The `--warmup` requests after the engine was ready (their time is warm-up time, not the client's). */
  warmup: Schema.optional(Schema.NullOr(WarmupRun)),
  /** What the node sampled while the client ran (docs/design.md#samplers); absent in records written before. */
  observations: Schema.optional(Schema.NullOr(Observations)),
  /** The engine's effective configuration, read after readiness (docs/design.md#samplers). */
  engine_config: Schema.optional(Schema.NullOr(EngineConfig))
})
export type AttemptRecord = typeof AttemptRecord.Type

export const EnablementState = Schema.Struct({
  /** Enablement command runs decided so far (the lane is engaged once this is > 0). */
  attempts: Count,
  /** Failed revalidations since the lane engaged. */
  stall_streak: Count,
  /** An enablement run is decided and has not finished yet. */
  inflight: Schema.Boolean,
  /** Where the last launch log handed to the enablement command is stashed. */
  launch_log_path: Schema.NullOr(Schema.String),
  /** A revalidation succeeded. */
  succeeded: Schema.Boolean
})
export type EnablementState = typeof EnablementState.Type

export const SessionState = Schema.Struct({
  schema_version: Schema.Literal(CURRENT_SCHEMA_VERSION),
  status: SessionStatus,
  stop_reason: Schema.NullOr(StopReason),
  /** When the run stopped (with `stop_reason`); null while running and on success. */
  stop_ts: Schema.NullOr(IsoTimestamp),
  baseline_tput: Measure,
  baseline_failure_streak: Count,
  baseline_arg_error_streak: Count,
  baseline_total_failures: Count,
  baseline_last_failure_signature: Schema.NullOr(Schema.String),
  enablement: EnablementState,
  baseline_attempts: Schema.Array(AttemptRecord),
  /** What the session measures (command, lease, server), for telling a resume from another experiment. */
  baseline_spec: Schema.optional(BaselineSpec)
})
export type SessionState = typeof SessionState.Type

const initialEnablement: EnablementState = {
  attempts: 0,
  stall_streak: 0,
  inflight: false,
  launch_log_path: null,
  succeeded: false
}

// ---------------------------------------------------------------------------------------------
// Version 1 (as written by the first releases): no enablement lane, the signature was called
// `baseline_failure_signature` and stored unversioned, attempt records had no `signature`.

const AttemptRecordV1 = AttemptRecord.omit("signature", "result_format", "metrics")

export const SessionStateV1 = Schema.Struct({
  schema_version: Schema.Literal(1),
  status: SessionStatus,
  stop_reason: Schema.NullOr(StopReason),
  stop_ts: Schema.NullOr(IsoTimestamp),
  baseline_tput: Measure,
  baseline_failure_streak: Count,
  baseline_arg_error_streak: Count,
  baseline_total_failures: Count,
  baseline_failure_signature: Schema.NullOr(Schema.String),
  baseline_attempts: Schema.Array(AttemptRecordV1)
})
export type SessionStateV1 = typeof SessionStateV1.Type

/**
 * v1 → v2. The stored signature gets the version prefix; v1 folded the same way without it, and
 * folding is idempotent, so re-folding the old body yields the v1 signature of the same text.
 * Attempt signatures are computed from the recorded error text of counted failures.
 */
export const migrateV1 = (v1: SessionStateV1): SessionState => migrateV2(migrateV1toV2(v1))

const migrateV1toV2 = (v1: SessionStateV1): SessionStateV2 => {
  const { baseline_failure_signature, baseline_attempts, schema_version: _, ...rest } = v1
  const sig = baseline_failure_signature
  return {
    ...rest,
    schema_version: 2,
    baseline_last_failure_signature:
      sig === null ? null : sig.startsWith(SIGNATURE_PREFIX) ? sig : SIGNATURE_PREFIX + foldText(sig),
    enablement: initialEnablement,
    baseline_attempts: baseline_attempts.map((a) => ({
      ...a,
      signature:
        a.ended_at !== null && a.error_class !== null && isCounted(a.error_class) && a.error !== null
          ? SIGNATURE_PREFIX + foldText(a.error)
          : null
    }))
  }
}

// ---------------------------------------------------------------------------------------------
// Version 2: no per-attempt result format or metrics (serving benchmarks added them:
// docs/design.md#results-and-metrics).

const AttemptRecordV2 = AttemptRecord.omit("result_format", "metrics")

export const SessionStateV2 = Schema.Struct({
  ...SessionState.fields,
  schema_version: Schema.Literal(2),
  baseline_attempts: Schema.Array(AttemptRecordV2)
})
export type SessionStateV2 = typeof SessionStateV2.Type

/** v2 → v3: every attempt gets `result_format: null` and `metrics: null` (nothing was recorded). */
export const migrateV2 = (v2: SessionStateV2): SessionState => ({
  ...v2,
  schema_version: CURRENT_SCHEMA_VERSION,
  baseline_attempts: v2.baseline_attempts.map((a) => ({ ...a, result_format: null, metrics: null }))
})

// ---------------------------------------------------------------------------------------------

export const initialState = (): SessionState => ({
  schema_version: CURRENT_SCHEMA_VERSION,
  status: "running",
  stop_reason: null,
  stop_ts: null,
  baseline_tput: null,
  baseline_failure_streak: 0,
  baseline_arg_error_streak: 0,
  baseline_total_failures: 0,
  baseline_last_failure_signature: null,
  enablement: initialEnablement,
  baseline_attempts: []
})

/** Why a state file could not be used; the store turns this into its tagged errors. */
export type StateProblem =
  | { readonly kind: "corrupt"; readonly detail: string }
  | { readonly kind: "future"; readonly version: number }

const firstIssue = (error: ParseResult.ParseError): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const first = issues[0]
  if (first === undefined) return oneLine(error.message)
  const at = first.path.length > 0 ? `at ${first.path.join(".")}: ` : ""
  return oneLine(at + first.message)
}

const decodeV1 = Schema.decodeUnknownEither(SessionStateV1)
const decodeV2 = Schema.decodeUnknownEither(SessionStateV2)
const decodeV3 = Schema.decodeUnknownEither(SessionState)

/** Decodes an already parsed JSON value, migrating older versions. */
export const decodeState = (json: unknown): Either.Either<SessionState, StateProblem> => {
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    return Either.left({ kind: "corrupt", detail: "not a JSON object" })
  }
  const version = (json as Record<string, unknown>).schema_version
  if (typeof version !== "number" || !Number.isInteger(version) || version < 1) {
    return Either.left({
      kind: "corrupt",
      detail: `schema_version is ${version === undefined ? "missing" : JSON.stringify(version)}, expected a whole number from 1`
    })
  }
  if (version > CURRENT_SCHEMA_VERSION) return Either.left({ kind: "future", version })
  const corrupt = (e: ParseResult.ParseError): StateProblem => ({
    kind: "corrupt",
    detail: `schema_version ${version}: ${firstIssue(e)}`
  })
  if (version === 1) return Either.map(Either.mapLeft(decodeV1(json), corrupt), migrateV1)
  if (version === 2) return Either.map(Either.mapLeft(decodeV2(json), corrupt), migrateV2)
  return Either.mapLeft(decodeV3(json), corrupt)
}

/** Parses the text of a state file (JSON), migrating older versions. */
export const parseState = (text: string): Either.Either<SessionState, StateProblem> => {
  return Either.flatMap(parseJson(text), decodeState)
}

const encode = Schema.encodeSync(SessionState)

/** The text written to the state file: validated, pretty-printed, newline-terminated. */
export const renderState = (state: SessionState): string => JSON.stringify(encode(state), null, 2) + "\n"

// ---------------------------------------------------------------------------------------------
// Attempt bookkeeping outside the stop rules.

/** The in-flight attempt, if one is open (only ever the last record). */
export const inflightAttempt = (state: SessionState): AttemptRecord | undefined => {
  const last = state.baseline_attempts[state.baseline_attempts.length - 1]
  return last !== undefined && last.ended_at === null ? last : undefined
}

/**
 * Opens an attempt: appends an in-flight record, to be saved before the command runs. An attempt
 * already open is returned as is (idempotent), so a retry of the save cannot open two.
 */
export const beginAttempt = (state: SessionState, startedAt: string): SessionState => {
  if (inflightAttempt(state) !== undefined) return state
  const record: AttemptRecord = {
    number: state.baseline_attempts.length + 1,
    started_at: startedAt,
    ended_at: null,
    runtime_sec: null,
    error_class: null,
    exit_code: null,
    error: null,
    signature: null,
    throughput: null,
    result_format: null,
    metrics: null
  }
  return { ...state, baseline_attempts: [...state.baseline_attempts, record] }
}

export const INTERRUPTED_ERROR = "attempt interrupted: hyperloom exited before the attempt finished"

/**
 * On resume: every in-flight attempt becomes an `interrupted` record ended at `now`. Nothing is
 * charged: streaks, totals, the signature and the enablement counters are left as they were.
 */
export const recoverInterrupted = (state: SessionState, now: string): SessionState => {
  if (!state.baseline_attempts.some((a) => a.ended_at === null)) return state
  const end = Date.parse(now)
  return {
    ...state,
    baseline_attempts: state.baseline_attempts.map((a) => {
      if (a.ended_at !== null) return a
      const runtime = (end - Date.parse(a.started_at)) / 1000
      return {
        ...a,
        ended_at: now,
        runtime_sec: Number.isFinite(runtime) && runtime >= 0 ? runtime : null,
        error_class: "interrupted" as const,
        exit_code: null,
        error: INTERRUPTED_ERROR,
        signature: null,
        throughput: null,
        result_format: null,
        metrics: null
      }
    })
  }
}

/** The enablement command has finished (whatever its exit): the revalidation comes next. */
export const finishEnablement = (state: SessionState): SessionState =>
  state.enablement.inflight ? { ...state, enablement: { ...state.enablement, inflight: false } } : state

export const isTerminal = (state: SessionState): boolean => state.status !== "running"

/**
 * A session the run itself stopped (deadline passed, operator cancelled) charged nothing for that
 * and can be resumed: this reopens it (`running`, no stop reason), counters and signature as they
 * were. A session that succeeded or was stopped by a stop rule is returned unchanged.
 */
export const reopenStoppedByRun = (state: SessionState): SessionState =>
  state.status === "cancelled" ||
  (state.status === "stopped" &&
    (state.stop_reason === "session_time_exhausted" || state.stop_reason === "orchestrator_cancelled"))
    ? { ...state, status: "running", stop_reason: null, stop_ts: null }
    : state
