/**
 * `hyperloom report`: one self-contained HTML page comparing baseline sessions
 * (docs/design.md#what-a-serving-session-keeps). Inline CSS and SVG only: no script, no font, no
 * image, no link of any kind is fetched, so the file opens anywhere (a laptop on a plane). Pure:
 * the sessions in, the page out.
 */
import { errorHead } from "../domain/Attempt.js"
import { isMeasurement, type MetricKey } from "../domain/Results.js"
import type { EnvironmentRecord } from "../domain/Serving.js"
import type { AttemptRecord, SessionState } from "../domain/State.js"

export interface ReportSession {
  /** How the session is named on the page (its directory). */
  readonly name: string
  readonly state: SessionState
  readonly environment: EnvironmentRecord | undefined
}

const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]

/**
 * Session i's colour: the palette, then hues spread by the golden angle at three lightnesses, so
 * that no two sessions of a page share one (the palette alone repeated from the ninth on).
 */
export const colorFor = (i: number): string =>
  i < COLORS.length
    ? COLORS[i]!
    : `hsl(${(((i - COLORS.length) * 137.508 + 20) % 360) | 0}, 65%, ${[42, 30, 54][i % 3]}%)`

export const escapeHtml = (text: string): string =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!
  )

const fmt = (n: number | null | undefined, digits = 1): string =>
  n === null || n === undefined || !Number.isFinite(n)
    ? "–"
    : Math.abs(n) >= 1000
      ? Math.round(n).toLocaleString("en-US")
      : Math.abs(n) >= 100
        ? n.toFixed(0)
        : n.toFixed(digits)

interface Point {
  readonly x: number
  readonly y: number | null
  /** Shown on hover (an SVG <title>). */
  readonly label: string
}

interface Series {
  readonly name: string
  readonly color: string
  readonly dashed?: boolean
  readonly points: ReadonlyArray<Point>
}

/** A "nice" upper bound for an axis. */
const niceMax = (max: number): number => {
  if (!(max > 0)) return 1
  const p = 10 ** Math.floor(Math.log10(max))
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= max) return m * p
  return 10 * p
}

