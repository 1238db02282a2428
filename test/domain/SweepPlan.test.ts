import { assert, describe, it } from "@effect/vitest"
import { renderPlan, sessionEstimate, sweepPlan } from "../../src/domain/Sweep/Plan.js"
import type { Experiment } from "../../src/domain/Sweep.js"

const e: Experiment = {
  server: "vllm serve m --max-num-seqs {seqs} --port $HYPERLOOM_PORT",
  client: ["vllm", "bench", "serve", "--max-concurrency", "{c}", "--tag", "{seqs}"],
  params: [
    { name: "seqs", values: ["8", "16", "32"] },
    { name: "mode", values: ["a", "b"] }
  ],
  load: { kind: "points", name: "c", values: ["16", "4", "inf"] },
  slos: [],
  repeats: 2,
  gpus: 1,
  nodes: 1
}

describe("sweep run --dry-run: the plan", () => {
  it("combinations, points, runs, the first combination's command lines (loads ascending), the estimate", () => {
    const p = sweepPlan(e, "grid", { start_sec: 60, run_sec: 90, source: "options" })
    assert.strictEqual(p.combinations, 6)
    assert.strictEqual(p.points_per_combination, 3)
    assert.strictEqual(p.runs, 6 * 3 * 2)
    assert.deepStrictEqual(p.first, {
      params: { seqs: "8", mode: "a" },
      server_cmd: "vllm serve m --max-num-seqs 8 --port $HYPERLOOM_PORT",
      client_cmds: [
        "vllm bench serve --max-concurrency 4 --tag 8",
        "vllm bench serve --max-concurrency 16 --tag 8",
        "vllm bench serve --max-concurrency inf --tag 8"
      ]
    })
    assert.strictEqual(p.estimate?.total_sec, 6 * 60 + 36 * 90)
    const text = renderPlan(p)
    assert.include(
      text,
      "dry run (nothing runs): 6 combination(s) = 6 engine start(s), 3 load point(s) each, 2 repeat(s): 36 client run(s)"
    )
    assert.include(
      text,
      "estimate: 1.0 h = 6 × 60 s per engine start + 36 × 90 s per client run (from --estimate-start/--estimate-run)"
    )
  })

  it("a search and adaptive give upper bounds; no figures: no estimate, and how to get one", () => {
    const p = sweepPlan({ ...e, load: { kind: "search", name: "c", max: 64 } }, "adaptive", null)
    assert.strictEqual(p.points_per_combination, 13)
    assert.isTrue(p.points_are_upper_bound)
    assert.strictEqual(p.runs, 6 * 13 * 2)
    assert.isNull(p.estimate)
    const text = renderPlan(p)
    assert.include(text, "at most (--strategy adaptive starts fewer")
    assert.include(text, "estimate: none (give --estimate-start S and --estimate-run S")
  })

  it("a resumed session estimates from its own medians", () => {
    const doc = {
      combinations: [
        {
          engine_starts: [{ ready_sec: 50 }, { ready_sec: null }],
          points: [{ runs: [{ runtime_sec: 10 }, { runtime_sec: 30 }] }]
        },
        { engine_starts: [{ ready_sec: 70 }], points: [{ runs: [{ runtime_sec: 20 }] }] }
      ]
    }
    assert.deepStrictEqual(sessionEstimate(doc), { start_sec: 60, run_sec: 20, source: "session" })
    assert.isNull(sessionEstimate({ combinations: [] }))
  })
})
