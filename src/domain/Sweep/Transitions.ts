/**
 * The sweep document's transitions (docs/design.md#what-a-sweep-keeps), pure: the experiment's
 * record, a new sweep, the bookkeeping of engine starts, points and runs, what a dead process left
 * in flight, a sweep grown by more loads or repeats, and the adaptive strategy's view and skips.
 * The program (programs/Sweep/) decides when; this file decides what.
 *
 * A run is written before its client starts (`ended_at: null`); a run or engine start found open
 * on load was in flight when the process died: `recoverInterrupted` marks it `interrupted`, moves
 * it to its point's `interrupted_runs` and makes the point pending again: the point keeps the runs
 * it finished and goes on from its next repeat; no finished point or run is ever run again.
 */
import type { FailureClass } from "../Failure.js"
import type { Metrics } from "../Results.js"
import type { AdaptiveCombination } from "./Adaptive.js"
import { type Candidate, isNoisy, mediansOf, statsOf } from "./Best.js"
import { ascendingLoads, type Combination, combinations, substitute } from "./Grid.js"
import { linkedLoads } from "./GridForms.js"
import type { Experiment } from "./Identity.js"
import type {
  CombinationRecord,
  CombinationStatus,
  EngineStart,
  ExperimentRecord,
  PointRecord,
  PointStatus,
  RunRecord,
  SweepDoc,
  SweepStatus,
  SweepStopReason
} from "./Schema.js"
import { SWEEP_SCHEMA_VERSION } from "./Schema.js"
import { allHold, judgeSlos, parseSlo, renderSlo } from "./Slo.js"
import { candidatesOf, withSummary } from "./Summary.js"
import { countsRun, isMeasuredRun, pointValidity, withCold, withFailures } from "./Validity.js"

// ---------------------------------------------------------------------------------------------
// The experiment

export const experimentRecord = (e: Experiment): ExperimentRecord => ({
  server: e.server,
  client: [...e.client],
  params: e.params.map((p) => ({ name: p.name, values: [...p.values] })),
  load: e.load.kind === "points" ? { ...e.load, values: [...e.load.values] } : { ...e.load },
  slos: e.slos.map(renderSlo),
  repeats: e.repeats,
  gpus: e.gpus,
  nodes: e.nodes,
  ...(e.combos !== undefined ? { combos: e.combos.map((c) => ({ ...c })) } : {}),
  ...(e.links !== undefined && e.links.length > 0 ? { links: e.links.map((l) => ({ ...l })) } : {}),
  ...(e.oneRun === true ? { one_run: true } : {})
})

export const experimentOf = (r: ExperimentRecord): Experiment => ({
  ...r,
  oneRun: r.one_run === true,
  slos: r.slos.flatMap((s) => {
    const p = parseSlo(s)
    return p.ok ? [p.slo] : []
  })
})

/** The client argv of a point: params and the load filled in. */
export const clientArgvOf = (e: ExperimentRecord, params: Combination, load: string): Array<string> =>
  e.client.map((a) => substitute(a, { ...params, [e.load.name]: load }))

const newPoint = (e: ExperimentRecord, params: Combination, load: string): PointRecord => ({
  load,
  status: "pending",
  class: null,
  error: null,
  client_argv: clientArgvOf(e, params, load),
  runs: [],
  interrupted_runs: [],
  stats: {},
  slo: []
})

/** A new sweep: every combination pending; grid points laid out (ascending), search points to come. */
export const initialSweep = (experiment: Experiment, now: string): SweepDoc => {
  const e = experimentRecord(experiment)
  const loads = e.load.kind === "points" ? ascendingLoads(e.load.values) : []
  const doc: SweepDoc = {
    schema_version: SWEEP_SCHEMA_VERSION,
    kind: "hyperloom.sweep",
    status: "running",
    stop_reason: null,
    stop_error: null,
    created_at: now,
    updated_at: now,
    experiment: e,
    combinations: (e.combos ?? combinations(e.params)).map((params, index) => ({
      index,
      params,
      server_cmd: substitute(e.server, params),
      status: "pending",
      class: null,
      error: null,
      engine_starts: [],
      points: linkedLoads(loads, params, e.links).map((l) => newPoint(e, params, l))
    })),
    summary: { combinations: [], verdict: "none", best: null, tied_with: [] }
  }
  return withSummary(doc)
}

