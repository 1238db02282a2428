/**
 * `hyperloom report` on a sweep session (docs/design.md#sweeps): one self-contained HTML page
 * (inline SVG and CSS, nothing fetched). Per combination: output throughput against load, and p99
 * TTFT / TPOT against load with the SLO lines, failed points as ×. A Pareto chart of output
 * tokens/s per user (throughput ÷ concurrency) against output tokens/s per GPU (throughput ÷ the
 * lease's GPUs), the front marked and the best highlighted. The points table. Pure: the documents
 * in, the page out.
 */
import type { MetricKey } from "../domain/Results.js"
import type { EnvironmentRecord } from "../domain/Serving.js"
import { hasNodes, nodesOf } from "../domain/Sweep/Parallel.js"
import { renderTimeToBest } from "../domain/Sweep/Time.js"
import {
  ADAPTIVE_ASSUMPTION,
  ascendingLoads,
  comboRef,
  loadNumber,
  type PointRecord,
  renderTimeParts,
  type SweepDoc,
  shellLine,
  statementOf,
  sweepDuration
} from "../domain/Sweep.js"
import { escapeHtml } from "./RenderReport.js"
import { bestStatement, bestTitle } from "./RenderSweepStatus.js"

const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]

const fmt = (n: number | null | undefined): string =>
  n === null || n === undefined || !Number.isFinite(n)
    ? "–"
    : Math.abs(n) >= 100
      ? Math.round(n).toLocaleString("en-US")
      : String(Math.round(n * 10) / 10)

const niceMax = (max: number): number => {
  if (!(max > 0)) return 1
  const p = 10 ** Math.floor(Math.log10(max))
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= max) return m * p
  return 10 * p
}

interface XY {
  readonly x: number
  /** The median; null when the point has no measurement (failed): drawn as × on the floor. */
  readonly y: number | null
  /** The spread over the repeats (min–max), drawn as a bar when it is not a single value. */
  readonly min?: number | undefined
  readonly max?: number | undefined
  /** Measured but an SLO failed: a hollow marker, so it never reads as a passing point. */
  readonly sloFailed?: boolean
  readonly label: string
}
interface Line {
  readonly name: string
  readonly color: string
  readonly dashed?: boolean
  readonly points: ReadonlyArray<XY>
  /** The combination never served (infeasible, or its engine failed): one × at the axis' left end. */
  readonly never?: string | undefined
}
interface Rule {
  readonly y: number
  readonly label: string
}

// Three fit side by side at 1400 px and two at 900 px; the legend is the section's, in HTML.
const W = 410
const H = 280
const L = 64
const R = 16
const B = 44

/**
 * The y scale of a chart: linear from 0, or logarithmic (decades) when the positive values span
 * 20× or more — a TTFT of 35–75 ms beside one of 8,000 ms would otherwise lie flat on the floor.
 * SLO bounds are in the domain, so a low SLO line stays visible.
 */
export const yScale = (values: ReadonlyArray<number>) => {
  const pos = values.filter((v) => v > 0 && Number.isFinite(v))
  const lo = Math.min(...pos)
  const hi = Math.max(...pos)
  if (pos.length >= 2 && hi / lo >= 20) {
    const d0 = Math.floor(Math.log10(lo))
    const d1 = Math.ceil(Math.log10(hi * 1.05))
    const ticks: Array<number> = []
    for (let d = d0; d <= d1; d++)
      for (const m of d1 - d0 <= 2 ? [1, 2, 5] : [1]) if (m * 10 ** d <= 10 ** d1) ticks.push(m * 10 ** d)
    return {
      log: true as const,
      floor: 10 ** d0,
      ticks,
      at: (v: number) => (Math.log10(Math.max(v, 10 ** d0)) - d0) / (d1 - d0)
    }
  }
  const max = niceMax(Math.max(0, ...values.filter(Number.isFinite)) * 1.05)
  return {
    log: false as const,
    floor: 0,
    ticks: [0, 1, 2, 3, 4, 5].map((i) => (max * i) / 5),
    at: (v: number) => v / max
  }
}

