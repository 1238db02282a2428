/**
 * Grids as people write them (issue 27, item 13): beside the Cartesian product of --param, an
 * explicit list of combinations (--combo 'a=1,b=2', repeated) and linked values (vLLM's
 * `bench sweep --link-vars max_num_seqs=max_concurrency`: a server combination runs only the load
 * points equal to its linked param, vllm/benchmarks/sweep/serve.py `_comb_is_valid`). A resume
 * still refuses a different experiment.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  type Experiment,
  experimentDiff,
  experimentOf,
  experimentRecord,
  initialSweep,
  paramsOfCombos,
  parseCombo,
  parseLinks
} from "../../src/domain/Sweep.js"

const base: Experiment = {
  server: "engine --max-num-seqs {seqs} --tp {tp}",
  client: ["client", "--max-concurrency", "{c}"],
  params: [],
  load: { kind: "points", name: "c", values: ["1", "4", "8", "16"] },
  slos: [],
  repeats: 1,
  gpus: 1,
  nodes: 1
}

describe("explicit combinations", () => {
  it("--combo 'a=1,b=2': parsed, the params derived in order, every combo naming the same params", () => {
    const a = parseCombo("seqs=8,tp=1")
    const b = parseCombo("seqs=16, tp=2")
    assert.isTrue(a.ok && b.ok)
    if (!a.ok || !b.ok) return
    const ps = paramsOfCombos([a.value, b.value])
    assert.isTrue(ps.ok)
    if (!ps.ok) return
    assert.deepStrictEqual(ps.value, [
      { name: "seqs", values: ["8", "16"] },
      { name: "tp", values: ["1", "2"] }
    ])
    assert.isFalse(parseCombo("seqs=").ok)
    assert.isFalse(parseCombo("seqs=1,seqs=2").ok)
    const c = parseCombo("seqs=4")
    assert.isTrue(c.ok)
    if (c.ok) assert.include((paramsOfCombos([a.value, c.value]) as { error: string }).error, "tp")
    assert.include((paramsOfCombos([a.value, a.value]) as { error: string }).error, "twice")
  })

  it("a sweep of listed combinations has exactly those, not their product", () => {
    const combos = [
      { seqs: "8", tp: "1" },
      { seqs: "16", tp: "2" }
    ]
    const e: Experiment = {
      ...base,
      params: (paramsOfCombos(combos) as { value: Experiment["params"] }).value,
      combos
    }
    const doc = initialSweep(e, "2026-01-01T00:00:00.000Z")
    assert.deepStrictEqual(
      doc.combinations.map((c) => c.server_cmd),
      ["engine --max-num-seqs 8 --tp 1", "engine --max-num-seqs 16 --tp 2"]
    )
    // kept, and read back as the same experiment
    const again = experimentOf(experimentRecord(e))
    assert.deepStrictEqual(experimentDiff(e, again), [])
    const other = { ...e, combos: [combos[0]!, { seqs: "32", tp: "2" }] }
    const diff = experimentDiff(e, other)
    assert.strictEqual(diff.length, 1)
    assert.include(diff[0]!.field, "--combo")
  })
})

describe("linked values (--link-vars PARAM=LOAD)", () => {
  it("each combination runs only the load points equal to its linked param", () => {
    const links = parseLinks(["seqs=c"])
    assert.isTrue(links.ok)
    if (!links.ok) return
    const e: Experiment = {
      ...base,
      server: "engine --max-num-seqs {seqs}",
      params: [{ name: "seqs", values: ["4", "8", "32"] }],
      links: links.value
    }
    const doc = initialSweep(e, "2026-01-01T00:00:00.000Z")
    assert.deepStrictEqual(
      doc.combinations.map((c) => c.points.map((p) => p.load)),
      [["4"], ["8"], []]
    )
    assert.deepStrictEqual(experimentDiff(e, { ...e, links: [] })[0]?.field, "--link-vars")
    assert.deepStrictEqual(experimentDiff(e, experimentOf(experimentRecord(e))), [])
  })

  it("several links given comma-separated, as vLLM's --link-vars; malformed ones refused", () => {
    const l = parseLinks(["seqs=c,len=input"])
    assert.isTrue(l.ok)
    if (l.ok)
      assert.deepStrictEqual(l.value, [
        { param: "seqs", load: "c" },
        { param: "len", load: "input" }
      ])
    assert.isFalse(parseLinks(["seqs"]).ok)
    assert.isFalse(parseLinks(["=c"]).ok)
  })
})
