/** The trust block every MCP result carries (src/cli/mcp/Trust.ts): confidence, noise, validity, findings. */
import { assert, describe, it } from "vitest"
import { sweepTrust } from "../../src/cli/mcp/Trust.js"
import { initialSweep, type SweepDoc } from "../../src/domain/Sweep.js"
import { sweepExperiment } from "../support/sweep.js"

const finding = {
  check: "not_engaged",
  severity: "invalid",
  evidence: "asked 256, the engine runs 128",
  source: "/get_server_info"
}

/** A laid-out sweep with `edit` applied to its JSON (only the fields the trust block reads matter). */
const docWith = (repeats: number, edit: (d: any) => void): SweepDoc => {
  const d = JSON.parse(JSON.stringify(initialSweep(sweepExperiment({ repeats }), new Date(0).toISOString())))
  edit(d)
  return d as SweepDoc
}

describe("the trust block", () => {
  it("passes every run's findings through where they stand, with the summary's validity and the flagged points", () => {
    const doc = docWith(2, (d) => {
      const p = d.combinations[1].points[0]
      p.runs = [
        { validity: { verdict: "invalid", findings: [finding] } },
        { validity: { verdict: "valid", findings: [] } }
      ]
      p.validity = { valid: 1, suspect: 0, invalid: 1, reasons: ["not_engaged (invalid): asked 256"] }
      d.summary.validity = {
        runs: 2,
        valid: 1,
        suspect: 0,
        invalid: 1,
        line: "1 of 2 runs invalid",
        not_checked: [],
        unverified: []
      }
      d.summary.verdict = "best"
      d.summary.significant = true
    })
    const t = sweepTrust(doc)
    assert.deepStrictEqual(t.findings, [
      { at: "$.combinations[1].points[0].runs[0].validity.findings[0]", finding }
    ])
    assert.deepStrictEqual(t.points_with_findings, [
      {
        combination: 1,
        load: doc.combinations[1]!.points[0]!.load,
        suspect: 0,
        invalid: 1,
        reasons: ["not_engaged (invalid): asked 256"]
      }
    ])
    assert.strictEqual((t.validity as { invalid: number }).invalid, 1)
    assert.strictEqual(t.confidence, "significant")
    assert.include(t.reason, "0 run(s) suspect and 1 invalid: report the findings")
  })

  it("says no confidence where there is none, and a tie is a tie", () => {
    const one = sweepTrust(docWith(1, (d) => (d.summary.verdict = "best")))
    assert.strictEqual(one.confidence, "none")
    assert.include(one.reason, "one run per point")
    assert.strictEqual(sweepTrust(docWith(3, (d) => (d.summary.verdict = "none"))).confidence, "none")
    const notShown = sweepTrust(
      docWith(3, (d) => {
        d.summary.verdict = "best"
        d.summary.significant = false
      })
    )
    assert.strictEqual(notShown.confidence, "none")
    const tie = sweepTrust(
      docWith(3, (d) => {
        d.summary.verdict = "tie"
        d.summary.tied_with = [{}]
      })
    )
    assert.strictEqual(tie.confidence, "tie")
    assert.include(tie.reason, "a tie, not a gain")
  })

  it("names the noisy points", () => {
    const t = sweepTrust(docWith(2, (d) => (d.combinations[0].points[1].noisy = true)))
    assert.deepStrictEqual(t.noisy_points, [{ combination: 0, load: t.noisy_points[0]!.load }])
    assert.strictEqual(t.noisy_points.length, 1)
  })
})
