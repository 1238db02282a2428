/**
 * `sweep run --one-run` (docs/clients.md#in-a-sweep): a combination's load points in ONE client
 * run, its report's benchmarks the points at the loads the report states; a point the report has
 * no benchmark for fails, naming what it holds — never a point measured at another load.
 */

import { createHash } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { renderSweepText } from "../../src/cli/RenderSweep.js"
import { pointAtLoad } from "../../src/programs/Sweep/Points.js"
import { runSweep } from "../../src/programs/Sweep.js"
import * as SweepEngine from "../../src/programs/SweepEngine.js"
import { makeMemoryAttemptFiles } from "../../src/services/AttemptFiles.js"
import { setup, sweepExperiment, sweepOptions } from "../support/sweep.js"

/** A GuideLLM report (before 0.4) of one concurrent benchmark per stream count. */
const guidellm = (streams: ReadonlyArray<number>) => ({
  benchmarks: streams.map((n) => ({
    type_: "generative_benchmark",
    args: { strategy: { type_: "concurrent", streams: n } },
    request_totals: { successful: 10, errored: 0, incomplete: 0, total: 10 },
    duration: 10,
    metrics: {
      output_token_count: {
        successful: { mean: 100, median: 100, min: 100, max: 100, total_sum: 100 * 10 * n }
      },
      time_to_first_token_ms: { successful: { mean: 10 * n, median: 10 * n, percentiles: { p99: 20 * n } } },
      request_latency: { successful: { mean: 1, median: 1, percentiles: { p99: 2 } } },
      inter_token_latency_ms: { successful: { mean: 5, median: 5, percentiles: { p99: 6 } } }
    },
    requests: { successful: [] }
  }))
})

const experiment = sweepExperiment({
  server: "engine --max-num-seqs {seqs}",
  client: ["guidellm", "benchmark", "--rate-type", "concurrent", "--rate", "{c}"],
  params: [{ name: "seqs", values: ["4"] }],
  load: { kind: "points", name: "c", values: ["1", "2", "4"] },
  slos: [],
  oneRun: true
})

describe("sweep run --one-run", () => {
  it.effect(
    "one client run with the load list; each benchmark the point at its stated load; one engine start",
    () =>
      Effect.gen(function* () {
        const r = yield* runSweep(sweepOptions("/s/one", experiment))
        const log = yield* Effect.flatten(SweepEngine.FakeSweepEngineLog)
        assert.strictEqual(log.starts.length, 1)
        assert.deepStrictEqual(
          log.runs.map((x) => x.argv.at(-1)),
          ["1,2,4"]
        )
        const c = r.doc.combinations[0]!
        assert.deepStrictEqual(
          c.points.map((p) => [p.load, p.status, p.runs[0]?.metrics?.output_throughput]),
          [
            ["1", "ok", 100],
            ["2", "ok", 200],
            ["4", "ok", 400]
          ]
        )
        assert.strictEqual(r.doc.summary.best?.load, "4")
        // each run keeps its benchmark's workload; sweep show states it once
        assert.strictEqual(c.points[0]!.runs[0]!.workload?.concurrency, 1)
        const text = renderSweepText("/s/one", r.doc)
        assert.include(
          text,
          "  workload: client guidellm; arrival closed; requests 10; output tokens mean 100, p50 100\n"
        )
        assert.strictEqual(text.split("workload:").length, 2)
      }).pipe(Effect.provide(setup({ run: () => ({ report: guidellm([1, 2, 4]) }) })))
  )

  it.effect(
    "a report whose benchmarks do not match the loads asked: those points fail, naming what it holds",
    () =>
      Effect.gen(function* () {
        const r = yield* runSweep(sweepOptions("/s/mismatch", experiment))
        const c = r.doc.combinations[0]!
        assert.deepStrictEqual(
          c.points.map((p) => [p.load, p.status]),
          [
            ["1", "ok"],
            ["2", "ok"],
            ["4", "failed"]
          ]
        )
        const four = c.points[2]!
        assert.strictEqual(four.runs.length, 2, "retried once")
        assert.include(
          four.runs[1]!.error,
          "holds no benchmark at c=4; it holds concurrency 1, concurrency 2, concurrency 8"
        )
        assert.isNull(four.runs[1]!.metrics)
      }).pipe(Effect.provide(setup({ run: () => ({ report: guidellm([1, 2, 8]) }) })))
  )
})

