/**
 * Statistics over a point's repeats and the best point of a sweep (docs/design.md#best-and-tie,
 * docs/design.md#trusted-answers). Pure.
 *
 * - A point's metrics: per metric the median over its measured repeats, min and max, and the
 *   noise (Stats.ts): mean, standard deviation, coefficient of variation and the 95 % interval of
 *   the mean. A point whose output-throughput CV exceeds 5 % is noisy.
 * - Best: the `ok` point with the highest median output throughput. It is declared only when it
 *   beats the best `ok` point of every other combination beyond the noise — Welch's t-test at
 *   95 % on the two points' output-throughput repeats (the interval of the difference of the means
 *   lies above 0). Otherwise the verdict is a tie naming the tied combinations. With one run per
 *   point nothing can claim significance: the best is the highest, said with "one run per point:
 *   no noise estimate".
 * - `verdictLine`: the one sentence every view of the verdict prints (CLI, JSON, report).
 * - A tie names what differs between the tied combinations (`differing`, `labelDifferingFirst`):
 *   the params in which they differ first and whole, what they share after (a table may cut that),
 *   so a tie of two long labels that differ in their last param still reads.
 */
import { METRIC_KEYS, type MetricKey, type Metrics } from "../Results.js"
import { describe, median as medianOf, noisyCv, welch } from "../Stats.js"

export const median = medianOf

export interface Stat {
  readonly median: number
  readonly min: number
  readonly max: number
  /** The rest are absent in documents written before docs/design.md#trusted-answers. */
  readonly n?: number | undefined
  readonly mean?: number | undefined
  /** Sample standard deviation; null with one run. */
  readonly sd?: number | null | undefined
  /** sd ÷ mean; null with one run. */
  readonly cv?: number | null | undefined
  /** The 95 % interval of the mean (Student's t); null with one run. */
  readonly ci95?: readonly [number, number] | null | undefined
}

export type MetricStats = { readonly [K in MetricKey]?: Stat }

/** Every statistic of every metric present in at least one run (over the runs that have it). */
export const statsOf = (runs: ReadonlyArray<Metrics>): MetricStats => {
  const out: { [K in MetricKey]?: Stat } = {}
  for (const key of METRIC_KEYS) {
    const xs = runs.flatMap((m) => (m[key] === undefined ? [] : [m[key]]))
    if (xs.length > 0) {
      const s = describe(xs)
      out[key] = {
        median: s.median,
        min: s.min,
        max: s.max,
        n: s.n,
        mean: s.mean,
        sd: s.sd,
        cv: s.cv,
        ci95: s.ci95
      }
    }
  }
  return out
}

export const mediansOf = (stats: MetricStats): Metrics =>
  Object.fromEntries(Object.entries(stats).map(([k, s]) => [k, s.median])) as Metrics

/** A point is noisy when its output throughput varies by more than 5 % (CV) over its repeats. */
export const isNoisy = (stats: MetricStats): boolean => noisyCv(stats.output_throughput?.cv)

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
  /** The output throughput of each measured repeat. */
  readonly samples: ReadonlyArray<number>
}

export type BestVerdict =
  | { readonly _tag: "none" }
  | {
      readonly _tag: "best"
      readonly best: Candidate
      /** false with one run per point (or a side with one run): no noise estimate, no significance. */
      readonly significant: boolean
      /** Other combinations with an `ok` point (0: nothing to beat). */
      readonly rivals: number
    }
  | {
      readonly _tag: "tie"
      readonly best: Candidate
      /** The other combinations' best points that the best does not beat beyond the noise. */
      readonly tiedWith: ReadonlyArray<Candidate>
    }

/** The note a best carries when nothing could be tested. */
export const NO_NOISE_ESTIMATE = "one run per point: no noise estimate"

/**
 * Does `a` beat `b` beyond the noise? Welch's t-test at 95 % on their repeats; `undefined` when
 * either has fewer than two runs (nothing can be claimed).
 */
export const beatsClearly = (a: Candidate, b: Candidate): boolean | undefined => {
  const w = welch(describe(b.samples), describe(a.samples))
  return w === null ? undefined : w.significant && w.diff > 0
}

/**
 * The best of the `ok` candidates (ties in throughput go to the earlier combination, then the
 * earlier point). With two or more runs on both sides, another combination's best that the best
 * does not beat by Welch's test ties with it; with one run per point the highest is the best,
 * not significant.
 */
