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

/**
 * How the same command given to a session grows it (docs/design.md#time-to-the-answer): more
 * `--load` values and a larger `--repeats` are growth (the new points and runs only, everything
 * measured kept); a smaller `--repeats` than recorded keeps what is there (the session's repeats
 * stand: nothing measured is dropped); any other difference is refused.
 */
export interface Growth {
  /** The load values added (undefined: none). */
  readonly loads: ReadonlyArray<string> | undefined
  /** The larger repeats (undefined: not grown). */
  readonly repeats: number | undefined
  /** The smaller `--repeats` given, kept at the recorded one (undefined: not smaller). */
  readonly fewerRepeats: number | undefined
  /** The differences that are no growth: the run is refused, naming them. */
  readonly refused: ReadonlyArray<Difference>
}

export const growthOf = (was: Experiment, now: Experiment, diffs: ReadonlyArray<Difference>): Growth => {
  const loadDiffs = diffs.filter((d) => d.field === "--load/--search")
  const loads = loadDiffs.length === 1 ? addedLoads(was, now, loadDiffs) : undefined
  const repeatsDiffer = diffs.some((d) => d.field === "--repeats")
  return {
    loads,
    repeats: repeatsDiffer && now.repeats > was.repeats ? now.repeats : undefined,
    fewerRepeats: repeatsDiffer && now.repeats < was.repeats ? now.repeats : undefined,
    refused: diffs.filter(
      (d) => d.field !== "--repeats" && !(d.field === "--load/--search" && loads !== undefined)
    )
  }
}

/** What growRepeatsLine needs of a sweep document (Sweep.ts's SweepDoc has it; no import back). */
interface RepeatsView {
  readonly experiment: { readonly repeats: number }
  readonly combinations: ReadonlyArray<{
    readonly status: string
    readonly points: ReadonlyArray<{
      readonly status: string
      readonly runs: ReadonlyArray<{ readonly status: "ok" | "failed" | "interrupted" | null }>
    }>
  }>
}

/** The line a run that changes `--repeats` logs: the runs it adds, or that a smaller one keeps what is there. */
export const growRepeatsLine = (doc: RepeatsView, grow: Growth): string => {
  const recorded = doc.experiment.repeats
  if (grow.repeats === undefined)
    return `sweep: --repeats ${grow.fewerRepeats} is smaller than the session's ${recorded}: what is measured is kept (nothing is dropped) and the session keeps --repeats ${recorded}`
  const to = grow.repeats
  let points = 0
  let runs = 0
  for (const c of doc.combinations) {
    if (c.status !== "done" && c.status !== "pending" && c.status !== "running") continue
    for (const p of c.points) {
      if (p.status !== "ok" && p.status !== "slo_failed" && p.status !== "invalid") continue
      points++
      runs += Math.max(0, to - p.runs.filter((r) => r.status === "ok").length)
    }
  }
  return `sweep: growing the repeats from ${recorded} to ${to}: ${runs} new run(s) on ${points} measured point(s), in rounds; every run measured is kept and each point's statistics are computed again over all its runs`
}
