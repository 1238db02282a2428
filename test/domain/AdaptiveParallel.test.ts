/**
 * `--strategy adaptive --parallel N` (issue 33 item 2): up to N candidates measured at once, the
 * same best as the serial search and no more than 1.5× its engine starts, against the stand-in's
 * closed-form model (examples/engine-model.mjs THREE_AXES) and against random unimodal objectives.
 */
import { assert, describe, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { kvFailure, THREE_AXES as MODEL, modelFlags, predict } from "../../examples/engine-model.mjs"
import {
  type AdaptiveCombination,
  monotoneSkips,
  nextAdaptive,
  proposeAdaptive
} from "../../src/domain/Sweep/Adaptive.js"
import { type Combination, combinations, type Param } from "../../src/domain/Sweep/Grid.js"

const THREE_AXES: ReadonlyArray<Param> = MODEL.params

const truth = (c: Combination): number | null => {
  const s = modelFlags([...MODEL.engineArgs, ...Object.entries(c).flatMap(([k, v]) => [`--${k}`, v])])
  return kvFailure(s) === undefined ? predict(s, MODEL.load).outputThroughput : null
}

type Objective = (c: Combination) => number | null

const measure = (state: Array<AdaptiveCombination>, i: number, f: Objective) => {
  const t = f(state[i]!.params)
  state[i] = {
    ...state[i]!,
    state: "measured",
    kvInfeasible: t === null,
    objective: t === null ? undefined : { throughput: t, spread: 0, samples: [t] }
  }
}

const fresh = (params: ReadonlyArray<Param>): Array<AdaptiveCombination> =>
  combinations(params).map((p, index) => ({ index, params: p, state: "pending", kvInfeasible: false }))

const skip = (
  params: ReadonlyArray<Param>,
  state: Array<AdaptiveCombination>,
  running: ReadonlySet<number>
) => {
  for (const s of monotoneSkips(params, state, running))
    state[s.index] = { ...state[s.index]!, state: "skipped" }
}

/** The serial search (what `--parallel 1` does): its starts and where it settled. */
const serial = (params: ReadonlyArray<Param>, f: Objective) => {
  const state = fresh(params)
  const started: Array<number> = []
  for (let guard = 0; guard < 10_000; guard++) {
    skip(params, state, new Set())
    const step = nextAdaptive(params, state)
    if (step._tag === "done") return { started, settledAt: step.settledAt, state }
    started.push(step.index)
    measure(state, step.index, f)
  }
  throw new Error("the serial search did not end")
}

/**
 * The search with `n` at once: every free place filled with what it proposes; each combination
 * takes one unit of time, the one in flight longest ends first; `wall` is when the search ended
 * (the serial search's is its number of starts).
 */
const parallel = (params: ReadonlyArray<Param>, f: Objective, n: number) => {
  const state = fresh(params)
  const started: Array<number> = []
  const inFlight: Array<{ readonly index: number; readonly end: number }> = []
  let most = 0
  let now = 0
  for (let guard = 0; guard < 10_000; guard++) {
    skip(params, state, new Set(inFlight.map((x) => x.index)))
    const p = proposeAdaptive(params, state, n - inFlight.length, new Set(inFlight.map((x) => x.index)))
    if (p._tag === "done") return { started, settledAt: p.settledAt, state, most, wall: now }
    if (p._tag === "run")
      for (const w of p.start) {
        assert.strictEqual(state[w.index]!.state, "pending")
        assert.isFalse(inFlight.some((x) => x.index === w.index))
        started.push(w.index)
        inFlight.push({ index: w.index, end: now + 1 })
      }
    assert.isAtMost(inFlight.length, n)
    assert.isAbove(inFlight.length, 0, "nothing in flight and nothing proposed, yet not done")
    most = Math.max(most, inFlight.length)
    const next = inFlight.shift()!
    now = next.end
    measure(state, next.index, f)
  }
  throw new Error("the parallel search did not end")
}

const bestOf = (state: ReadonlyArray<AdaptiveCombination>) =>
  Math.max(...state.map((c) => c.objective?.throughput ?? Number.NEGATIVE_INFINITY))

describe("adaptive with --parallel N", () => {
  it("the closed-form model: the serial search's best, up to N at once, at most 1.5× its engine starts, fewer waits", () => {
    const one = serial(THREE_AXES, truth)
    assert.strictEqual(one.started.length, 7)
    for (const n of [2, 3, 4]) {
      const r = parallel(THREE_AXES, truth, n)
      assert.deepStrictEqual(r.settledAt, one.settledAt, `n=${n}`)
      assert.strictEqual(bestOf(r.state), bestOf(one.state), `n=${n}`)
      assert.isAtMost(r.started.length, 1.5 * one.started.length, `n=${n}: ${r.started.length} starts`)
      assert.strictEqual(r.most, n, `n=${n}: it used every place`)
      // done sooner than one at a time (each start as long): the wall time the bench measures
      assert.isBelow(r.wall, one.started.length, `n=${n}`)
      console.log(
        `[adaptive --parallel ${n}] ${r.started.length} engine starts (serial ${one.started.length}), wall ${r.wall} (serial ${one.started.length})`
      )
    }
  })

  it("with one place it is the serial search, start for start", () => {
    const one = serial(THREE_AXES, truth)
    const r = parallel(THREE_AXES, truth, 1)
    assert.deepStrictEqual(r.started, one.started)
  })

  it("enumerated params: each group's search runs beside the others'", () => {
    const params: ReadonlyArray<Param> = [
      { name: "mode", values: ["eager", "graphs"] },
      { name: "seqs", values: ["2", "4", "8"] }
    ]
    const f = (c: Combination) => Number(c.seqs) * (c.mode === "graphs" ? 2 : 1)
    const one = serial(params, f)
    const r = parallel(params, f, 2)
    assert.deepStrictEqual(r.settledAt, one.settledAt)
    assert.strictEqual(r.started.length, one.started.length)
    // the two starts (eager/4 and graphs/4) together first
    assert.deepStrictEqual(
      r.started.slice(0, 2).map((i) => combinations(params)[i]),
      [
        { mode: "eager", seqs: "4" },
        { mode: "graphs", seqs: "4" }
      ]
    )
  })

  it.prop(
    "random unimodal objectives on three axes (a peak and a KV corner): the serial best, ≤ 1.5× its starts, for N = 2 and 3",
    [
      fc.tuple(
        fc.integer({ min: 0, max: 4 }),
        fc.integer({ min: 0, max: 4 }),
        fc.integer({ min: 0, max: 4 })
      ),
      fc.tuple(
        fc.double({ min: 0.2, max: 3, noNaN: true }),
        fc.double({ min: 0.2, max: 3, noNaN: true }),
        fc.double({ min: 0.2, max: 3, noNaN: true })
      ),
      fc.integer({ min: 5, max: 13 })
    ],
    ([peak, w, corner]) => {
      const params: ReadonlyArray<Param> = ["a", "b", "c"].map((name) => ({
        name,
        values: ["1", "2", "3", "4", "5"]
      }))
      // a separable unimodal objective (the coordinate search's assumption), infeasible past a corner
      const f = (c: Combination): number | null => {
        const x = [Number(c.a) - 1, Number(c.b) - 1, Number(c.c) - 1]
        if (x[0]! + x[1]! + x[2]! > corner) return null
        return 1000 - x.reduce((s, v, i) => s + w[i]! * (v - peak[i]!) ** 2 * 10, 0)
      }
      const one = serial(params, f)
      for (const n of [2, 3]) {
        const r = parallel(params, f, n)
        if (bestOf(r.state) < bestOf(one.state)) return false
        if (process.env.DEBUG_ADAPTIVE)
          console.log(
            n,
            one.started.length,
            r.started.length,
            JSON.stringify(one.settledAt),
            JSON.stringify(r.settledAt)
          )
        if (JSON.stringify(r.settledAt) !== JSON.stringify(one.settledAt)) return false
        if (r.started.length > 1.5 * one.started.length) return false
      }
      return true
    },
    { fastCheck: { numRuns: 60 } }
  )
})
