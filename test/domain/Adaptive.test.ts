import { assert, describe, it } from "@effect/vitest"
import {
  kvFailure,
  modelFlags,
  predict,
  THREE_AXES as THREE_AXES_MODEL
} from "../../examples/engine-model.mjs"
import {
  type AdaptiveCombination,
  isNumericParam,
  monotoneSkips,
  nextAdaptive
} from "../../src/domain/Sweep/Adaptive.js"
import { type Combination, combinations, type Param } from "../../src/domain/Sweep/Grid.js"

const { engineArgs: BASE, load: LOAD } = THREE_AXES_MODEL
const THREE_AXES: ReadonlyArray<Param> = THREE_AXES_MODEL.params

const truth = (c: Combination): number | null => {
  const s = modelFlags([...BASE, ...Object.entries(c).flatMap(([k, v]) => [`--${k}`, v])])
  return kvFailure(s) === undefined ? predict(s, LOAD).outputThroughput : null
}

/** Runs the search to its end against an objective; returns what it started, in order. */
const drive = (params: ReadonlyArray<Param>, objective: (c: Combination) => number | null | "none") => {
  const state: Array<AdaptiveCombination> = combinations(params).map((p, index) => ({
    index,
    params: p,
    state: "pending",
    kvInfeasible: false
  }))
  const started: Array<number> = []
  const skipped = new Map<number, string>()
  for (let guard = 0; guard < 1000; guard++) {
    for (const s of monotoneSkips(params, state)) {
      state[s.index] = { ...state[s.index]!, state: "skipped" }
      skipped.set(s.index, s.reason)
    }
    const step = nextAdaptive(params, state)
    if (step._tag === "done") return { state, started, skipped, settledAt: step.settledAt }
    assert.strictEqual(state[step.index]!.state, "pending")
    started.push(step.index)
    const t = objective(state[step.index]!.params)
    state[step.index] = {
      ...state[step.index]!,
      state: "measured",
      kvInfeasible: t === null,
      objective: typeof t === "number" ? { throughput: t, spread: 0, samples: [t] } : undefined
    }
  }
  throw new Error("the search did not end")
}

describe("adaptive search", () => {
  it("finds the model's closed-form best of a 4 × 4 × 4 grid with at most 30 % of its engine starts", () => {
    const grid = combinations(THREE_AXES)
    const values = grid.map(truth)
    const best = Math.max(...values.map((v) => v ?? 0))
    assert.isAbove(values.filter((v) => v === null).length, 0, "the model has a KV-infeasible corner")
    const r = drive(THREE_AXES, truth)
    assert.strictEqual(r.settledAt.length, 1)
    const found = grid[r.settledAt[0]!]!
    assert.closeTo(truth(found) ?? 0, best, 1e-9, JSON.stringify(found))
    assert.deepStrictEqual(found, {
      "max-num-seqs": "32",
      "max-num-batched-tokens": "2048",
      "gpu-memory-utilization": "0.8"
    })
    assert.isAtMost(r.started.length, Math.floor(0.3 * grid.length))
    // the engine starts the search made, counted (the bench reports the same on a real head)
    assert.strictEqual(r.started.length, 7)
  })

  it("the start is the (upper) middle of each axis, axes ordered by value, not as written", () => {
    const params: ReadonlyArray<Param> = [{ name: "b", values: ["16", "2", "8", "4"] }]
    const r = nextAdaptive(
      params,
      combinations(params).map((p, index) => ({ index, params: p, state: "pending", kvInfeasible: false }))
    )
    assert.deepStrictEqual(r, { _tag: "run", index: 2, why: "the search's start (the middle of each axis)" })
  })

  it("infeasible is monotone: past a kv_cache_oom next to a feasible value, nothing further out starts; the reason names it", () => {
    const params: ReadonlyArray<Param> = [{ name: "seqs", values: ["2", "4", "8", "16", "32"] }]
    // throughput rises with seqs; 16 and 32 do not fit
    const r = drive(params, (c) => (Number(c.seqs) >= 16 ? null : Number(c.seqs)))
    const label = (i: number) => combinations(params)[i]!.seqs
    assert.deepStrictEqual(r.started.map(label), ["8", "16", "4"])
    assert.deepStrictEqual([...r.skipped.keys()].map(label), ["32"])
    assert.include(r.skipped.get(4), "seqs=16 failed with kv_cache_oom")
    assert.include(r.skipped.get(4), "a larger seqs")
    assert.deepStrictEqual(r.settledAt.map(label), ["8"])
  })

  it("moves while the objective improves by more than the noise (1 % with one run), then settles", () => {
    const params: ReadonlyArray<Param> = [{ name: "x", values: ["1", "2", "3", "4", "5", "6", "7"] }]
    // a peak at 2; 3 → 2 improves by 50 %, 2 → 1 by 0.5 % (within the noise: no move)
    const f = (c: Combination) =>
      ({ "1": 100.5, "2": 100, "3": 50, "4": 40, "5": 30, "6": 20, "7": 10 })[c.x!]!
    const r = drive(params, f)
    const label = (i: number) => combinations(params)[i]!.x
    assert.deepStrictEqual(r.started.map(label), ["4", "5", "3", "2", "1"])
    assert.deepStrictEqual(r.settledAt.map(label), ["2"])
  })

  it("an infeasible start moves to any feasible neighbour; an objective beats none", () => {
    const params: ReadonlyArray<Param> = [{ name: "x", values: ["1", "2", "3"] }]
    const r = drive(params, (c) => (c.x === "2" ? "none" : c.x === "1" ? 5 : 3))
    const label = (i: number) => combinations(params)[i]!.x
    assert.deepStrictEqual(r.started.map(label), ["2", "3", "1"])
    assert.deepStrictEqual(r.settledAt.map(label), ["1"])
  })

  it("params that are not all numbers are enumerated: a search per value", () => {
    const params: ReadonlyArray<Param> = [
      { name: "mode", values: ["eager", "graphs"] },
      { name: "seqs", values: ["2", "4", "8"] }
    ]
    assert.deepStrictEqual(params.map(isNumericParam), [false, true])
    const r = drive(params, (c) => Number(c.seqs) * (c.mode === "graphs" ? 2 : 1))
    const label = (i: number) => `${combinations(params)[i]!.mode}/${combinations(params)[i]!.seqs}`
    assert.deepStrictEqual(r.settledAt.map(label), ["eager/8", "graphs/8"])
    assert.deepStrictEqual(r.started.map(label), [
      "eager/4",
      "eager/8",
      "eager/2",
      "graphs/4",
      "graphs/8",
      "graphs/2"
    ])
  })
})