export const chooseBest = (candidates: ReadonlyArray<Candidate>): BestVerdict => {
  if (candidates.length === 0) return { _tag: "none" }
  const order = (a: Candidate, b: Candidate) =>
    b.throughput - a.throughput || a.combination - b.combination || a.point - b.point
  const sorted = [...candidates].sort(order)
  const best = sorted[0]!
  const perCombination = new Map<number, Candidate>()
  for (const c of sorted) if (!perCombination.has(c.combination)) perCombination.set(c.combination, c)
  const others = [...perCombination.values()].filter((c) => c.combination !== best.combination)
  const judged = others.map((c) => ({ c, win: beatsClearly(best, c) }))
  if (best.samples.length < 2 || (judged.length > 0 && judged.every((j) => j.win === undefined)))
    return { _tag: "best", best, significant: false, rivals: others.length }
  // A rival with one run (a grown sweep's older point) is not beaten beyond the noise either.
  const tiedWith = judged.filter((j) => j.win !== true).map((j) => j.c)
  return tiedWith.length === 0
    ? { _tag: "best", best, significant: true, rivals: others.length }
    : { _tag: "tie", best, tiedWith }
}

/** A combination's params (name → value), as the labels read them. */
type Params = Readonly<Record<string, string>>

/**
 * The params in which `combos` differ (in the order they are first met), and those all of them
 * share with the same value.
 */
export const differing = (
  combos: ReadonlyArray<Params>
): { readonly differ: ReadonlyArray<string>; readonly same: ReadonlyArray<string> } => {
  const names: Array<string> = []
  for (const c of combos) for (const k of Object.keys(c)) if (!names.includes(k)) names.push(k)
  const differ = names.filter((k) => new Set(combos.map((c) => c[k] ?? "")).size > 1)
  return { differ, same: names.filter((k) => !differ.includes(k)) }
}

/** Only `names` of `params`, in that order: the part of a tie that tells the combinations apart. */
export const pick = (params: Params, names: ReadonlyArray<string>): Record<string, string> =>
  Object.fromEntries(names.filter((k) => Object.hasOwn(params, k)).map((k) => [k, params[k]!]))

const words = (params: Params, names: ReadonlyArray<string>) =>
  names.filter((k) => Object.hasOwn(params, k)).map((k) => `${k}=${params[k]}`)

/**
 * A label with the params named in `first` first and whole, then the others; only the others are
 * cut (to `max` characters in all, ending with `…`), never the first ones.
 */
export const labelDifferingFirst = (params: Params, first: ReadonlyArray<string>, max: number): string => {
  const head = words(params, first).join(" ")
  const rest = words(
    params,
    Object.keys(params).filter((k) => !first.includes(k))
  ).join(" ")
  if (head === "") return rest.length <= max ? rest : `${rest.slice(0, Math.max(0, max - 1))}…`
  if (rest === "") return head
  const room = max - head.length - 1
  return rest.length <= room
    ? `${head} ${rest}`
    : room >= 2
      ? `${head} ${rest.slice(0, room - 1)}…`
      : `${head} …`
}

/** How long the params the tied combinations share may run in the sentence (the records keep them whole). */
export const ALIKE_SHOWN = 120

/**
 * How a tie names its combinations: each `#i (the params that differ among them)`, whole, and once
 * what they share (`; they differ only in X (alike: …)`, cut at ALIKE_SHOWN characters).
 */
export const tieNames = (
  rows: ReadonlyArray<{ readonly combination: number; readonly params: Params }>
): { readonly refs: ReadonlyMap<number, string>; readonly tail: string } => {
  const { differ, same } = differing(rows.map((r) => r.params))
  const refs = new Map(
    rows.map((r) => {
      const shown = words(r.params, differ).join(" ")
      return [r.combination, shown === "" ? `#${r.combination}` : `#${r.combination} (${shown})`] as const
    })
  )
  const alike = words(rows[0]?.params ?? {}, same).join(" ")
  const cut = alike.length <= ALIKE_SHOWN ? alike : `${alike.slice(0, ALIKE_SHOWN - 1)}…`
  const tail =
    differ.length === 0
      ? ""
      : `; they differ only in ${differ.join(", ")}${cut === "" ? "" : ` (alike: ${cut})`}`
  return { refs, tail }
}
