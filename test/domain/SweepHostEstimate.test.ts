/**
 * `--dry-run`'s estimate from the host's recent sweeps (docs/design.md#time-to-the-answer): a sweep run's record, the
 * medians over the recent ones (each session once), and the choice (options, session, host).
 */
import { assert, describe, it } from "@effect/vitest"
import {
  chooseEstimate,
  engineOf,
  hostEstimate,
  type SweepRecord,
  sweepRecordOf
} from "../../src/domain/Sweep/HostEstimate.js"
import { renderPlan, sweepPlan } from "../../src/domain/Sweep/Plan.js"
import type { Experiment } from "../../src/domain/Sweep.js"

const e: Experiment = {
  server: "vllm serve m --max-num-seqs {seqs}",
  client: ["vllm", "bench", "serve", "--max-concurrency", "{c}"],
  params: [{ name: "seqs", values: ["8", "16"] }],
  load: { kind: "points", name: "c", values: ["1", "2", "4"] },
  slos: [],
  repeats: 1,
  gpus: 1,
  nodes: 1
}

const VLLM = { program: "vllm", model: "m" }

const measured = {
  combinations: [
    {
      engine_starts: [{ ready_sec: 50 }, { ready_sec: null }],
      points: [{ runs: [{ runtime_sec: 10 }, { runtime_sec: 30 }] }]
    },
    { engine_starts: [{ ready_sec: 70 }], points: [{ runs: [{ runtime_sec: 20 }, { runtime_sec: null }] }] }
  ]
}

const rec = (
  session: string,
  endedAt: number,
  startSec: number | null,
  runSec: number | null
): SweepRecord => ({
  endedAt,
  session,
  startSec,
  runSec,
  engineStarts: startSec === null ? 0 : 1,
  clientRuns: runSec === null ? 0 : 1,
  engine: VLLM
})

