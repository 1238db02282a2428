/**
 * `hyperloom report --session A --session B` on two sweep sessions
 * (docs/design.md#trusted-answers): both drawn on shared axes, with the deltas. Two charts: output
 * throughput against load (A solid, B dashed, one colour per combination the two share, the 95 %
 * interval of each mean as a bar), and the change B ÷ A − 1 per point with its 95 % interval
 * (Welch), the zero line and the overall geometric-mean change as a band. Then the comparison's
 * table (the same numbers `hyperloom compare` prints). Pure: an HTML section (inline SVG and CSS,
 * nothing fetched) that the report page places first.
 */
import { compareSessions, formatChange, notComparedWhy, sweepSide } from "../domain/Compare.js"
import { describe, ratioChange, type Summary } from "../domain/Stats.js"
import { comboLabel, loadNumber, type PointRecord, type SweepDoc } from "../domain/Sweep.js"
import { escapeHtml } from "./RenderReport.js"

const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]
const W = 620
const H = 330
const L = 64
const R = 20
const T = 40
const B = 46

const num = (n: number): string =>
  Math.abs(n) >= 100 ? Math.round(n).toLocaleString("en-US") : String(Math.round(n * 10) / 10)

const summaryOf = (p: PointRecord | undefined): Summary | null => {
  const xs =
    p?.runs.flatMap((r) =>
      r.status === "ok" && r.metrics?.output_throughput !== undefined ? [r.metrics.output_throughput] : []
    ) ?? []
  return p?.status === "ok" && xs.length > 0 ? describe(xs) : null
}

interface Row {
  readonly load: string
  readonly x: number
  readonly a: Summary | null
  readonly b: Summary | null
}
interface Series {
  readonly label: string
  readonly color: string
  readonly rows: ReadonlyArray<Row>
}

const niceRange = (lo: number, hi: number): readonly [number, number, number] => {
  const span = hi - lo || Math.abs(hi) || 1
  const step0 = span / 5
  const p = 10 ** Math.floor(Math.log10(step0))
  const step = [1, 2, 2.5, 5, 10].map((m) => m * p).find((s) => s >= step0) ?? 10 * p
  return [Math.floor(lo / step) * step, Math.ceil(hi / step) * step, step]
}

const frame = (
  title: string,
  yLabel: string,
  xName: string,
  xs: ReadonlyArray<number>,
  y: readonly [number, number, number]
) => {
  const log = xs.length > 0 && xs[0]! > 0
  const tx = (x: number) => (log ? Math.log2(x) : x)
  const x0 = xs.length === 0 ? 0 : tx(xs[0]!)
  const x1 = xs.length === 0 ? 1 : tx(xs[xs.length - 1]!)
  // inset: the markers at the first and last load stay clear of the axis and its labels
  const P = 18
  const px = (x: number) =>
    L + P + (x1 === x0 ? (W - L - R - 2 * P) / 2 : ((tx(x) - x0) / (x1 - x0)) * (W - L - R - 2 * P))
  const py = (v: number) => T + (1 - (v - y[0]) / (y[1] - y[0] || 1)) * (H - T - B)
  const o: Array<string> = [
    `<svg class="chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${escapeHtml(title)}">`,
    `<text x="${L}" y="22" class="title">${escapeHtml(title)}</text>`
  ]
  for (let v = y[0]; v <= y[1] + y[2] / 1e6; v += y[2]) {
    o.push(
      `<line x1="${L}" x2="${W - R}" y1="${py(v).toFixed(1)}" y2="${py(v).toFixed(1)}" class="grid"/><text x="${L - 6}" y="${(py(v) + 4).toFixed(1)}" class="tick" text-anchor="end">${num(v)}</text>`
    )
  }
  for (const x of xs)
    o.push(
      `<text x="${px(x).toFixed(1)}" y="${H - B + 16}" class="tick" text-anchor="middle">${num(x)}</text>`
    )
  o.push(
    `<line x1="${L}" x2="${L}" y1="${T}" y2="${H - B}" class="axisline"/><line x1="${L}" x2="${W - R}" y1="${H - B}" y2="${H - B}" class="axisline"/>`,
    `<text x="${(L + W - R) / 2}" y="${H - 8}" class="axis" text-anchor="middle">${escapeHtml(xName)}${log ? " (log scale)" : ""}</text>`,
    `<text transform="translate(14 ${(T + H - B) / 2}) rotate(-90)" class="axis" text-anchor="middle">${escapeHtml(yLabel)}</text>`
  )
  return { o, px, py }
}

const bar = (x: number, lo: number, hi: number, color: string) =>
  `<line x1="${x.toFixed(1)}" x2="${x.toFixed(1)}" y1="${lo.toFixed(1)}" y2="${hi.toFixed(1)}" stroke="${color}" stroke-width="1.5"/><line x1="${(x - 4).toFixed(1)}" x2="${(x + 4).toFixed(1)}" y1="${lo.toFixed(1)}" y2="${lo.toFixed(1)}" stroke="${color}"/><line x1="${(x - 4).toFixed(1)}" x2="${(x + 4).toFixed(1)}" y1="${hi.toFixed(1)}" y2="${hi.toFixed(1)}" stroke="${color}"/>`

