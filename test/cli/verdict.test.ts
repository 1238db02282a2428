/**
 * The sweep's verdict is the same wherever it is shown (docs/design.md#trusted-answers): `sweep
 * show`'s text, the JSON (`summary.verdict`, `summary.statement`) and the report. A tie is never
 * drawn as a best; one run per point says that there is no noise estimate.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { renderSweepText } from "../../src/cli/RenderSweep.js"
import { renderSweepReport } from "../../src/cli/RenderSweepReport.js"
import type { Experiment, SweepDoc } from "../../src/domain/Sweep.js"
import { runSweep } from "../../src/programs/Sweep.js"
import { flag, seqsOf, setup, sweepExperiment, sweepOptions } from "../support/sweep.js"

/**
 * Two combinations (seqs 7 and 8, unless `over` says otherwise), one load; output throughput per
 * run from `values(key)` in turn, `key` what tells the combinations apart in the server command
 * (`seqs` by default).
 */
const sweep = <K extends string | number = number>(
  repeats: number,
  values: (key: K) => ReadonlyArray<number>,
  over: Partial<Experiment> = {},
  keyOf: (server: string) => K = seqsOf as unknown as (server: string) => K
) => {
  const seen = new Map<K, number>()
  return runSweep(
    sweepOptions(
      "/s/verdict",
      sweepExperiment({
        params: [{ name: "seqs", values: ["7", "8"] }],
        load: { kind: "points", name: "c", values: ["4"] },
        slos: [],
        repeats,
        gpus: 1,
        ...over
      }),
      { request: { gpus: 1, servingSlot: true } }
    )
  ).pipe(
    Effect.map((r) => r.doc),
    Effect.provide(
      setup({
        run: (server, argv) => {
          const s = keyOf(server)
          const i = seen.get(s) ?? 0
          seen.set(s, i + 1)
          const xs = values(s)
          return {
            metrics: {
              output_throughput: xs[i % xs.length]!,
              p99_ttft_ms: 10,
              completed: flag(argv, "--max-concurrency")
            }
          }
        }
      })
    )
  )
}

/** sweep show's text without the best's latencies (printed beside its throughput). */
const shown = (doc: SweepDoc) =>
  renderSweepText("/s/verdict", doc).replace(/, p99 TTFT [\d.]+ ms(, p99 TPOT [\d.]+ ms)?/, "")

const html = (doc: SweepDoc) => renderSweepReport([{ name: "s", doc }], "2026-12-01T00:00:00.000Z")

describe("one verdict everywhere", () => {
  it.effect("a tie: the CLI, the JSON and the report all say tie; the report marks no best", () =>
    Effect.gen(function* () {
      // seqs=8: 104 ± 5, seqs=7: 100 ± 5 — the larger median, not beyond the noise
      const doc = yield* sweep(3, (s) => (s === 8 ? [99, 104, 109] : [95, 100, 105]))
      assert.strictEqual(doc.summary.verdict, "tie")
      const statement = doc.summary.statement!
      assert.match(statement, /^a TIE within the noise \(Welch's t-test, 95 %\): #1 \(seqs=8\) at c=4/)
      assert.include(shown(doc), `best: ${statement}`)
      const page = html(doc)
      assert.include(page, statement.replace(/'/g, "&#39;"))
      assert.notInclude(page, "★ best")
      assert.notInclude(page, 'class="bestrow"')
      assert.notInclude(page, "best: #1")
      assert.notMatch(page, /<b>Best/)
    })
  )

  it.effect("a best beyond the noise: stated with its interval, marked in the report", () =>
    Effect.gen(function* () {
      const doc = yield* sweep(3, (s) => (s === 8 ? [119, 120, 121] : [99, 100, 101]))
      assert.strictEqual(doc.summary.verdict, "best")
      assert.isTrue(doc.summary.significant)
      const statement = doc.summary.statement!
      // mean 120, sd 1, half-width t(0.975, 2) / √3 = 2.484: 117.5–122.5, printed rounded
      assert.include(statement, "mean 120 [95 % CI 118–122] over 3 runs")
      assert.include(statement, "beats every other combination's best beyond the noise")
      assert.include(shown(doc), `best: ${statement}`)
      const page = html(doc)
      assert.include(page, statement.replace(/'/g, "&#39;"))
      assert.include(page, "★ best")
    })
  )

  it.effect("one run per point: the best says there is no noise estimate, everywhere", () =>
    Effect.gen(function* () {
      const doc = yield* sweep(1, (s) => (s === 8 ? [120] : [100]))
      assert.strictEqual(doc.summary.verdict, "best")
      assert.isFalse(doc.summary.significant)
      assert.include(doc.summary.statement!, "one run per point: no noise estimate")
      assert.include(shown(doc), "one run per point: no noise estimate")
      assert.include(html(doc), "one run per point: no noise estimate")
    })
  )

  it.effect(
    "issue 33 item 5: a tie between two long labels that differ in their last param names that param, whole, in the CLI, the JSON and the report",
    () =>
      Effect.gen(function* () {
        const model = "meta-llama/Llama-3.1-70B-Instruct-from-a-long-local-mirror-path"
        const doc = yield* sweep<string>(
          3,
          (g) => (g === "0.9" ? [99, 104, 109] : [95, 100, 105]),
          {
            server:
              "engine --model {model} --max-num-seqs {seqs} --max-model-len {len} --gpu-memory-utilization {gpu_memory_utilization}",
            params: [
              { name: "model", values: [model] },
              { name: "seqs", values: ["8"] },
              { name: "len", values: ["4096"] },
              { name: "gpu_memory_utilization", values: ["0.85", "0.9"] }
            ]
          },
          (server) => /--gpu-memory-utilization (\S+)/.exec(server)![1]!
        )
        assert.strictEqual(doc.summary.verdict, "tie")
        const statement = doc.summary.statement!
        assert.match(
          statement,
          /^a TIE within the noise \(Welch's t-test, 95 %\): #1 \(gpu_memory_utilization=0\.9\) at c=4: .* does not beat #0 \(gpu_memory_utilization=0\.85\) at c=4: /
        )
        assert.include(
          statement,
          `; they differ only in gpu_memory_utilization (alike: model=${model} seqs=8 len=4096)`
        )
        // the JSON's records say what tells them apart
        assert.deepStrictEqual(doc.summary.best?.differs, { gpu_memory_utilization: "0.9" })
        assert.deepStrictEqual(
          doc.summary.tied_with.map((t) => t.differs),
          [{ gpu_memory_utilization: "0.85" }]
        )
        const text = shown(doc)
        assert.include(text, `best: ${statement}`)
        // the tables: the param that varies first, whole
        assert.match(text, /\n1 +gpu_memory_utilization=0\.9 model=meta-llama/)
        assert.match(text, /\n0 +gpu_memory_utilization=0\.85 model=meta-llama/)
        assert.include(html(doc), statement.replace(/'/g, "&#39;"))
      })
  )
})
