/**
 * `hyperloom compare` (docs/design.md#trusted-answers) on sweeps the sweep program made against the
 * scripted stand-in with a seeded noise (test/support/compare.ts): the same model twice finds no
 * difference; the model slowed by 10 % is found slower with 95 % confidence and trips `--fail-on`;
 * one run per point claims no confidence and judges the raw change; unmatched points and differing
 * records are listed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { compareJson, renderCompareText } from "../../src/cli/RenderCompare.js"
import { baselineSide, compareSessions, judgeGate, parseGate, sweepSide } from "../../src/domain/Compare.js"
import type { Workload } from "../../src/domain/Results.js"
import { initialState } from "../../src/domain/State.js"
import { noisySweep } from "../support/compare.js"

const gate = (text: string) => {
  const g = parseGate(text)
  if (!g.ok) throw new Error(g.error)
  return g.gate
}

describe("compare", () => {
  it.effect("the same model twice (other noise): no difference beyond the noise; the gate passes", () =>
    Effect.gen(function* () {
      const a = yield* noisySweep({ dir: "/s/a", repeats: 5, seed: 1 })
      const b = yield* noisySweep({ dir: "/s/b", repeats: 5, seed: 2 })
      const c = compareSessions(sweepSide("A", a, []), sweepSide("B", b, []), ["output_throughput"])
      assert.deepStrictEqual(c.differences, [])
      assert.isTrue(c.confidence)
      const m = c.metrics[0]!
      assert.strictEqual(m.points.length, 6)
      assert.strictEqual(m.overall!.points, 6)
      assert.strictEqual(m.overall!.verdict, "no difference beyond the noise")
      assert.isBelow(Math.abs(m.overall!.change), 0.02)
      assert.isTrue(m.overall!.ci95![0] < 0 && m.overall!.ci95![1] > 0)
      const r = judgeGate(c, gate("output_throughput<-3%"))
      assert.isFalse(r.failed)
      assert.isTrue(r.confident)
    })
  )

  it.effect("the model slowed by 10 %: slower with 95 % confidence at every point; --fail-on fails", () =>
    Effect.gen(function* () {
      const a = yield* noisySweep({ dir: "/s/a", repeats: 3, seed: 1 })
      const b = yield* noisySweep({ dir: "/s/b", repeats: 3, seed: 2, slow: 1 / 0.9 })
      const c = compareSessions(sweepSide("A", a, []), sweepSide("B", b, []), [
        "output_throughput",
        "p99_tpot_ms"
      ])
      const [tput, tpot] = c.metrics
      assert.deepStrictEqual(
        tput!.points.map((p) => p.verdict),
        Array(6).fill("slower")
      )
      assert.closeTo(tput!.overall!.change, -0.1, 0.02)
      assert.strictEqual(tput!.overall!.verdict, "slower")
      assert.isBelow(tput!.overall!.ci95![1], -0.03)
      // latencies: lower is better, the scripted engine's are noiseless (an interval of zero width)
      assert.isFalse(tpot!.higherIsBetter)
      assert.closeTo(tpot!.overall!.change, 1 / 0.9 - 1, 1e-9)
      assert.strictEqual(tpot!.overall!.verdict, "slower")
      // best against best: the same point (seqs=8 c=4) on both sides
      assert.strictEqual(tput!.best!.a, "seqs=8 c=4")
      assert.strictEqual(tput!.best!.verdict, "slower")
      const r = judgeGate(c, gate("output_throughput<-3%"))
      assert.isTrue(r.failed)
      assert.isTrue(r.confident)
      assert.include(r.reason, "past -3.0 % with 95 % confidence")
      assert.isTrue(judgeGate(c, gate("p99_tpot_ms>+5%")).failed)
      // a threshold beyond the change: passes
      assert.isFalse(judgeGate(c, gate("output_throughput<-20%")).failed)
      const text = renderCompareText(c, [r])
      assert.include(text, "gate output_throughput<-3%: FAILED")
      assert.match(text, /overall \(geometric mean over 6 point\(s\) both measured ok\): -\d+\.\d % \[-/)
    })
  )

  it.effect("one run per point: no confidence can be claimed; the gate judges the raw change", () =>
    Effect.gen(function* () {
      const a = yield* noisySweep({ dir: "/s/a", repeats: 1, seed: 1 })
      const b = yield* noisySweep({ dir: "/s/b", repeats: 3, seed: 2, slow: 1 / 0.9 })
      const c = compareSessions(sweepSide("A", a, []), sweepSide("B", b, []), ["output_throughput"])
      assert.isFalse(c.confidence)
      const m = c.metrics[0]!
      assert.isNull(m.overall!.ci95)
      assert.strictEqual(m.overall!.verdict, "no confidence: one run")
      assert.isTrue(m.points.every((p) => p.verdict === "no confidence: one run" && p.change!.ci95 === null))
      const r = judgeGate(c, gate("output_throughput<-3%"))
      assert.isFalse(r.confident)
      assert.isTrue(r.failed)
      assert.include(r.reason, "no confidence can be claimed")
      assert.include(renderCompareText(c, [r]), "one run per point on a side: no confidence can be claimed")
      // the differing record is listed first
      assert.deepStrictEqual(c.differences, [{ what: "repeats", a: "1", b: "3" }])
      assert.match(
        renderCompareText(c, [r]),
        /^compare A: A \(sweep\) with B: B \(sweep\)\nwhat differs[^\n]*\n {2}repeats:/
      )
    })
  )

  it.effect("points only one session has are listed; a gate with nothing to judge fails", () =>
    Effect.gen(function* () {
      const a = yield* noisySweep({ dir: "/s/a", repeats: 2, seed: 1, loads: ["1", "2"] })
      const b = yield* noisySweep({
        dir: "/s/b",
        repeats: 2,
        seed: 2,
        loads: ["2", "8"],
        server: "engine --max-num-seqs {seqs} --new-flag"
      })
      const c = compareSessions(sweepSide("A", a, []), sweepSide("B", b, []), ["output_throughput"])
      assert.deepStrictEqual(c.unmatched, {
        onlyA: ["seqs=2 c=1", "seqs=8 c=1"],
        onlyB: ["seqs=2 c=8", "seqs=8 c=8"]
      })
      assert.strictEqual(c.metrics[0]!.points.length, 2)
      assert.strictEqual(c.differences[0]!.what, "engine command")
      const none = compareSessions(sweepSide("A", a, []), sweepSide("B", a, []), ["p99_itl_ms"])
      const r = judgeGate(none, gate("p99_itl_ms>+5%"))
      assert.isTrue(r.failed)
      assert.include(r.reason, "cannot judge")
    })
  )

  it("two baselines match as a whole; their environments' differences come first", () => {
    const attempt = (n: number, t: number) => ({
      number: n,
      started_at: "2026-01-01T00:00:00.000Z",
      ended_at: "2026-01-01T00:01:00.000Z",
      runtime_sec: 60,
      error_class: null,
      exit_code: 0,
      error: null,
      signature: null,
      throughput: t,
      result_format: null,
      metrics: null
    })
    const state = (ts: ReadonlyArray<number>) => ({
      ...initialState(),
      status: "succeeded" as const,
      baseline_attempts: ts.map((t, i) => attempt(i + 1, t))
    })
    const env = (version: string) => ({
      recorded_at: "2026-01-01T00:00:00.000Z",
      attempt: 1,
      hyperloom_version: version,
      ray_version: "2.58.0",
      node: { id: null, hostname: "gpu-1", gpu_count: 1, cuda_visible_devices: "0", accelerators: ["H100"] },
      server_argv: ["sh", "-c", "vllm serve m"],
      client_argv: ["vllm", "bench", "serve"],
      engines: { vllm: "0.9.2" },
      python: null
    })
    const c = compareSessions(
      baselineSide("A", state([100, 102, 98]), env("0.1.0")),
      baselineSide("B", state([90, 91, 89]), env("0.2.0")),
      ["output_throughput"]
    )
    assert.deepStrictEqual(c.differences, [{ what: "hyperloom version", a: "0.1.0", b: "0.2.0" }])
    const p = c.metrics[0]!.points
    assert.strictEqual(p.length, 1)
    assert.strictEqual(p[0]!.key, "baseline")
    assert.closeTo(p[0]!.change!.change, -0.1, 1e-12)
    assert.strictEqual(p[0]!.verdict, "slower")
    // the overall of the one point is that point's change, interval and verdict
    const o = c.metrics[0]!.overall!
    assert.deepStrictEqual(
      [o.points, o.change, o.ci95, o.verdict],
      [1, p[0]!.change!.change, p[0]!.change!.ci95, "slower"]
    )
  })

  describe("the workload on record (docs/clients.md#the-workload-on-record)", () => {
    const workload = (over: Partial<Workload> = {}): Workload => ({
      client: "guidellm",
      client_version: "0.7.3",
      dataset: "/data/prompts.jsonl",
      dataset_file: { bytes: 1000, sha256: "aa" },
      input_tokens: { mean: 512, p50: 510, p99: 900 },
      output_tokens: { mean: 128, p50: 128, p99: 128 },
      rate: null,
      concurrency: 8,
      arrival: "closed",
      burstiness: null,
      requests: 200,
      ...over
    })
    const baseline = (ts: ReadonlyArray<number>, w: Workload | undefined) => ({
      ...initialState(),
      status: "succeeded" as const,
      baseline_attempts: ts.map((t, i) => ({
        number: i + 1,
        started_at: "2026-01-01T00:00:00.000Z",
        ended_at: "2026-01-01T00:01:00.000Z",
        runtime_sec: 60,
        error_class: null,
        exit_code: 0,
        error: null,
        signature: null,
        throughput: t,
        result_format: "guidellm" as const,
        metrics: null,
        ...(w === undefined ? {} : { workload: w })
      }))
    })
    const compare = (wa: Workload | undefined, wb: Workload | undefined, allow = false) =>
      compareSessions(
        baselineSide("A", baseline([100, 102, 98], wa), undefined),
        baselineSide("B", baseline([90, 91, 89], wb), undefined),
        ["output_throughput"],
        { allowWorkloadChange: allow }
      )

    it("the same dataset name with another file (its SHA-256): listed first, and no verdict", () => {
      const c = compare(workload(), workload({ dataset_file: { bytes: 1000, sha256: "bb" } }))
      assert.deepStrictEqual(c.differences[0], {
        what: "workload: dataset file",
        a: "1000 bytes, sha256 aa",
        b: "1000 bytes, sha256 bb"
      })
      assert.deepStrictEqual(c.workload, { changed: ["dataset file"], allowed: false })
      assert.isNull(c.metrics[0]!.points[0]!.verdict)
      assert.isNull(c.metrics[0]!.overall)
      const r = judgeGate(c, gate("output_throughput<-3%"))
      assert.isTrue(r.failed)
      assert.include(r.reason, "different workloads (dataset file)")
      const text = renderCompareText(c, [r])
      assert.include(text, "no verdict: the two sessions sent different workloads (dataset file)")
      assert.isBelow(text.indexOf("workload: dataset file"), text.indexOf("output_throughput ("))
    })

    it("--allow-workload-change: the verdict is given, the difference still listed first", () => {
      const c = compare(workload(), workload({ client: "aiperf", client_version: null }), true)
      assert.strictEqual(c.differences[0]!.what, "workload: client")
      assert.strictEqual(c.metrics[0]!.points[0]!.verdict, "slower")
    })

    it("output lengths (the engine's answers) and a session without a record are listed, not a different workload", () => {
      const c = compare(workload(), workload({ output_tokens: { mean: 97, p50: 90, p99: 128 } }))
      assert.deepStrictEqual(c.differences[0], {
        what: "workload: output tokens",
        a: "mean 128, p50 128, p99 128",
        b: "mean 97, p50 90, p99 128"
      })
      assert.deepStrictEqual(c.workload.changed, [])
      assert.strictEqual(c.metrics[0]!.points[0]!.verdict, "slower")
      const old = compare(undefined, workload())
      assert.strictEqual(old.differences[0]!.a, "not recorded")
      assert.deepStrictEqual(old.workload.changed, [])
      assert.strictEqual(old.metrics[0]!.points[0]!.verdict, "slower")
    })
  })

  it.effect("a noisy point (output CV over 5 %) is flagged on its side, in the text and the JSON", () =>
    Effect.gen(function* () {
      const a = yield* noisySweep({ dir: "/s/a", repeats: 3, seed: 1 })
      const b = yield* noisySweep({ dir: "/s/b", repeats: 3, seed: 2, cv: 0.15 })
      const c = compareSessions(sweepSide("A", a, []), sweepSide("B", b, []), ["output_throughput"])
      const points = c.metrics[0]!.points
      // A's noise is 2 %: never noisy; B's 15 %: noisy where its runs' CV exceeds 5 %
      assert.isTrue(points.every((p) => !p.noisy.includes("A")))
      const noisyB = points.filter((p) => p.noisy.includes("B"))
      assert.isAbove(noisyB.length, 0)
      assert.deepStrictEqual(
        noisyB.map((p) => p.key),
        points.filter((p) => p.b!.cv! > 0.05).map((p) => p.key)
      )
      assert.include(renderCompareText(c, []), `(noisy in B: output CV over 5 %)`)
      assert.deepStrictEqual(
        compareJson(c, [], 0).metrics[0]!.points.map((p) => p.noisy),
        points.map((p) => p.noisy)
      )
    })
  )

  it("--fail-on parses a metric, a direction and a signed percentage; nothing else", () => {
    assert.deepStrictEqual(parseGate("output_throughput<-3%"), {
      ok: true,
      gate: { metric: "output_throughput", op: "<", threshold: -0.03, text: "output_throughput<-3%" }
    })
    assert.strictEqual(gate("p99_ttft_ms>+5.5%").threshold, 0.055)
    assert.isFalse(parseGate("output_throughput<-3").ok)
    assert.isFalse(parseGate("throughputs<-3%").ok)
  })
})
