import { Data } from "effect"
import {
  type AttemptResult,
  boundedErrorText,
  type FailureClass,
  hasInfeasibleMarker,
  isCounted,
  isValidThroughput,
  MAX_ERROR_CHARS
} from "./Failure.js"
import { foldSignature } from "./Signature.js"
import { type AttemptRecord, inflightAttempt, type SessionState, type StopReason } from "./State.js"
import { formatThroughput } from "./Text.js"

/**
 * The baseline stop rules (docs/design.md#stop-rules, rules 1–6) as one pure function of the state
 * and a classified attempt: `applyAttempt(state, result, context) → { state, decision }`.
 *
 * Order of evaluation for a counted failure: bookkeeping first (streaks, total, signature, stall),
 * then the stops in this precedence — rule 1 (infeasible) › rule 2 (arg errors) › rule 5 (stalled) ›
 * rule 3 (same failure twice / three failures) — then rule 5's enablement run, else a retry. When two
 * stops fire on the same attempt, the earlier one names the reason; the state records all counters.
 *
 * Choices where the rules (docs/design.md#stop-rules) leave room (each pinned by a test):
 *
 * - Charged or not. `session_time_exhausted`, `orchestrator_cancelled` and `interrupted` change no
 *   streak, no total, no stall and leave the stored signature alone. So two identical
 *   `subprocess_nonzero` failures separated only by such rounds are still *consecutive* and stop the
 *   run at the second. "Consecutive" means consecutive among counted attempts: any other counted class
 *   in between clears the signature and breaks the pair.
 * - Rule 1 is judged on the error text (and the launch log) containing the marker, whatever the
 *   class, as well as on the `ray_cluster_infeasible` class; it stops at the first occurrence, in or
 *   out of enablement, before the lane could see the text. The attempt is bookkept as a rule-3
 *   failure (streak, total; an arg-error-classed one as an arg error).
 * - Rule 2 counts only `fast_exit_arg_error`: it does not add to the failure streak or the total
 *   (rule 3 is "any *other* counted failure"), does not reset them either, and clears the signature
 *   (rule 4: any counted class other than `subprocess_nonzero`). Rule 2 does not stand down in the
 *   enablement lane: only rule 3's early stops do. So an arg error that engages the lane followed by
 *   an arg error on the revalidation stops `baseline_arg_error` (the stall streak still records it).
 * - The lane is *engaged* once the enablement command has been decided at least once in the session
 *   (`enablement.attempts > 0`) and the run has an enablement command (a run resumed without
 *   `--enablement-cmd` is outside the lane again and rule 3 applies to its counters as they stand).
 *   Every baseline attempt while engaged revalidates the enablement, so every counted failure while
 *   engaged adds one stall, whether or not its launch log lets the enablement run again; this keeps
 *   the lane bounded (STALL_LIMIT stalls ⇒ `enablement_stalled`) even when a revalidation fails
 *   silently, since rule 3 no longer can stop it.
 * - Rule 3's early stops are judged by whether the lane was engaged *before* the attempt. The
 *   attempt that engages the lane is still outside it: if it is the third failure or repeats the
 *   previous `subprocess_nonzero`, the run stops instead of engaging.
 * - Rule 5 runs the enablement after any counted failure with a non-empty launch log (rule 1's are
 *   stopped before): deciding it increments `enablement.attempts`, sets `inflight` and the launch log
 *   path, and counts as enablement progress, so the stored signature is cleared.
 * - Rule 6 resets all three streaks (failure, arg-error, stall) and the signature; `stop_reason` and
 *   `stop_ts` stay null on success; `enablement.succeeded` is set when the lane had engaged.
 */

/** Rule 2: this many consecutive argument errors stop the run. */
export const ARG_ERROR_LIMIT = 2
/** Rule 3: this many failures (streak or total) stop the run outside the enablement lane. */
export const FAILURE_LIMIT = 3
/** Rule 5: this many failed revalidations stop the run. */
export const STALL_LIMIT = 5

export type Decision = Data.TaggedEnum<{
  /** Run the baseline again. */
  retry: { readonly why: string }
  /** Run the enablement command with this launch log, then revalidate. */
  run_enablement: { readonly launchLog: string; readonly why: string }
  /** The run is over without a baseline. */
  stop: { readonly reason: StopReason; readonly why: string }
  /** The baseline succeeded with this throughput. */
  succeeded: { readonly throughput: number; readonly why: string }
}>
export const Decision = Data.taggedEnum<Decision>()

export interface RuleContext {
  /** ISO time the attempt ended: its `ended_at`, and `stop_ts` when the run stops. */
  readonly now: string
  /** `--enablement-cmd` was given: the enablement lane (rule 5) is available. */
  readonly enablementAvailable: boolean
  /** Where the program stashes the launch log when the decision is `run_enablement`. */
  readonly launchLogPath?: string | null | undefined
  /** Start of the attempt when no in-flight record was opened for it (defaults to `now`). */
  readonly startedAt?: string | undefined
}