// ---------------------------------------------------------------------------------------------
// Bookkeeping

const FINAL_POINT: ReadonlySet<PointStatus> = new Set(["ok", "slo_failed", "failed", "not_run", "invalid"])
const FINAL_COMBINATION: ReadonlySet<CombinationStatus> = new Set([
  "done",
  "infeasible",
  "failed",
  "engine_died",
  "skipped",
  "check_failed"
])

export const isFinalPoint = (p: PointRecord) => FINAL_POINT.has(p.status)
export const isFinalCombination = (c: CombinationRecord) => FINAL_COMBINATION.has(c.status)

const mapCombination = (
  doc: SweepDoc,
  index: number,
  f: (c: CombinationRecord) => CombinationRecord
): SweepDoc => ({
  ...doc,
  combinations: doc.combinations.map((c) => (c.index === index ? f(c) : c))
})

const mapPoint = (doc: SweepDoc, index: number, load: string, f: (p: PointRecord) => PointRecord): SweepDoc =>
  mapCombination(doc, index, (c) => ({ ...c, points: c.points.map((p) => (p.load === load ? f(p) : p)) }))

/**
 * Runs and engine starts a dead process left open become `interrupted`; their points and
 * combinations pending. Only the run in flight is lost (moved to `interrupted_runs`): the runs a
 * point finished stay, and the point goes on from its next repeat (docs/design.md#trusted-answers).
 */
export const recoverInterrupted = (doc: SweepDoc, now: string): SweepDoc => {
  const combos = doc.combinations.map((c) => ({
    ...c,
    status: c.status === "running" ? ("pending" as const) : c.status,
    engine_starts: c.engine_starts.map((s) =>
      s.ended_at === null ? { ...s, ended_at: now, outcome: "interrupted" as const } : s
    ),
    points: c.points.map((p) =>
      p.status === "running" || (p.status === "pending" && p.runs.some((r) => r.ended_at === null))
        ? {
            ...p,
            status: "pending" as const,
            interrupted_runs: [
              ...p.interrupted_runs,
              ...p.runs
                .filter((r) => r.ended_at === null)
                .map((r) => ({ ...r, ended_at: now, status: "interrupted" as const }))
            ],
            runs: p.runs.filter((r) => r.ended_at !== null)
          }
        : p
    )
  }))
  return { ...doc, combinations: combos }
}

/** How many interrupted runs and engine starts `recoverInterrupted` would mark. */
export const inFlight = (doc: SweepDoc): number =>
  doc.combinations.reduce(
    (n, c) =>
      n +
      c.engine_starts.filter((s) => s.ended_at === null).length +
      c.points.reduce((m, p) => m + p.runs.filter((r) => r.ended_at === null).length, 0),
    0
  )

export const setSweepStatus = (
  doc: SweepDoc,
  status: SweepStatus,
  reason: SweepStopReason | null,
  error: string | null,
  now: string
): SweepDoc => ({ ...doc, status, stop_reason: reason, stop_error: error, updated_at: now })

/**
 * Reopens a sweep that did not finish (cancelled, past its deadline, stopped by an infeasible
 * cluster that may have been fixed since): a later run resumes it. A finished sweep stays as it is.
 */
export const reopen = (doc: SweepDoc): SweepDoc =>
  doc.status === "done" ? doc : { ...doc, status: "running", stop_reason: null, stop_error: null }

export const setCombination = (
  doc: SweepDoc,
  index: number,
  patch: Partial<Pick<CombinationRecord, "status" | "class" | "error">>
): SweepDoc => mapCombination(doc, index, (c) => ({ ...c, ...patch }))

export const beginEngine = (doc: SweepDoc, index: number, dir: string, now: string): SweepDoc =>
  mapCombination(doc, index, (c) => ({
    ...c,
    status: "running",
    engine_starts: [
      ...c.engine_starts,
      {
        number: c.engine_starts.length + 1,
        dir,
        started_at: now,
        ended_at: null,
        ready_sec: null,
        outcome: null,
        class: null,
        error: null
      }
    ]
  }))