/**
 * A chart against load: x on a log2 scale when every load is positive (doubling grids); y linear
 * or logarithmic (yScale). Each series is drawn in load order, shifted a few pixels from the
 * others so that overlapping series stay visible; failed points × on the floor, SLO-failed points
 * hollow, min–max bars with repeats.
 */
const loadChart = (
  title: string,
  unit: string,
  xName: string,
  lines: ReadonlyArray<Line>,
  rules: ReadonlyArray<Rule>
) => {
  const T = 34
  const xs = [...new Set(lines.flatMap((l) => l.points.map((p) => p.x)))]
    .filter(Number.isFinite)
    .sort((a, b) => a - b)
  const log = xs.length > 0 && xs[0]! > 0
  const tx = (x: number) => (log ? Math.log2(x) : x)
  const x0 = xs.length === 0 ? 0 : tx(xs[0]!)
  const x1 = xs.length === 0 ? 1 : tx(xs[xs.length - 1]!)
  const ys = [
    ...lines.flatMap((l) =>
      l.points.flatMap((p) => [p.y, p.min, p.max].filter((v): v is number => typeof v === "number"))
    ),
    ...rules.map((r) => r.y)
  ]
  const scale = yScale(ys)
  const px = (x: number) => L + (x1 === x0 ? (W - L - R) / 2 : ((tx(x) - x0) / (x1 - x0)) * (W - L - R))
  const py = (y: number) => T + (1 - scale.at(y)) * (H - T - B)
  const o: Array<string> = []
  o.push(
    `<svg class="chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${escapeHtml(title)}">`
  )
  o.push(`<text x="${L}" y="20" class="title">${escapeHtml(title)}</text>`)
  for (const v of scale.ticks) {
    o.push(`<line x1="${L}" x2="${W - R}" y1="${py(v)}" y2="${py(v)}" class="grid"/>`)
    o.push(`<text x="${L - 6}" y="${py(v) + 4}" class="tick" text-anchor="end">${fmt(v)}</text>`)
  }
  for (const x of xs)
    o.push(`<text x="${px(x)}" y="${H - B + 16}" class="tick" text-anchor="middle">${fmt(x)}</text>`)
  o.push(
    `<text x="${(L + W - R) / 2}" y="${H - 8}" class="axis" text-anchor="middle">${escapeHtml(xName)}${log ? " (log scale)" : ""}</text>`
  )
  o.push(
    `<text x="14" y="${(T + H - B) / 2}" class="axis" text-anchor="middle" transform="rotate(-90 14 ${(T + H - B) / 2})">${escapeHtml(unit)}${scale.log ? " (log scale)" : ""}</text>`
  )
  o.push(
    `<line x1="${L}" x2="${L}" y1="${T}" y2="${H - B}" class="axisline"/><line x1="${L}" x2="${W - R}" y1="${H - B}" y2="${H - B}" class="axisline"/>`
  )
  // The SLO's label at the left end, where the load is lowest and the curves mostly stay clear of it.
  for (const r of rules) {
    o.push(`<line x1="${L}" x2="${W - R}" y1="${py(r.y)}" y2="${py(r.y)}" class="slo"/>`)
    o.push(`<text x="${L + 4}" y="${py(r.y) - 4}" class="slolabel">${escapeHtml(r.label)}</text>`)
  }
  const cross = (x: number, y: number, color: string, label: string) =>
    `<g class="failed"><path d="M${x - 6},${y - 6}L${x + 6},${y + 6}M${x - 6},${y + 6}L${x + 6},${y - 6}" stroke="${color}" stroke-width="2.5"/><title>${escapeHtml(label)}</title></g>`
  lines.forEach((l, k) => {
    // Series side by side around each load, 4 px apart: equal values never hide each other.
    const dx = (k - (lines.length - 1) / 2) * 4
    const at = (x: number) => px(x) + dx
    const drawn = l.points.filter((p) => Number.isFinite(p.x)).sort((a, b) => a.x - b.x)
    const measured = drawn.filter((p) => p.y !== null)
    if (measured.length > 0)
      o.push(
        `<path d="${measured.map((p, i) => `${i === 0 ? "M" : "L"}${at(p.x).toFixed(1)},${py(p.y!).toFixed(1)}`).join(" ")}" fill="none" stroke="${l.color}" stroke-width="2" stroke-opacity="0.85"${l.dashed ? ' stroke-dasharray="6 4"' : ""}/>`
      )
    if (l.never !== undefined && xs.length > 0)
      o.push(cross(L + 8 + k * 4, py(scale.floor), l.color, l.never))
    for (const p of drawn) {
      const x = at(p.x)
      if (p.y === null) {
        o.push(cross(x, py(scale.floor), l.color, p.label))
        continue
      }
      if (p.min !== undefined && p.max !== undefined && p.max > p.min)
        o.push(
          `<line x1="${x.toFixed(1)}" x2="${x.toFixed(1)}" y1="${py(p.min).toFixed(1)}" y2="${py(p.max).toFixed(1)}" stroke="${l.color}" class="range"/>`
        )
      o.push(
        p.sloFailed === true
          ? `<circle cx="${x.toFixed(1)}" cy="${py(p.y).toFixed(1)}" r="4" fill="#fff" stroke="${l.color}" stroke-width="2" class="slofailed"><title>${escapeHtml(p.label)}</title></circle>`
          : `<circle cx="${x.toFixed(1)}" cy="${py(p.y).toFixed(1)}" r="4" fill="${l.color}"><title>${escapeHtml(p.label)}</title></circle>`
      )
    }
  })
  o.push("</svg>")
  return o.join("\n")
}

