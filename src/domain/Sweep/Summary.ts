/**
 * A sweep's summary (docs/design.md#what-a-sweep-keeps): per combination its largest SLO-passing
 * load and peak, the best (or the tie) and its one-sentence statement, the time accounting, and
 * `summary.csv`. Pure; every save recomputes it (`withSummary`).
 */
import { METRIC_KEYS } from "../Results.js"
import { ellipsize } from "../Text.js"
import {
  type BestVerdict,
  type Candidate,
  chooseBest,
  differing,
  type MetricStats,
  NO_NOISE_ESTIMATE,
  pick,
  tieNames
} from "./Best.js"
import { comboLabel, comboRef, loadNumber, shellLine } from "./Grid.js"
import { edgeFlag } from "./Grow.js"
import { noEngineReady } from "./NoEngine.js"
import type { BestRecord, CombinationRecord, PointRecord, SweepDoc } from "./Schema.js"
import { sweepTime } from "./Time.js"
import { countsRun, sessionValidity } from "./Validity.js"

// ---------------------------------------------------------------------------------------------
// The summary and the best

const throughputStat = (p: PointRecord) => p.stats.output_throughput

/** The combination's largest SLO-passing load (by load value) and its peak measured throughput. */
export const combinationSummary = (c: CombinationRecord) => {
  const ok = c.points.filter((p) => p.status === "ok")
  const largest =
    ok.length === 0 ? null : ok.reduce((a, b) => (loadNumber(b.load) > loadNumber(a.load) ? b : a)).load
  const measured = c.points.flatMap((p) => {
    const t = throughputStat(p)
    return (p.status === "ok" || p.status === "slo_failed") && t !== undefined ? [t.median] : []
  })
  return {
    index: c.index,
    label: comboLabel(c.params),
    status: c.status,
    largest_passing_load: largest,
    peak_output_throughput: measured.length === 0 ? null : Math.max(...measured),
    points: c.points.length
  }
}

/** The exact, runnable command lines of a point. */
const bestRecord = (doc: SweepDoc, cand: Candidate) => {
  const c = doc.combinations.find((x) => x.index === cand.combination)!
  const p = c.points[cand.point]!
  const t = throughputStat(p)
  return {
    combination: c.index,
    label: comboLabel(c.params),
    load: p.load,
    output_throughput: cand.throughput,
    spread: cand.spread,
    runs: cand.samples.length,
    ...(t?.mean !== undefined ? { mean: t.mean } : {}),
    ci95: t?.ci95 ?? null,
    server_cmd: c.server_cmd,
    client_cmd: shellLine(p.client_argv)
  }
}

export const candidatesOf = (doc: SweepDoc): ReadonlyArray<Candidate> =>
  doc.combinations.flatMap((c) =>
    c.points.flatMap((p, point) => {
      const t = throughputStat(p)
      return p.status === "ok" && t !== undefined
        ? [
            {
              combination: c.index,
              point,
              throughput: t.median,
              spread: t.max - t.min,
              // only runs that count (docs/trust.md#is-the-number-valid)
              samples: p.runs.flatMap((r) =>
                countsRun(r) && r.metrics?.output_throughput !== undefined
                  ? [r.metrics.output_throughput]
                  : []
              )
            }
          ]
        : []
    })
  )

/** The document with its summary recomputed (every save goes through this). */
export const withSummary = (doc: SweepDoc): SweepDoc => {
  const verdict = chooseBest(candidatesOf(doc))
  const best = verdict._tag === "none" ? null : bestRecord(doc, verdict.best)
  const tiedWith = verdict._tag === "tie" ? verdict.tiedWith.map((t) => bestRecord(doc, t)) : []
  // a tie: what tells the tied combinations apart (issue 33 item 5)
  const { differ } = differing([best, ...tiedWith].flatMap((b) => (b === null ? [] : [paramsOf(doc, b)])))
  const apart = <B extends BestRow>(b: B): B =>
    verdict._tag === "tie" ? { ...b, differs: pick(paramsOf(doc, b), differ) } : b
  const summary = {
    combinations: doc.combinations.map(combinationSummary),
    verdict: verdict._tag,
    best: best === null ? null : apart(best),
    tied_with: tiedWith.map(apart),
    significant: verdict._tag === "best" && verdict.significant,
    validity: sessionValidity(doc),
    statement:
      best === null && noEngineReady(doc)
        ? noEngineStatement(doc)
        : verdictStatement(
            doc.experiment.load.name,
            verdict,
            best,
            tiedWith,
            (i) => doc.combinations.find((c) => c.index === i)?.params
          )
  }
  const edge = edgeFlag(doc.experiment.load, best?.load)
  return {
    ...doc,
    summary: { ...summary, ...(edge === undefined ? {} : { edge }), time: sweepTime({ ...doc, summary }) }
  }
}

type BestRow = typeof BestRecord.Type

const paramsOf = (doc: SweepDoc, b: BestRow) =>
  doc.combinations.find((c) => c.index === b.combination)?.params ?? {}

const tput = (n: number) => (n >= 100 ? String(Math.round(n)) : String(Math.round(n * 10) / 10))
const interval = (b: BestRow) =>
  b.ci95 === null || b.ci95 === undefined
    ? ""
    : `, mean ${tput(b.mean ?? b.output_throughput)} [95 % CI ${tput(b.ci95[0])}–${tput(b.ci95[1])}] over ${b.runs ?? "?"} runs`
