/**
 * `sweep show` (and the end of `sweep run`) as text (docs/design.md#sweeps): the points table, per
 * combination its largest SLO-passing load and peak, and the best (or the tie) with its full server
 * and client command lines, ready to paste. Pure.
 */

import { type Workload, workloadSummary } from "../domain/Results.js"
import { differing, labelDifferingFirst } from "../domain/Sweep/Best.js"
import { hasNodes, nodesOf } from "../domain/Sweep/Parallel.js"
import { renderTimeToBest, shownTenths } from "../domain/Sweep/Time.js"
import type { PointRecord, SweepDoc } from "../domain/Sweep.js"
import {
  ADAPTIVE_ASSUMPTION,
  nodeName,
  renderClass,
  renderTimeParts,
  shellQuote,
  statementOf
} from "../domain/Sweep.js"
import { ellipsize } from "../domain/Text.js"
import { bestStatement, bestTitle, sweepStatusText } from "./RenderSweepStatus.js"

/** A value the user wrote (a load), cut in a text table; --json has it whole. */
const cut = (text: string): string => ellipsize(text, 60)

/**
 * A combination's label in a table: the params that vary across the sweep first and whole, those
 * every combination shares after, cut (issue 33 item 5: two labels that differ in their last param
 * must not read alike).
 */
const labelIn =
  (doc: SweepDoc) =>
  (params: Readonly<Record<string, string>>): string =>
    labelDifferingFirst(params, differing(doc.combinations.map((c) => c.params)).differ, 60)

const num = (n: number | undefined | null): string =>
  n === undefined || n === null ? "–" : n >= 100 ? String(Math.round(n)) : String(Math.round(n * 10) / 10)

const spread = (p: PointRecord, key: "output_throughput" | "p99_ttft_ms" | "p99_tpot_ms"): string => {
  const s = p.stats[key]
  if (s === undefined) return "–"
  return s.min === s.max ? num(s.median) : `${num(s.median)} (${num(s.min)}–${num(s.max)})`
}

/** `, p99 TTFT 60 ms, p99 TPOT 60 ms`: the best point's medians, beside its throughput. */
/**
 * docs/design.md#trusted-answers: a point whose output throughput varies by more than 5 % over its
 * repeats.
 */
const noisyNote = (p: PointRecord) =>
  `noisy: CV ${Math.round((p.stats.output_throughput?.cv ?? 0) * 1000) / 10} % > 5 %`

/** A point with suspect runs, flagged wherever it is shown (docs/trust.md#is-the-number-valid). */
const suspectNote = (p: PointRecord): ReadonlyArray<string> =>
  (p.validity?.suspect ?? 0) > 0 ? [`suspect: ${(p.validity?.reasons ?? []).join("; ")}`] : []

/** The session's validity: the summary line, and each check that could not be made, once. */
export const validityLines = (doc: SweepDoc): ReadonlyArray<string> => {
  const v = doc.summary.validity
  if (v === undefined || v.runs === 0) return []
  return [
    `validity: ${v.line}`,
    ...v.not_checked.map((n) => `  not checked: ${n}`),
    ...(v.unverified.length > 0
      ? [`  not reported by the engine (unverified): ${v.unverified.join(", ")}`]
      : [])
  ]
}

const table = (rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
  return rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i]!))
        .join("  ")
        .trimEnd()
    )
    .join("\n")
}

