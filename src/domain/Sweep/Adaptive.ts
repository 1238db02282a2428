/**
 * `--strategy adaptive` (docs/design.md#time-to-the-answer): which server combination to start
 * next, and which never to start. Pure: the program asks `nextAdaptive` after every combination;
 * the answer is replayed from what the sweep has measured so far (nothing else is kept), so a
 * resumed sweep asks the same questions and gets the same answers.
 *
 * - A `--param` whose values are all numbers is an ordered axis (by value); the others are
 *   enumerated: each assignment of them gets a search of its own.
 * - *Infeasible is monotone*: a combination `infeasible` with `kv_cache_oom`, next to a feasible
 *   one on a numeric axis, makes every combination further out on that axis (the rest equal)
 *   `skipped`, the reason naming the combination it follows from.
 * - *Coordinate search*: from the middle value of each axis (the upper middle for an even count),
 *   measure the neighbours along one axis, move to the better one while it improves the objective
 *   by more than the noise, then the next axis, until a whole round of axes moves nowhere. The
 *   objective is a combination's best SLO-passing output throughput (with `--search`, at its
 *   largest passing load); a combination with no passing point, infeasible or failed, has none
 *   (worse than any).
 * - What it did not run is `skipped` with the reason; the assumption (each numeric axis unimodal)
 *   is stated in `ADAPTIVE_ASSUMPTION`.
 */
import { beatsClearly, type Candidate } from "./Best.js"
import { type Combination, comboLabel, type Param } from "./Grid.js"

export const STRATEGIES = ["grid", "adaptive"] as const
export type Strategy = (typeof STRATEGIES)[number]

export const ADAPTIVE_ASSUMPTION =
  "adaptive search: each numeric --param axis is assumed unimodal (one peak of the objective along it, the rest equal), and a kv_cache_oom stays infeasible further out on an axis; run the same command with --strategy grid to measure what it skipped"

/** What the search needs to know of one combination. */
export interface AdaptiveCombination {
  readonly index: number
  readonly params: Combination
  /** `pending` (never started, or to run again), `measured` (finished: see objective), `skipped`. */
  readonly state: "pending" | "measured" | "skipped"
  /** Ended infeasible with kv_cache_oom. */
  readonly kvInfeasible: boolean
  /** Best SLO-passing output throughput (median) and its max−min spread; undefined: none. */
  readonly objective?:
    | { readonly throughput: number; readonly spread: number; readonly samples: ReadonlyArray<number> }
    | undefined
}

export type AdaptiveStep =
  | { readonly _tag: "run"; readonly index: number; readonly why: string }
  | {
      readonly _tag: "done"
      /** Where the search settled (the best it found), or undefined when nothing passed. */
      readonly settledAt: ReadonlyArray<number>
    }

export interface Skip {
  readonly index: number
  readonly reason: string
}

/** A param is an axis when every value is a finite number. */
export const isNumericParam = (p: Param): boolean =>
  p.values.length > 0 && p.values.every((v) => v.trim() !== "" && Number.isFinite(Number(v)))

interface Space {
  readonly params: ReadonlyArray<Param>
  /** Per param: its values in axis order (numeric: ascending; else as given). */
  readonly order: ReadonlyArray<ReadonlyArray<string>>
  readonly numeric: ReadonlyArray<boolean>
  readonly byKey: ReadonlyMap<string, AdaptiveCombination>
}

const keyOf = (params: ReadonlyArray<Param>, c: Combination) =>
  JSON.stringify(params.map((p) => c[p.name] ?? ""))

const space = (params: ReadonlyArray<Param>, combos: ReadonlyArray<AdaptiveCombination>): Space => {
  const numeric = params.map(isNumericParam)
  const order = params.map((p, i) =>
    numeric[i] ? [...p.values].sort((a, b) => Number(a) - Number(b)) : [...p.values]
  )
  return {
    params,
    order,
    numeric,
    byKey: new Map(combos.map((c) => [keyOf(params, c.params), c]))
  }
}

const find = (s: Space, c: Combination) => s.byKey.get(keyOf(s.params, c))

const withValue = (c: Combination, name: string, value: string): Combination => ({ ...c, [name]: value })

const candidate = (c: AdaptiveCombination): Candidate | undefined =>
  c.objective === undefined
    ? undefined
    : {
        combination: c.index,
        point: 0,
        throughput: c.objective.throughput,
        spread: c.objective.spread,
        samples: c.objective.samples
      }

/** With one run per point there is no noise estimate: a move needs more than this gain (1 %). */
export const SINGLE_RUN_MARGIN = 0.01

/** `a` improves on `b` by more than the noise (an objective always improves on none). */
export const improvesOn = (a: AdaptiveCombination, b: AdaptiveCombination): boolean => {
  const ca = candidate(a)
  const cb = candidate(b)
  if (ca === undefined) return false
  if (cb === undefined) return true
  // Welch's test at 95 % on the repeats (Best.ts); one run per point: more than 1 %
  return beatsClearly(ca, cb) ?? ca.throughput > cb.throughput * (1 + SINGLE_RUN_MARGIN)
}

