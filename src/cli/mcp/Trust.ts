/**
 * What every MCP result says about how far it can be trusted (docs/agents.md#what-an-agent-sees):
 * the confidence of a sweep's best ("none" where there is none: one run per point, no point meeting
 * the SLOs, a best that is not significant), its noisy points, the summary's validity (runs valid,
 * suspect, invalid; what was not checked), the points with suspect or invalid runs, and every
 * validity finding the runs carry, passed through where it stands. An agent reading the structured output cannot
 * take a gain the data does not support for one.
 */
import type { SessionState } from "../../domain/State.js"
import type { SweepDoc } from "../../domain/Sweep.js"

export interface Finding {
  /** Where in the document it stands (a JSON path). */
  readonly at: string
  readonly finding: unknown
}

/**
 * Every validity finding a document carries (each run's `validity.findings`, and any other
 * `findings` list), with where it stands; nothing is dropped.
 */
export const findingsIn = (value: unknown, at = "$"): ReadonlyArray<Finding> => {
  if (Array.isArray(value)) return value.flatMap((v, i) => findingsIn(v, `${at}[${i}]`))
  if (value === null || typeof value !== "object") return []
  const out: Array<Finding> = []
  for (const [key, v] of Object.entries(value)) {
    if (key === "findings" && Array.isArray(v))
      out.push(...v.map((f, i) => ({ at: `${at}.${key}[${i}]`, finding: f })))
    else out.push(...findingsIn(v, `${at}.${key}`))
  }
  return out
}

export interface Trust {
  /** `significant`: the best beats every other by Welch's test at 95 %; `tie`; `none`: no confidence. */
  readonly confidence: "significant" | "tie" | "none"
  /** Why, in one sentence. */
  readonly reason: string
  readonly repeats: number
  /** Points whose output throughput varied by more than 5 % (CV) over their repeats. */
  readonly noisy_points: ReadonlyArray<{ readonly combination: number; readonly load: string }>
  /**
   * The summary's validity as the document says it (runs valid, suspect, invalid; what was not
   * checked), null where the document has none (docs/trust.md).
   */
  readonly validity: unknown
  /** Points with suspect or invalid runs: their counts and reasons. */
  readonly points_with_findings: ReadonlyArray<{
    readonly combination: number
    readonly load: string
    readonly suspect: number
    readonly invalid: number
    readonly reasons: ReadonlyArray<string>
  }>
  readonly findings: ReadonlyArray<Finding>
}

/** The trust block of a sweep document. */
export const sweepTrust = (doc: SweepDoc): Trust => {
  const s = doc.summary
  const repeats = doc.experiment.repeats
  const noisy = doc.combinations.flatMap((c) =>
    c.points.filter((p) => p.noisy === true).map((p) => ({ combination: c.index, load: p.load }))
  )
  const [confidence, reason]: [Trust["confidence"], string] =
    s.verdict === "none"
      ? ["none", "no point met every SLO: there is no best to trust"]
      : s.verdict === "tie"
        ? [
            "tie",
            `the best does not beat ${s.tied_with.length} other combination(s) beyond the noise: a tie, not a gain`
          ]
        : repeats < 2
          ? [
              "none",
              "one run per point: no noise estimate, so no confidence can be claimed for the best (run again with repeats >= 2)"
            ]
          : s.significant === true
            ? ["significant", "the best beats every other combination's best by Welch's t-test at 95 %"]
            : ["none", "the best was not shown to beat the others at 95 %: no confidence"]
  const flagged = doc.combinations.flatMap((c) =>
    c.points.flatMap((p) =>
      p.validity !== undefined && p.validity.suspect + p.validity.invalid > 0
        ? [
            {
              combination: c.index,
              load: p.load,
              suspect: p.validity.suspect,
              invalid: p.validity.invalid,
              reasons: p.validity.reasons
            }
          ]
        : []
    )
  )
  const v = s.validity
  const caveat =
    v !== undefined && v.suspect + v.invalid > 0
      ? `; ${v.suspect} run(s) suspect and ${v.invalid} invalid: report the findings`
      : ""
  return {
    confidence,
    reason: `${reason}${caveat}`,
    repeats,
    noisy_points: noisy,
    validity: v ?? null,
    points_with_findings: flagged,
    findings: findingsIn(doc)
  }
}

/** The trust block of a baseline session: one measurement, no comparison, no confidence. */
export const baselineTrust = (state: SessionState): Trust => ({
  confidence: "none",
  reason: "a baseline is one measurement: it names no gain; compare two sessions for one",
  repeats: 1,
  noisy_points: [],
  validity: null,
  points_with_findings: [],
  findings: findingsIn(state)
})
