/**
 * Validity in a sweep (docs/trust.md#is-the-number-valid), pure: a finished run judged against its
 * combination's engine start and the sweep's settings; a point's runs after its repeats (`cold`);
 * the point's verdict (`invalid` when no run of it counts); the session's tally and its "not
 * checked" lines; a whole document re-judged from its records (`hyperloom check`).
 */
import type { Observations } from "../Observations.js"
import type { ClientCounts, Metrics } from "../Results.js"
import {
  askedLoadOf,
  cold,
  counts,
  DEFAULT_MAX_FAILED,
  failuresMissSlo,
  judgeRun,
  notCheckedOnce,
  type RunValidity,
  reasonsOf,
  renderTally,
  type Settings,
  sessionClockMedian,
  tally,
  unverifiedOnce,
  withFindings
} from "../Validity.js"
import type { Combination } from "./Grid.js"
import type { CombinationRecord, EngineStart, PointRecord, RunRecord, SweepDoc } from "./Schema.js"
import type { Slo, SloVerdict } from "./Slo.js"

/** A measured run: finished ok with metrics. */
export const isMeasuredRun = (r: RunRecord): boolean => r.status === "ok" && r.metrics !== null

/** A measured run that counts (not invalid). */
export const countsRun = (r: RunRecord): boolean => isMeasuredRun(r) && counts(r.validity)

/** Every measured run of a document, in order (combinations, points, runs). */
export const measuredRuns = (doc: SweepDoc): ReadonlyArray<RunRecord> =>
  doc.combinations.flatMap((c) => c.points.flatMap((p) => p.runs.filter(isMeasuredRun)))

/** The settings the checks read, from the document and its SLOs. */
export const settingsOf = (doc: SweepDoc, slos: ReadonlyArray<Slo>): Settings => ({
  maxFailed: doc.validity?.max_failed ?? DEFAULT_MAX_FAILED,
  slos,
  sessionClockMedian: sessionClockMedian(measuredRuns(doc).map((r) => r.observations))
})

/** The engine start a run ran against: the last one that became ready before the run started. */
export const engineStartOf = (c: CombinationRecord, run: RunRecord): EngineStart | undefined =>
  c.engine_starts
    .filter((s) => s.outcome === "ready" && s.ready_at !== undefined && s.ready_at <= run.started_at)
    .at(-1) ?? c.engine_starts.filter((s) => s.outcome === "ready").at(-1)

/** A finished run's verdict: every per-run check against its engine start's reported config. */
export const judgeSweepRun = (input: {
  readonly params: Combination
  readonly loadName: string
  readonly load: string
  readonly metrics: Metrics | null
  readonly client: ClientCounts | undefined
  readonly observations: Observations | null | undefined
  readonly engine: EngineStart | undefined
  readonly settings: Settings
}): RunValidity =>
  judgeRun(
    {
      metrics: input.metrics,
      client: input.client,
      observations: input.observations,
      engineConfig: input.engine?.engine_config,
      params: input.params,
      asked: askedLoadOf(input.loadName, input.load)
    },
    input.settings
  )

/**
 * `cold` over a combination's runs: for each engine start, its first measured run, when its point
 * has other measured runs, compared with them (output throughput). Returns the runs with the
 * finding added (the others unchanged).
 */
export const withCold = (c: CombinationRecord): CombinationRecord => {
  const firsts = new Set<RunRecord>()
  for (const s of c.engine_starts) {
    if (s.outcome !== "ready") continue
    const after = c.points
      .flatMap((p) => p.runs.filter(isMeasuredRun))
      .filter((r) => s.ready_at === undefined || r.started_at >= s.ready_at)
      .sort((a, b) => a.started_at.localeCompare(b.started_at))
    if (after[0] !== undefined) firsts.add(after[0])
  }
  return {
    ...c,
    points: c.points.map((p) => ({
      ...p,
      runs: p.runs.map((r) => {
        if (!firsts.has(r) || r.throughput === null || r.validity?.findings.some((f) => f.check === "cold"))
          return r
        const others = p.runs.filter((o) => o !== r && isMeasuredRun(o) && o.throughput !== null)
        const f = cold(
          r.throughput,
          others.map((o) => o.throughput as number)
        )
        return f === undefined || r.validity === undefined
          ? r
          : { ...r, validity: withFindings(r.validity, [f]) }
      })
    }))
  }
}

