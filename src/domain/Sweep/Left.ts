/**
 * What the same command would still run on an existing session (`sweep run --dry-run` on a
 * session that holds a sweep, docs/design.md#time-to-the-answer): the engine starts and client runs
 * left after the growth the command asks for (more `--load` values, a larger `--repeats`,
 * `--strategy grid` completing an adaptive session), everything measured kept; or the differences
 * for which the run would be refused. Pure: it applies the program's own steps to a copy.
 */

import type { Strategy } from "./Adaptive.js"
import { growthOf } from "./Grow.js"
import { type Difference, type Experiment, experimentDiff } from "./Identity.js"
import type { SweepDoc } from "./Schema.js"
import {
  completeGrid,
  experimentOf,
  growLoads,
  growRepeats,
  isFinalCombination,
  isFinalPoint,
  recoverInterrupted
} from "./Transitions.js"

export type SessionLeft =
  | { readonly _tag: "refused"; readonly differences: ReadonlyArray<Difference> }
  | {
      readonly _tag: "left"
      readonly engine_starts: number
      readonly runs: number
      /** A search's points (or an adaptive search's combinations) are not known before they run. */
      readonly upper_bound: boolean
      /** `--repeats` smaller than the session's: the session's stands. */
      readonly kept_repeats: number | undefined
    }

/** What is left of `doc` for the command `now` (its experiment, strategy); `searchPoints`: the most a search evaluates. */
export const sessionLeft = (
  doc: SweepDoc,
  now: Experiment,
  strategy: Strategy,
  searchPoints: number
): SessionLeft => {
  const was = doc.strategy ?? "grid"
  const diffs = [
    ...experimentDiff(experimentOf(doc.experiment), now),
    ...(was === "grid" && strategy === "adaptive"
      ? [{ field: "--strategy", was: "grid (every combination)", now: "adaptive" }]
      : [])
  ]
  const grow = growthOf(experimentOf(doc.experiment), now, diffs)
  if (grow.refused.length > 0) return { _tag: "refused", differences: grow.refused }
  let d = recoverInterrupted(doc, doc.updated_at)
  if (grow.loads !== undefined && now.load.kind === "points") d = growLoads(d, now.load.values)
  if (grow.repeats !== undefined) d = growRepeats(d, grow.repeats)
  if (was === "adaptive" && strategy === "grid") d = completeGrid(d)
  const repeats = d.experiment.repeats
  const search = d.experiment.load.kind === "search"
  const open = d.combinations.filter((c) => !isFinalCombination(c))
  let runs = 0
  for (const c of open) {
    for (const p of c.points)
      if (!isFinalPoint(p)) runs += Math.max(0, repeats - p.runs.filter((r) => r.status === "ok").length)
    if (search) runs += Math.max(0, searchPoints - c.points.filter(isFinalPoint).length) * repeats
  }
  return {
    _tag: "left",
    engine_starts: open.length,
    runs,
    upper_bound: search || (d.strategy ?? "grid") === "adaptive",
    kept_repeats: grow.fewerRepeats === undefined ? undefined : repeats
  }
}
