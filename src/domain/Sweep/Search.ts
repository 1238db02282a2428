/**
 * The load search of `--search NAME[:MAX]` (docs/design.md#slo-and-search): for one combination,
 * the largest integer load that meets every SLO. Start at 1, double until an SLO fails or MAX is
 * reached (the last step is MAX itself when doubling would pass it), then bisect between the last
 * pass and the first fail. Every evaluated point is recorded by the caller.
 *
 * The policy is a pure function of the points evaluated so far, so a resumed sweep continues the
 * search exactly where it was (the points on disk are the search's whole state). A point that
 * failed (not just its SLO) counts as not passing.
 *
 * Evaluations: doubling takes at most ⌈log2 MAX⌉ + 1, bisection ⌈log2 (first fail − last pass)⌉.
 */

export interface Evaluated {
  readonly load: number
  readonly pass: boolean
}

export type SearchStep =
  | { readonly _tag: "evaluate"; readonly load: number }
  /** `largest` null: not even load 1 passed. */
  | { readonly _tag: "done"; readonly largest: number | null }

export const nextSearchStep = (max: number, evaluated: ReadonlyArray<Evaluated>): SearchStep => {
  const fails = evaluated.filter((e) => !e.pass).map((e) => e.load)
  const firstFail = fails.length === 0 ? undefined : Math.min(...fails)
  const passes = evaluated
    .filter((e) => e.pass && (firstFail === undefined || e.load < firstFail))
    .map((e) => e.load)
  const lastPass = passes.length === 0 ? undefined : Math.max(...passes)
  if (firstFail === undefined) {
    // doubling
    if (lastPass === undefined) return { _tag: "evaluate", load: 1 }
    if (lastPass >= max) return { _tag: "done", largest: lastPass }
    return { _tag: "evaluate", load: Math.min(lastPass * 2, max) }
  }
  if (lastPass === undefined) {
    // bisect between 0 (nothing passes) and the first fail, down to load 1
    if (firstFail <= 1) return { _tag: "done", largest: null }
    return { _tag: "evaluate", load: Math.floor(firstFail / 2) }
  }
  if (firstFail - lastPass <= 1) return { _tag: "done", largest: lastPass }
  return { _tag: "evaluate", load: Math.floor((lastPass + firstFail) / 2) }
}

/**
 * The bound on evaluations per combination (issue 16, docs/design.md#slo-and-search):
 * ⌈log2 MAX⌉ + ⌈log2 gap⌉ + 1.
 */
export const evaluationBound = (max: number, gap: number): number =>
  Math.ceil(Math.log2(max)) + (gap > 1 ? Math.ceil(Math.log2(gap)) : 0) + 1