describe("the host's recent sweeps", () => {
  it("a sweep run's record: the session's medians and the counts they rest on; nothing measured: none", () => {
    assert.deepStrictEqual(sweepRecordOf(measured, "/s/a", 1000), {
      endedAt: 1000,
      session: "/s/a",
      startSec: 60,
      runSec: 20,
      engineStarts: 2,
      clientRuns: 3
    })
    // an engine that started but ran no client (e.g. cancelled during the first point): half a record
    const startedOnly = { combinations: [{ engine_starts: [{ ready_sec: 42.04 }], points: [] }] }
    assert.deepStrictEqual(sweepRecordOf(startedOnly, "/s/b", 5), {
      endedAt: 5,
      session: "/s/b",
      startSec: 42,
      runSec: null,
      engineStarts: 1,
      clientRuns: 0
    })
    assert.isNull(
      sweepRecordOf({ combinations: [{ engine_starts: [{ ready_sec: null }], points: [] }] }, "/s/c", 1)
    )
  })

  it("the estimate: medians over the recent sweeps, a session counted once (its last record), the last end named", () => {
    const t = Date.UTC(2026, 11, 3, 23, 40, 0)
    const est = hostEstimate(
      [
        rec("/s/a", t - 3000, 100, 10), // superseded by /s/a's later record
        rec("/s/b", t - 2000, 40, 30),
        rec("/s/c", t - 1000, 60, null),
        rec("/s/a", t, 50, 20)
      ],
      VLLM
    )
    assert.deepStrictEqual(est, {
      start_sec: 50,
      run_sec: 25,
      source: "host",
      sweeps: 3,
      last_ended: "2026-12-03T23:40:00Z",
      engine: "vllm, model m",
      sessions: ["/s/b", "/s/c", "/s/a"]
    })
    assert.isNull(hostEstimate([], VLLM))
    // starts but never a client run: no estimate
    assert.isNull(hostEstimate([rec("/s/a", t, 50, null)], VLLM))
  })

  it("the choice: the options win, then the session's own measurements, then the host's sweeps, else none", () => {
    const host = [rec("/s/x", 0, 90, 45)]
    const given = { start_sec: 5, run_sec: 2, source: "options" as const }
    assert.deepStrictEqual(chooseEstimate(given, measured, host, e.server).estimate, given)
    assert.deepStrictEqual(chooseEstimate(null, measured, host, e.server).estimate, {
      start_sec: 60,
      run_sec: 20,
      source: "session"
    })
    assert.strictEqual(chooseEstimate(null, { combinations: [] }, host, e.server).estimate?.source, "host")
    assert.strictEqual(chooseEstimate(null, null, host, e.server).estimate?.source, "host")
    assert.deepStrictEqual(chooseEstimate(null, null, [], e.server), { estimate: null })
  })

  it("the plan says where the figures came from: this host's N recent sweeps and when the last ended", () => {
    const est = hostEstimate(
      [rec("/s/a", Date.UTC(2026, 11, 3, 22, 0, 0), 60, 30), rec("/s/b", 0, 60, 30)],
      VLLM
    )
    const p = sweepPlan(e, "grid", est)
    assert.strictEqual(p.estimate?.total_sec, 2 * 60 + 6 * 30)
    assert.include(
      renderPlan(p),
      "estimate: 5.0 min = 2 × 60 s per engine start + 6 × 30 s per client run (from this host's 2 recent sweep(s) of the same engine (vllm, model m): /s/a, /s/b; the last ended 2026-12-03T22:00:00Z)"
    )
    const json = JSON.parse(JSON.stringify({ dry_run: true, ...p }))
    assert.deepStrictEqual(json.estimate, {
      start_sec: 60,
      run_sec: 30,
      source: "host",
      sweeps: 2,
      last_ended: "2026-12-03T22:00:00Z",
      engine: "vllm, model m",
      sessions: ["/s/a", "/s/b"],
      total_sec: 300
    })
  })

  it("the engine of a server command: its program (or the interpreter's module or script) and its model", () => {
    const cases: ReadonlyArray<readonly [string, string, string | null]> = [
      [
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-seqs {seqs}",
        "vllm",
        "meta-llama/Llama-3.1-8B-Instruct"
      ],
      ["vllm serve --model Qwen/Qwen2.5-7B --port $HYPERLOOM_PORT", "vllm", "Qwen/Qwen2.5-7B"],
      [
        "CUDA_VISIBLE_DEVICES=0 exec python3 -u -m sglang.launch_server --model-path 'Qwen/Qwen2.5-7B' --port 1",
        "sglang.launch_server",
        "Qwen/Qwen2.5-7B"
      ],
      ["python -m vllm.entrypoints.openai.api_server --model=m1", "vllm.entrypoints.openai.api_server", "m1"],
      [
        "/usr/bin/node /x/examples/fake-engine.mjs --load-sec 0.2 --max-num-seqs {seqs}",
        "fake-engine.mjs",
        null
      ],
      [
        "text-generation-launcher --model-id bigscience/bloom-560m",
        "text-generation-launcher",
        "bigscience/bloom-560m"
      ],
      ["/opt/llama.cpp/llama-server -m /models/q4.gguf -c 4096", "llama-server", "/models/q4.gguf"],
      ["engine --max-num-seqs {seqs}", "engine", null]
    ]
    for (const [server, program, model] of cases)
      assert.deepStrictEqual(engineOf(server), { program, model }, server)
  })

  it("issue 33 item 7: sweeps of another engine are never the estimate; when none is alike, what they ran is said", () => {
    const t = Date.UTC(2026, 11, 3, 22, 0, 0)
    const standIn = { program: "fake-engine.mjs", model: null }
    const host: ReadonlyArray<SweepRecord> = [
      { ...rec("/s/stand-in", t, 0.3, 1.2), engine: standIn },
      { ...rec("/s/old", t - 1, 0.3, 1.2), engine: undefined }
    ]
    const chosen = chooseEstimate(null, null, host, e.server)
    assert.isNull(chosen.estimate)
    assert.deepStrictEqual(chosen.unlike, {
      engine: "vllm, model m",
      ran: [
        { engine: "fake-engine.mjs", sweeps: 1 },
        { engine: "an engine not recorded (an older record)", sweeps: 1 }
      ]
    })
    assert.include(
      renderPlan(sweepPlan(e, "grid", chosen.estimate, undefined, chosen.unlike)),
      "estimate: none — none of this host's 2 recent sweep(s) ran this engine (vllm, model m): they ran fake-engine.mjs (1), an engine not recorded (an older record) (1); give --estimate-start S and --estimate-run S"
    )
    // the same program with another model is another engine; the same model, other flags, is alike
    assert.isNull(hostEstimate([rec("/s/a", t, 60, 30)], { program: "vllm", model: "other" }))
    assert.strictEqual(
      hostEstimate([rec("/s/a", t, 60, 30)], engineOf("vllm serve m --max-model-len 4096"))?.start_sec,
      60
    )
    // a record carries its engine, from the session's server command
    assert.deepStrictEqual(
      sweepRecordOf({ ...measured, experiment: { server: "vllm serve m --max-num-seqs 8" } }, "/s/a", 1)
        ?.engine,
      VLLM
    )
  })
})