/** A line chart as inline SVG: attempts on x, the metric on y, one line per series, gaps for nulls. */
export const lineChart = (title: string, unit: string, series: ReadonlyArray<Series>): string => {
  const W = 720
  const L = 70
  const R = 20
  // the legend sits between the title and the plot, three entries a row; the chart grows with it,
  // so that the plot keeps its height however many series there are
  const T = 34 + Math.ceil(series.length / 3) * 16 + 8
  const B = 46
  const PLOT = 220
  const H = T + PLOT + B
  const xs = series.flatMap((s) => s.points.map((p) => p.x))
  const ys = series.flatMap((s) => s.points.flatMap((p) => (p.y === null ? [] : [p.y])))
  const xMax = Math.max(1, ...xs)
  const yMax = niceMax(Math.max(0, ...ys))
  const px = (x: number) => L + (xMax === 1 ? (W - L - R) / 2 : ((x - 1) / (xMax - 1)) * (W - L - R))
  const py = (y: number) => T + (1 - y / yMax) * (H - T - B)
  const out: Array<string> = []
  out.push(
    `<svg class="chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${escapeHtml(title)}">`
  )
  out.push(`<text x="${L}" y="20" class="title">${escapeHtml(title)}</text>`)
  for (let i = 0; i <= 5; i++) {
    const v = (yMax * i) / 5
    const y = py(v)
    out.push(`<line x1="${L}" x2="${W - R}" y1="${y}" y2="${y}" class="grid"/>`)
    out.push(
      `<text x="${L - 8}" y="${y + 4}" class="tick" text-anchor="end">${v === 0 ? "0" : fmt(v, v < 10 ? 1 : 0)}</text>`
    )
  }
  for (let x = 1; x <= xMax; x++) {
    out.push(`<text x="${px(x)}" y="${H - B + 18}" class="tick" text-anchor="middle">${x}</text>`)
  }
  out.push(`<text x="${(L + W - R) / 2}" y="${H - 8}" class="axis" text-anchor="middle">attempt</text>`)
  out.push(
    `<text x="16" y="${(T + H - B) / 2}" class="axis" text-anchor="middle" transform="rotate(-90 16 ${(T + H - B) / 2})">${escapeHtml(unit)}</text>`
  )
  out.push(`<line x1="${L}" x2="${L}" y1="${T}" y2="${H - B}" class="axisline"/>`)
  out.push(`<line x1="${L}" x2="${W - R}" y1="${H - B}" y2="${H - B}" class="axisline"/>`)
  series.forEach((s) => {
    // consecutive measured points form a segment; a failed attempt breaks the line
    let path = ""
    let open = false
    for (const p of s.points) {
      if (p.y === null) {
        open = false
        continue
      }
      path += `${open ? "L" : "M"}${px(p.x).toFixed(1)},${py(p.y).toFixed(1)} `
      open = true
    }
    if (path !== "") {
      out.push(
        `<path d="${path.trim()}" fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ""}/>`
      )
    }
    for (const p of s.points) {
      if (p.y === null) {
        const x = px(p.x)
        const y = py(0)
        out.push(
          `<g class="failed"><path d="M${x - 5},${y - 5}L${x + 5},${y + 5}M${x - 5},${y + 5}L${x + 5},${y - 5}" stroke="${s.color}" stroke-width="2"/><title>${escapeHtml(p.label)}</title></g>`
        )
      } else {
        out.push(
          `<circle cx="${px(p.x).toFixed(1)}" cy="${py(p.y).toFixed(1)}" r="4" fill="${s.color}"><title>${escapeHtml(p.label)}</title></circle>`
        )
      }
    }
  })
  // legend
  series.forEach((s, i) => {
    const x = L + 10 + (i % 3) * 215
    const y = 38 + Math.floor(i / 3) * 16
    out.push(
      `<line x1="${x}" x2="${x + 22}" y1="${y}" y2="${y}" stroke="${s.color}" stroke-width="3"${s.dashed ? ' stroke-dasharray="6 4"' : ""}/>`
    )
    out.push(`<text x="${x + 28}" y="${y + 4}" class="legend">${escapeHtml(s.name)}</text>`)
  })
  out.push("</svg>")
  return out.join("\n")
}

const finished = (s: SessionState) => s.baseline_attempts.filter((a) => a.ended_at !== null)

const metric = (a: AttemptRecord, k: MetricKey): number | null => a.metrics?.[k] ?? null

/**
 * A figure of an attempt that is a measurement (completed 0 is none:
 * docs/design.md#classified-from-what-happened); else null, drawn as ×.
 */
const measured = (a: AttemptRecord, k: MetricKey): number | null =>
  isMeasurement(a.throughput, a.metrics) ? metric(a, k) : null

/** An attempt as the report labels its point (the log line summing one up is domain/Attempt's describeAttempt). */
const attemptLabel = (a: AttemptRecord) =>
  `attempt ${a.number}: ${a.error_class ?? "succeeded"}${a.throughput !== null ? `, ${fmt(a.throughput)} tok/s` : ""}`

/** The attempt whose metrics represent a session: its successful one, else the last with metrics. */
export const representative = (s: SessionState): AttemptRecord | undefined => {
  const done = finished(s)
  return (
    done.find((a) => a.error_class === null) ??
    [...done].reverse().find((a) => a.metrics !== null) ??
    done.at(-1)
  )
}

/**
 * An attempt's error as the report shows it: the line that sums it up and, where the classifier
 * found one, its root cause (a server that died before it was ready: the exception, not the exit);
 * the whole stored text folds out beneath.
 */