export const renderSweepText = (sessionDir: string, doc: SweepDoc): string => {
  const e = doc.experiment
  const label = labelIn(doc)
  const out: Array<string> = []
  out.push(
    `sweep ${sessionDir}: ${sweepStatusText(doc)}, ${doc.combinations.length} combination(s), ${
      e.load.kind === "points"
        ? `load ${e.load.name} = ${e.load.values.join(", ")}`
        : `search ${e.load.name} up to ${e.load.max}`
    }, ${e.repeats} repeat(s), SLO ${e.slos.length === 0 ? "none" : e.slos.join(" and ")}${
      (doc.summary.validity?.runs ?? 0) > 0 ? `; ${doc.summary.validity!.line}` : ""
    }`
  )
  if (doc.stop_error !== null) out.push(`  ${doc.stop_error.split("\n")[0]}`)
  if (doc.hardware_class !== undefined) out.push(`  hardware class: ${renderClass(doc.hardware_class)}`)
  // the workload once (docs/clients.md#the-workload-on-record), from the runs' reports
  const work = workloadSummary(
    doc.combinations.flatMap((c) =>
      c.points.flatMap((p) =>
        p.runs.flatMap((r) => (r.status === "ok" && r.workload !== undefined ? [r.workload as Workload] : []))
      )
    ),
    "runs"
  )
  if (work !== undefined) out.push(`  workload: ${work}`)
  if ((doc.left_alone ?? []).length > 0)
    out.push(
      `  left alone (another hardware class): ${doc.left_alone!.map((n) => `${nodeName(n)} (${n.gpu_count} GPU${n.gpu_model !== null ? ` ${n.gpu_model}` : ""})`).join(", ")}`
    )
  out.push("")
  const rows: Array<Array<string>> = [
    ["#", "combination", e.load.name, "status", "output tok/s", "p99 TTFT ms", "p99 TPOT ms", "runs", "note"]
  ]
  for (const c of doc.combinations) {
    if (c.status === "skipped") {
      rows.push([
        String(c.index),
        label(c.params),
        "–",
        "skipped",
        "–",
        "–",
        "–",
        "0",
        (c.reason ?? "").slice(0, 110)
      ])
      continue
    }
    if (
      c.points.length === 0 ||
      c.status === "infeasible" ||
      c.status === "failed" ||
      c.status === "check_failed"
    ) {
      rows.push([
        String(c.index),
        label(c.params),
        "–",
        c.status,
        "–",
        "–",
        "–",
        String(c.engine_starts.length),
        // the note quotes the engine's own line and its server.log
        // (docs/design.md#time-to-the-answer): keep it whole
        c.class !== null
          ? (c.error ?? "").startsWith(`${c.class}: `)
            ? (c.error ?? "").split("\n")[0]!.slice(0, 400)
            : `${c.class}: ${(c.error ?? "").split("\n")[0]!.slice(0, 70)}`
          : c.status === "check_failed"
            ? (c.error ?? "").slice(0, 400)
            : ""
      ])
      if (c.points.every((p) => p.status === "not_run")) continue
    }
    for (const p of c.points) {
      rows.push([
        String(c.index),
        label(c.params),
        cut(p.load),
        p.status,
        spread(p, "output_throughput"),
        spread(p, "p99_ttft_ms"),
        spread(p, "p99_tpot_ms"),
        String(p.runs.length),
        p.status === "failed"
          ? `${p.class ?? ""}: ${(p.error ?? "").split("\n")[0]!.slice(0, 70)}`
          : p.status === "invalid"
            ? // never data: the reasons, whole (docs/trust.md#is-the-number-valid)
              (p.validity?.reasons ?? []).join("; ")
            : [
                ...(p.status === "slo_failed"
                  ? p.slo.filter((v) => !v.ok).map((v) => `${v.slo} (was ${num(v.value)})`)
                  : []),
                ...(p.noisy === true ? [noisyNote(p)] : []),
                ...suspectNote(p)
              ].join(", ")
      ])
    }
  }
  out.push(table(rows))
  out.push("")
  out.push("per combination:")
  // the node(s) of each combination (docs/design.md#sweeps-at-cluster-scale), when the sweep
  // recorded them
  const withNodes = hasNodes(doc)
  out.push(
    table([
      [
        "#",
        "combination",
        "status",
        `largest passing ${e.load.name}`,
        "peak output tok/s",
        ...(withNodes ? ["node(s)"] : [])
      ],
      ...doc.summary.combinations.map((c) => [
        String(c.index),
        label(doc.combinations.find((x) => x.index === c.index)?.params ?? {}),
        c.status,
        c.largest_passing_load ?? "none",
        num(c.peak_output_throughput),
        ...(withNodes ? [nodesOf(doc.combinations.find((x) => x.index === c.index)!).join(", ") || "–"] : [])
      ])
    ])
  )
  out.push("")
  if (doc.strategy === "adaptive" || doc.combinations.some((c) => c.status === "skipped"))
    out.push(`${ADAPTIVE_ASSUMPTION}.`, "")
  const t = doc.summary.time
  if (t !== undefined) {
    out.push(
      `time: ${renderTimeParts(t.total)}; ${t.engine_starts} engine start(s), ${t.client_runs} client run(s); ${renderTimeToBest(t)}`
    )
    const started = t.combinations.filter((c) => doc.combinations[c.index]!.engine_starts.length > 0)
    if (started.length > 0)
      out.push(
        table([
          ["#", "wall s", "lease wait s", "engine starts s", "client runs s", "--between s", "hyperloom s"],
          // each row adds up as shown (Sweep/Time.ts)
          ...started.map((c) => {
            const s = shownTenths(c)
            return [
              String(c.index),
              s.wall_sec,
              s.lease_wait_sec,
              s.engine_start_sec,
              s.client_sec,
              s.between_sec,
              s.own_sec
            ]
          })
        ])
      )
    out.push("")
  }
  const judged = validityLines(doc)
  if (judged.length > 0) out.push(...judged, "")
  const s = doc.summary
  const title = bestTitle(doc)
  if (s.best === null) {
    out.push(
      doc.status === "done" ? `best: ${statementOf(doc)}` : `${title}: none — no point has met every SLO yet`
    )
  } else {
    // The verdict's one sentence (docs/design.md#trusted-answers): the JSON's summary.statement,
    // the report's
    out.push(`${title}: ${bestStatement(doc)}`)
    if (s.edge !== undefined) out.push(`  # note: ${s.edge}`)
    // Every line below is a shell line (comments included): the block pastes as it is.
    out.push("  # by hand: hyperloom picks a free port and sets these itself for the engine and the client")
    if (doc.cwd !== undefined) out.push(`  cd ${shellQuote(doc.cwd)}`)
    out.push(
      "  export HYPERLOOM_PORT=8000 HYPERLOOM_BASE_URL=http://127.0.0.1:8000 HYPERLOOM_RESULT_FILE=result.json"
    )
    out.push("  # the server (hyperloom runs it with sh -c, in a process group of its own):")
    out.push(`  sh -c ${shellQuote(s.best.server_cmd)}`)
    out.push("  # the client, once the server answers its readiness path:")
    out.push(`  ${s.best.client_cmd}`)
  }
  return out.join("\n")
}
