/**
 * A sweep session (docs/design.md#what-a-sweep-keeps): the persisted document
 * `<session>/sweep.json`, the bookkeeping of combinations, points and runs, the per-combination
 * summary and the best, and `summary.csv`. Pure: the program (programs/Sweep.ts) decides when; this
 * file decides what.
 *
 * Shape (schema_version 1):
 * - `experiment`: what identifies the experiment (Sweep/Identity.ts) — a resume must match it;
 * - `combinations[]`: one per server combination (the Cartesian product of `--param`, first param
 *   slowest), each with its expanded server command line, its engine starts (one lease each),
 *   its status and its `points[]` (grid: every load, ascending, from the start; search: appended
 *   as the search evaluates them);
 * - a point: its load, expanded client argv, status (`pending`, `running`, `ok`, `slo_failed`,
 *   `failed`, `not_run`), its runs (one per repeat, plus a retry of a failed run), the
 *   median/min/max of every metric over its measured repeats and the SLO verdicts on the medians;
 * - `summary`: per combination its largest SLO-passing load and peak, and the best (or the tie).
 *
 * A run is written before its client starts (`ended_at: null`); a run or engine start found open
 * on load was in flight when the process died: `recoverInterrupted` marks it `interrupted`, moves
 * it to its point's `interrupted_runs` and makes the point pending again: the point keeps the runs
 * it finished and goes on from its next repeat; no finished point or run is ever run again.
 * With `--repeats` ≥ 2 a grid's points run in rounds (Sweep/Repeats.ts).
 */
import { Either, ParseResult, Schema } from "effect"
import { FAILURE_CLASSES, type FailureClass } from "./Failure.js"
import { METRIC_KEYS, type MetricKey, type Metrics } from "./Results.js"
import { AttemptMetrics, IsoTimestamp } from "./State.js"
import { type AdaptiveCombination, STRATEGIES } from "./Sweep/Adaptive.js"
import {
  type BestVerdict,
  type Candidate,
  chooseBest,
  isNoisy,
  type MetricStats,
  mediansOf,
  NO_NOISE_ESTIMATE,
  statsOf
} from "./Sweep/Best.js"
import {
  ascendingLoads,
  type Combination,
  combinations,
  comboLabel,
  loadNumber,
  shellLine,
  substitute
} from "./Sweep/Grid.js"
import { linkedLoads } from "./Sweep/GridForms.js"
import { edgeFlag } from "./Sweep/Grow.js"
import type { Experiment } from "./Sweep/Identity.js"
import { HardwareClass, NodeRecord } from "./Sweep/Nodes.js"
import { allHold, judgeSlos, parseSlo, renderSlo } from "./Sweep/Slo.js"
import { sweepTime } from "./Sweep/Time.js"
import { ellipsize, oneLine } from "./Text.js"

export * from "./Sweep/Adaptive.js"
export * from "./Sweep/Best.js"
export * from "./Sweep/Environment.js"
export * from "./Sweep/Grid.js"
export * from "./Sweep/GridForms.js"
export * from "./Sweep/Grow.js"
export * from "./Sweep/Identity.js"
export * from "./Sweep/Nodes.js"
export * from "./Sweep/Repeats.js"
export * from "./Sweep/Search.js"
export * from "./Sweep/Slo.js"
export * from "./Sweep/Time.js"

export const SWEEP_FILE = "sweep.json"
export const SUMMARY_CSV = "summary.csv"
export const SWEEP_SCHEMA_VERSION = 1

const lit = <const L extends ReadonlyArray<string>>(...values: L) =>
  Schema.Literal(...values).annotations({
    message: (issue) => ({
      message: `expected one of ${values.join(", ")}, got ${JSON.stringify(issue.actual)}`,
      override: true
    })
  })

