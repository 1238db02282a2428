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
  combos: ReadonlyArray<AdaptiveCombination>,
  /** Combinations in flight (`--parallel`): started already, never skipped. */
  running: ReadonlySet<number> = new Set()
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
          if (
            further === undefined ||
            further.state !== "pending" ||
            running.has(further.index) ||
            out.has(further.index)
          )
            continue
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

/** A combination the search wants measured, and why. */
export interface Wanted {
  readonly index: number
  readonly why: string
}

/**
 * One enumerated group's search walked as far as what is measured decides it: `settled` where it
 * stopped, or the combinations it needs before it can go on (`needed`: the serial search's next ones,
 * in its order) and those it will likely need once they are in (`likely`: the neighbours along the
 * axes it is about to compare, then the next move's); `blocked` when it waits on one in flight.
 */
interface Walk {
  readonly settled?: number | undefined
  readonly needed: ReadonlyArray<Wanted>
  readonly likely: ReadonlyArray<Wanted>
  /** Every combination the serial search has measured or needs, so far (the start, the neighbours it compared). */
  readonly path: ReadonlyArray<number>
}

const walkGroup = (
  s: Space,
  axes: ReadonlyArray<number>,
  group: Combination,
  running: ReadonlySet<number>
): Walk | undefined => {
  const params = s.params
  const open = (c: AdaptiveCombination | undefined): c is AdaptiveCombination =>
    c !== undefined && c.state === "pending" && !running.has(c.index)
  /** The neighbours of `at` along `axis` (nearer first: up, then down), skipped ones left out. */
  const neighbours = (at: Combination, axis: number) => {
    const name = params[axis]!.name
    const values = s.order[axis]!
    const i = values.indexOf(at[name] ?? "")
    return [i + 1, i - 1]
      .filter((j) => j >= 0 && j < values.length)
      .flatMap((j) => {
        const n = find(s, withValue(at, name, values[j]!))
        return n === undefined || n.state === "skipped" ? [] : [n]
      })
  }
  /** The other axes' neighbours of `at` (the axes it is about to compare), in the axes' order after `axis`. */
  const around = (at: AdaptiveCombination, axis: number): Array<Wanted> =>
    axes
      .map((_, k) => axes[(axes.indexOf(axis) + k) % axes.length]!)
      .flatMap((x) =>
        neighbours(at.params, x)
          .filter(open)
          .map((n) => ({
            index: n.index,
            why: `a neighbour of ${comboLabel(at.params)} along ${params[x]!.name}`
          }))
      )
  let cur: Combination = { ...group }
  for (const i of axes) cur = withValue(cur, params[i]!.name, s.order[i]![middle(s.order[i]!.length)]!)
  let here = find(s, cur)
  if (here === undefined) return undefined
  const path = new Set<number>([here.index])
  if (here.state === "pending") {
    // whatever the start measures, the search compares its neighbours along the first axis next
    const first = axes.length === 0 ? [] : neighbours(cur, axes[0]!)
    for (const n of first) path.add(n.index)
    const start = [
      ...(running.has(here.index)
        ? []
        : [{ index: here.index, why: "the search's start (the middle of each axis)" }]),
      ...first.filter(open).map((n) => ({
        index: n.index,
        why: `a neighbour of the search's start ${comboLabel(here!.params)} along ${params[axes[0]!]!.name}`
      }))
    ]
    const rest =
      axes.length === 0 ? [] : around(here, axes[0]!).filter((w) => !start.some((x) => x.index === w.index))
    return { needed: start, likely: rest, path: [...path] }
  }
  let still = 0
  let a = 0
  while (axes.length > 0 && still < axes.length) {
    const axis = axes[a % axes.length]!
    a++
    const name = params[axis]!.name
    const near = neighbours(cur, axis)
    for (const n of near) path.add(n.index)
    const waiting = near.filter((n) => n.state === "pending")
    if (waiting.length > 0) {
      const needed = waiting
        .filter(open)
        .map((n) => ({ index: n.index, why: `a neighbour of ${comboLabel(here!.params)} along ${name}` }))
      // the next move, should a neighbour measured already be the better: its neighbour further out
      const moved = near
        .filter((n) => n.state === "measured" && improvesOn(n, here!))
        .flatMap((n) => neighbours(n.params, axis).filter((m) => open(m) && m.index !== here!.index))
        .map((m) => ({ index: m.index, why: `a move along ${name}, should it improve` }))
      const around_ = around(here, axis).filter((w) => !needed.some((x) => x.index === w.index))
      return { needed, likely: [...moved, ...around_], path: [...path] }
    }
    const better = near
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
  return { settled: here.index, needed: [], likely: [], path: [...path] }
}

const groupsOf = (s: Space) => {
  const enumerated = s.params.flatMap((_, i) => (s.numeric[i] ? [] : [i]))
  // every assignment of the enumerated params, in the grid's order
  let groups: Array<Combination> = [{}]
  for (const i of enumerated) {
    const p = s.params[i]!
    groups = groups.flatMap((g) => s.order[i]!.map((v) => withValue(g, p.name, v)))
  }
  return groups
}

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
  const settledAt: Array<number> = []
  for (const group of groupsOf(s)) {
    const w = walkGroup(s, axes, group, new Set())
    if (w === undefined) continue
    if (w.needed.length > 0) return { _tag: "run", ...w.needed[0]! }
    settledAt.push(w.settled!)
  }
  return { _tag: "done", settledAt }
}

