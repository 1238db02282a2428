import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import { judgeSweepRun, settingsOf } from "../../src/domain/Sweep/Validity.js"
import {
  beginEngine,
  beginRun,
  type Experiment,
  finishPoint,
  finishRun,
  initialSweep,
  parseSweep,
  renderSweep,
  type SweepDoc,
  updateEngine,
  withSummary
} from "../../src/domain/Sweep.js"
import { checkFailed, type RunValidity, VALID } from "../../src/domain/Validity.js"

const T0 = "2026-01-01T00:00:00.000Z"
const at = (s: number) => new Date(Date.parse(T0) + s * 1000).toISOString()

const experiment = (over: Partial<Experiment> = {}): Experiment => ({
  server: "engine --max-num-seqs {max-num-seqs}",
  client: ["client", "--max-concurrency", "{c}"],
  params: [{ name: "max-num-seqs", values: ["32", "64"] }],
  load: { kind: "points", name: "c", values: ["64"] },
  slos: [{ metric: "p99_ttft_ms", op: "<=", bound: 500 }],
  repeats: 1,
  gpus: 1,
  nodes: 1,
  ...over
})

const notEngaged: RunValidity = {
  verdict: "invalid",
  findings: [
    {
      check: "not_engaged",
      severity: "invalid",
      evidence: "max_num_seqs asked 64, the engine runs 45",
      source: "/metrics vllm:cache_config_info"
    }
  ]
}

let clock = 0
const run = (
  doc: SweepDoc,
  index: number,
  tput: number,
  validity: RunValidity | undefined,
  over: { readonly repeat?: number; readonly client?: { completed: number; failed: number } } = {}
) => {
  clock += 10
  const d = beginRun(doc, index, "64", {
    repeat: over.repeat ?? 1,
    try: 1,
    dir: `/s/${index}/${clock}`,
    client_argv: ["client"],
    started_at: at(clock)
  })
  return finishRun(d, index, "64", {
    ended_at: at(clock + 5),
    status: "ok",
    class: null,
    error: null,
    exit_code: 0,
    runtime_sec: 5,
    throughput: tput,
    metrics: { output_throughput: tput, p99_ttft_ms: 100, completed: 400 },
    engine_died: false,
    ...(validity === undefined ? {} : { validity }),
    ...(over.client === undefined ? {} : { client: over.client })
  })
}

const ready = (doc: SweepDoc, index: number) => {
  clock += 1
  return updateEngine(beginEngine(doc, index, `/s/${index}/engine-${clock}`, at(clock)), index, {
    outcome: "ready",
    ready_at: at(clock),
    ready_sec: 1,
    ended_at: null
  })
}

/** judgeSweepRun on a clean run of max-num-seqs 32 at c = 64, with `over` laid on it. */
const judge = (over: Partial<Parameters<typeof judgeSweepRun>[0]>) =>
  judgeSweepRun({
    params: { "max-num-seqs": "32" },
    loadName: "c",
    load: "64",
    metrics: { completed: 400 },
    client: { completed: 400, failed: 0 },
    observations: undefined,
    engine: undefined,
    settings: { maxFailed: 0.01, slos: [], sessionClockMedian: null },
    ...over
  })

