/**
 * The report on a sweep (docs/design.md#sweeps), on a document the sweep program made against a scripted
 * engine: failed points drawn as ×, the SLO lines, the Pareto front over the points that met every
 * SLO with the best on it and ringed once, its label inside the chart, one legend for the section
 * (HTML, so long labels wrap instead of overlapping in the charts), nothing fetched.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { paretoFront, renderSweepReport } from "../../src/cli/RenderSweepReport.js"
import type { SweepDoc } from "../../src/domain/Sweep.js"
import { scriptedSweep } from "../support/sweep.js"

const sweepDoc = scriptedSweep({
  server: "engine --max-num-seqs {seqs} --a-rather-long-flag-name-for-the-legend {seqs}",
  client: ["client", "--max-concurrency", "{c}"],
  gpus: 2
})

const count = (html: string, needle: string) => html.split(needle).length - 1
const svgs = (html: string) => [...html.matchAll(/<svg[\s\S]*?<\/svg>/g)].map((m) => m[0])

describe("the report on a sweep", () => {
  it("paretoFront keeps the points nothing beats on both axes, by x", () => {
    const pts = [
      { x: 1, y: 10 },
      { x: 2, y: 8 },
      { x: 2, y: 5 },
      { x: 4, y: 4 },
      { x: 3, y: 3 }
    ]
    assert.deepStrictEqual(paretoFront(pts), [pts[0], pts[1], pts[3]])
  })

  it.effect(
    "draws ×, SLO lines, the front of the SLO-passing points and the best once, inside the chart",
    () =>
      Effect.gen(function* () {
        const doc: SweepDoc = yield* sweepDoc
        assert.strictEqual(doc.summary.best?.label, "seqs=8")
        assert.strictEqual(doc.summary.best?.load, "8")
        const html = renderSweepReport([{ name: "s", doc }], "2026-12-01T00:00:00.000Z")
        const [throughput, ttft, tpot, pareto] = svgs(html)
        assert.isDefined(pareto)
        // seqs=2 at c=4 failed (the engine died): one × in each chart against load, none elsewhere
        for (const chart of [throughput!, ttft!, tpot!])
          assert.strictEqual(count(chart, '<g class="failed">'), 1)
        assert.strictEqual(count(pareto!, 'class="failed"'), 0)
        // the SLO line in the TTFT chart only
        assert.deepStrictEqual(
          [throughput!, ttft!, tpot!].map((c) => count(c, 'class="slo"')),
          [0, 1, 0]
        )
        assert.include(ttft!, "SLO p99_ttft_ms&lt;=300")
        // Pareto: 9 ok points (c ≤ B; seqs=2 stopped at its failure), 1 SLO-failed drawn hollow, never on the front
        const okPoints = doc.combinations.flatMap((c) => c.points.filter((p) => p.status === "ok"))
        assert.strictEqual(okPoints.length, 2 + 3 + 4)
        assert.strictEqual(count(pareto!, 'class="slofailed"'), 1)
        const front = paretoFront(
          doc.combinations.flatMap((c) =>
            c.points
              .filter((p) => p.status === "ok")
              .map((p) => {
                const t = p.stats.output_throughput!.median
                return { x: t / Number(p.load), y: t / 2 }
              })
          )
        )
        assert.strictEqual(count(pareto!, 'class="onfront"'), front.length)
        assert.strictEqual(count(pareto!, 'class="best"'), 1)
        // the best's label stays inside the chart's width
        const label =
          /<text x="([\d.]+)" y="[\d.]+" class="bestlabel" text-anchor="(start|end)">best: #2 at c=8<\/text>/.exec(
            pareto!
          )
        assert.isNotNull(label, pareto)
        const x = Number(label![1])
        const width = Number(/viewBox="0 0 (\d+)/.exec(pareto!)![1])
        const textWidth = "best: #2 at c=8".length * 7.5
        if (label![2] === "start") assert.isBelow(x + textWidth, width)
        else assert.isAbove(x - textWidth, 0)
        // one legend for the section, each combination once, none drawn inside the charts
        const legend = /<div class="legend">([\s\S]*?)<\/div>/.exec(html)![1]!
        assert.deepStrictEqual(
          [...legend.matchAll(/<\/span>(#\d [^<]*)<\/span>/g)].map((m) => m[1]),
          ["#0 (seqs=2)", "#1 (seqs=4)", "#2 (seqs=8)"]
        )
        for (const chart of [throughput!, ttft!, tpot!]) assert.notInclude(chart, 'class="legend"')
        // the best row marked in the table; nothing fetched
        assert.strictEqual(count(html, 'class="bestrow"'), 1)
        assert.notMatch(html, /(src|href)=|https?:\/\/(?!www\.w3\.org)/)
      })
  )

  it.effect(
    "says where the time went (docs/design.md#time-to-the-answer); an adaptive sweep states its assumption",
    () =>
      Effect.gen(function* () {
        const doc: SweepDoc = yield* sweepDoc
        const html = renderSweepReport([{ name: "s", doc }], "2026-12-01T00:00:00.000Z")
        assert.include(html, "time: wall ")
        assert.include(html, "3 engine start(s)")
        assert.notInclude(html, "assumed unimodal")
        const adaptive = renderSweepReport([{ name: "s", doc: { ...doc, strategy: "adaptive" } }], "x")
        assert.include(adaptive, "each numeric --param axis is assumed unimodal")
      })
  )
})