export type AdaptiveProposal =
  | {
      readonly _tag: "run"
      /** Up to `free` combinations to start now, the search's next first, then the likely ones. */
      readonly start: ReadonlyArray<Wanted>
    }
  /** Nothing to start now: the search waits on the combinations in flight. */
  | { readonly _tag: "wait" }
  | { readonly _tag: "done"; readonly settledAt: ReadonlyArray<number> }

/**
 * `--parallel N` with `--strategy adaptive` (docs/design.md#time-to-the-answer): up to `free` more
 * combinations to start beside those in flight (`running`). First what the serial search needs next
 * (each enumerated group's search runs on its own, so every group's next is needed), then what it
 * will likely need once those are in: the neighbours along the axes it is about to compare at the
 * point it stands on, and the neighbour further out should a neighbour measured already be the
 * better (the next move). A likely one the search then does not need is an engine start more than
 * the serial search makes; the search's decisions are the serial one's (each made on what is
 * measured, in the same order), so it settles where the serial search settles. `done` once every
 * group settled and nothing is in flight.
 */
export const proposeAdaptive = (
  params: ReadonlyArray<Param>,
  combos: ReadonlyArray<AdaptiveCombination>,
  free: number,
  running: ReadonlySet<number>
): AdaptiveProposal => {
  const s = space(params, combos)
  const axes = params.flatMap((_, i) => (s.numeric[i] ? [i] : []))
  const walks = groupsOf(s).flatMap((g) => {
    const w = walkGroup(s, axes, g, running)
    return w === undefined ? [] : [w]
  })
  const unsettled = walks.filter((w) => w.settled === undefined)
  if (unsettled.length === 0 && running.size === 0)
    return { _tag: "done", settledAt: walks.map((w) => w.settled!) }
  const start: Array<Wanted> = []
  const add = (w: Wanted) => {
    if (start.length < free && !start.some((x) => x.index === w.index)) start.push(w)
  }
  // what each group's search needs, taken in turns (every group's next first)
  const longest = Math.max(0, ...unsettled.map((x) => x.needed.length))
  for (let k = 0; k < longest; k++)
    for (const x of unsettled) if (x.needed[k] !== undefined) add(x.needed[k]!)
  // The likely ones within a budget: those started off the serial search's path (`spent`) stay at
  // most half of what it has measured or needs so far (`serial`, never more than it makes in the
  // end), so the starts stay within 1.5× the serial search's.
  const path = new Set(walks.flatMap((w) => w.path))
  const started = combos.filter((c) => c.state === "measured" || running.has(c.index)).map((c) => c.index)
  const serial = started.filter((i) => path.has(i)).length + start.length
  const spent = started.filter((i) => !path.has(i)).length
  let budget = Math.floor(serial / 2) - spent
  for (const w of unsettled.flatMap((x) => x.likely))
    if (budget > 0 && start.length < free && !start.some((x) => x.index === w.index)) {
      start.push(w)
      budget--
    }
  return start.length === 0 ? { _tag: "wait" } : { _tag: "run", start }
}

/** The reason of a combination the search did not start. */
export const notRunReason = (settled: ReadonlyArray<Combination>): string =>
  `not run by the adaptive search: it settled at ${
    settled.length === 0 ? "no combination" : settled.map(comboLabel).join("; ")
  }, where no neighbour improved the objective by more than the noise (each numeric axis assumed unimodal; --strategy grid runs it)`
