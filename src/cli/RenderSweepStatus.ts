/**
 * How far a sweep got, in words a user reads (issue 27, item 11): the status without internal
 * tags (`cancelled (Ctrl-C) after 1 of 9 points`, not `cancelled (orchestrator_cancelled)`), and
 * the title of its best line: `best` once it is done, `best so far (…)` while it is not, so a
 * cancelled or stopped sweep's best never reads as the answer. Shared by `sweep show` and the report.
 */
import type { SweepDoc, SweepStopReason } from "../domain/Sweep.js"

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
  const done = points.filter((p) => p.status === "ok" || p.status === "slo_failed" || p.status === "failed")
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
