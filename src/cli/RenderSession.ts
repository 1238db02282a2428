import { errorHead } from "../domain/Attempt.js"
import { isMeasurement, type Workload, workloadSummary } from "../domain/Results.js"
import type { AttemptRecord, SessionState } from "../domain/State.js"
import { FAILURE_LIMIT, STALL_LIMIT } from "../domain/StopRules.js"
import { fixed2, formatSeconds, formatThroughput } from "../domain/Text.js"
import { notCheckedOnce, renderFinding, renderTally, tally } from "../domain/Validity.js"

const MARKER = "ray_cluster_infeasible"

const shorten = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text)

const finished = (s: SessionState) => s.baseline_attempts.filter((a) => a.ended_at !== null)

const counted = (a: AttemptRecord) =>
  a.error_class !== null &&
  a.error_class !== "interrupted" &&
  a.error_class !== "session_time_exhausted" &&
  a.error_class !== "orchestrator_cancelled"

/** Why the session is where it is, from the state alone (the stop rules' reasons, in words). */
export const whyStopped = (s: SessionState): string => {
  const attempts = finished(s)
  const last = attempts[attempts.length - 1]
  const n = last !== undefined ? `attempt ${last.number}` : "no attempt"
  switch (s.status) {
    case "succeeded":
      return `${n} succeeded with throughput ${formatThroughput(s.baseline_tput)}${s.enablement.succeeded ? " (revalidation after enablement)" : ""}`
    case "running": {
      const open = s.baseline_attempts.find((a) => a.ended_at === null)
      return open !== undefined
        ? `attempt ${open.number} is in flight (since ${open.started_at}), or its run died; the next run records it as interrupted`
        : "not finished: the next `baseline run` on this session resumes it"
    }
    case "cancelled":
      return `cancelled by the operator${last?.error_class === "orchestrator_cancelled" ? ` during ${n}` : " between attempts"}; not charged (a new run resumes the session)`
  }
  switch (s.stop_reason) {
    case "baseline_failed": {
      if (
        last !== undefined &&
        (last.error_class === "ray_cluster_infeasible" || (last.error ?? "").includes(MARKER))
      ) {
        return `the Ray cluster cannot grant the lease (${MARKER}, ${n}): no retry can fix that`
      }
      const charged = attempts.filter(counted)
      const prev = charged[charged.length - 2]
      if (
        last !== undefined &&
        prev !== undefined &&
        last.error_class === "subprocess_nonzero" &&
        prev.error_class === "subprocess_nonzero" &&
        last.signature !== null &&
        last.signature === prev.signature
      ) {
        return `attempt ${last.number} failed the same way as attempt ${prev.number} (same signature)`
      }
      return `${Math.max(s.baseline_failure_streak, s.baseline_total_failures)} failures (limit ${FAILURE_LIMIT})`
    }
    case "baseline_arg_error":
      return `${s.baseline_arg_error_streak} argument errors in a row: the command line itself is wrong`
    case "enablement_stalled":
      return `${s.enablement.stall_streak} failed revalidations after enablement (limit ${STALL_LIMIT})`
    case "session_time_exhausted":
      return `the --deadline passed${last?.error_class === "session_time_exhausted" ? ` during ${n}` : ""}; not charged (a new run resumes the session)`
    case "orchestrator_cancelled":
      return "cancelled by the operator; not charged"
    default:
      return "stopped"
  }
}

const pad = (text: string, width: number) =>
  text.length >= width ? text : text + " ".repeat(width - text.length)

const num = fixed2

/**
 * One line of an attempt's serving metrics (docs/design.md#results-and-metrics): format, output and
 * total token throughput, requests/s and completed, then TTFT, TPOT and ITL as mean/median/p99 ms;
 * undefined without metrics.
 */