describe("validity in a sweep", () => {
  it("an invalid run enters no statistic: its point is invalid with the reasons, out of the best; the summary says how many runs were valid", () => {
    let doc = initialSweep(experiment(), T0)
    doc = ready(doc, 0)
    doc = finishPoint(run(doc, 0, 889, VALID), 0, "64")
    doc = ready(doc, 1)
    // believed, 1032 tok/s would win
    doc = finishPoint(run(doc, 1, 1032, notEngaged), 1, "64")
    doc = withSummary(doc)
    const p = doc.combinations[1]!.points[0]!
    assert.strictEqual(p.status, "invalid")
    assert.strictEqual(
      p.error,
      "no valid run: not_engaged (invalid): max_num_seqs asked 64, the engine runs 45 (from /metrics vllm:cache_config_info)"
    )
    assert.deepStrictEqual(p.stats, {})
    assert.deepStrictEqual(p.validity, { valid: 0, suspect: 0, invalid: 1, reasons: [p.error!.slice(14)] })
    assert.strictEqual(doc.summary.best?.combination, 0)
    assert.strictEqual(doc.summary.best?.output_throughput, 889)
    assert.strictEqual(doc.summary.validity?.line, "1 of 2 runs valid (1 invalid)")
    // kept: the run, its metrics, through the file and back
    assert.strictEqual(p.runs[0]!.throughput, 1032)
    assert.deepStrictEqual(Either.getOrThrow(parseSweep(renderSweep(doc))), doc)
  })

  it("a point keeps its valid runs and drops the invalid one from its statistics", () => {
    let doc = initialSweep(experiment({ repeats: 2 }), T0)
    doc = ready(doc, 0)
    doc = run(doc, 0, 880, VALID)
    doc = run(doc, 0, 5000, { verdict: "invalid", findings: [checkFailed(1, "x")] }, { repeat: 2 })
    doc = finishPoint(doc, 0, "64")
    const p = doc.combinations[0]!.points[0]!
    assert.strictEqual(p.status, "ok")
    assert.strictEqual(p.stats.output_throughput?.median, 880)
    assert.strictEqual(p.stats.output_throughput?.n, 1)
  })

  it("cold: the first run after an engine start, beyond the noise of the point's other runs, is flagged (suspect, still counted)", () => {
    let doc = initialSweep(experiment({ repeats: 3 }), T0)
    doc = ready(doc, 0)
    doc = run(doc, 0, 410, VALID)
    doc = run(doc, 0, 520, VALID, { repeat: 2 })
    doc = run(doc, 0, 530, VALID, { repeat: 3 })
    doc = finishPoint(doc, 0, "64")
    const runs = doc.combinations[0]!.points[0]!.runs
    assert.strictEqual(runs[0]!.validity?.verdict, "suspect")
    assert.deepStrictEqual(
      runs[0]!.validity?.findings.map((f) => f.check),
      ["cold"]
    )
    assert.strictEqual(runs[1]!.validity?.verdict, "valid")
    // suspect runs count: the median of 410, 520, 530
    assert.strictEqual(doc.combinations[0]!.points[0]!.stats.output_throughput?.median, 520)
    assert.deepStrictEqual(doc.combinations[0]!.points[0]!.validity, {
      valid: 2,
      suspect: 1,
      invalid: 0,
      reasons: [
        runs[0]!.validity!.findings.map(
          (f) => `${f.check} (${f.severity}): ${f.evidence} (from ${f.source})`
        )[0]!
      ]
    })
  })

  it("failures are misses: a p99 bound fails when more than 1 % of the requests failed, whatever the p99 of the rest", () => {
    let doc = initialSweep(experiment(), T0)
    doc = ready(doc, 0)
    // 5 of 400 failed (1.25 %): within --max-failed 2 % (suspect), but a p99 cannot hold
    doc = { ...doc, validity: { check: null, warmup: 8, max_failed: 0.02 } }
    const v = judge({
      metrics: { completed: 395 },
      client: { completed: 395, failed: 5 },
      settings: settingsOf(doc, experiment().slos)
    })
    assert.strictEqual(v.verdict, "suspect")
    doc = finishPoint(run(doc, 0, 880, v, { client: { completed: 395, failed: 5 } }), 0, "64")
    const p = doc.combinations[0]!.points[0]!
    assert.strictEqual(p.status, "slo_failed")
    assert.deepStrictEqual(p.slo, [{ slo: "p99_ttft_ms<=500", value: 100, ok: false }])
  })

  it("a run judged in a sweep reads the asked load from the load's name and the params against the engine's report", () => {
    const v = judge({
      params: { "max-num-seqs": "64" },
      loadName: "max_concurrency",
      observations: {
        duration_s: 10,
        client_cpu: null,
        engine_load: {
          source: "vllm",
          samples: 6,
          running_mean: 30,
          waiting_mean: 0,
          requests_total_delta: 400,
          generation_tokens_delta: null,
          prompt_tokens_delta: null
        },
        gpus: null,
        not_checked: []
      },
      engine: {
        number: 1,
        dir: "/e",
        started_at: T0,
        ended_at: null,
        ready_sec: 1,
        outcome: "ready",
        class: null,
        error: null,
        engine_config: {
          engine: "vllm",
          values: { max_num_seqs: 45 },
          sources: { max_num_seqs: "startup log" }
        }
      }
    })
    assert.deepStrictEqual(
      v.findings.map((f) => `${f.check}: ${f.evidence}`),
      [
        "not_engaged: max_num_seqs asked 64, the engine runs 45",
        "load_not_delivered: asked 64 in flight, the engine saw 30 on average (53 % under)"
      ]
    )
  })
})