interface ParetoPoint {
  readonly x: number
  readonly y: number
  readonly color: string
  readonly label: string
  /** The best's label on the chart: the combination's number and the load (the rest is in the legend). */
  readonly short: string
  readonly best: boolean
  readonly sloFailed: boolean
}

/** The points no other point beats on both axes (more per user and more per GPU), by tok/s per user. */
export const paretoFront = <P extends { readonly x: number; readonly y: number }>(
  points: ReadonlyArray<P>
): ReadonlyArray<P> =>
  points
    .filter((p) => !points.some((q) => q !== p && q.x >= p.x && q.y >= p.y && (q.x > p.x || q.y > p.y)))
    .sort((a, b) => a.x - b.x)

const paretoChart = (points: ReadonlyArray<ParetoPoint>, perGpu: string) => {
  const w = 760
  const h = 420
  const T = 48
  const xMax = niceMax(Math.max(0, ...points.map((p) => p.x)) * 1.05)
  const yMax = niceMax(Math.max(0, ...points.map((p) => p.y)) * 1.05)
  const px = (x: number) => L + (x / xMax) * (w - L - R)
  const py = (y: number) => T + (1 - y / yMax) * (h - T - B)
  // The front of the points that met every SLO: the best is always on it (the most per GPU of them).
  const front = paretoFront(points.filter((p) => !p.sloFailed))
  const o: Array<string> = []
  o.push(
    `<svg class="chart" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" role="img" aria-label="Pareto">`
  )
  o.push(`<text x="${L}" y="20" class="title">Pareto: tokens/s/user against tokens/s/GPU</text>`)
  for (let i = 0; i <= 5; i++) {
    const vy = (yMax * i) / 5
    const vx = (xMax * i) / 5
    o.push(`<line x1="${L}" x2="${w - R}" y1="${py(vy)}" y2="${py(vy)}" class="grid"/>`)
    o.push(`<text x="${L - 6}" y="${py(vy) + 4}" class="tick" text-anchor="end">${fmt(vy)}</text>`)
    o.push(`<text x="${px(vx)}" y="${h - B + 16}" class="tick" text-anchor="middle">${fmt(vx)}</text>`)
  }
  o.push(
    `<text x="${(L + w - R) / 2}" y="${h - 8}" class="axis" text-anchor="middle">tokens/s/user (output throughput ÷ concurrency)</text>`
  )
  o.push(
    `<text x="14" y="${(T + h - B) / 2}" class="axis" text-anchor="middle" transform="rotate(-90 14 ${(T + h - B) / 2})">tokens/s/GPU (output throughput ${escapeHtml(perGpu)})</text>`
  )
  o.push(
    `<line x1="${L}" x2="${L}" y1="${T}" y2="${h - B}" class="axisline"/><line x1="${L}" x2="${w - R}" y1="${h - B}" y2="${h - B}" class="axisline"/>`
  )
  if (front.length > 0)
    o.push(
      `<path d="${front.map((p, i) => `${i === 0 ? "M" : "L"}${px(p.x).toFixed(1)},${py(p.y).toFixed(1)}`).join(" ")}" class="front"/>`
    )
  o.push(
    `<text x="${L}" y="36" class="legend">filled: met every SLO · hollow: an SLO failed · dashed: the front of the filled · ringed: the best</text>`
  )
  // Points at the same place (two combinations alike) are drawn 5 px apart, so neither hides.
  const seen = new Map<string, number>()
  const shift = new Map<ParetoPoint, number>()
  for (const p of points) {
    const key = `${px(p.x).toFixed(0)},${py(p.y).toFixed(0)}`
    const n = seen.get(key) ?? 0
    seen.set(key, n + 1)
    shift.set(p, n * 5)
  }
  for (const p of points) {
    const onFront = front.includes(p)
    const at = `cx="${(px(p.x) + (shift.get(p) ?? 0)).toFixed(1)}" cy="${py(p.y).toFixed(1)}"`
    o.push(
      p.sloFailed
        ? `<circle ${at} r="4" fill="#fff" stroke="${p.color}" stroke-width="1.5" class="slofailed"><title>${escapeHtml(p.label)}</title></circle>`
        : `<circle ${at} r="${onFront ? 6 : 4}" fill="${p.color}"${onFront ? ' stroke="#000" stroke-width="1.5" class="onfront"' : ""}><title>${escapeHtml(p.label)}${onFront ? " (on the front)" : ""}</title></circle>`
    )
  }
  // The best's ring and label last, on top; the label on the side with room, inside the chart.
  for (const p of points.filter((q) => q.best)) {
    const right = px(p.x) < (L + w - R) / 2
    const y = Math.max(T + 12, py(p.y) - 10)
    o.push(`<circle cx="${px(p.x).toFixed(1)}" cy="${py(p.y).toFixed(1)}" r="12" class="best"/>`)
    o.push(
      `<text x="${(px(p.x) + (right ? 16 : -16)).toFixed(1)}" y="${y.toFixed(1)}" class="bestlabel" text-anchor="${right ? "start" : "end"}">best: ${escapeHtml(p.short)}</text>`
    )
  }
  o.push("</svg>")
  return o.join("\n")
}