export const renderMetrics = (a: AttemptRecord): string | undefined => {
  const m = a.metrics
  if (m === null) return undefined
  // completed 0 / no positive throughput: its zeros are no figures
  // (docs/design.md#classified-from-what-happened)
  if (!isMeasurement(a.throughput, m)) {
    const format = a.result_format !== null ? `[${a.result_format}] ` : ""
    return `${format}no measurement: ${m.completed !== undefined ? `${m.completed} completed` : "no positive throughput"}`
  }
  const lat = (name: "ttft" | "tpot" | "itl") => {
    const mean = m[`mean_${name}_ms`]
    const median = m[`median_${name}_ms`]
    const p99 = m[`p99_${name}_ms`]
    if (mean === undefined && median === undefined && p99 === undefined) return undefined
    return `${name.toUpperCase()} ${num(mean)}/${num(median)}/${num(p99)} ms`
  }
  const parts = [
    a.result_format !== null ? `[${a.result_format}]` : undefined,
    m.output_throughput !== undefined ? `out ${num(m.output_throughput)} tok/s` : undefined,
    m.total_token_throughput !== undefined ? `total ${num(m.total_token_throughput)} tok/s` : undefined,
    m.request_throughput !== undefined ? `${num(m.request_throughput)} req/s` : undefined,
    m.completed !== undefined ? `${m.completed} completed` : undefined,
    lat("ttft"),
    lat("tpot"),
    lat("itl")
  ].filter((p): p is string => p !== undefined)
  return parts.length > 0
    ? `${parts.join(" · ")}${parts.some((p) => p.endsWith(" ms")) ? " (mean/median/p99)" : ""}`
    : undefined
}

/** The readable summary of a session (`hyperloom state show`, `hyperloom baseline run`). */
export const renderSession = (sessionDir: string, s: SessionState): string => {
  const lines: Array<string> = []
  const status =
    s.status === "stopped" ? `stopped: ${s.stop_reason}` : s.status === "cancelled" ? "cancelled" : s.status
  lines.push(`session     ${sessionDir}`)
  lines.push(`status      ${status}${s.stop_ts !== null ? ` at ${s.stop_ts}` : ""}`)
  lines.push(`why         ${whyStopped(s)}`)
  lines.push(`throughput  ${formatThroughput(s.baseline_tput)}`)
  lines.push(`attempts    ${s.baseline_attempts.length}`)
  for (const a of s.baseline_attempts) {
    const what = a.ended_at === null ? "in flight" : (a.error_class ?? "succeeded")
    const exit = a.exit_code !== null ? `exit ${a.exit_code}` : "-"
    const detail =
      a.ended_at === null
        ? `since ${a.started_at}`
        : a.error_class === null
          ? `throughput ${formatThroughput(a.throughput)}`
          : errorHead(a.error, a.error_class, 100)
    lines.push(
      `  #${pad(String(a.number), 3)} ${pad(what, 24)} ${pad(exit, 8)} ${pad(formatSeconds(a.runtime_sec), 9)} ${detail}`
    )
    const metrics = renderMetrics(a)
    if (metrics !== undefined) lines.push(`       ${metrics}`)
    // docs/trust.md#is-the-number-valid: a suspect or invalid attempt, flagged with its findings
    if (a.validity !== undefined && a.validity.verdict !== "valid")
      for (const f of a.validity.findings) lines.push(`       ${a.validity.verdict}: ${renderFinding(f)}`)
  }
  // the workload once (docs/clients.md#the-workload-on-record), from the attempts' reports
  const work = workloadSummary(
    s.baseline_attempts.flatMap((a) =>
      a.error_class === null && a.workload !== undefined ? [a.workload as Workload] : []
    ),
    "attempts"
  )
  if (work !== undefined) lines.push(`workload    ${work}`)
  const judged = s.baseline_attempts.flatMap((a) => (a.validity === undefined ? [] : [a.validity]))
  if (judged.length > 0) {
    lines.push(`validity    ${renderTally(tally(judged))}`)
    for (const n of notCheckedOnce(judged)) lines.push(`  not checked: ${n}`)
  }
  lines.push(
    `streaks     failure ${s.baseline_failure_streak}, arg-error ${s.baseline_arg_error_streak}, total failures ${s.baseline_total_failures}`
  )
  lines.push(
    `signature   ${s.baseline_last_failure_signature === null ? "-" : shorten(s.baseline_last_failure_signature, 200)}`
  )
  const e = s.enablement
  lines.push(
    e.attempts === 0
      ? "enablement  not engaged"
      : `enablement  ${e.attempts} run(s), stall ${e.stall_streak}/${STALL_LIMIT}${e.inflight ? ", one pending" : ""}, ${e.succeeded ? "revalidated" : "not revalidated"}${e.launch_log_path !== null ? `, launch log ${e.launch_log_path}` : ""}`
  )
  return lines.join("\n")
}
