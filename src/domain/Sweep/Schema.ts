/**
 * The sweep document's schema (docs/design.md#what-a-sweep-keeps): `<session>/sweep.json`, its
 * combinations, points, runs and engine starts, and its summary. Types and schemas only: the
 * transitions are in Sweep/Transitions.ts, the summary in Sweep/Summary.ts, reading and writing in
 * Sweep/File.ts; the one way in is domain/Sweep.ts.
 */
import { Schema } from "effect"
import { FAILURE_CLASSES } from "../Failure.js"
import { EngineConfig, Observations } from "../Observations.js"
import { METRIC_KEYS, type MetricKey, WorkloadSchema } from "../Results.js"
import { CheckRun, WarmupRun } from "../Serving.js"
import { AttemptMetrics, IsoTimestamp } from "../State.js"
import { ClientCountsSchema, RunValidity } from "../Validity.js"
import { STRATEGIES } from "./Adaptive.js"
import { HardwareClass, NodeRecord } from "./Nodes.js"

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
  "skipped",
  /** `--check` exited non-zero after an engine start: nothing measured, out of the best (docs/trust.md#is-the-number-valid). */
  "check_failed"
)
export type CombinationStatus = typeof CombinationStatus.Type
/** `invalid`: measured, but no run of it is valid (docs/trust.md#is-the-number-valid); `reasons` says why. */
export const PointStatus = lit("pending", "running", "ok", "slo_failed", "failed", "not_run", "invalid")
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
  between_sec: Schema.optional(Schema.NullOr(Schema.Finite)),
  /**
   * Is the number what it claims (docs/trust.md#is-the-number-valid): `valid`, or its findings; an
   * `invalid` run is kept but enters no statistic. Absent for failed runs and before.
   */
  validity: Schema.optional(RunValidity),
  /** The client's own counts from its result (completed, failed, output tokens). */
  client: Schema.optional(ClientCountsSchema),
  /** What the client sent, from its report (docs/clients.md#the-workload-on-record); absent before. */
  workload: Schema.optional(WorkloadSchema),
  /** What reading its result left out or computed, naming field and file (docs/clients.md). */
  result_notes: Schema.optional(Schema.Array(Schema.String)),
  /** What the node's samplers saw during the run (client CPU, the engine's load, the GPUs). */
  observations: Schema.optional(Schema.NullOr(Observations))
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
  noisy: Schema.optional(Schema.Boolean),
  /**
   * Its runs' validity (docs/trust.md#is-the-number-valid): how many were valid, suspect and invalid,
   * and the findings, each once. Absent before.
   */
  validity: Schema.optional(
    Schema.Struct({
      valid: Schema.NonNegativeInt,
      suspect: Schema.NonNegativeInt,
      invalid: Schema.NonNegativeInt,
      reasons: Schema.Array(Schema.String)
    })
  )
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
  node: Schema.optional(NodeRecord),
  /** What the engine reported of its effective configuration after readiness. */
  engine_config: Schema.optional(Schema.NullOr(EngineConfig)),
  /** The `--check` run after readiness. */
  check: Schema.optional(Schema.NullOr(CheckRun)),
  /** The `--warmup` requests after readiness (their time is warm-up time). */
  warmup: Schema.optional(Schema.NullOr(WarmupRun))
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
  links: Schema.optional(Schema.Array(Schema.Struct({ param: Schema.String, load: Schema.String }))),
  /** `--one-run`: every load point of a combination in one client run (absent: one run per point). */
  one_run: Schema.optional(Schema.Boolean)
})
export type ExperimentRecord = typeof ExperimentRecord.Type

/**
 * The validity settings of a sweep (docs/trust.md#is-the-number-valid): `--check`, `--warmup` and
 * `--max-failed` (a fraction). Not part of the experiment: a resume may change them, and `hyperloom
 * check` re-judges with them.
 */
export const ValiditySettings = Schema.Struct({
  check: Schema.NullOr(Schema.String),
  warmup: Schema.NonNegativeInt,
  max_failed: Schema.Number
})
export type ValiditySettings = typeof ValiditySettings.Type

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
  total: Schema.Struct({
    ...Parts,
    /** With `--parallel`: combination time beside another's, counted once in the wall (Time.ts). */
    at_once_sec: Schema.optional(Schema.Finite)
  }),
  combinations: Schema.Array(Schema.Struct({ index: Schema.NonNegativeInt, ...Parts })),
  time_to_best_sec: Schema.NullOr(Schema.Finite),
  engine_starts: Schema.NonNegativeInt,
  client_runs: Schema.NonNegativeInt
})

export const BestRecord = Schema.Struct({
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
  client_cmd: Schema.String,
  /**
   * In a tie: the params in which the tied combinations differ, with this one's values (what tells
   * it apart; the label has them all). Absent otherwise and in documents written before.
   */
  differs: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String }))
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
  statement: Schema.optional(Schema.String),
  /**
   * How many measured runs were valid, suspect and invalid, and what could not be checked, said once
   * (docs/trust.md#is-the-number-valid); absent before.
   */
  validity: Schema.optional(
    Schema.Struct({
      runs: Schema.NonNegativeInt,
      valid: Schema.NonNegativeInt,
      suspect: Schema.NonNegativeInt,
      invalid: Schema.NonNegativeInt,
      line: Schema.String,
      not_checked: Schema.Array(Schema.String),
      unverified: Schema.Array(Schema.String)
    })
  )
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
  /** `--check`, `--warmup`, `--max-failed` as last run (docs/trust.md#is-the-number-valid); absent before. */
  validity: Schema.optional(ValiditySettings),
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
  /**
   * Each `sweep run` invocation of the session: when it began and the session's wall time before
   * it, so that Time.ts places a moment on the sweep's own clock; absent before.
   */
  invocations: Schema.optional(
    Schema.Array(Schema.Struct({ started_at: Schema.String, wall_before_sec: Schema.Finite }))
  ),
  /** `--strategy` (docs/design.md#time-to-the-answer); absent in documents written before it: `grid`. */
  strategy: Schema.optional(lit(...STRATEGIES)),
  /** The hyperloom that created the session (`compare` lists it when two sessions differ). */
  hyperloom_version: Schema.optional(Schema.String),
  combinations: Schema.Array(CombinationRecord),
  summary: SweepSummary
})
export type SweepDoc = typeof SweepDoc.Type
