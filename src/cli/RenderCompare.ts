/**
 * `hyperloom compare A B` as text and as JSON (docs/design.md#trusted-answers): what differs
 * between the two sessions' records first, then per metric the matched points with A, B, the change
 * and its 95 % interval and a verdict, the overall geometric-mean change and best against best, the
 * unmatched points, and the gates. Pure.
 */
import { type Comparison, formatChange, type GateResult, notComparedWhy } from "../domain/Compare.js"
import type { Summary } from "../domain/Stats.js"

const num = (n: number): string =>
  Math.abs(n) >= 100 ? String(Math.round(n)) : String(Math.round(n * 10) / 10)

const side = (s: Summary | null): string =>
  s === null
    ? "–"
    : s.ci95 === null
      ? `${num(s.mean)} (1 run)`
      : `${num(s.mean)} [${num(s.ci95[0])}–${num(s.ci95[1])}] ×${s.n}`

const interval = (ci: readonly [number, number] | null): string =>
  ci === null ? "no interval" : `[${formatChange(ci[0])} … ${formatChange(ci[1])}]`

const table = (rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
  return rows.map((r) => `  ${r.map((c, i) => c.padEnd(widths[i]!)).join("  ")}`.trimEnd()).join("\n")
}

export const renderCompareText = (c: Comparison, gates: ReadonlyArray<GateResult>): string => {
  const out: Array<string> = []
  out.push(`compare A: ${c.a.name} (${c.a.kind}) with B: ${c.b.name} (${c.b.kind})`)
  if (c.differences.length === 0)
    out.push("the two sessions' records agree (engine and client command lines, node, hyperloom version)")
  else {
    out.push("what differs between the two sessions' records:")
    for (const d of c.differences) {
      out.push(`  ${d.what}:`)
      out.push(`    A: ${d.a ?? "(not recorded)"}`)
      out.push(`    B: ${d.b ?? "(not recorded)"}`)
    }
  }
  if (c.workload.changed.length > 0)
    out.push(
      c.workload.allowed
        ? `the workloads differ (${c.workload.changed.join(", ")}); compared anyway (--allow-workload-change): a change below may be the workload's`
        : `no verdict: the two sessions sent different workloads (${c.workload.changed.join(", ")}); different experiments are not compared (--allow-workload-change compares them anyway)`
    )
  if (!c.confidence)
    out.push(
      "one run per point on a side: no confidence can be claimed; changes are raw (no interval, no verdict beyond the noise)"
    )
  for (const m of c.metrics) {
    out.push("")
    out.push(
      `${m.metric} (${m.higherIsBetter ? "higher" : "lower"} is better; change = B ÷ A − 1 of the means, 95 % interval by Welch):`
    )
    if (m.points.length === 0) out.push("  no matched point")
    else
      out.push(
        table([
          ["point", "A mean [95 % CI] ×runs", "B", "change", "95 % CI", "verdict"],
          ...m.points.map((p) => [
            p.key,
            p.statusA === "ok" ? side(p.a) : `${side(p.a)} ${p.statusA}`,
            p.statusB === "ok" ? side(p.b) : `${side(p.b)} ${p.statusB}`,
            p.change === null ? "–" : formatChange(p.change.change),
            p.change === null ? "–" : interval(p.change.ci95),
            (p.verdict ??
              (c.workload.changed.length > 0 && !c.workload.allowed
                ? "not compared: different workloads"
                : notComparedWhy(p))) +
              (p.noisy.length === 0 ? "" : ` (noisy in ${p.noisy.join(" and ")}: output CV over 5 %)`)
          ])
        ])
      )
    out.push(
      m.overall === null
        ? "  overall: none — no point both sessions measured ok"
        : `  overall (geometric mean over ${m.overall.points} point(s) both measured ok): ${formatChange(m.overall.change)} ${interval(m.overall.ci95)}: ${m.overall.verdict}`
    )
    if (m.best !== null)
      out.push(
        `  best against best: A's ${m.best.a} ${side(m.best.sa)} → B's ${m.best.b} ${side(m.best.sb)}: ${formatChange(m.best.change.change)} ${interval(m.best.change.ci95)}: ${m.best.verdict}`
      )
  }
  out.push("")
  const { onlyA, onlyB } = c.unmatched
  if (onlyA.length === 0 && onlyB.length === 0) out.push("unmatched points: none")
  else {
    out.push("unmatched points (not compared):")
    if (onlyA.length > 0) out.push(`  only in A: ${onlyA.join("; ")}`)
    if (onlyB.length > 0) out.push(`  only in B: ${onlyB.join("; ")}`)
  }
  for (const g of gates) out.push(`gate ${g.gate}: ${g.failed ? "FAILED" : "passed"} — ${g.reason}`)
  return out.join("\n")
}

const stat = (s: Summary | null) =>
  s === null
    ? null
    : { n: s.n, mean: s.mean, median: s.median, min: s.min, max: s.max, sd: s.sd, cv: s.cv, ci95: s.ci95 }

/** The JSON document of `compare --json`. */
export const compareJson = (c: Comparison, gates: ReadonlyArray<GateResult>, exitCode: number) => ({
  kind: "hyperloom.compare",
  a: c.a,
  b: c.b,
  differences: c.differences,
  workload: { changed: c.workload.changed, allowed: c.workload.allowed },
  confidence: c.confidence,
  metrics: c.metrics.map((m) => ({
    metric: m.metric,
    higher_is_better: m.higherIsBetter,
    points: m.points.map((p) => ({
      key: p.key,
      status_a: p.statusA,
      status_b: p.statusB,
      ...(p.invalid !== undefined ? { invalid: p.invalid, not_compared: notComparedWhy(p) } : {}),
      a: stat(p.a),
      b: stat(p.b),
      change: p.change?.change ?? null,
      ci95: p.change?.ci95 ?? null,
      verdict: p.verdict,
      noisy: p.noisy
    })),
    overall:
      m.overall === null
        ? null
        : {
            points: m.overall.points,
            change: m.overall.change,
            ci95: m.overall.ci95,
            verdict: m.overall.verdict
          },
    best_against_best:
      m.best === null
        ? null
        : {
            a: m.best.a,
            b: m.best.b,
            mean_a: m.best.sa.mean,
            mean_b: m.best.sb.mean,
            change: m.best.change.change,
            ci95: m.best.change.ci95,
            verdict: m.best.verdict
          }
  })),
  unmatched: { only_a: c.unmatched.onlyA, only_b: c.unmatched.onlyB },
  gates,
  exit_code: exitCode
})
