/**
 * GuideLLM's and AIPerf's reports (docs/clients.md), read from the files their own repositories
 * publish (../shared/client-fixtures, with their provenance; never copied here): each metric to
 * the value the tool's own aggregate (and GuideLLM's console rendering) states where its definition
 * is hyperloom's, computed from per-request records or left out (with a note) where it is not.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { aiperfRecordsOf, parseAiperfRun, parseAiperfRuns } from "../../src/domain/ClientReports.js"
import { type ParsedResult, parseResult } from "../../src/domain/Results.js"
import { percentileLinear } from "../../src/domain/Stats.js"

const FIXTURES = path.resolve(import.meta.dirname, "../../../shared/client-fixtures")
const read = (rel: string) => fs.readFileSync(path.join(FIXTURES, rel), "utf8")
const near = (actual: number | undefined, expected: number, digits: number, what: string) =>
  assert.strictEqual(actual?.toFixed(digits), expected.toFixed(digits), what)

describe("GuideLLM before 0.4: benchmarks_stripped.json (GuideLLM's own test asset)", () => {
  const r = parseResult(read("guidellm-v0.3-stripped/benchmarks_stripped.json"), {
    file: "benchmarks_stripped.json"
  })!
  const console_ = read("guidellm-v0.3-stripped/benchmarks_stripped_output.txt")
  // GuideLLM's console rows: "synchronous| 16:59:28| …" (Benchmarks Info, then Benchmarks Stats)
  const rows = console_
    .split("\n")
    .filter((l) => l.startsWith("synchronous|"))
    .map((l) => l.split("|").map((c) => c.trim()))
  const [info, stats] = rows as [Array<string>, Array<string>]

  it("is GuideLLM's, one benchmark at the load it states (synchronous: one request in flight)", () => {
    assert.strictEqual(r.format, "guidellm")
    assert.strictEqual(r.points?.length, 1)
    assert.deepStrictEqual(r.load, { kind: "concurrency", value: 1 })
    assert.strictEqual(r.points?.[0]?.label, "synchronous")
  })

  it("counts as its console does: 46 completed, 1 incomplete, 0 errored (failed = errored + incomplete)", () => {
    assert.deepStrictEqual([info[4], info[5], info[6]], ["46", "1", "0"])
    assert.strictEqual(r.metrics.completed, 46)
    assert.strictEqual(r.metrics.failed, 1)
  })

  it("TTFT and end-to-end latency: its console's mean, median, p99 (per-request values, unweighted: the definitions)", () => {
    // Stats columns: Per Second, Concurrency, Out Tok/sec, Tot Tok/sec, Req Latency mean/median/p99, TTFT mean/median/p99, ITL …, TPOT …
    const [latMean, latMedian, latP99, ttftMean, ttftMedian, ttftP99] = stats.slice(5, 11).map(Number)
    near(r.metrics.mean_ttft_ms, ttftMean!, 1, "mean TTFT")
    near(r.metrics.median_ttft_ms, ttftMedian!, 1, "median TTFT")
    near(r.metrics.p99_ttft_ms, ttftP99!, 1, "p99 TTFT")
    near((r.metrics.mean_e2el_ms ?? 0) / 1000, latMean!, 2, "mean latency")
    near((r.metrics.median_e2el_ms ?? 0) / 1000, latMedian!, 2, "median latency")
    near((r.metrics.p99_e2el_ms ?? 0) / 1000, latP99!, 2, "p99 latency")
  })

  it("TPOT is GuideLLM's inter_token_latency_ms (its console's ITL column), not its time_per_output_token_ms", () => {
    // every output is 128 tokens, so the (output tokens − 1) weights are equal: the per-request mean
    const [itlMean, itlMedian, itlP99, tpotMean] = stats.slice(11, 15).map(Number)
    near(r.metrics.mean_tpot_ms, itlMean!, 1, "mean TPOT = GuideLLM's mean ITL")
    near(r.metrics.median_tpot_ms, itlMedian!, 1, "median")
    near(r.metrics.p99_tpot_ms, itlP99!, 1, "p99")
    // (last − first token) / 128 against / 127: GuideLLM's TPOT is the smaller figure, by 128/127
    const doc = JSON.parse(read("guidellm-v0.3-stripped/benchmarks_stripped.json"))
    const g = doc.benchmarks[0].metrics
    near(g.time_per_output_token_ms.successful.mean * (128 / 127), r.metrics.mean_tpot_ms!, 6, "128/127")
    assert.notStrictEqual(r.metrics.mean_tpot_ms?.toFixed(3), tpotMean!.toFixed(3))
    assert.isTrue(
      r.notes?.some((n) => n.startsWith("tpot: from inter_token_latency_ms (every output 128 tokens"))
    )
  })

  it("ITL (per-chunk gaps) is left out and says so: GuideLLM records no chunk times", () => {
    assert.isUndefined(r.metrics.mean_itl_ms)
    assert.isTrue(r.notes?.some((n) => n.startsWith("itl: left out")))
  })

  it("throughputs are completed requests and their output tokens over the benchmark's duration (vLLM's definition), not GuideLLM's time-weighted rates", () => {
    // Output Tok Total Comp 5888 (the console), duration 29.997 s (the report)
    assert.strictEqual(info[16], "5888")
    near(r.metrics.output_throughput, 5888 / 29.997201442718506, 6, "output tok/s")
    near(r.metrics.request_throughput, 46 / 29.997201442718506, 6, "req/s")
    // its console's 198.1 tok/s and 1.55 req/s are averages over time of interpolated rates
    assert.strictEqual(stats[3], "198.1")
    assert.notStrictEqual(r.metrics.output_throughput?.toFixed(1), "198.1")
  })

  it("the workload on record: its --data, lengths (mean/p50/p99), the load, the requests sent", () => {
    assert.deepStrictEqual(r.workload, {
      client: "guidellm",
      client_version: null,
      dataset: "prompt_tokens=256,output_tokens=128",
      input_tokens: { mean: 257.1086956521739, p50: 257, p99: 259 },
      output_tokens: { mean: 127.99999999999999, p50: 128, p99: 128 },
      rate: null,
      concurrency: 1,
      arrival: "closed",
      burstiness: null,
      requests: 47
    })
  })

  it("with output lengths that differ and 1 of 46 records kept, TPOT is left out, naming the field and the file", () => {
    const doc = JSON.parse(read("guidellm-v0.3-stripped/benchmarks_stripped.json"))
    doc.benchmarks[0].metrics.output_token_count.successful.min = 100
    const p = parseResult(JSON.stringify(doc), { file: "b.json" })!
    assert.isUndefined(p.metrics.mean_tpot_ms)
    const note = p.notes?.find((n) => n.startsWith("tpot: left out"))
    assert.include(note, "b.json benchmarks[0]'s inter_token_latency_ms is weighted by output tokens")
    assert.include(note, "keeps 1 of 46 records")
  })
})

describe("AIPerf 0.1.1 (an artifact directory with every request's record)", () => {
  const json = read("aiperf-0.1.1-run1/profile_export_aiperf.json")
  const jsonl = read("aiperf-0.1.1-run1/profile_export.jsonl")
  const r = parseResult(json, { jsonl })!
  const records = JSON.parse(json).records

  it("is AIPerf's, at concurrency 100; counts 89 completed and 11 failed (cancelled)", () => {
    assert.strictEqual(r.format, "aiperf")
    assert.deepStrictEqual(r.load, { kind: "concurrency", value: 100 })
    assert.strictEqual(r.metrics.completed, 89)
    assert.strictEqual(r.metrics.failed, 11)
  })

  it("its aggregates feed the metrics whose formulas are hyperloom's: TPOT ← inter_token_latency, ITL ← inter_chunk_latency", () => {
    assert.strictEqual(r.metrics.output_throughput, records.output_token_throughput.avg)
    assert.strictEqual(r.metrics.request_throughput, records.request_throughput.avg)
    assert.strictEqual(r.metrics.mean_ttft_ms, records.ttft.avg)
    assert.strictEqual(r.metrics.p99_ttft_ms, records.ttft.p99)
    assert.strictEqual(r.metrics.mean_tpot_ms, records.inter_token_latency.avg)
    assert.strictEqual(r.metrics.median_tpot_ms, records.inter_token_latency.p50)
    assert.strictEqual(r.metrics.mean_itl_ms, records.inter_chunk_latency.avg)
    assert.strictEqual(r.metrics.p99_e2el_ms, records.request_latency.p99)
    assert.deepStrictEqual(r.notes, [])
  })

  it("recomputed from its 89 records, hyperloom's percentiles give AIPerf's own aggregates (both numpy's linear method)", () => {
    const ok = aiperfRecordsOf(jsonl).filter((x) => x.ok)
    assert.strictEqual(ok.length, 89)
    const itl = ok.map((x) => x.values.inter_token_latency as number)
    near(percentileLinear(itl, 99), records.inter_token_latency.p99, 6, "p99")
    // an export without its aggregates (a version that renamed them): computed from the records
    const doc = JSON.parse(json)
    delete doc.records.inter_token_latency
    delete doc.records.inter_chunk_latency
    const p = parseAiperfRun(doc, "x/profile_export_aiperf.json", jsonl)
    near(p.metrics.mean_tpot_ms, records.inter_token_latency.avg, 6, "mean TPOT from records")
    near(p.metrics.p99_tpot_ms, records.inter_token_latency.p99, 6, "p99 TPOT from records")
    near(p.metrics.median_itl_ms, records.inter_chunk_latency.p50, 6, "median ITL from 21537 chunk gaps")
    near(p.metrics.p99_itl_ms, records.inter_chunk_latency.p99, 6, "p99 ITL")
    assert.isTrue(
      p.notes.some((n) =>
        n.startsWith(
          "tpot: x/profile_export_aiperf.json has no inter_token_latency: computed from the 89 records"
        )
      )
    )
    // without the records it is left out, and says so
    const q = parseAiperfRun(doc, "x/profile_export_aiperf.json")
    assert.isUndefined(q.metrics.mean_tpot_ms)
    assert.isTrue(
      q.notes.some(
        (n) =>
          n ===
          "tpot: left out: x/profile_export_aiperf.json has no inter_token_latency and no profile_export.jsonl beside it"
      )
    )
  })

  it("hand-computed: three records, TPOT (request latency − TTFT) / (tokens − 1) per request, p99 by linear interpolation", () => {
    const line = (latency: number, ttft: number, osl: number) =>
      JSON.stringify({
        metadata: {},
        metrics: {
          request_latency: { value: latency, unit: "ms" },
          time_to_first_token: { value: ttft, unit: "ms" },
          output_sequence_length: { value: osl, unit: "tokens" },
          inter_token_latency: { value: (latency - ttft) / (osl - 1), unit: "ms" }
        }
      })
    // TPOTs: (110−10)/10 = 10, (220−20)/20 = 10, (430−30)/5 = 80
    const lines = [line(110, 10, 11), line(220, 20, 21), line(430, 30, 6)].join("\n")
    const doc = { input_config: { loadgen: { concurrency: 2 } }, request_count: { unit: "requests", avg: 3 } }
    const p = parseAiperfRun(doc, "h.json", lines)
    assert.strictEqual(p.metrics.mean_tpot_ms, 100 / 3)
    assert.strictEqual(p.metrics.median_tpot_ms, 10)
    // rank 0.99 × 2 = 1.98: 10 + (80 − 10) × 0.98
    assert.strictEqual(p.metrics.p99_tpot_ms, 10 + 70 * 0.98)
    assert.strictEqual(p.metrics.mean_ttft_ms, 20)
  })
})

describe("AIPerf 0.3 (three runs at concurrency 1, 2 and 4: the plot feature's fixtures)", () => {
  const runs = ["c1", "c2", "c4"].map((c) => ({
    doc: JSON.parse(read(`aiperf-0.3-qwen3-${c}/profile_export_aiperf.json`)),
    where: `${c}/profile_export_aiperf.json`,
    jsonl: read(`aiperf-0.3-qwen3-${c}/profile_export.jsonl`)
  }))
  const r = parseAiperfRuns(runs) as ParsedResult

  it("one measured point per run, each at the concurrency its input_config states", () => {
    assert.deepStrictEqual(
      r.points?.map((p) => p.load),
      [1, 2, 4].map((value) => ({ kind: "concurrency" as const, value }))
    )
    for (const [i, p] of (r.points ?? []).entries()) {
      const d = runs[i]!.doc
      assert.strictEqual(p.metrics.output_throughput, d.output_token_throughput.avg)
      assert.strictEqual(p.metrics.p99_ttft_ms, d.time_to_first_token.p99)
      assert.strictEqual(p.metrics.mean_tpot_ms, d.inter_token_latency.avg)
      assert.strictEqual(p.metrics.completed, 64)
      assert.strictEqual(p.metrics.failed, 0)
      assert.strictEqual(p.workload?.requests, 64)
      assert.deepStrictEqual(p.workload?.input_tokens, { mean: 100, p50: 100, p99: 100 })
    }
  })

  it("its trimmed records (10 of 64) are not taken for the whole: with an aggregate missing, the metric is left out", () => {
    const doc = structuredClone(runs[0]!.doc)
    delete doc.inter_chunk_latency
    const p = parseAiperfRun(doc, "c1/profile_export_aiperf.json", runs[0]!.jsonl)
    assert.isUndefined(p.metrics.mean_itl_ms)
    assert.isTrue(p.notes.some((n) => n.includes("profile_export.jsonl holds 10 of its 64 requests")))
  })
})

describe("bad input: a clear note on the point, never a silent zero", () => {
  it("a GuideLLM report whose fields were renamed (an unknown version): not a measurement, naming the field and file", () => {
    const doc = JSON.parse(read("guidellm-v0.3-stripped/benchmarks_stripped.json"))
    doc.benchmarks[0].totals = doc.benchmarks[0].request_totals
    delete doc.benchmarks[0].request_totals
    doc.metadata = { version: 3 }
    const p = parseResult(JSON.stringify(doc), { file: "report.json" })!
    assert.strictEqual(p.format, "guidellm")
    assert.isUndefined(p.throughput)
    assert.include(
      p.invalid,
      "report.json benchmarks[0]: a GuideLLM report of a version hyperloom does not know: no request_totals"
    )
    assert.isTrue(p.notes?.some((n) => n.includes("metadata.version 3 is one hyperloom does not know")))
  })

  it("an AIPerf export without request_count: not a measurement, naming it", () => {
    const doc = JSON.parse(read("aiperf-0.3-qwen3-c1/profile_export_aiperf.json"))
    doc.valid_request_count = doc.request_count
    delete doc.request_count
    const p = parseResult(JSON.stringify(doc), { file: "profile_export_aiperf.json" })!
    assert.strictEqual(p.format, "aiperf")
    assert.include(
      p.invalid,
      "profile_export_aiperf.json: an AIPerf export of a version hyperloom does not know: no request_count"
    )
  })

  it("a GuideLLM benchmark whose requests all errored: completed 0 (never a measurement) and a note saying so", () => {
    const doc = JSON.parse(read("guidellm-v0.3-stripped/benchmarks_stripped.json"))
    doc.benchmarks[0].request_totals = { successful: 0, errored: 5, incomplete: 0, total: 5 }
    for (const m of Object.values(doc.benchmarks[0].metrics) as Array<{ successful: { total_sum: number } }>)
      m.successful.total_sum = 0
    const p = parseResult(JSON.stringify(doc), { file: "r.json" })!
    assert.strictEqual(p.metrics.completed, 0)
    assert.strictEqual(p.metrics.failed, 5)
    assert.isTrue(
      p.notes?.some(
        (n) => n === "r.json benchmarks[0]: no request succeeded (errored 5, incomplete 0): not a measurement"
      )
    )
  })

  it("an AIPerf run whose requests all failed: completed 0 and failed N, with a note", () => {
    const doc = JSON.parse(read("aiperf-0.1.1-run1/profile_export_aiperf.json"))
    delete doc.records.request_count
    const p = parseAiperfRun(doc, "a.json")
    assert.strictEqual(p.metrics.completed, 0)
    assert.strictEqual(p.metrics.failed, 11)
    assert.isTrue(p.notes.some((n) => n.startsWith("a.json: no request succeeded")))
  })
})
