/**
 * Interleaved repeats (docs/design.md#trusted-answers). With `--repeats R` ≥ 2 a combination runs
 * its load points in rounds — every point once, then again — not each point R times in a row, so
 * drift (heat, a neighbour's job) spreads over all points instead of landing on the last ones.
 * Pure: the state is the points' runs on disk, so a resumed sweep goes on exactly where it was.
 *
 * - `nextRun`: the next run of a point — its next repeat, or the retry of a run that failed (a
 *   failed run is retried once, at once); null once it has R measured runs.
 * - `nextRoundPoint`: the grid's next point — among the points not finished, the one with the
 *   fewest measured runs, the lowest load first (the points are kept in ascending load order).
 *
 * `--search` cannot interleave: it must judge a point (on the median of its R runs) before it
 * knows the next load. Its points run their repeats back to back; drift then shows as noise within
 * a point (its CV and interval), never as a difference between points measured in order.
 */
/** What the rounds need of a point (Sweep.ts's PointRecord has it; no import back, no cycle). */
interface PointRuns {
  readonly runs: ReadonlyArray<{
    readonly status: "ok" | "failed" | "interrupted" | null
    readonly try: number
    readonly repeat: number
  }>
}

export interface NextRun {
  /** 1…R. */
  readonly repeat: number
  /** 1, or 2 for the retry of a failed run. */
  readonly try: number
}

const measured = (p: PointRuns) => p.runs.filter((r) => r.status === "ok").length

/** The next run of a point (its finished runs as they are on disk); null when it has R. */
export const nextRun = (p: PointRuns, repeats: number): NextRun | null => {
  const done = measured(p)
  const last = p.runs.at(-1)
  if (last !== undefined && last.status === "failed" && last.try === 1) return { repeat: last.repeat, try: 2 }
  return done >= repeats ? null : { repeat: done + 1, try: 1 }
}

/** The grid's next point to run a repeat of, in rounds; undefined when every point is final. */
export const nextRoundPoint = <P extends PointRuns>(
  points: ReadonlyArray<P>,
  isFinal: (p: P) => boolean
): P | undefined => {
  let next: P | undefined
  for (const p of points) if (!isFinal(p) && (next === undefined || measured(p) < measured(next))) next = p
  return next
}
