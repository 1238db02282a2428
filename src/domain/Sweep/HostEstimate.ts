/**
 * `--dry-run`'s estimate from the host's recent sweeps (docs/design.md#time-to-the-answer): each sweep run that measured
 * something leaves a record (its medians and the counts they rest on); the estimate is the median
 * over the recent sweeps, each session counted once (its last record: a resumed session's medians
 * cover everything it measured). The choice: the options, else the session's own measurements,
 * else the host's. Pure.
 */
import { type Estimate, type MeasuredSession, measuredTimes, medianSec, sessionEstimate } from "./Plan.js"

/** One sweep run's end, as the user's `sweeps.jsonl` keeps it. */
export interface SweepRecord {
  /** When the run ended (ms since the epoch). */
  readonly endedAt: number
  /** The session folder (absolute). */
  readonly session: string
  /** The median engine start (launch to ready) of the session, null when none was ready. */
  readonly startSec: number | null
  /** The median client run of the session, null when none finished. */
  readonly runSec: number | null
  readonly engineStarts: number
  readonly clientRuns: number
}

/** The record of a sweep run that ended now; null when the session measured nothing. */
export const sweepRecordOf = (doc: MeasuredSession, session: string, endedAt: number): SweepRecord | null => {
  const { runs, starts } = measuredTimes(doc)
  if (starts.length === 0 && runs.length === 0) return null
  const r = (xs: ReadonlyArray<number>) => (xs.length === 0 ? null : medianSec(xs))
  return {
    endedAt,
    session,
    startSec: r(starts),
    runSec: r(runs),
    engineStarts: starts.length,
    clientRuns: runs.length
  }
}

/** The estimate from the host's recent sweeps: medians over them; null without both figures. */
export const hostEstimate = (records: ReadonlyArray<SweepRecord>): Estimate | null => {
  const last = new Map<string, SweepRecord>()
  for (const rec of records) {
    last.delete(rec.session)
    last.set(rec.session, rec)
  }
  const recent = [...last.values()]
  const starts = recent.flatMap((s) => (s.startSec === null ? [] : [s.startSec]))
  const runs = recent.flatMap((s) => (s.runSec === null ? [] : [s.runSec]))
  if (starts.length === 0 || runs.length === 0) return null
  const used = recent.filter((s) => s.startSec !== null || s.runSec !== null)
  return {
    start_sec: medianSec(starts),
    run_sec: medianSec(runs),
    source: "host",
    sweeps: used.length,
    last_ended: new Date(Math.max(...used.map((s) => s.endedAt))).toISOString().replace(/\.\d{3}Z$/, "Z")
  }
}

/** The explicit options win; then what the session itself measured; then the host's recent sweeps. */
export const chooseEstimate = (
  given: Estimate | null,
  session: MeasuredSession | null,
  host: ReadonlyArray<SweepRecord>
): Estimate | null => given ?? (session === null ? null : sessionEstimate(session)) ?? hostEstimate(host)