export const SweepStatus = lit("running", "done", "stopped", "cancelled")
export type SweepStatus = typeof SweepStatus.Type
export const SweepStopReason = lit(
  "ray_cluster_infeasible",
  "session_time_exhausted",
  "orchestrator_cancelled",
  /**
   * `--wait` passed before a combination's lease was granted (docs/design.md#fair-queue): the
   * holder named.
   */
  "lease_wait_expired",
  /** Another failure of a combination's lease (Ray unreachable, the host lock, the bridge). */
  "lease_failed"
)
export type SweepStopReason = typeof SweepStopReason.Type
/**
 * `skipped`: never started by `--strategy adaptive` (docs/design.md#time-to-the-answer), its
 * `reason` says why.
 */
export const CombinationStatus = lit(
  "pending",
  "running",
  "done",
  "infeasible",
  "failed",
  "engine_died",
  "skipped"
)
export type CombinationStatus = typeof CombinationStatus.Type
export const PointStatus = lit("pending", "running", "ok", "slo_failed", "failed", "not_run")
export type PointStatus = typeof PointStatus.Type
export const RunStatus = lit("ok", "failed", "interrupted")
const FailureClassSchema = lit(...FAILURE_CLASSES)

const Stat = Schema.Struct({
  median: Schema.Finite,
  min: Schema.Finite,
  max: Schema.Finite,
  // The noise (docs/design.md#trusted-answers); absent in documents written before, which still load.
  n: Schema.optional(Schema.Int.pipe(Schema.positive())),
  mean: Schema.optional(Schema.Finite),
  sd: Schema.optional(Schema.NullOr(Schema.Finite)),
  cv: Schema.optional(Schema.NullOr(Schema.Finite)),
  ci95: Schema.optional(Schema.NullOr(Schema.Tuple(Schema.Finite, Schema.Finite)))
})
export const MetricStatsSchema = Schema.Struct(
  Object.fromEntries(METRIC_KEYS.map((k) => [k, Schema.optional(Stat)])) as {
    readonly [K in MetricKey]: Schema.optional<typeof Stat>
  }
)

export const RunRecord = Schema.Struct({
  /** 1…repeats. */
  repeat: Schema.Int.pipe(Schema.positive()),
  /** 1, or 2 for the retry of a failed run. */
  try: Schema.Int.pipe(Schema.positive()),
  dir: Schema.String,
  client_argv: Schema.Array(Schema.String),
  started_at: IsoTimestamp,
  ended_at: Schema.NullOr(IsoTimestamp),
  status: Schema.NullOr(RunStatus),
  class: Schema.NullOr(FailureClassSchema),
  error: Schema.NullOr(Schema.String),
  exit_code: Schema.NullOr(Schema.Int),
  runtime_sec: Schema.NullOr(Schema.Finite),
  throughput: Schema.NullOr(Schema.Finite),
  metrics: Schema.NullOr(AttemptMetrics),
  /** The engine died while this run's client ran. */
  engine_died: Schema.Boolean,
  /**
   * The `--between` command's own time before this run (docs/design.md#time-to-the-answer); absent
   * before it was kept.
   */
  between_sec: Schema.optional(Schema.NullOr(Schema.Finite))
})
export type RunRecord = typeof RunRecord.Type

const SloVerdictSchema = Schema.Struct({
  slo: Schema.String,
  value: Schema.NullOr(Schema.Finite),
  ok: Schema.Boolean
})

export const PointRecord = Schema.Struct({
  load: Schema.String,
  status: PointStatus,
  class: Schema.NullOr(FailureClassSchema),
  error: Schema.NullOr(Schema.String),
  /** The client's argv with every placeholder filled ($HYPERLOOM_* are the runner's). */
  client_argv: Schema.Array(Schema.String),
  runs: Schema.Array(RunRecord),
  /** Runs of earlier tries of this point, left in flight by a process that died. */
  interrupted_runs: Schema.Array(RunRecord),
  stats: MetricStatsSchema,
  slo: Schema.Array(SloVerdictSchema),
  /**
   * Its output throughput's CV over the repeats exceeds 5 % (docs/design.md#trusted-answers);
   * absent before.
   */
  noisy: Schema.optional(Schema.Boolean)
})
export type PointRecord = typeof PointRecord.Type