const median = (p: PointRecord, k: MetricKey) => p.stats[k]?.median ?? null

/** `60 (55–75)` with repeats that differ, else the median alone. */
const range = (p: PointRecord, k: MetricKey) => {
  const s = p.stats[k]
  return s === undefined
    ? "–"
    : s.min === s.max
      ? fmt(s.median)
      : `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})`
}

const sloRules = (doc: SweepDoc, metric: string): Array<Rule> =>
  doc.experiment.slos
    .filter((s) => s.startsWith(metric))
    .map((s) => ({ y: Number(s.split(/<=|>=/)[1]), label: `SLO ${s}` }))

const measuredOrNull = (p: PointRecord, k: MetricKey) =>
  p.status === "ok" || p.status === "slo_failed" ? median(p, k) : null

const visible = (p: PointRecord) => p.status !== "not_run" && p.status !== "pending"

/** One sweep's section: charts per combination, the Pareto chart, the points table. */
/** The sweep's environment (node, versions, engines, commands) and its duration, as a baseline's. */
const environmentTable = (doc: SweepDoc, env: EnvironmentRecord | undefined): string => {
  const runs = doc.combinations.flatMap((c) => c.points.flatMap((p) => p.runs)).length
  const starts = doc.combinations.reduce((n, c) => n + c.engine_starts.length, 0)
  const rows: Array<[string, string]> = [
    [
      "duration",
      `${sweepDuration(doc.created_at, doc.updated_at)} (${doc.created_at} to ${doc.updated_at}; ${starts} engine start(s), ${runs} client run(s))`
    ]
  ]
  if (env !== undefined) {
    const engines = Object.entries(env.engines)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")
    const n = (env as { readonly combination?: number }).combination
    rows.push(
      ["hyperloom", env.hyperloom_version],
      ["Ray", env.ray_version ?? "–"],
      ["node", env.node.hostname ?? "–"],
      [
        "GPUs",
        `${env.node.gpu_count}${env.node.accelerators.length > 0 ? ` × ${env.node.accelerators.join(", ")}` : ""}${env.node.cuda_visible_devices !== null ? ` (CUDA_VISIBLE_DEVICES=${env.node.cuda_visible_devices})` : ""}`
      ],
      ["engines", engines === "" ? "–" : engines],
      ["python", env.python ?? "–"],
      [`server${n !== undefined ? ` (#${n}, the last engine ready)` : ""}`, shellLine(env.server_argv ?? [])],
      ["client", shellLine(env.client_argv)],
      ["recorded", env.recorded_at]
    )
  }
  return `<h3>Environment</h3>
<table class="env">${rows.map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`).join("")}</table>${env === undefined ? `<p class="meta">No environment record (environment.json) in this session.</p>` : ""}`
}

/**
 * Where the time went (docs/design.md#time-to-the-answer), one line; nothing for a document written
 * before it was kept.
 */
const timeLine = (doc: SweepDoc): string => {
  const t = doc.summary.time
  if (t === undefined) return ""
  const adaptive = doc.strategy === "adaptive" ? ` · ${escapeHtml(ADAPTIVE_ASSUMPTION)}` : ""
  return `\n<div class="meta">time: ${escapeHtml(renderTimeParts(t.total))} · ${t.engine_starts} engine start(s), ${t.client_runs} client run(s) · ${escapeHtml(renderTimeToBest(t))}${adaptive}</div>`
}

export const renderSweepSection = (name: string, doc: SweepDoc, environment?: EnvironmentRecord): string => {
  const e = doc.experiment
  const loadName = e.load.name
  const gpus = e.gpus * Math.max(1, e.nodes)
  const perGpu = gpus > 0 ? `÷ ${gpus} GPU${gpus === 1 ? "" : "s"}` : "not divided: 0 GPUs"
  const combos = doc.combinations.map((c, i) => ({
    c,
    color: COLORS[i % COLORS.length]!,
    label: comboRef(c.index, c.params)
  }))
  const lineOf = (k: MetricKey, dashed = false) =>
    combos.map(({ c, color, label }) => ({
      name: `${label}${dashed ? " TPOT" : ""}`,
      color,
      dashed,
      never: c.points.some(visible)
        ? undefined
        : c.status === "infeasible" || c.status === "failed" || c.status === "check_failed"
          ? `${label}: ${c.status}${c.class !== null ? ` (${c.class})` : ""}, no point measured`
          : undefined,
      points: c.points.filter(visible).map((p) => {
        const s = p.stats[k]
        const measured = p.status === "ok" || p.status === "slo_failed"
        return {
          x: loadNumber(p.load),
          y: measuredOrNull(p, k),
          min: measured ? s?.min : undefined,
          max: measured ? s?.max : undefined,
          sloFailed: p.status === "slo_failed",
          // an invalid point is drawn as such (×, its reasons), never as data (docs/trust.md)
          label: `${label}, ${loadName}=${p.load}: ${p.status}${p.status === "failed" ? ` (${p.class})` : ""}${p.status === "invalid" ? ` (${(p.validity?.reasons ?? []).join("; ")})` : ""}, ${fmt(median(p, k))}${s !== undefined && s.max > s.min ? ` (${fmt(s.min)}–${fmt(s.max)})` : ""}`
        }
      })
    }))
  const charts = [
    loadChart(
      "Output throughput against load",
      "output tok/s",
      loadName,
      lineOf("output_throughput"),
      sloRules(doc, "output_throughput")
    ),
    loadChart("p99 TTFT against load", "ms", loadName, lineOf("p99_ttft_ms"), sloRules(doc, "p99_ttft_ms")),
    loadChart("p99 TPOT against load", "ms", loadName, lineOf("p99_tpot_ms"), sloRules(doc, "p99_tpot_ms"))
  ]
  // Only a declared best is marked as one (docs/design.md#trusted-answers): a tie marks its points
  // as tied.
  const best = doc.summary.verdict === "best" ? doc.summary.best : null
  const tied = doc.summary.verdict === "tie" ? [doc.summary.best!, ...doc.summary.tied_with] : []
  const pareto: Array<ParetoPoint> = combos.flatMap(({ c, color, label }) =>
    c.points.flatMap((p) => {
      const t = median(p, "output_throughput")
      const conc = loadNumber(p.load)
      if (p.status !== "ok" && p.status !== "slo_failed") return []
      if (t === null || !(conc > 0) || !Number.isFinite(conc)) return []
      return [
        {
          x: t / conc,
          y: t / Math.max(1, gpus),
          color,
          label: `${label}, ${loadName}=${p.load}${p.status === "slo_failed" ? " (SLO failed)" : ""}: ${fmt(t / conc)} tokens/s/user, ${fmt(t / Math.max(1, gpus))} tokens/s/GPU`,
          short: `#${c.index} at ${loadName}=${p.load}`,
          best: best !== null && best.combination === c.index && best.load === p.load,
          sloFailed: p.status === "slo_failed"
        }
      ]
    })
  )
  // the node(s) each combination ran on (docs/design.md#sweeps-at-cluster-scale), when the sweep
  // recorded them
  const withNodes = hasNodes(doc)
  const nodeCell = (c: (typeof combos)[number]["c"]) =>
    withNodes ? `<td>${escapeHtml(nodesOf(c).join(", ") || "–")}</td>` : ""
  const rows = combos.flatMap(({ c, color, label }) => {
    if (c.points.length === 0 || c.points.every((p) => p.status === "not_run"))
      return [
        `<tr><td><span class="swatch" style="background:${color}"></span>${escapeHtml(label)}</td>${nodeCell(c)}<td>–</td><td class="bad">${escapeHtml(c.status)}</td><td colspan="5" class="err">${escapeHtml(`${c.class ?? ""} ${(c.error ?? "").split("\n")[0]}`.slice(0, 200))}</td></tr>`
      ]
    const order = ascendingLoads(c.points.map((p) => p.load))
    const sorted = [...c.points].sort((a, b) => order.indexOf(a.load) - order.indexOf(b.load))
    return sorted.map((p) => {
      const s = p.stats.output_throughput
      const isBest = best !== null && best.combination === c.index && best.load === p.load
      const isTied = tied.some((t) => t.combination === c.index && t.load === p.load)
      const cls = p.status === "ok" ? "good" : "bad"
      const tp =
        s === undefined
          ? "–"
          : s.min === s.max
            ? fmt(s.median)
            : `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})`
      const conc = loadNumber(p.load)
      return `<tr${isBest ? ' class="bestrow"' : ""}><td><span class="swatch" style="background:${color}"></span>${escapeHtml(label)}</td>${nodeCell(c)}<td>${escapeHtml(p.load)}</td><td class="${cls}">${escapeHtml(p.status)}${isBest ? " ★ best" : isTied ? " ≈ tied" : ""}${p.noisy === true ? " (noisy)" : ""}</td><td class="num">${tp}</td><td class="num">${range(p, "p99_ttft_ms")}</td><td class="num">${fmt(median(p, "p99_tpot_ms"))}</td><td class="num">${s !== undefined && conc > 0 && Number.isFinite(conc) ? fmt(s.median / conc) : "–"}</td><td class="err">${escapeHtml(
        p.status === "failed"
          ? `${p.class}: ${(p.error ?? "").split("\n")[0]}`.slice(0, 160)
          : p.status === "invalid" || (p.validity?.suspect ?? 0) > 0
            ? `${p.status === "invalid" ? "invalid" : "suspect"}: ${(p.validity?.reasons ?? []).join("; ")}`
            : p.slo
                .filter((v) => !v.ok)
                .map((v) => `${v.slo} (was ${fmt(v.value)})`)
                .join(", ")
      )}</td></tr>`
    })
  })
  // The verdict's one sentence, as `sweep show` and the JSON's summary.statement say it.
  const shown = doc.summary.best
  const verdict =
    shown === null
      ? `<p class="bad">best: ${escapeHtml(statementOf(doc))}</p>`
      : `<p><b>${doc.summary.verdict === "tie" ? "Tie" : escapeHtml(bestTitle(doc).replace(/^best/, "Best"))}:</b> ${escapeHtml(bestStatement(doc))}</p>
<pre>server: ${escapeHtml(shown.server_cmd)}
client: ${escapeHtml(shown.client_cmd)}</pre>`
  return `<section>
<h2>${escapeHtml(name)}</h2>
<div class="meta">${doc.combinations.length} combination(s) · ${e.load.kind === "points" ? `${escapeHtml(loadName)} = ${escapeHtml(e.load.values.join(", "))}` : `search ${escapeHtml(loadName)} up to ${e.load.max}`} · ${e.repeats} repeat(s) · SLO ${escapeHtml(e.slos.join(" and ") || "none")} · status ${escapeHtml(doc.status)} · failed points are marked ×</div>
${verdict}${timeLine(doc)}
<div class="legend">${combos.map(({ color, label }) => `<span><span class="swatch" style="background:${color}"></span>${escapeHtml(label)}</span>`).join(" ")}</div>
<div class="key">● measured, met every SLO (median over the repeats; a bar: min–max over them) · ○ measured, an SLO failed · <span class="bad">×</span> failed: no measurement, drawn on the x-axis (at its left end: a combination that never served) · <span class="bad">- - -</span> SLO</div>
<div class="charts">
${charts.join("\n")}
</div>
<div class="charts">
${paretoChart(pareto, perGpu)}
</div>
<h3>Points</h3>
<div class="wide"><table><tr><th>combination</th>${withNodes ? "<th>node(s)</th>" : ""}<th>${escapeHtml(loadName)}</th><th>status</th><th>output tok/s (median, min–max)</th><th>p99 TTFT ms (median, min–max)</th><th>p99 TPOT ms</th><th>tok/s per user</th><th>why not ok</th></tr>
${rows.join("\n")}
</table></div>
${environmentTable(doc, environment)}
</section>`
}