const axisWord = (s: Space, axis: number, up: boolean) =>
  `${up ? "a larger" : "a smaller"} ${s.params[axis]!.name}`

/**
 * Monotone infeasibility: every pending combination that lies further out, on one numeric axis,
 * than a kv_cache_oom combination next to a feasible one (measured, not kv-infeasible).
 */
export const monotoneSkips = (
  params: ReadonlyArray<Param>,
  combos: ReadonlyArray<AdaptiveCombination>
): ReadonlyArray<Skip> => {
  const s = space(params, combos)
  const out = new Map<number, string>()
  for (const bad of combos) {
    if (!bad.kvInfeasible) continue
    params.forEach((p, axis) => {
      if (!s.numeric[axis]) return
      const values = s.order[axis]!
      const at = values.indexOf(bad.params[p.name] ?? "")
      for (const dir of [1, -1]) {
        // a feasible combination on the other side, the rest equal
        const feasible = values
          .slice(0, Math.max(0, at))
          .concat(values.slice(at + 1))
          .some((v) => {
            const i = values.indexOf(v)
            if ((i - at) * dir >= 0) return false
            const other = find(s, withValue(bad.params, p.name, v))
            return other !== undefined && other.state === "measured" && !other.kvInfeasible
          })
        if (!feasible) continue
        for (let i = at + dir; i >= 0 && i < values.length; i += dir) {
          const further = find(s, withValue(bad.params, p.name, values[i]!))
          if (further === undefined || further.state !== "pending" || out.has(further.index)) continue
          out.set(
            further.index,
            `infeasible is monotone: ${comboLabel(bad.params)} failed with kv_cache_oom, and this one differs from it only by ${axisWord(s, axis, dir > 0)} (needs more KV cache)`
          )
        }
      }
    })
  }
  return [...out].map(([index, reason]) => ({ index, reason }))
}

const middle = (n: number) => Math.floor(n / 2)

/**
 * The next combination the adaptive search starts, or `done` with where it settled. Combinations
 * in state `skipped` are never proposed; a proposal is always `pending`.
 */
export const nextAdaptive = (
  params: ReadonlyArray<Param>,
  combos: ReadonlyArray<AdaptiveCombination>
): AdaptiveStep => {
  const s = space(params, combos)
  const axes = params.flatMap((_, i) => (s.numeric[i] ? [i] : []))
  const enumerated = params.flatMap((_, i) => (s.numeric[i] ? [] : [i]))
  // every assignment of the enumerated params, in the grid's order
  let groups: Array<Combination> = [{}]
  for (const i of enumerated) {
    const p = params[i]!
    groups = groups.flatMap((g) => s.order[i]!.map((v) => withValue(g, p.name, v)))
  }
  const settledAt: Array<number> = []
  for (const group of groups) {
    let cur: Combination = { ...group }
    for (const i of axes) cur = withValue(cur, params[i]!.name, s.order[i]![middle(s.order[i]!.length)]!)
    let here = find(s, cur)
    if (here === undefined) continue
    if (here.state === "pending")
      return { _tag: "run", index: here.index, why: "the search's start (the middle of each axis)" }
    let still = 0
    let a = 0
    while (axes.length > 0 && still < axes.length) {
      const axis = axes[a % axes.length]!
      a++
      const name = params[axis]!.name
      const values = s.order[axis]!
      const at = values.indexOf(cur[name] ?? "")
      const neighbours = [at + 1, at - 1]
        .filter((i) => i >= 0 && i < values.length)
        .flatMap((i) => {
          const n = find(s, withValue(cur, name, values[i]!))
          return n === undefined || n.state === "skipped" ? [] : [n]
        })
      const pending = neighbours.find((n) => n.state === "pending")
      if (pending !== undefined)
        return {
          _tag: "run",
          index: pending.index,
          why: `a neighbour of ${comboLabel(here.params)} along ${name}`
        }
      const better = neighbours
        .filter((n) => improvesOn(n, here!))
        .sort((x, y) => (y.objective?.throughput ?? 0) - (x.objective?.throughput ?? 0))[0]
      if (better === undefined) {
        still++
        continue
      }
      // moved: look further along the same axis before the next one
      cur = better.params
      here = better
      still = 0
      a--
    }
    settledAt.push(here.index)
  }
  return { _tag: "done", settledAt }
}

/** The reason of a combination the search did not start. */
export const notRunReason = (settled: ReadonlyArray<Combination>): string =>
  `not run by the adaptive search: it settled at ${
    settled.length === 0 ? "no combination" : settled.map(comboLabel).join("; ")
  }, where no neighbour improved the objective by more than the noise (each numeric axis assumed unimodal; --strategy grid runs it)`