export const EngineStart = Schema.Struct({
  number: Schema.Int.pipe(Schema.positive()),
  dir: Schema.String,
  started_at: IsoTimestamp,
  ended_at: Schema.NullOr(IsoTimestamp),
  ready_sec: Schema.NullOr(Schema.Finite),
  /**
   * When hyperloom saw it ready (docs/design.md#time-to-the-answer: the lease's wait is the span to
   * it less ready_sec).
   */
  ready_at: Schema.optional(IsoTimestamp),
  /**
   * `ready` once it served; `failed` before ready; `interrupted` when a dead process left it open;
   * `left_alone` when it was granted a node of another hardware class (stopped at once, not charged).
   */
  outcome: Schema.NullOr(lit("ready", "failed", "interrupted", "left_alone")),
  class: Schema.NullOr(FailureClassSchema),
  error: Schema.NullOr(Schema.String),
  /** The node it ran on (docs/design.md#sweeps-at-cluster-scale), once known. */
  node: Schema.optional(NodeRecord)
})
export type EngineStart = typeof EngineStart.Type

export const CombinationRecord = Schema.Struct({
  index: Schema.NonNegativeInt,
  params: Schema.Record({ key: Schema.String, value: Schema.String }),
  /** The server command line with the params filled in (run with `sh -c`). */
  server_cmd: Schema.String,
  status: CombinationStatus,
  class: Schema.NullOr(FailureClassSchema),
  error: Schema.NullOr(Schema.String),
  engine_starts: Schema.Array(EngineStart),
  points: Schema.Array(PointRecord),
  /**
   * Why it was `skipped` (docs/design.md#time-to-the-answer): the combination it follows from, or
   * where the search settled.
   */
  reason: Schema.optional(Schema.String)
})
export type CombinationRecord = typeof CombinationRecord.Type

const ParamSchema = Schema.Struct({ name: Schema.String, values: Schema.Array(Schema.String) })
const LoadSchema = Schema.Union(
  Schema.Struct({ kind: Schema.Literal("points"), name: Schema.String, values: Schema.Array(Schema.String) }),
  Schema.Struct({
    kind: Schema.Literal("search"),
    name: Schema.String,
    max: Schema.Int.pipe(Schema.positive())
  })
)

export const ExperimentRecord = Schema.Struct({
  server: Schema.String,
  client: Schema.Array(Schema.String),
  params: Schema.Array(ParamSchema),
  load: LoadSchema,
  slos: Schema.Array(Schema.String),
  repeats: Schema.Int.pipe(Schema.positive()),
  gpus: Schema.NonNegativeInt,
  nodes: Schema.Int.pipe(Schema.positive()),
  /** `--combo`: the listed combinations (absent: the params' Cartesian product). */
  combos: Schema.optional(Schema.Array(Schema.Record({ key: Schema.String, value: Schema.String }))),
  /** `--link-vars PARAM=LOAD` (absent: none). */
  links: Schema.optional(Schema.Array(Schema.Struct({ param: Schema.String, load: Schema.String })))
})
export type ExperimentRecord = typeof ExperimentRecord.Type

const CombinationSummary = Schema.Struct({
  index: Schema.NonNegativeInt,
  label: Schema.String,
  status: CombinationStatus,
  largest_passing_load: Schema.NullOr(Schema.String),
  peak_output_throughput: Schema.NullOr(Schema.Finite),
  points: Schema.NonNegativeInt
})

const Parts = {
  wall_sec: Schema.Finite,
  lease_wait_sec: Schema.Finite,
  engine_start_sec: Schema.Finite,
  client_sec: Schema.Finite,
  between_sec: Schema.Finite,
  own_sec: Schema.Finite
}
const TimeSchema = Schema.Struct({
  total: Schema.Struct(Parts),
  combinations: Schema.Array(Schema.Struct({ index: Schema.NonNegativeInt, ...Parts })),
  time_to_best_sec: Schema.NullOr(Schema.Finite),
  engine_starts: Schema.NonNegativeInt,
  client_runs: Schema.NonNegativeInt
})

