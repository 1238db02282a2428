/**
 * What a new user reads at the end of a sweep (issue 27, items 11 and 12): a cancelled or stopped
 * sweep's best is the best SO FAR, with how far it got; no internal tags in user text; one
 * numbering of combinations (the `#` of the table) in the progress lines and the best line; a
 * sweep without params names its combination without an empty label.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import { renderSweepText } from "../../src/cli/RenderSweep.js"
import { renderSweepReport } from "../../src/cli/RenderSweepReport.js"
import {
  type Experiment,
  renderSummaryCsv,
  type SweepDoc,
  sweepEnvironmentRecord,
  withSummary
} from "../../src/domain/Sweep.js"
import { runSweep } from "../../src/programs/Sweep.js"
import { model, scriptedSweep, setup } from "../support/sweep.js"

/** The doc as if Ctrl-C came after the first point: everything after it pending again. */
const cancelledAfterFirst = (doc: SweepDoc): SweepDoc =>
  withSummary({
    ...doc,
    status: "cancelled",
    stop_reason: "orchestrator_cancelled",
    stop_error: "cancelled (Ctrl-C)",
    combinations: doc.combinations.map((c, ci) => ({
      ...c,
      status: ci === 0 ? "running" : "pending",
      engine_starts: ci === 0 ? c.engine_starts : [],
      points: c.points.map((p, pi) =>
        ci === 0 && pi === 0 ? p : { ...p, status: "pending", runs: [], stats: {}, slo: [] }
      )
    }))
  })

const collectLogs = (lines: Array<string>) =>
  Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ message }) => {
      lines.push(Array.isArray(message) ? message.map(String).join(" ") : String(message))
    })
  )