describe("a sweep's dataset file on record (docs/clients.md#the-workload-on-record)", () => {
  const data = '{"prompt": "one"}\n{"prompt": "two"}\n'
  const facts = { bytes: data.length, sha256: createHash("sha256").update(data).digest("hex") }
  const withData = (oneRun: boolean) =>
    sweepExperiment({
      ...experiment,
      client: [...experiment.client, "--data", "/data/prompts.jsonl"],
      load: { kind: "points", name: "c", values: oneRun ? ["1", "2"] : ["1"] },
      oneRun
    })
  for (const oneRun of [false, true])
    it.effect(
      `the local file the client's --data names: its size and SHA-256 on every run, as a baseline's (${oneRun ? "--one-run" : "one run per point"})`,
      () => {
        const mem = makeMemoryAttemptFiles()
        mem.files.set("/data/prompts.jsonl", data)
        return Effect.gen(function* () {
          const r = yield* runSweep(sweepOptions(`/s/data-${oneRun}`, withData(oneRun)))
          const runs = r.doc.combinations[0]!.points.flatMap((p) => p.runs)
          assert.strictEqual(runs.length, oneRun ? 2 : 1)
          for (const run of runs) {
            assert.strictEqual(run.workload?.dataset, "/data/prompts.jsonl")
            assert.deepStrictEqual(run.workload?.dataset_file, facts)
          }
        }).pipe(
          Effect.provide(setup({ run: () => ({ report: guidellm(oneRun ? [1, 2] : [1]) }) }, undefined, mem))
        )
      }
    )
})

describe("--one-run: a benchmark is a point at its load's kind too", () => {
  const rate = (value: number) => ({ load: { kind: "rate" as const, value }, label: `constant@${value}` })
  const conc = (value: number) => ({
    load: { kind: "concurrency" as const, value },
    label: `concurrent@${value}`
  })

  it("a load named for in-flight requests never takes a rate of the same value, nor one for rates a concurrency", () => {
    assert.isUndefined(pointAtLoad([rate(2), rate(4)], "concurrency", "2"))
    assert.isUndefined(pointAtLoad([rate(2)], "max_concurrency", "2"))
    assert.isUndefined(pointAtLoad([conc(2)], "request_rate", "2"))
    assert.deepStrictEqual(pointAtLoad([rate(2), conc(2)], "concurrency", "2"), conc(2))
    assert.deepStrictEqual(pointAtLoad([rate(2), conc(2)], "rate", "2"), rate(2))
  })

  it("a name that says neither takes the one benchmark at that value, and none when a rate and a concurrency share it", () => {
    assert.deepStrictEqual(pointAtLoad([conc(1), conc(2)], "c", "2"), conc(2))
    assert.deepStrictEqual(pointAtLoad([rate(0.5), rate(2)], "c", "2.0"), rate(2))
    assert.isUndefined(pointAtLoad([rate(2), conc(2)], "c", "2"))
  })

  it.effect(
    "end to end: a GuideLLM report of rates for a sweep over concurrency fails its points, naming what it holds",
    () =>
      Effect.gen(function* () {
        const r = yield* runSweep(
          sweepOptions(
            "/s/kinds",
            sweepExperiment({
              ...experiment,
              load: { kind: "points", name: "concurrency", values: ["1", "2"] }
            })
          )
        )
        const c = r.doc.combinations[0]!
        assert.deepStrictEqual(
          c.points.map((p) => p.status),
          ["failed", "failed"]
        )
        assert.include(
          c.points[0]!.runs[0]!.error ?? "",
          "holds no benchmark at concurrency=1; it holds rate 1, rate 2"
        )
      }).pipe(
        Effect.provide(
          setup({
            run: () => ({
              report: {
                benchmarks: guidellm([1, 2]).benchmarks.map((b, i) => ({
                  ...b,
                  args: { strategy: { type_: "constant", rate: i + 1 } }
                }))
              }
            })
          })
        )
      )
  )
})