/** The point's validity summary (how many runs of each verdict, the findings once). */
export const pointValidity = (runs: ReadonlyArray<RunRecord>): NonNullable<PointRecord["validity"]> => {
  const measured = runs.filter(isMeasuredRun).map((r) => r.validity)
  const t = tally(measured)
  return { valid: t.valid + t.unjudged, suspect: t.suspect, invalid: t.invalid, reasons: reasonsOf(measured) }
}

/** Failures are misses: each SLO verdict on a quantile latency also fails when the runs' failures alone miss it. */
export const withFailures = (
  verdicts: ReadonlyArray<SloVerdict>,
  slos: ReadonlyArray<Slo>,
  runs: ReadonlyArray<RunRecord>
): ReadonlyArray<SloVerdict> => {
  const pooled: ClientCounts = {
    completed: runs.reduce((n, r) => n + (r.client?.completed ?? 0), 0),
    failed: runs.reduce((n, r) => n + (r.client?.failed ?? 0), 0)
  }
  return verdicts.map((v, i) =>
    slos[i] !== undefined && failuresMissSlo(slos[i], pooled) ? { ...v, ok: false } : v
  )
}

/** The session's line and lists: "7 of 9 runs valid (1 suspect, 1 invalid)", not checked, unverified. */
export const sessionValidity = (doc: SweepDoc) => {
  const runs = measuredRuns(doc)
  const t = tally(runs.map((r) => r.validity))
  return {
    runs: t.runs,
    valid: t.valid + t.unjudged,
    suspect: t.suspect,
    invalid: t.invalid,
    line: renderTally(t),
    not_checked: [...notCheckedOnce(runs.map((r) => r.validity))],
    unverified: [...unverifiedOnce(runs.map((r) => r.validity))]
  }
}

/** One run's verdict as recorded and as re-judged (`hyperloom check`). */
export interface Rejudged {
  readonly combination: number
  readonly load: string
  readonly repeat: number
  readonly try: number
  readonly dir: string
  readonly recorded: RunValidity["verdict"] | null
  readonly now: RunValidity
}

/**
 * The document re-judged from its records (`hyperloom check`, docs/trust.md#is-the-number-valid):
 * every measured run's checks again with the settings it recorded, each measured point finished
 * again (its statistics, status and the best follow), the summary recomputed. Runs nothing.
 */
export const rejudgeSweep = (
  doc: SweepDoc,
  slos: ReadonlyArray<Slo>,
  finish: (d: SweepDoc, index: number, load: string) => SweepDoc,
  summarize: (d: SweepDoc) => SweepDoc
): { readonly doc: SweepDoc; readonly runs: ReadonlyArray<Rejudged> } => {
  const settings = settingsOf(doc, slos)
  const runs: Array<Rejudged> = []
  let out: SweepDoc = {
    ...doc,
    combinations: doc.combinations.map((c) => ({
      ...c,
      points: c.points.map((p) => ({
        ...p,
        runs: p.runs.map((r) => {
          if (!isMeasuredRun(r)) return r
          const now = judgeSweepRun({
            params: c.params,
            loadName: doc.experiment.load.name,
            load: p.load,
            metrics: r.metrics,
            client: r.client,
            observations: r.observations,
            engine: engineStartOf(c, r),
            settings
          })
          runs.push({
            combination: c.index,
            load: p.load,
            repeat: r.repeat,
            try: r.try,
            dir: r.dir,
            recorded: r.validity?.verdict ?? null,
            now
          })
          return { ...r, validity: now }
        })
      }))
    }))
  }
  for (const c of out.combinations)
    for (const p of c.points)
      if (p.status === "ok" || p.status === "slo_failed" || p.status === "invalid")
        out = finish(out, c.index, p.load)
  out = summarize(out)
  // `cold` is decided over the repeats while finishing: take the final verdicts
  const final = new Map(
    out.combinations.flatMap((c) => c.points.flatMap((p) => p.runs.map((r) => [r.dir, r])))
  )
  return { doc: out, runs: runs.map((x) => ({ ...x, now: final.get(x.dir)?.validity ?? x.now })) }
}
