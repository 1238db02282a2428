/**
 * The report on two sweep sessions (docs/design.md#trusted-answers): both on shared axes with the
 * deltas — A solid, B dashed, each mean's 95 % interval; the change per point with its interval and
 * the overall band; the comparison's table with the verdicts `hyperloom compare` gives.
 */
import * as fs from "node:fs"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { renderCompareSection, withCompareSection } from "../../src/cli/RenderCompareReport.js"
import { renderSweepReport } from "../../src/cli/RenderSweepReport.js"
import { noisySweep } from "../support/compare.js"

const count = (html: string, needle: string) => html.split(needle).length - 1

describe("the report on two sweeps", () => {
  it.effect("draws A and B on shared axes, the deltas with their intervals, the overall band", () =>
    Effect.gen(function* () {
      const a = yield* noisySweep({ dir: "/s/a", repeats: 3, seed: 1 })
      const b = yield* noisySweep({
        dir: "/s/b",
        repeats: 3,
        seed: 2,
        slow: 1 / 0.9,
        loads: ["1", "2", "4", "8"]
      })
      const section = renderCompareSection({ name: "/s/a", doc: a }, { name: "/s/b", doc: b })
      const [tput, delta] = [...section.matchAll(/<svg[\s\S]*?<\/svg>/g)].map((m) => m[0])
      // one chart of both: 2 combinations × (3 loads of A + 4 of B) means, one line per side each
      assert.strictEqual(count(tput!, "<circle"), 2 * (3 + 4))
      assert.strictEqual(count(tput!, "<polyline"), 4)
      assert.strictEqual(count(tput!, 'stroke-dasharray="7 4"'), 2)
      // deltas: the 6 matched points, each with its interval; the overall band, the zero line
      assert.strictEqual(count(delta!, 'width="8" height="8"'), 6)
      assert.strictEqual(count(delta!, 'class="band"'), 1)
      assert.strictEqual(count(delta!, 'class="zero"'), 1)
      assert.match(
        section,
        /<b>Overall \(geometric mean of output throughput\):<\/b> -\d+\.\d % \[95 % CI -[\d.]+ % … -[\d.]+ %\] over 6 point\(s\): slower/
      )
      assert.strictEqual(count(section, "<td>slower</td>"), 6)
      assert.include(section, "only in B seqs=2 c=8; seqs=8 c=8")
      assert.notMatch(section, /(src|href)=|https?:\/\/(?!www\.w3\.org)/)
      const out = process.env.HYPERLOOM_TEST_REPORT_OUT
      if (out !== undefined) {
        const page = renderSweepReport(
          [
            { name: "/s/a", doc: a },
            { name: "/s/b", doc: b }
          ],
          "2026-12-03T00:00:00.000Z"
        )
        fs.writeFileSync(out, withCompareSection(page, section))
      }
    })
  )
})