const BestRecord = Schema.Struct({
  combination: Schema.NonNegativeInt,
  label: Schema.String,
  load: Schema.String,
  output_throughput: Schema.Finite,
  spread: Schema.Finite,
  /**
   * Runs measured, the mean and its 95 % interval (null with one run); absent before
   * docs/design.md#trusted-answers.
   */
  runs: Schema.optional(Schema.NonNegativeInt),
  mean: Schema.optional(Schema.Finite),
  ci95: Schema.optional(Schema.NullOr(Schema.Tuple(Schema.Finite, Schema.Finite))),
  /** Both complete: the server's `sh -c` string and the client's command line, ready to paste. */
  server_cmd: Schema.String,
  client_cmd: Schema.String
})

export const SweepSummary = Schema.Struct({
  combinations: Schema.Array(CombinationSummary),
  /** `best` with a winner; `tie` when noise cannot tell (R ≥ 2); `none` when no point met every SLO. */
  verdict: lit("best", "tie", "none"),
  best: Schema.NullOr(BestRecord),
  tied_with: Schema.Array(BestRecord),
  /**
   * A best at the largest --load tried or at --search's MAX (docs/design.md#time-to-the-answer):
   * the capacity may be higher.
   */
  edge: Schema.optional(Schema.String),
  /**
   * Where the time went (docs/design.md#time-to-the-answer, Sweep/Time.ts); absent in documents
   * written before.
   */
  time: Schema.optional(TimeSchema),
  /**
   * The best was tested against every other combination's best by Welch's t-test at 95 % (false
   * with one run per point: no noise estimate). Absent in documents written before
   * docs/design.md#trusted-answers.
   */
  significant: Schema.optional(Schema.Boolean),
  /** The verdict as one sentence, the same in `sweep show`, `--json` and the report. */
  statement: Schema.optional(Schema.String)
})
export type SweepSummary = typeof SweepSummary.Type

export const SweepDoc = Schema.Struct({
  schema_version: Schema.Literal(SWEEP_SCHEMA_VERSION),
  kind: Schema.Literal("hyperloom.sweep"),
  status: SweepStatus,
  stop_reason: Schema.NullOr(SweepStopReason),
  stop_error: Schema.NullOr(Schema.String),
  created_at: IsoTimestamp,
  updated_at: IsoTimestamp,
  experiment: ExperimentRecord,
  /**
   * The directory the sweep was first run in (the engine's and the client's working directory):
   * relative paths in their command lines are relative to it. Absent in documents written before.
   */
  cwd: Schema.optional(Schema.String),
  /**
   * The hardware class of the first node granted (docs/design.md#sweeps-at-cluster-scale): a
   * resumed sweep keeps it.
   */
  hardware_class: Schema.optional(HardwareClass),
  /** Nodes of another class, left alone (Ray node ids, each with its facts). */
  left_alone: Schema.optional(Schema.Array(NodeRecord)),
  /**
   * Seconds the `sweep run` invocations of this session took, summed
   * (docs/design.md#time-to-the-answer); absent before.
   */
  wall_sec: Schema.optional(Schema.Finite),
  /** `--strategy` (docs/design.md#time-to-the-answer); absent in documents written before it: `grid`. */
  strategy: Schema.optional(lit(...STRATEGIES)),
  /** The hyperloom that created the session (`compare` lists it when two sessions differ). */
  hyperloom_version: Schema.optional(Schema.String),
  combinations: Schema.Array(CombinationRecord),
  summary: SweepSummary
})
export type SweepDoc = typeof SweepDoc.Type

// ---------------------------------------------------------------------------------------------
// Reading and writing