const throughputChart = (series: ReadonlyArray<Series>, xs: ReadonlyArray<number>, loadName: string) => {
  const ys = series.flatMap((s) =>
    s.rows.flatMap((r) => [r.a, r.b].flatMap((x) => (x === null ? [] : [x.ci95?.[1] ?? x.mean, x.mean])))
  )
  const y = niceRange(0, Math.max(1, ...ys) * 1.05)
  const { o, px, py } = frame(
    "Output throughput against load: A solid, B dashed",
    "output tok/s (mean, 95 % CI)",
    loadName,
    xs,
    y
  )
  for (const s of series) {
    for (const side of ["a", "b"] as const) {
      const pts = s.rows.flatMap((r) => (r[side] === null ? [] : [{ x: r.x, m: r[side]! }]))
      const shift = side === "a" ? -3 : 3
      if (pts.length > 1)
        o.push(
          `<polyline fill="none" stroke="${s.color}" stroke-width="2"${side === "b" ? ' stroke-dasharray="7 4"' : ""} points="${pts.map((p) => `${px(p.x).toFixed(1)},${py(p.m.mean).toFixed(1)}`).join(" ")}"/>`
        )
      for (const p of pts) {
        const cx = px(p.x) + shift
        if (p.m.ci95 !== null) o.push(bar(cx, py(p.m.ci95[0]), py(p.m.ci95[1]), s.color))
        o.push(
          side === "a"
            ? `<circle cx="${cx.toFixed(1)}" cy="${py(p.m.mean).toFixed(1)}" r="4" fill="${s.color}"><title>A ${escapeHtml(s.label)}, ${escapeHtml(loadName)}=${p.x}: ${num(p.m.mean)} tok/s</title></circle>`
            : `<circle cx="${cx.toFixed(1)}" cy="${py(p.m.mean).toFixed(1)}" r="4" fill="#fff" stroke="${s.color}" stroke-width="2"><title>B ${escapeHtml(s.label)}, ${escapeHtml(loadName)}=${p.x}: ${num(p.m.mean)} tok/s</title></circle>`
        )
      }
    }
  }
  o.push("</svg>")
  return o.join("\n")
}

const deltaChart = (
  series: ReadonlyArray<Series>,
  xs: ReadonlyArray<number>,
  loadName: string,
  overall: { readonly change: number; readonly ci95: readonly [number, number] | null } | null
) => {
  const deltas = series.flatMap((s, i) =>
    s.rows.flatMap((r) => (r.a === null || r.b === null ? [] : [{ s, i, x: r.x, c: ratioChange(r.a, r.b) }]))
  )
  const vals = deltas.flatMap((d) => [
    d.c.change * 100,
    ...(d.c.ci95 === null ? [] : d.c.ci95.map((v) => v * 100))
  ])
  const lim = Math.max(5, ...vals.map(Math.abs)) * 1.1
  const y = niceRange(-lim, lim)
  const { o, px, py } = frame(
    "Change B ÷ A − 1 per point, 95 % CI (Welch)",
    "change in output tok/s (%)",
    loadName,
    xs,
    y
  )
  if (overall !== null) {
    const [lo, hi] = overall.ci95 ?? [overall.change, overall.change]
    o.push(
      `<rect x="${L}" width="${W - L - R}" y="${py(hi * 100).toFixed(1)}" height="${Math.max(1, py(lo * 100) - py(hi * 100)).toFixed(1)}" class="band"/>`,
      `<text x="${W - R - 4}" y="${(py(hi * 100) - 5).toFixed(1)}" class="bandlabel" text-anchor="end">overall ${escapeHtml(formatChange(overall.change))}${overall.ci95 === null ? " (one run: no interval)" : ""}</text>`
    )
  }
  o.push(`<line x1="${L}" x2="${W - R}" y1="${py(0).toFixed(1)}" y2="${py(0).toFixed(1)}" class="zero"/>`)
  const n = series.length
  for (const d of deltas) {
    const cx = px(d.x) + (n > 1 ? (d.i - (n - 1) / 2) * 8 : 0)
    if (d.c.ci95 !== null) o.push(bar(cx, py(d.c.ci95[0] * 100), py(d.c.ci95[1] * 100), d.s.color))
    o.push(
      `<rect x="${(cx - 4).toFixed(1)}" y="${(py(d.c.change * 100) - 4).toFixed(1)}" width="8" height="8" fill="${d.s.color}"><title>${escapeHtml(d.s.label)}, ${escapeHtml(loadName)}=${d.x}: ${escapeHtml(formatChange(d.c.change))}</title></rect>`
    )
  }
  o.push("</svg>")
  return o.join("\n")
}