export interface Applied {
  readonly state: SessionState
  readonly decision: Decision
}

/** Status written with a stop reason: an operator's cancel is `cancelled`, every other stop `stopped`. */
export const statusFor = (reason: StopReason): SessionState["status"] =>
  reason === "orchestrator_cancelled" ? "cancelled" : "stopped"

const stopped = (state: SessionState, reason: StopReason, now: string): SessionState => ({
  ...state,
  status: statusFor(reason),
  stop_reason: reason,
  stop_ts: now,
  enablement: { ...state.enablement, inflight: false }
})

/** What an already finished session answers when asked again. */
const terminalDecision = (state: SessionState): Decision =>
  state.status === "succeeded"
    ? Decision.succeeded({ throughput: state.baseline_tput ?? 0, why: "the session already succeeded" })
    : Decision.stop({
        reason: state.stop_reason ?? "orchestrator_cancelled",
        why: `the session already ended (${state.stop_reason ?? state.status})`
      })

/**
 * The run stops between attempts (deadline passed, operator cancelled): nothing is charged, nothing
 * else changes. An attempt in flight is judged through `applyAttempt` with its stopped-by-the-run class.
 */
export const stopByRun = (
  state: SessionState,
  reason: "session_time_exhausted" | "orchestrator_cancelled",
  now: string
): SessionState => (state.status === "running" ? stopped(state, reason, now) : state)

const finiteOrNull = (n: number | null): number | null => (n !== null && Number.isFinite(n) ? n : null)

const label = (c: FailureClass) => c.replaceAll("_", " ")