export type SweepProblem =
  | { readonly kind: "corrupt"; readonly detail: string }
  | { readonly kind: "future"; readonly version: number }

const decode = Schema.decodeUnknownEither(SweepDoc)
const encode = Schema.encodeSync(SweepDoc)

export const parseSweep = (text: string): Either.Either<SweepDoc, SweepProblem> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    return Either.left({
      kind: "corrupt",
      detail: `invalid JSON: ${oneLine(String((e as Error).message ?? e))}`
    })
  }
  const v = (json as { schema_version?: unknown } | null)?.schema_version
  if (typeof v === "number" && Number.isInteger(v) && v > SWEEP_SCHEMA_VERSION)
    return Either.left({ kind: "future", version: v })
  return Either.flatMap(
    Either.mapLeft(decode(json), (e) => ({
      kind: "corrupt" as const,
      detail: oneLine(ParseResult.TreeFormatter.formatErrorSync(e))
    })),
    (doc) => {
      const problem = gridProblem(doc)
      return problem === undefined
        ? Either.right(doc)
        : Either.left({ kind: "corrupt" as const, detail: problem })
    }
  )
}

const sameParams = (a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>) => {
  const ka = Object.keys(a)
  return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && a[k] === b[k])
}

/**
 * Whether the document's combination records are exactly its experiment's grid (issue 27 item 4):
 * one record per combination `initialSweep` lays out, in order, index i at position i with that
 * combination's params, and (for load points) each with the grid's loads. A file edited by hand
 * (a record removed: a best over half the grid; two swapped with a point reset: one point re-run
 * forever) is refused, naming the first problem, and never rewritten.
 */
export const gridProblem = (doc: SweepDoc): string | undefined => {
  const want = initialSweep(experimentOf(doc.experiment), doc.created_at).combinations
  const got = doc.combinations
  if (got.length !== want.length)
    return `it holds ${got.length} combination record(s) where its experiment's grid has ${want.length}; the file was edited or damaged`
  for (let i = 0; i < want.length; i++) {
    const g = got[i]!
    const w = want[i]!
    if (g.index !== i)
      return `combination record ${i} has index ${g.index} (records must be 0…${want.length - 1} in order); the file was edited or damaged`
    if (!sameParams(g.params, w.params))
      return `combination ${i} has params ${JSON.stringify(g.params)} where the grid has ${JSON.stringify(w.params)}; the file was edited or damaged`
    if (doc.experiment.load.kind === "points") {
      const loads = g.points.map((p) => p.load)
      const wanted = w.points.map((p) => p.load)
      if (loads.length !== wanted.length || loads.some((l, j) => l !== wanted[j]))
        return `combination ${i} has load points ${loads.join(", ") || "(none)"} where the grid has ${wanted.join(", ")}; the file was edited or damaged`
    }
  }
  return undefined
}

export const renderSweep = (doc: SweepDoc): string => `${JSON.stringify(encode(doc), null, 2)}\n`

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
  ...(e.links !== undefined && e.links.length > 0 ? { links: e.links.map((l) => ({ ...l })) } : {})
})

