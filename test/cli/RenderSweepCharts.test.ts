/**
 * Charts that show what matters (issue 27, item 10), on a sweep the program made against a
 * scripted engine, then shaped as a new user's sweep looks: one combination infeasible, one whose
 * points were evaluated out of load order (as --search evaluates them: 1, 2, 8, 4), repeats that
 * differ, TTFTs from 25 ms to 900 ms (the points past the engine's batch limit).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { renderSweepReport, yScale } from "../../src/cli/RenderSweepReport.js"
import { type PointRecord, type SweepDoc, withSummary } from "../../src/domain/Sweep.js"
import { runSweep } from "../../src/programs/Sweep.js"
import { model, setup, sweepExperiment, sweepOptions } from "../support/sweep.js"

const svgs = (html: string) => [...html.matchAll(/<svg[\s\S]*?<\/svg>/g)].map((m) => m[0])

/** The scripted sweep, made into what a new user meets. */
const userSweep = Effect.map(
  runSweep(
    sweepOptions("/s/user", sweepExperiment({ gpus: 1 }), { request: { gpus: 1, servingSlot: true } })
  ).pipe(
    Effect.map((r) => r.doc),
    Effect.provide(setup({ run: model }))
  ),
  (doc): SweepDoc => {
    const byLoad = (ps: ReadonlyArray<PointRecord>) => Object.fromEntries(ps.map((p) => [p.load, p]))
    return withSummary({
      ...doc,
      combinations: doc.combinations.map((c) => {
        if (c.index === 1)
          return {
            ...c,
            status: "infeasible" as const,
            class: "kv_cache_oom" as const,
            error: "ValueError: No available memory for the cache blocks.",
            points: c.points.map((p) => ({ ...p, status: "not_run" as const, runs: [], stats: {}, slo: [] }))
          }
        if (c.index === 2) {
          const p = byLoad(c.points)
          const c2 = p["2"]!
          const spread: PointRecord = {
            ...c2,
            stats: {
              ...c2.stats,
              output_throughput: { median: 66.7, min: 60, max: 70 },
              p99_ttft_ms: { median: 30, min: 28, max: 45 }
            }
          }
          return { ...c, points: [p["1"]!, spread, p["8"]!, p["4"]!] }
        }
        return c
      })
    })
  }
)

const pathXs = (svg: string, color: string): Array<number> => {
  const d = new RegExp(`<path d="([^"]+)" fill="none" stroke="${color}"`).exec(svg)?.[1] ?? ""
  return [...d.matchAll(/[ML]([\d.]+),/g)].map((m) => Number(m[1]))
}

describe("charts that show what matters", () => {
  it.effect("the report's best line gives the best point's p99 TTFT and TPOT after its throughput", () =>
    Effect.gen(function* () {
      const html = renderSweepReport([{ name: "s", doc: yield* userSweep }], "now")
      // the best is #2 at c=8: 133 tok/s, p99 TTFT 60 ms, p99 TPOT 60 ms (the scripted model)
      assert.match(
        html,
        /<b>Best:<\/b> #2 \(seqs=8\) at c=8: 133 output tok\/s[^<]*; at the best point: p99 TTFT 60 ms, p99 TPOT 60 ms<\/p>/
      )
    })
  )

  it.effect("a search's points are drawn and listed by load, not in the order they ran", () =>
    Effect.gen(function* () {
      const html = renderSweepReport([{ name: "s", doc: yield* userSweep }], "now")
      for (const svg of svgs(html).slice(0, 3)) {
        const xs = pathXs(svg, "#2ca02c")
        assert.strictEqual(xs.length, 4, svg)
        assert.deepStrictEqual(
          xs,
          [...xs].sort((a, b) => a - b)
        )
      }
      const rows = [
        ...html.matchAll(/<tr[^>]*><td><span[^>]*><\/span>#2 \(seqs=8\)<\/td><td>([^<]+)<\/td>/g)
      ].map((m) => m[1])
      assert.deepStrictEqual(rows, ["1", "2", "4", "8"])
    })
  )

  it.effect("an infeasible combination is drawn (× at the axis' left end), as the key says", () =>
    Effect.gen(function* () {
      const html = renderSweepReport([{ name: "s", doc: yield* userSweep }], "now")
      for (const svg of svgs(html).slice(0, 3)) {
        assert.match(svg, /<g class="failed"><path d="[^"]+" stroke="#d62728"/, svg)
        assert.include(svg, "#1 (seqs=4): infeasible (kv_cache_oom)")
      }
    })
  )

  it.effect("TTFT spanning decades gets a log axis: 25 ms and 60 ms no longer share the floor", () =>
    Effect.gen(function* () {
      const html = renderSweepReport([{ name: "s", doc: yield* userSweep }], "now")
      const ttft = svgs(html)[1]!
      assert.include(ttft, "ms (log scale)")
      const cy = (load: string) =>
        Number(
          new RegExp(`cy="([\\d.]+)"[^>]*><title>#2 \\(seqs=8\\), c=${load}:`).exec(ttft)?.[1] ?? Number.NaN
        )
      assert.isAbove(cy("1") - cy("8"), 20, ttft)
      // the SLO (300 ms) is inside the chart
      const slo = Number(/<line x1="[\d.]+" x2="[\d.]+" y1="([\d.]+)"[^>]*class="slo"/.exec(ttft)?.[1])
      assert.isAbove(slo, 34)
      assert.isBelow(slo, 280 - 44)
    })
  )

  it("yScale: linear from 0 when values stay within 20×, log decades beyond", () => {
    assert.isFalse(yScale([35, 75, 300]).log)
    const s = yScale([35, 75, 8000, 300])
    assert.isTrue(s.log)
    assert.isAbove(s.at(75) - s.at(35), 0.1)
  })

  it.effect(
    "SLO-failed points are hollow on the throughput chart; repeats' min–max are bars and in the table",
    () =>
      Effect.gen(function* () {
        const html = renderSweepReport([{ name: "s", doc: yield* userSweep }], "now")
        const tput = svgs(html)[0]!
        assert.match(tput, /class="slofailed"><title>#0 \(seqs=2\), c=8: slo_failed/)
        assert.include(tput, 'class="range"')
        assert.include(html, "30 (28–45)")
      })
  )

  it.effect("series that overlap stay visible: equal values at one load are drawn apart", () =>
    Effect.gen(function* () {
      const html = renderSweepReport([{ name: "s", doc: yield* userSweep }], "now")
      const tput = svgs(html)[0]!
      const cx = (combo: string) =>
        new RegExp(`<circle cx="([\\d.]+)" cy="([\\d.]+)"[^>]*><title>${combo}, c=1:`).exec(tput)
      const a = cx("#0 \\(seqs=2\\)")
      const b = cx("#2 \\(seqs=8\\)")
      assert.strictEqual(a?.[2], b?.[2], "same throughput at c=1")
      assert.notStrictEqual(a?.[1], b?.[1])
    })
  )

  it.effect("the Pareto chart reads tokens/s/user against tokens/s/GPU, each point labelled on hover", () =>
    Effect.gen(function* () {
      const html = renderSweepReport([{ name: "s", doc: yield* userSweep }], "now")
      const pareto = svgs(html)[3]!
      assert.include(pareto, "tokens/s/GPU")
      assert.include(pareto, "tokens/s/user")
      assert.match(pareto, /<title>#2 \(seqs=8\), c=8: [\d.]+ tokens\/s\/user, [\d.]+ tokens\/s\/GPU/)
    })
  )
})