/** Updates the combination's last engine start. */
export const updateEngine = (doc: SweepDoc, index: number, patch: Partial<EngineStart>): SweepDoc =>
  mapCombination(doc, index, (c) => ({
    ...c,
    engine_starts: c.engine_starts.map((s, i) => (i === c.engine_starts.length - 1 ? { ...s, ...patch } : s))
  }))

/** Appends a point (search mode); no-op when the load is already there. */
export const addPoint = (doc: SweepDoc, index: number, load: string): SweepDoc =>
  mapCombination(doc, index, (c) =>
    c.points.some((p) => p.load === load)
      ? c
      : { ...c, points: [...c.points, newPoint(doc.experiment, c.params, load)] }
  )

export const beginRun = (
  doc: SweepDoc,
  index: number,
  load: string,
  run: Pick<RunRecord, "repeat" | "try" | "dir" | "client_argv" | "started_at">
): SweepDoc =>
  mapPoint(doc, index, load, (p) => ({
    ...p,
    status: "running",
    runs: [
      ...p.runs,
      {
        ...run,
        ended_at: null,
        status: null,
        class: null,
        error: null,
        exit_code: null,
        runtime_sec: null,
        throughput: null,
        metrics: null,
        engine_died: false,
        between_sec: null
      }
    ]
  }))

export const finishRun = (
  doc: SweepDoc,
  index: number,
  load: string,
  patch: Omit<RunRecord, "repeat" | "try" | "dir" | "client_argv" | "started_at" | "between_sec"> &
    Partial<Pick<RunRecord, "between_sec">>
): SweepDoc =>
  mapPoint(doc, index, load, (p) => ({
    ...p,
    // between its runs a point waits (interleaved repeats): only the run in flight is `running`
    status: "pending",
    runs: p.runs.map((r, i) => (i === p.runs.length - 1 ? { ...r, ...patch } : r))
  }))

/**
 * Ends a point: `failed` with the class and error of its failed run; `invalid` when it measured but
 * no run of it counts (docs/trust.md#is-the-number-valid: the findings its reasons); else its stats
 * over the runs that count and the SLO verdicts on their medians, failures counted as misses (`ok`
 * or `slo_failed`). The combination's first run after each engine start is judged `cold` or not
 * against its point's other runs first.
 */
export const finishPoint = (
  doc: SweepDoc,
  index: number,
  load: string,
  failure?: { readonly class: FailureClass | null; readonly error: string | null }
): SweepDoc => {
  const slos = experimentOf(doc.experiment).slos
  return mapCombination(doc, index, (c) => {
    const judged = withCold(c)
    return {
      ...judged,
      points: judged.points.map((p) => {
        if (p.load !== load) return p
        const counted = p.runs.filter(countsRun)
        const stats = statsOf(counted.map((r) => r.metrics as Metrics))
        const noisy = isNoisy(stats)
        const validity = pointValidity(p.runs)
        if (failure !== undefined)
          return {
            ...p,
            status: "failed",
            class: failure.class,
            error: failure.error,
            stats,
            noisy,
            validity
          }
        if (counted.length === 0 && p.runs.some(isMeasuredRun))
          return {
            ...p,
            status: "invalid",
            class: null,
            error: `no valid run: ${validity.reasons.join("; ")}`,
            stats,
            slo: [],
            noisy,
            validity
          }
        const slo = withFailures(judgeSlos(slos, mediansOf(stats)), slos, counted)
        return {
          ...p,
          status: allHold(slo) ? "ok" : "slo_failed",
          class: null,
          error: null,
          stats,
          slo: [...slo],
          noisy,
          validity
        }
      })
    }
  })
}

/** Every pending point of a combination becomes `not_run` (the combination ended before them). */
export const skipRemaining = (doc: SweepDoc, index: number): SweepDoc =>
  mapCombination(doc, index, (c) => ({
    ...c,
    points: c.points.map((p) => (isFinalPoint(p) ? p : { ...p, status: "not_run" as const }))
  }))

/**
 * More `--load` values on a session (docs/design.md#time-to-the-answer): the experiment takes them,
 * every combination that finished (`done`) gets the new points pending (in ascending order with the
 * old ones) and runs again for them alone; one that ended otherwise gets them `not_run`; nothing
 * measured changes.
 */
