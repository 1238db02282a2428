/**
 * Growing a finished sweep (docs/design.md#time-to-the-answer): the same command with more `--load`
 * values (nothing else changed) adds only the new points and keeps everything measured; and a best
 * at the edge of what was tried is flagged, since the true capacity may lie beyond it. Pure.
 */
import { loadNumber } from "./Grid.js"
import type { Difference, Experiment } from "./Identity.js"

/**
 * The load values `now` adds to `was` when that is the only difference (same name, every old value
 * kept); undefined otherwise.
 */
export const addedLoads = (
  was: Experiment,
  now: Experiment,
  diffs: ReadonlyArray<Difference>
): ReadonlyArray<string> | undefined => {
  if (diffs.length !== 1 || diffs[0]!.field !== "--load/--search") return undefined
  if (was.load.kind !== "points" || now.load.kind !== "points" || was.load.name !== now.load.name)
    return undefined
  const old = was.load.values
  const given = now.load.values
  if (!old.every((v) => given.includes(v))) return undefined
  const added = given.filter((v) => !old.includes(v))
  return added.length > 0 ? added : undefined
}

/**
 * The flag of a best at the edge of what was tried: the largest `--load` value (numerically), or
 * `--search`'s MAX; undefined when the best lies inside.
 */
export const edgeFlag = (load: Experiment["load"], bestLoad: string | undefined): string | undefined => {
  if (bestLoad === undefined) return undefined
  if (load.kind === "search")
    return loadNumber(bestLoad) >= load.max
      ? `the best is at --search's MAX (${load.max}): the true capacity may be higher (raise MAX)`
      : undefined
  const numeric = load.values.map(loadNumber).filter((n) => !Number.isNaN(n))
  if (numeric.length === 0) return undefined
  const top = Math.max(...numeric)
  return loadNumber(bestLoad) === top && top !== Number.POSITIVE_INFINITY
    ? `the best is at the largest --load ${load.name} tried (${bestLoad}): the true capacity may be higher (the same command with larger --load values adds only the new points)`
    : undefined
}