/** The section comparing sweep B with sweep A: shared axes, deltas, the comparison's table. */
export const renderCompareSection = (
  a: { readonly name: string; readonly doc: SweepDoc },
  b: { readonly name: string; readonly doc: SweepDoc }
): string => {
  const loadName = a.doc.experiment.load.name
  const byLabelB = new Map(b.doc.combinations.map((c) => [comboLabel(c.params), c]))
  const series: Array<Series> = a.doc.combinations.flatMap((ca, i) => {
    const label = comboLabel(ca.params)
    const cb = byLabelB.get(label)
    if (cb === undefined) return []
    const loads = [...new Set([...ca.points.map((p) => p.load), ...cb.points.map((p) => p.load)])]
      .filter((l) => Number.isFinite(loadNumber(l)))
      .sort((x, y) => loadNumber(x) - loadNumber(y))
    return [
      {
        label: `#${ca.index} ${label}`,
        color: COLORS[i % COLORS.length]!,
        rows: loads.map((load) => ({
          load,
          x: loadNumber(load),
          a: summaryOf(ca.points.find((p) => p.load === load)),
          b: summaryOf(cb.points.find((p) => p.load === load))
        }))
      }
    ]
  })
  const xs = [...new Set(series.flatMap((s) => s.rows.map((r) => r.x)))].sort((x, y) => x - y)
  const c = compareSessions(sweepSide(a.name, a.doc, []), sweepSide(b.name, b.doc, []), ["output_throughput"])
  const m = c.metrics[0]!
  const rows = m.points.map(
    (p) =>
      `<tr><td>${escapeHtml(p.key)}</td><td class="num">${p.a === null ? "–" : num(p.a.mean)}</td><td class="num">${p.b === null ? "–" : num(p.b.mean)}</td><td class="num">${p.change === null ? "–" : escapeHtml(formatChange(p.change.change))}</td><td class="num">${p.change?.ci95 == null ? "–" : escapeHtml(`${formatChange(p.change.ci95[0])} … ${formatChange(p.change.ci95[1])}`)}</td><td>${escapeHtml(p.verdict ?? notComparedWhy(p))}</td></tr>`
  )
  const overall =
    m.overall === null
      ? "no point both sessions measured ok"
      : `${formatChange(m.overall.change)}${m.overall.ci95 === null ? " (one run per point on a side: no confidence can be claimed)" : ` [95 % CI ${formatChange(m.overall.ci95[0])} … ${formatChange(m.overall.ci95[1])}]`} over ${m.overall.points} point(s): ${m.overall.verdict}`
  return `<section class="compare">
<h2>B against A: ${escapeHtml(b.name)} against ${escapeHtml(a.name)}</h2>
<p><b>Overall (geometric mean of output throughput):</b> ${escapeHtml(overall)}</p>
${c.differences.length === 0 ? "" : `<div class="meta">what differs: ${c.differences.map((d) => `<b>${escapeHtml(d.what)}</b> A <code>${escapeHtml(d.a ?? "–")}</code> B <code>${escapeHtml(d.b ?? "–")}</code>`).join(" · ")}</div>`}
${c.unmatched.onlyA.length + c.unmatched.onlyB.length === 0 ? "" : `<div class="meta">not compared: only in A ${escapeHtml(c.unmatched.onlyA.join("; ") || "–")}; only in B ${escapeHtml(c.unmatched.onlyB.join("; ") || "–")}</div>`}
<div class="legend">${series.map((s) => `<span><span class="swatch" style="background:${s.color}"></span>${escapeHtml(s.label)}</span>`).join(" ")}<span>● A (solid) · ○ B (dashed) · bars: 95 % CI</span></div>
<div class="charts">
${throughputChart(series, xs, loadName)}
${deltaChart(series, xs, loadName, m.overall)}
</div>
<table><tr><th>point</th><th>A mean tok/s</th><th>B mean tok/s</th><th>change</th><th>95 % CI</th><th>verdict</th></tr>
${rows.join("\n")}
</table>
<style>
section.compare svg .band { fill: #f0a000; fill-opacity: 0.18; } section.compare svg .bandlabel { font-size: 12px; fill: #a06800; }
section.compare svg .zero { stroke: #444; stroke-width: 1.2; } section.compare code { font-size: 12px; overflow-wrap: anywhere; }
</style>
</section>`
}

/** The page with the section placed first, under the page's header (or before its end). */
export const withCompareSection = (page: string, section: string): string => {
  const at = page.indexOf('<div class="meta">generated')
  const end = at < 0 ? -1 : page.indexOf("</div>\n", at)
  return end < 0
    ? page.replace("\n</body>", `\n${section}\n</body>`)
    : `${page.slice(0, end + 7)}${section}\n${page.slice(end + 7)}`
}