describe("a sweep that did not finish is not an answer", () => {
  it.effect("cancelled after 1 of 12 points: 'best so far', how far it got, no internal tag", () =>
    Effect.gen(function* () {
      const full = yield* scriptedSweep({
        server: "engine --max-num-seqs {seqs}",
        client: ["client", "--max-concurrency", "{c}"],
        gpus: 1
      })
      const text = renderSweepText("/s", cancelledAfterFirst(full))
      assert.notInclude(text, "orchestrator_cancelled")
      assert.notMatch(text, /^best: #/m)
      assert.include(text, "best so far (cancelled after 1 of 12 points)")
      assert.include(text, "the same command resumes it")
    })
  )

  it.effect("a finished sweep's best stays 'best:'", () =>
    Effect.gen(function* () {
      const full = yield* scriptedSweep({
        server: "engine --max-num-seqs {seqs}",
        client: ["client", "--max-concurrency", "{c}"],
        gpus: 1
      })
      const text = renderSweepText("/s", full)
      assert.match(text, /^best: #2 \(seqs=8\) at c=8/m)
      assert.notInclude(text, "so far")
    })
  )
})

describe("one numbering", () => {
  it.effect("progress names combinations by the table's #, never 3/3", () =>
    Effect.gen(function* () {
      const lines: Array<string> = []
      yield* scriptedSweep({
        server: "engine --max-num-seqs {seqs}",
        client: ["client", "--max-concurrency", "{c}"],
        gpus: 1
      }).pipe(Effect.provide(collectLogs(lines)))
      const progress = lines.filter((l) => l.startsWith("sweep: "))
      assert.isAbove(progress.length, 0)
      assert.isFalse(
        progress.some((l) => /combination \d+\/\d+/.test(l)),
        progress.join("\n")
      )
      assert.isTrue(
        progress.some((l) => l.includes("combination #2 (seqs=8)")),
        progress.join("\n")
      )
      assert.isTrue(
        progress.some((l) => l.includes("combination #0 (seqs=2)")),
        progress.join("\n")
      )
    })
  )

  it.effect("a sweep without params: best: #0 at …, no empty label", () =>
    Effect.gen(function* () {
      const e: Experiment = {
        server: "engine --max-num-seqs 8",
        client: ["client", "--max-concurrency", "{c}"],
        params: [],
        load: { kind: "points", name: "c", values: ["1", "2"] },
        slos: [],
        repeats: 1,
        gpus: 1,
        nodes: 1
      }
      const r = yield* runSweep({
        sessionDir: "/s/noparams",
        experiment: e,
        request: { gpus: 1, servingSlot: true },
        readiness: { path: "/health", timeoutSec: 10 },
        env: {},
        cwd: "/"
      }).pipe(Effect.provide(setup({ run: model })))
      const text = renderSweepText("/s", r.doc)
      assert.notInclude(text, "((no params))")
      assert.match(text, /^best: #0 at c=2: /m)
    })
  )
})

describe("exports people can use", () => {
  it.effect("summary.csv numbers are rounded to 2 decimals, as the reports print them", () =>
    Effect.gen(function* () {
      const doc = yield* scriptedSweep({
        server: "engine --max-num-seqs {seqs}",
        client: ["client", "--max-concurrency", "{c}"],
        gpus: 1
      })
      const csv = renderSummaryCsv(doc)
      const cells = csv
        .split("\n")
        .slice(1)
        .flatMap((l) => l.split(","))
      const numbers = cells.filter((c) => /^-?\d+(\.\d+)?$/.test(c))
      assert.isAbove(numbers.length, 10)
      for (const n of numbers) assert.match(n, /^-?\d+(\.\d{1,2})?$/, csv)
      // 200·8/(4+8) = 133.333… at seqs=8, c=8
      assert.include(csv, "133.33")
    })
  )

  it.effect("the best line gives the best point's p99 TTFT and TPOT with its throughput", () =>
    Effect.gen(function* () {
      const doc = yield* scriptedSweep({
        server: "engine --max-num-seqs {seqs}",
        client: ["client", "--max-concurrency", "{c}"],
        gpus: 1
      })
      const line = renderSweepText("/s", doc)
        .split("\n")
        .find((l) => l.startsWith("best:"))
      // seqs=8, c=8: p99 TTFT = p99 TPOT = 20 + 5·8 = 60 ms
      // the verdict's sentence stays word for word (summary.statement); the latencies follow it
      assert.match(line ?? "", /133 output tok\/s.*; at the best point: p99 TTFT 60 ms, p99 TPOT 60 ms$/)
    })
  )
})

describe("the report shows the sweep's environment and duration", () => {
  it.effect("versions, node, GPUs, engines, commands and how long the sweep took", () =>
    Effect.gen(function* () {
      const doc = yield* scriptedSweep({
        server: "engine --max-num-seqs {seqs}",
        client: ["client", "--max-concurrency", "{c}"],
        gpus: 1
      })
      const environment = sweepEnvironmentRecord({
        now: "2026-01-01T00:00:00.000Z",
        combination: 2,
        hyperloomVersion: "9.9.9",
        requestedGpus: 1,
        node: {
          hostname: "gpu-7",
          ray_version: "2.49.0",
          gpus: ["NVIDIA H100 80GB HBM3"],
          engines: { vllm: "0.9.2" }
        },
        server: "engine --max-num-seqs 8",
        clientArgv: ["client", "--max-concurrency", "8"]
      })
      const html = renderSweepReport(
        [
          {
            name: "s",
            doc: { ...doc, created_at: "2026-01-01T00:00:00.000Z", updated_at: "2026-01-01T01:02:03.000Z" },
            environment
          }
        ],
        "now"
      )
      const env = html.slice(html.indexOf("<h3>Environment</h3>"))
      for (const want of [
        "1 h 02 min",
        "9.9.9",
        "2.49.0",
        "gpu-7",
        "NVIDIA H100 80GB HBM3",
        "vllm 0.9.2",
        "sh -c",
        "client --max-concurrency 8"
      ])
        assert.include(env, want)
    })
  )
})