export const experimentOf = (r: ExperimentRecord): Experiment => ({
  ...r,
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

const FINAL_POINT: ReadonlySet<PointStatus> = new Set(["ok", "slo_failed", "failed", "not_run"])
const FINAL_COMBINATION: ReadonlySet<CombinationStatus> = new Set([
  "done",
  "infeasible",
  "failed",
  "engine_died",
  "skipped"
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
 * Ends a point: `failed` with the class and error of its failed run; else its stats over the ok
 * runs and the SLO verdicts on their medians (`ok` or `slo_failed`).
 */
export const finishPoint = (
  doc: SweepDoc,
  index: number,
  load: string,
  failure?: { readonly class: FailureClass | null; readonly error: string | null }
): SweepDoc =>
  mapPoint(doc, index, load, (p) => {
    const measured = p.runs
      .filter((r) => r.status === "ok" && r.metrics !== null)
      .map((r) => r.metrics as Metrics)
    const stats = statsOf(measured)
    const noisy = isNoisy(stats)
    if (failure !== undefined)
      return { ...p, status: "failed", class: failure.class, error: failure.error, stats, noisy }
    const slo = judgeSlos(experimentOf(doc.experiment).slos, mediansOf(stats))
    return {
      ...p,
      status: allHold(slo) ? "ok" : "slo_failed",
      class: null,
      error: null,
      stats,
      slo: [...slo],
      noisy
    }
  })

/** Every pending point of a combination becomes `not_run` (the combination ended before them). */
export const skipRemaining = (doc: SweepDoc, index: number): SweepDoc =>
  mapCombination(doc, index, (c) => ({
    ...c,
    points: c.points.map((p) => (isFinalPoint(p) ? p : { ...p, status: "not_run" as const }))
  }))

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
              samples: p.runs.flatMap((r) =>
                r.status === "ok" && r.metrics?.output_throughput !== undefined
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
  const summary = {
    combinations: doc.combinations.map(combinationSummary),
    verdict: verdict._tag,
    best,
    tied_with: tiedWith,
    significant: verdict._tag === "best" && verdict.significant,
    statement: verdictStatement(doc.experiment.load.name, verdict, best, tiedWith)
  }
  const edge = edgeFlag(doc.experiment.load, best?.load)
  return {
    ...doc,
    summary: { ...summary, ...(edge === undefined ? {} : { edge }), time: sweepTime({ ...doc, summary }) }
  }
}

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
  const measured = (p: PointRecord) => p.status === "ok" || p.status === "slo_failed"
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

type BestRow = typeof BestRecord.Type

const tput = (n: number) => (n >= 100 ? String(Math.round(n)) : String(Math.round(n * 10) / 10))
const interval = (b: BestRow) =>
  b.ci95 === null || b.ci95 === undefined
    ? ""
    : `, mean ${tput(b.mean ?? b.output_throughput)} [95 % CI ${tput(b.ci95[0])}–${tput(b.ci95[1])}] over ${b.runs ?? "?"} runs`
// a value the user wrote is cut in the sentence (the best's record keeps it whole)
const named = (loadName: string, b: BestRow) =>
  `#${b.combination}${b.label === "(no params)" ? "" : ` (${ellipsize(b.label, 60)})`} at ${loadName}=${ellipsize(b.load, 60)}: ${tput(b.output_throughput)} output tok/s (median${interval(b)})`

/**
 * The verdict in one sentence (docs/design.md#trusted-answers), the same wherever it is shown:
 * `sweep show`, `--json` (`summary.statement`) and the report.
 */
export const verdictStatement = (
  loadName: string,
  verdict: BestVerdict,
  best: BestRow | null,
  tiedWith: ReadonlyArray<BestRow>
): string => {
  if (verdict._tag === "none" || best === null)
    return "none — no point met every SLO (sweep_no_feasible_point)"
  if (verdict._tag === "tie")
    return `a TIE within the noise (Welch's t-test, 95 %): ${named(loadName, best)} does not beat ${tiedWith
      .map((t) => named(loadName, t))
      .join("; ")}`
  if (!verdict.significant) return `${named(loadName, best)}; ${NO_NOISE_ESTIMATE}`
  return verdict.rivals === 0
    ? `${named(loadName, best)}; no other combination had a point that met every SLO`
    : `${named(loadName, best)}; beats every other combination's best beyond the noise (Welch's t-test, 95 %)`
}

/**
 * The statement of a document's verdict: the one it carries, else (a document written before
 * docs/design.md#trusted-answers) one made from its stored verdict, claiming no significance.
 */
export const statementOf = (doc: SweepDoc): string => {
  const s = doc.summary
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
    ? verdictStatement(loadName, { _tag: "tie", best: cand, tiedWith: [] }, s.best, s.tied_with)
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
