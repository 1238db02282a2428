/**
 * Statistics over a point's repeats and the best point of a sweep (docs/design.md#best-and-tie). Pure.
 *
 * - A point's metrics are the median over its measured repeats, with min and max beside it.
 * - Best: the `ok` point with the highest median output throughput. With R ≥ 2 repeats, a best
 *   that does not beat the best `ok` point of every other combination by more than the larger
 *   max−min spread of the two, and by at least 1 %, is a tie naming the tied combinations: noise
 *   is not a winner.
 */
import { METRIC_KEYS, type MetricKey, type Metrics } from "../Results.js"

export const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

export interface Stat {
  readonly median: number
  readonly min: number
  readonly max: number
}

export type MetricStats = { readonly [K in MetricKey]?: Stat }

/** Median/min/max of every metric present in at least one run (over the runs that have it). */
export const statsOf = (runs: ReadonlyArray<Metrics>): MetricStats => {
  const out: { [K in MetricKey]?: Stat } = {}
  for (const key of METRIC_KEYS) {
    const xs = runs.flatMap((m) => (m[key] === undefined ? [] : [m[key]]))
    if (xs.length > 0) out[key] = { median: median(xs), min: Math.min(...xs), max: Math.max(...xs) }
  }
  return out
}

export const mediansOf = (stats: MetricStats): Metrics =>
  Object.fromEntries(Object.entries(stats).map(([k, s]) => [k, s.median])) as Metrics

/** The least relative margin a best must have over another combination's best (1 %). */
export const MIN_MARGIN = 0.01

/** What the best rule needs of a point. */
export interface Candidate {
  /** The combination's index. */
  readonly combination: number
  /** The point's index within its combination. */
  readonly point: number
  /** Median output throughput over the repeats. */
  readonly throughput: number
  /** max − min of the output throughput over the repeats (0 with one repeat). */
  readonly spread: number
}

export type BestVerdict =
  | { readonly _tag: "none" }
  | { readonly _tag: "best"; readonly best: Candidate }
  | {
      readonly _tag: "tie"
      readonly best: Candidate
      /** The other combinations' best points that the best does not clearly beat. */
      readonly tiedWith: ReadonlyArray<Candidate>
    }

/** Does `a` beat `b` beyond noise (the larger spread of the two, and 1 %)? */
export const beatsClearly = (a: Candidate, b: Candidate): boolean =>
  a.throughput - b.throughput > Math.max(a.spread, b.spread) &&
  a.throughput >= b.throughput * (1 + MIN_MARGIN)

/**
 * The best of the `ok` candidates (ties in throughput go to the earlier combination, then the
 * earlier point); with `repeats` ≥ 2, a tie when another combination's best is not clearly beaten.
 */
export const chooseBest = (candidates: ReadonlyArray<Candidate>, repeats: number): BestVerdict => {
  if (candidates.length === 0) return { _tag: "none" }
  const order = (a: Candidate, b: Candidate) =>
    b.throughput - a.throughput || a.combination - b.combination || a.point - b.point
  const sorted = [...candidates].sort(order)
  const best = sorted[0]!
  if (repeats < 2) return { _tag: "best", best }
  const perCombination = new Map<number, Candidate>()
  for (const c of sorted) if (!perCombination.has(c.combination)) perCombination.set(c.combination, c)
  const tiedWith = [...perCombination.values()].filter(
    (c) => c.combination !== best.combination && !beatsClearly(best, c)
  )
  return tiedWith.length === 0 ? { _tag: "best", best } : { _tag: "tie", best, tiedWith }
}