export const applyAttempt = (state: SessionState, result: AttemptResult, context: RuleContext): Applied => {
  if (state.status !== "running") return { state, decision: terminalDecision(state) }
  const now = context.now

  // A success needs a positive finite throughput; anything else claiming success is not a measurement.
  const errorClass: FailureClass | null =
    result.errorClass === null && !isValidThroughput(result.throughput)
      ? "invalid_measurement"
      : result.errorClass
  const counted = errorClass !== null && isCounted(errorClass)
  const errorText =
    errorClass === null
      ? null
      : result.error === null || result.error === ""
        ? label(errorClass)
        : result.error.length > MAX_ERROR_CHARS
          ? boundedErrorText(result.error)
          : result.error

  // Record the attempt: complete the in-flight record opened before the command ran, or append.
  const open = inflightAttempt(state)
  const number = open?.number ?? state.baseline_attempts.length + 1
  const runtime = finiteOrNull(result.runtimeSec)
  const record: AttemptRecord = {
    number,
    started_at: open?.started_at ?? context.startedAt ?? now,
    ended_at: now,
    runtime_sec: runtime !== null && runtime >= 0 ? runtime : null,
    error_class: errorClass,
    exit_code: result.exitCode !== null && Number.isInteger(result.exitCode) ? result.exitCode : null,
    error: errorText,
    // The whole output's signature when the program kept one; else the fold of the error text.
    signature: counted && errorText !== null ? (result.outputSignature ?? foldSignature(errorText)) : null,
    throughput: finiteOrNull(result.throughput),
    result_format: result.resultFormat ?? null,
    metrics: result.metrics !== undefined && Object.keys(result.metrics).length > 0 ? result.metrics : null,
    ...(result.validity !== undefined ? { validity: result.validity } : {}),
    ...(result.validity !== undefined && result.maxFailed !== undefined
      ? { max_failed: result.maxFailed }
      : {}),
    ...(result.client !== undefined && Object.keys(result.client).length > 0
      ? { client: result.client }
      : {}),
    ...(result.workload !== undefined ? { workload: result.workload } : {}),
    ...(result.resultNotes !== undefined && result.resultNotes.length > 0
      ? { result_notes: result.resultNotes }
      : {}),
    ...(result.check != null ? { check: result.check } : {}),
    ...(result.warmup != null ? { warmup: result.warmup } : {}),
    ...(result.observations != null ? { observations: result.observations } : {}),
    ...(result.engineConfig != null ? { engine_config: result.engineConfig } : {})
  }
  const recorded: SessionState = {
    ...state,
    baseline_attempts:
      open !== undefined
        ? [...state.baseline_attempts.slice(0, -1), record]
        : [...state.baseline_attempts, record]
  }
  const n = `attempt ${number}`

  // Rule 6: success.
  if (errorClass === null) {
    const throughput = result.throughput as number
    const engaged = state.enablement.attempts > 0
    return {
      state: {
        ...recorded,
        status: "succeeded",
        stop_reason: null,
        stop_ts: null,
        baseline_tput: throughput,
        baseline_failure_streak: 0,
        baseline_arg_error_streak: 0,
        baseline_last_failure_signature: null,
        enablement: {
          ...state.enablement,
          stall_streak: 0,
          inflight: false,
          succeeded: state.enablement.succeeded || engaged
        }
      },
      decision: Decision.succeeded({
        throughput,
        why: `${n} succeeded with throughput ${formatThroughput(throughput)}${engaged ? " (revalidation after enablement)" : ""}`
      })
    }
  }

  // Stopped by the run, or interrupted: never charged, nothing but the record changes.
  if (errorClass === "interrupted") {
    return { state: recorded, decision: Decision.retry({ why: `${n} was interrupted; not charged` }) }
  }
  if (errorClass === "session_time_exhausted" || errorClass === "orchestrator_cancelled") {
    const why =
      errorClass === "session_time_exhausted"
        ? `the session deadline passed during ${n}; not charged`
        : `the run was cancelled during ${n}; not charged`
    return { state: stopped(recorded, errorClass, now), decision: Decision.stop({ reason: errorClass, why }) }
  }

  // A counted failure: bookkeeping (rules 2, 3, 4, and the stall of rule 5).
  const e = state.enablement
  const engaged = context.enablementAvailable && e.attempts > 0
  const isArgError = errorClass === "fast_exit_arg_error"
  const isNonzero = errorClass === "subprocess_nonzero"
  const previousSignature = state.baseline_last_failure_signature
  const failureStreak = isArgError ? state.baseline_failure_streak : state.baseline_failure_streak + 1
  const totalFailures = isArgError ? state.baseline_total_failures : state.baseline_total_failures + 1
  const argErrorStreak = isArgError ? state.baseline_arg_error_streak + 1 : 0
  const stallStreak = engaged ? e.stall_streak + 1 : e.stall_streak
  const next: SessionState = {
    ...recorded,
    baseline_failure_streak: failureStreak,
    baseline_total_failures: totalFailures,
    baseline_arg_error_streak: argErrorStreak,
    baseline_last_failure_signature: isNonzero ? record.signature : null,
    enablement: { ...e, stall_streak: stallStreak, inflight: false }
  }
  const stop = (reason: StopReason, why: string): Applied => ({
    state: stopped(next, reason, now),
    decision: Decision.stop({ reason, why })
  })
  const what = `${n} failed (${errorClass})`

  // Rule 1: the cluster can never grant the lease; no retry or enablement can fix that.
  if (
    errorClass === "ray_cluster_infeasible" ||
    hasInfeasibleMarker(errorText ?? "") ||
    hasInfeasibleMarker(result.launchLog)
  ) {
    return stop("baseline_failed", `${what}: the Ray cluster cannot grant the lease (ray_cluster_infeasible)`)
  }
  // Rule 2: the command line itself is wrong.
  if (isArgError && argErrorStreak >= ARG_ERROR_LIMIT) {
    return stop("baseline_arg_error", `${what}: ${argErrorStreak} argument errors in a row`)
  }
  // Rule 5: the enablement lane is not getting anywhere.
  if (engaged && stallStreak >= STALL_LIMIT) {
    return stop("enablement_stalled", `${what}: ${stallStreak} failed revalidations after enablement`)
  }
  // Rule 3's early stops, outside the lane.
  if (!engaged && !isArgError) {
    if (isNonzero && previousSignature !== null && record.signature === previousSignature) {
      return stop("baseline_failed", `${what} the same way as the previous failure`)
    }
    if (failureStreak >= FAILURE_LIMIT || totalFailures >= FAILURE_LIMIT) {
      return stop(
        "baseline_failed",
        `${what}: ${Math.max(failureStreak, totalFailures)} failures (limit ${FAILURE_LIMIT})`
      )
    }
  }
  // Rule 5: hand the launch log to the enablement command, then revalidate.
  if (context.enablementAvailable && result.launchLog.trim() !== "") {
    return {
      state: {
        ...next,
        baseline_last_failure_signature: null,
        enablement: {
          ...next.enablement,
          attempts: e.attempts + 1,
          inflight: true,
          launch_log_path: context.launchLogPath ?? e.launch_log_path
        }
      },
      decision: Decision.run_enablement({
        launchLog: result.launchLog,
        why: `${what}; running the enablement command (${e.attempts + 1}), then revalidating${
          engaged ? ` (stall ${stallStreak}/${STALL_LIMIT})` : ""
        }`
      })
    }
  }
  return {
    state: next,
    decision: Decision.retry({
      why: engaged ? `${what}; retrying (stall ${stallStreak}/${STALL_LIMIT})` : `${what}; retrying`
    })
  }
}