export const renderSweepReport = (
  sweeps: ReadonlyArray<{
    readonly name: string
    readonly doc: SweepDoc
    readonly environment?: EnvironmentRecord | undefined
  }>,
  generatedAt: string
): string => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>hyperloom sweep report: ${escapeHtml(sweeps.map((s) => s.name).join(", "))}</title>
<style>
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 24px 0 4px; } h3 { font-size: 14px; margin: 16px 0 6px; }
.meta { color: #666; margin-bottom: 8px; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; margin: 8px 0; }
div.wide { overflow-x: auto; max-width: 100%; }
svg.chart { background: #fff; border: 1px solid #ddd; max-width: 100%; height: auto; }
svg .title { font-size: 13px; font-weight: 600; fill: #222; } svg .tick { font-size: 11px; fill: #555; }
svg .axis { font-size: 12px; fill: #333; } svg .legend { font-size: 11px; fill: #222; }
svg .grid { stroke: #eee; } svg .axisline { stroke: #999; }
svg .slo { stroke: #c00; stroke-width: 1.5; stroke-dasharray: 8 4; } svg .slolabel { font-size: 11px; fill: #c00; }
svg .front { fill: none; stroke: #444; stroke-width: 1.5; stroke-dasharray: 5 3; }
svg .best { fill: none; stroke: #f0a000; stroke-width: 3; } svg .bestlabel { font-size: 12px; font-weight: 600; fill: #a06800; }
table { border-collapse: collapse; } td, th { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f6f6f6; } td.err { color: #a33; font-family: ui-monospace, monospace; font-size: 12px; }
td.good { color: #176b1f; } td.bad, p.bad { color: #a33; } tr.bestrow { background: #fff5d6; }
pre { background: #f6f6f6; padding: 8px; white-space: pre-wrap; overflow-wrap: anywhere; }
div.key { margin: 6px 0; font-size: 13px; }
table { max-width: 100%; } td:first-child { overflow-wrap: anywhere; min-width: 12em; }
div.legend { display: flex; flex-wrap: wrap; gap: 4px 18px; margin: 6px 0; font-size: 13px; } div.legend > span { min-width: 0; overflow-wrap: anywhere; } td.num { white-space: nowrap; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; border-radius: 2px; }
</style>
</head>
<body>
<h1>hyperloom sweep</h1>
<div class="meta">generated ${escapeHtml(generatedAt)}</div>
${sweeps.map((s) => renderSweepSection(s.name, s.doc, s.environment)).join("\n")}
</body>
</html>
`