// a value the user wrote is cut in the sentence (the best's record keeps it whole)
const named = (loadName: string, b: BestRow, ref?: string) =>
  `${ref ?? `#${b.combination}${b.label === "(no params)" ? "" : ` (${ellipsize(b.label, 60)})`}`} at ${loadName}=${ellipsize(b.load, 60)}: ${tput(b.output_throughput)} output tok/s (median${interval(b)})`

/**
 * The verdict in one sentence (docs/design.md#trusted-answers), the same wherever it is shown:
 * `sweep show`, `--json` (`summary.statement`) and the report.
 */
export const verdictStatement = (
  loadName: string,
  verdict: BestVerdict,
  best: BestRow | null,
  tiedWith: ReadonlyArray<BestRow>,
  /** A combination's params: a tie then names each by what differs, whole (Best.ts's tieNames). */
  paramsOf?: (index: number) => Readonly<Record<string, string>> | undefined
): string => {
  if (verdict._tag === "none" || best === null)
    return "none — no point met every SLO (sweep_no_feasible_point)"
  if (verdict._tag === "tie") {
    const rows = [best, ...tiedWith].map((b) => ({
      combination: b.combination,
      params: paramsOf?.(b.combination)
    }))
    const known = rows.every((r) => r.params !== undefined)
    const tie = known
      ? tieNames(rows.map((r) => ({ combination: r.combination, params: r.params ?? {} })))
      : undefined
    return `a TIE within the noise (Welch's t-test, 95 %): ${named(loadName, best, tie?.refs.get(best.combination))} does not beat ${tiedWith
      .map((t) => named(loadName, t, tie?.refs.get(t.combination)))
      .join("; ")}${tie?.tail ?? ""}`
  }
  if (!verdict.significant) return `${named(loadName, best)}; ${NO_NOISE_ESTIMATE}`
  return verdict.rivals === 0
    ? `${named(loadName, best)}; no other combination had a point that met every SLO`
    : `${named(loadName, best)}; beats every other combination's best beyond the noise (Welch's t-test, 95 %)`
}

/** How many combinations' engine notes the statement quotes (the rest are counted). */
const NOTES_SHOWN = 3

/**
 * Why no engine became ready, in one sentence: each combination's note (its class, what happened,
 * the engine's own line, its server.log: Sweep/EngineNote.ts), the first NOTES_SHOWN of them.
 */
export const noEngineStatement = (doc: SweepDoc): string => {
  const notes = doc.combinations.flatMap((c) => {
    const note = c.error ?? [...c.engine_starts].reverse().find((s) => s.error !== null)?.error ?? null
    return note === null ? [] : [`${comboRef(c.index, c.params)}: ${note.split("\n")[0]}`]
  })
  const more =
    notes.length > NOTES_SHOWN ? `; and ${notes.length - NOTES_SHOWN} more (sweep show lists them)` : ""
  return `none — no engine ever became ready (sweep_no_engine_ready), so no point was measured${
    notes.length === 0 ? "" : `: ${notes.slice(0, NOTES_SHOWN).join("; ")}${more}`
  }`
}

/**
 * The statement of a document's verdict: the one it carries, else (a document written before
 * docs/design.md#trusted-answers) one made from its stored verdict, claiming no significance.
 */
export const statementOf = (doc: SweepDoc): string => {
  const s = doc.summary
  // a document written before blamed the SLO when no engine was ever ready
  if (s.best === null && noEngineReady(doc)) return noEngineStatement(doc)
  if (s.statement !== undefined) return s.statement
  const loadName = doc.experiment.load.name
  if (s.best === null) return verdictStatement(loadName, { _tag: "none" }, null, [])
  const cand: Candidate = {
    combination: s.best.combination,
    point: 0,
    throughput: s.best.output_throughput,
    spread: s.best.spread,
    samples: []
  }
  return s.verdict === "tie"
    ? verdictStatement(
        loadName,
        { _tag: "tie", best: cand, tiedWith: [] },
        s.best,
        s.tied_with,
        (i) => doc.combinations.find((c) => c.index === i)?.params
      )
    : verdictStatement(loadName, { _tag: "best", best: cand, significant: false, rivals: 0 }, s.best, [])
}

// ---------------------------------------------------------------------------------------------
// summary.csv

const csvCell = (v: string | number | null | undefined): string => {
  if (v === null || v === undefined) return ""
  const s = String(v)
  return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s
}

/** A measurement as the reports print it: 2 decimals (`65.87`, not `65.86953602976874`); sweep.json keeps every digit. */
const csvNumber = (n: number): number => Math.round(n * 100) / 100

/** One row per point: the combination, its params, the load, status, runs, and median/min/max per metric. */
export const renderSummaryCsv = (doc: SweepDoc): string => {
  const paramNames = doc.experiment.params.map((p) => p.name)
  const header = [
    "combination",
    ...paramNames,
    doc.experiment.load.name,
    "status",
    "class",
    "runs_ok",
    ...METRIC_KEYS.flatMap((k) => [`${k}_median`, `${k}_min`, `${k}_max`])
  ]
  const rows = doc.combinations.flatMap((c) =>
    c.points.map((p) => [
      c.index,
      ...paramNames.map((n) => c.params[n] ?? ""),
      p.load,
      p.status,
      p.class,
      p.runs.filter((r) => r.status === "ok").length,
      ...METRIC_KEYS.flatMap((k) => {
        const s = (p.stats as MetricStats)[k]
        return s === undefined ? [null, null, null] : [s.median, s.min, s.max].map(csvNumber)
      })
    ])
  )
  return `${[header, ...rows].map((r) => r.map(csvCell).join(",")).join("\n")}\n`
}
