/**
 * How far a sweep got, in words a user reads (issue 27, item 11): the status without internal
 * tags (`cancelled (Ctrl-C) after 1 of 9 points`, not `cancelled (orchestrator_cancelled)`), and
 * the title of its best line: `best` once it is done, `best so far (…)` while it is not, so a
 * cancelled or stopped sweep's best never reads as the answer. Shared by `sweep show` and the report.
 */
import { type SweepDoc, type SweepStopReason, statementOf } from "../domain/Sweep.js"

const REASONS: Readonly<Record<SweepStopReason, string>> = {
  orchestrator_cancelled: "cancelled",
  session_time_exhausted: "stopped at the deadline",
  ray_cluster_infeasible: "stopped: the cluster cannot hold the lease",
  lease_wait_expired: "stopped: the wait for the lease expired",
  lease_failed: "stopped: the lease failed"
}

/** `1 of 12 points` (grid) or `3 points` (search: the total is not known beforehand). */
export const pointsProgress = (doc: SweepDoc): string => {
  const points = doc.combinations.flatMap((c) => c.points)
  const done = points.filter(
    (p) => p.status === "ok" || p.status === "slo_failed" || p.status === "failed" || p.status === "invalid"
  )
  return doc.experiment.load.kind === "points"
    ? `${done.length} of ${points.length} points`
    : `${done.length} point${done.length === 1 ? "" : "s"}`
}

const unfinished = (doc: SweepDoc): string =>
  doc.status === "running"
    ? `running, ${pointsProgress(doc)} done`
    : `${doc.stop_reason !== null ? REASONS[doc.stop_reason] : doc.status} after ${pointsProgress(doc)}`

/** The sweep's status for its header line. */
export const sweepStatusText = (doc: SweepDoc): string =>
  doc.status === "done"
    ? "done"
    : doc.status === "running"
      ? unfinished(doc)
      : `${unfinished(doc)}; the same command resumes it`

/** `best` when the sweep is done; `best so far (cancelled after 1 of 9 points)` when it is not. */
export const bestTitle = (doc: SweepDoc): string =>
  doc.status === "done" ? "best" : `best so far (${unfinished(doc)})`

const ms = (n: number): string => String(n >= 100 ? Math.round(n) : Math.round(n * 10) / 10)

/**
 * The verdict's sentence, then the best point's p99 TTFT and TPOT (issue 27 item 14): what
 * `sweep show` and the report print as the best line.
 */
export const bestStatement = (doc: SweepDoc): string => {
  const b = doc.summary.best
  const p = doc.combinations.find((c) => c.index === b?.combination)?.points.find((x) => x.load === b?.load)
  const t = p?.stats.p99_ttft_ms?.median
  const o = p?.stats.p99_tpot_ms?.median
  const latencies = [
    ...(t === undefined ? [] : [`p99 TTFT ${ms(t)} ms`]),
    ...(o === undefined ? [] : [`p99 TPOT ${ms(o)} ms`])
  ]
  // the sentence stays whole (it is summary.statement, word for word); the latencies follow it
  return `${statementOf(doc)}${latencies.length === 0 ? "" : `; at the best point: ${latencies.join(", ")}`}`
}