const errorCell = (a: AttemptRecord): string => {
  if (a.error === null || a.error.trim() === "") return ""
  const lines = a.error
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "")
  const first = lines[0]!
  const root = lines.find((l) => /^root cause:/i.test(l))
  const head = errorHead(a.error, a.error_class, 240)
  const cause = root ?? (head !== "" && head !== first ? head : undefined)
  const summary = cause === undefined ? first : `${first}\n${cause}`
  const full = lines.join("\n")
  return full === summary
    ? escapeHtml(summary)
    : `${escapeHtml(summary)}<details><summary>whole error</summary><pre>${escapeHtml(a.error.trim())}</pre></details>`
}

const short = (name: string) => name.replace(/\/+$/, "").split("/").slice(-2).join("/")

export const renderReport = (sessions: ReadonlyArray<ReportSession>, generatedAt: string): string => {
  const named = sessions.map((s, i) => ({ ...s, label: short(s.name), color: colorFor(i) }))
  const throughput = lineChart(
    "Output token throughput per attempt",
    "tok/s",
    named.map((s) => ({
      name: s.label,
      color: s.color,
      points: finished(s.state).map((a) => ({
        x: a.number,
        y:
          a.error_class === null
            ? (a.throughput ?? metric(a, "output_throughput"))
            : measured(a, "output_throughput"),
        label: `${s.label} ${attemptLabel(a)}`
      }))
    }))
  )
  const latency = lineChart(
    "Latency per attempt: TTFT (solid) and TPOT (dashed), mean",
    "ms",
    named.flatMap((s) => [
      {
        name: `${s.label} TTFT`,
        color: s.color,
        points: finished(s.state).map((a) => ({
          x: a.number,
          y: measured(a, "mean_ttft_ms") ?? measured(a, "median_ttft_ms"),
          label: `${s.label} attempt ${a.number}: TTFT mean ${fmt(metric(a, "mean_ttft_ms"))} ms, p99 ${fmt(metric(a, "p99_ttft_ms"))} ms`
        }))
      },
      {
        name: `${s.label} TPOT`,
        color: s.color,
        dashed: true,
        points: finished(s.state).map((a) => ({
          x: a.number,
          y: measured(a, "mean_tpot_ms") ?? measured(a, "median_tpot_ms"),
          label: `${s.label} attempt ${a.number}: TPOT mean ${fmt(metric(a, "mean_tpot_ms"))} ms, p99 ${fmt(metric(a, "p99_tpot_ms"))} ms`
        }))
      }
    ])
  )

  const rows: Array<[string, (s: (typeof named)[number]) => string]> = [
    ["status", (s) => (s.state.status === "stopped" ? `stopped: ${s.state.stop_reason}` : s.state.status)],
    ["baseline throughput (tok/s)", (s) => fmt(s.state.baseline_tput)],
    [
      "attempts (succeeded / failed)",
      (s) => {
        const done = finished(s.state)
        const ok = done.filter((a) => a.error_class === null).length
        return `${done.length} (${ok} / ${done.length - ok})`
      }
    ],
    [
      "failure classes",
      (s) =>
        [...new Set(finished(s.state).flatMap((a) => (a.error_class ? [a.error_class] : [])))].join(", ") ||
        "–"
    ],
    ["result format", (s) => representative(s.state)?.result_format ?? "–"],
    [
      "output tok/s",
      (s) => fmt(representative(s.state) && measured(representative(s.state)!, "output_throughput"))
    ],
    [
      "total tok/s",
      (s) => fmt(representative(s.state) && measured(representative(s.state)!, "total_token_throughput"))
    ],
    [
      "requests/s",
      (s) => fmt(representative(s.state) && measured(representative(s.state)!, "request_throughput"), 2)
    ],
    ["completed", (s) => fmt(representative(s.state) && measured(representative(s.state)!, "completed"), 0)],
    ...(["ttft", "tpot", "itl"] as const).map((k): [string, (s: (typeof named)[number]) => string] => [
      `${k.toUpperCase()} mean / median / p99 (ms)`,
      (s) => {
        const a = representative(s.state)
        if (a === undefined) return "–"
        return `${fmt(metric(a, `mean_${k}_ms`))} / ${fmt(metric(a, `median_${k}_ms`))} / ${fmt(metric(a, `p99_${k}_ms`))}`
      }
    ]),
    [
      "engine",
      (s) =>
        Object.entries(s.environment?.engines ?? {})
          .map(([k, v]) => `${k} ${v}`)
          .join(", ") || "–"
    ],
    ["GPUs", (s) => (s.environment ? String(s.environment.node.gpu_count) : "–")],
    ["accelerators", (s) => s.environment?.node.accelerators.join(", ") || "–"],
    ["node", (s) => s.environment?.node.hostname ?? "–"],
    [
      "hyperloom / Ray",
      (s) =>
        s.environment ? `${s.environment.hyperloom_version} / ${s.environment.ray_version ?? "?"}` : "–"
    ],
    ["server", (s) => s.environment?.server_argv?.at(-1) ?? "–"],
    ["client", (s) => s.environment?.client_argv.join(" ") ?? "–"]
  ]
  const table = [
    "<table>",
    `<tr><th></th>${named.map((s) => `<th><span class="swatch" style="background:${s.color}"></span>${escapeHtml(s.label)}</th>`).join("")}</tr>`,
    ...rows.map(
      ([label, cell]) =>
        `<tr><td class="k">${escapeHtml(label)}</td>${named.map((s) => `<td>${escapeHtml(cell(s))}</td>`).join("")}</tr>`
    ),
    "</table>"
  ].join("\n")

  const attempts = named
    .map((s) =>
      [
        `<h3><span class="swatch" style="background:${s.color}"></span>${escapeHtml(s.name)}</h3>`,
        '<table class="attempts"><tr><th>#</th><th>class</th><th>exit</th><th>runtime (s)</th><th>tok/s</th><th>TTFT mean (ms)</th><th>TPOT mean (ms)</th><th>error</th></tr>',
        ...finished(s.state).map(
          (a) =>
            `<tr><td>${a.number}</td><td>${escapeHtml(a.error_class ?? "succeeded")}</td><td>${a.exit_code ?? "–"}</td><td>${fmt(a.runtime_sec)}</td><td>${fmt(isMeasurement(a.throughput, a.metrics) ? (a.throughput ?? metric(a, "output_throughput")) : null)}</td><td>${fmt(measured(a, "mean_ttft_ms"))}</td><td>${fmt(measured(a, "mean_tpot_ms"))}</td><td class="err">${errorCell(a)}</td></tr>`
        ),
        "</table>"
      ].join("\n")
    )
    .join("\n")

  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>hyperloom report: ${escapeHtml(named.map((s) => s.label).join(" vs "))}</title>
<style>
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 24px 0 8px; } h3 { font-size: 14px; margin: 16px 0 6px; }
.meta { color: #666; margin-bottom: 16px; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; }
svg.chart { background: #fff; border: 1px solid #ddd; }
svg .title { font-size: 14px; font-weight: 600; fill: #222; } svg .tick { font-size: 11px; fill: #555; }
svg .axis { font-size: 12px; fill: #333; } svg .legend { font-size: 12px; fill: #222; }
svg .grid { stroke: #eee; } svg .axisline { stroke: #999; }
table { border-collapse: collapse; } td, th { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f6f6f6; } td.k { color: #555; white-space: nowrap; } td.err { color: #a33; font-family: ui-monospace, monospace; font-size: 12px; white-space: pre-wrap; max-width: 60em; }
td.err details { color: #555; } td.err pre { white-space: pre-wrap; margin: 4px 0 0; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; border-radius: 2px; }
</style>
</head>
<body>
<h1>hyperloom serving baselines</h1>
<div class="meta">${named.length} session(s) · generated ${escapeHtml(generatedAt)} · failed attempts are marked ×</div>
<div class="charts">
${throughput}
${latency}
</div>
<h2>Sessions side by side</h2>
${table}
<h2>Attempts</h2>
${attempts}
</body>
</html>
`
}