export const growLoads = (doc: SweepDoc, values: ReadonlyArray<string>): SweepDoc => {
  if (doc.experiment.load.kind !== "points") return doc
  const experiment: ExperimentRecord = {
    ...doc.experiment,
    load: { ...doc.experiment.load, values: [...values] }
  }
  const order = ascendingLoads(values)
  return {
    ...doc,
    status: "running",
    stop_reason: null,
    stop_error: null,
    experiment,
    combinations: doc.combinations.map((c) => {
      const have = new Set(c.points.map((p) => p.load))
      const fresh = order.filter((l) => !have.has(l))
      if (fresh.length === 0) return c
      const open = c.status === "done" || c.status === "pending" || c.status === "running"
      const added = fresh.map((l) => {
        const p = newPoint(experiment, c.params, l)
        return open ? p : { ...p, status: "not_run" as const }
      })
      const points = [...c.points, ...added].sort((a, b) => order.indexOf(a.load) - order.indexOf(b.load))
      return { ...c, status: c.status === "done" ? ("pending" as const) : c.status, points }
    })
  }
}

/**
 * A larger `--repeats` on the same session (docs/design.md#time-to-the-answer): every measured
 * point (`ok` or `slo_failed`) is open again with the runs it has, so only its missing repeats run
 * (in rounds, as any repeats: Sweep/Repeats.ts) and its statistics and SLO verdicts are computed
 * again over all its runs when it closes. A failed point, a point not run and a combination that
 * ended without serving (infeasible, failed, engine died, skipped) stay as they are: growing the
 * repeats measures nothing twice and starts no engine that could not serve.
 */
export const growRepeats = (doc: SweepDoc, repeats: number): SweepDoc => {
  if (repeats <= doc.experiment.repeats) return doc
  const measured = (p: PointRecord) =>
    p.status === "ok" || p.status === "slo_failed" || p.status === "invalid"
  return {
    ...doc,
    status: "running",
    stop_reason: null,
    stop_error: null,
    experiment: { ...doc.experiment, repeats },
    combinations: doc.combinations.map((c) => {
      const open = c.status === "done" || c.status === "pending" || c.status === "running"
      if (!open || !c.points.some(measured)) return c
      return {
        ...c,
        status: c.status === "done" ? ("pending" as const) : c.status,
        points: c.points.map((p) => (measured(p) ? { ...p, status: "pending" as const } : p))
      }
    })
  }
}

// ---------------------------------------------------------------------------------------------
// The adaptive strategy (docs/design.md#time-to-the-answer)

/** What the adaptive search sees of each combination (Sweep/Adaptive.ts). */
export const adaptiveView = (doc: SweepDoc): ReadonlyArray<AdaptiveCombination> => {
  const cands = candidatesOf(doc)
  return doc.combinations.map((c) => {
    const mine = cands.filter((x) => x.combination === c.index)
    const top = mine.reduce<Candidate | undefined>(
      (a, b) => (a === undefined || b.throughput > a.throughput ? b : a),
      undefined
    )
    return {
      index: c.index,
      params: c.params,
      state: c.status === "skipped" ? "skipped" : isFinalCombination(c) ? "measured" : "pending",
      kvInfeasible: c.status === "infeasible" && c.class === "kv_cache_oom",
      objective:
        top === undefined
          ? undefined
          : { throughput: top.throughput, spread: top.spread, samples: top.samples }
    }
  })
}

/** A combination the adaptive search will not start: `skipped`, its points `not_run`, the reason kept. */
export const skipCombination = (doc: SweepDoc, index: number, reason: string): SweepDoc =>
  skipRemaining(
    mapCombination(doc, index, (c) => ({ ...c, status: "skipped" as const, reason })),
    index
  )

/**
 * `--strategy grid` on an adaptive session (the one change of experiment allowed: it completes the
 * grid): every skipped combination pending again, its points pending; the sweep reopened.
 */
export const completeGrid = (doc: SweepDoc): SweepDoc => {
  const skipped = doc.combinations.filter((c) => c.status === "skipped")
  return {
    ...doc,
    strategy: "grid",
    status: skipped.length > 0 ? "running" : doc.status,
    combinations: doc.combinations.map((c) => {
      if (c.status !== "skipped") return c
      const { reason: _reason, ...rest } = c
      return {
        ...rest,
        status: "pending" as const,
        points: c.points.map((p) => (p.status === "not_run" ? { ...p, status: "pending" as const } : p))
      }
    })
  }
}
