import { Schema } from "effect"

/**
 * What a result file is read into (Results.ts, ClientReports.ts): hyperloom's metrics
 * (docs/clients.md#one-definition-per-metric), the formats, the load a report states, the workload on
 * record and the measured points of a report holding several benchmarks. Types and names only.
 */

export const METRIC_KEYS = [
  "request_throughput",
  "output_throughput",
  "total_token_throughput",
  "completed",
  "mean_ttft_ms",
  "median_ttft_ms",
  "p99_ttft_ms",
  "mean_tpot_ms",
  "median_tpot_ms",
  "p99_tpot_ms",
  "mean_itl_ms",
  "median_itl_ms",
  "p99_itl_ms",
  "mean_e2el_ms",
  "median_e2el_ms",
  "p99_e2el_ms",
  "failed"
] as const

export type MetricKey = (typeof METRIC_KEYS)[number]
export type Metrics = { readonly [K in MetricKey]?: number }

export const RESULT_FORMATS = ["hyperloom", "vllm", "sglang", "guidellm", "aiperf"] as const
export type ResultFormat = (typeof RESULT_FORMATS)[number]

/** The load a client's report says one benchmark ran at (docs/clients.md#loads). */
export interface StatedLoad {
  readonly kind: "rate" | "concurrency"
  /** Requests per second (`inf`: all at once) or requests in flight. */
  readonly value: number | "inf"
}

/** Mean, median and p99 of a token-length distribution (docs/clients.md#the-workload-on-record). */
export interface LengthSummary {
  readonly mean: number
  readonly p50?: number | undefined
  readonly p99?: number | undefined
}

/**
 * What the client sent (docs/clients.md#the-workload-on-record), from its own report (and, for
 * the dataset file, its arguments): every field null when the client does not say.
 */
export interface Workload {
  readonly client: string
  readonly client_version: string | null
  /** The dataset's name, or the path of a local file, as the client states it. */
  readonly dataset: string | null
  /** A local dataset file: its size and SHA-256 (filled where the file can be read). */
  readonly dataset_file?: { readonly bytes: number; readonly sha256: string } | undefined
  readonly input_tokens: LengthSummary | null
  readonly output_tokens: LengthSummary | null
  /** Requests per second asked (`inf`: all at once); null when the load is a concurrency only. */
  readonly rate: number | "inf" | null
  /** Requests in flight asked (a bound, or the load itself). */
  readonly concurrency: number | null
  /** How arrivals are spaced: `poisson`, `constant`, `gamma`, `burst` (all at once), `closed` (a request per free slot). */
  readonly arrival: string | null
  /** The gamma shape of the arrivals (vLLM's --burstiness; 1 is Poisson). */
  readonly burstiness: number | null
  /** Requests the client was asked to send (or sent, where only that is stated). */
  readonly requests: number | null
}

/** One benchmark of a report: a measured point at the load the report states. */
export interface MeasuredPoint {
  /** Where it is in the report (`benchmarks[2]`, a folder name). */
  readonly where: string
  /** The client's own name for it (`constant@2.00`, `concurrency 4`). */
  readonly label: string
  readonly load: StatedLoad | null
  readonly throughput: unknown
  readonly metrics: Metrics
  /** The client's own counts for this benchmark. */
  readonly client?: ClientCounts | undefined
  readonly invalid?: string | undefined
  /** What was left out or computed, and why (docs/clients.md#one-definition-per-metric). */
  readonly notes: ReadonlyArray<string>
  readonly workload?: Workload | undefined
}

/**
 * What the client says it did, for the validity checks (docs/trust.md#is-the-number-valid): its
 * completed and failed requests (vLLM's `completed`/`failed`; SGLang's record has no failures), its
 * output-token total (vLLM's `total_output_tokens`, SGLang's `total_output` or the older
 * `total_output_tokens`) and its duration (both: `duration`, seconds).
 */
export interface ClientCounts {
  readonly completed?: number | undefined
  readonly failed?: number | undefined
  readonly output_tokens?: number | undefined
  readonly duration_s?: number | undefined
}

export interface ParsedResult {
  readonly format: ResultFormat
  /** The client's own counts, where its record has them. */
  readonly client?: ClientCounts | undefined
  /** The raw throughput value (a number for the engines' formats; anything for `hyperloom`). */
  readonly throughput: unknown
  readonly metrics: Metrics
  /** Records in the file (JSON lines); the last one was used. */
  readonly records: number
  /** Why the record is no measurement (`invalidMetricOf`), naming the field; absent when its metrics are possible. */
  readonly invalid?: string | undefined
  /** What was left out, computed or doubtful in reading it, each naming the field and the file. */
  readonly notes?: ReadonlyArray<string> | undefined
  /** What the client sent, where its report says. */
  readonly workload?: Workload | undefined
  /** The load the report says it ran at (a client's report). */
  readonly load?: StatedLoad | null | undefined
  /**
   * Every benchmark of a client's report holding one or more (GuideLLM, AIPerf): one measured
   * point each, at its stated load. The result's own figures are the last point's.
   */
  readonly points?: ReadonlyArray<MeasuredPoint> | undefined
}

const Lengths = Schema.Struct({
  mean: Schema.Number,
  p50: Schema.optional(Schema.Number),
  p99: Schema.optional(Schema.Number)
})

/** The workload on record, as kept in a session (docs/clients.md#the-workload-on-record). */
export const WorkloadSchema = Schema.Struct({
  client: Schema.String,
  client_version: Schema.NullOr(Schema.String),
  dataset: Schema.NullOr(Schema.String),
  dataset_file: Schema.optional(Schema.Struct({ bytes: Schema.Number, sha256: Schema.String })),
  input_tokens: Schema.NullOr(Lengths),
  output_tokens: Schema.NullOr(Lengths),
  rate: Schema.NullOr(Schema.Union(Schema.Number, Schema.Literal("inf"))),
  concurrency: Schema.NullOr(Schema.Number),
  arrival: Schema.NullOr(Schema.String),
  burstiness: Schema.NullOr(Schema.Number),
  requests: Schema.NullOr(Schema.Number)
})

const round = (x: number, digits: number) => String(Number(x.toFixed(digits)))
const lengthsLine = (l: LengthSummary | null) =>
  l === null
    ? null
    : `mean ${round(l.mean, 0)}${l.p50 === undefined ? "" : `, p50 ${round(l.p50, 0)}`}${l.p99 === undefined ? "" : `, p99 ${round(l.p99, 0)}`}`

/**
 * A workload's facts as label → value, in the order they are listed; `asked` marks what the
 * client was asked to send (a difference there is a different experiment), the rest is what came
 * back (output lengths are the engine's answers). `withLoad`: the rate and concurrency too (a
 * sweep's points differ in them by design, so its comparison leaves them to the points).
 */
export const workloadFacts = (
  w: Workload | undefined,
  withLoad: boolean
): ReadonlyArray<{ readonly what: string; readonly value: string | null; readonly asked: boolean }> =>
  w === undefined
    ? []
    : [
        {
          what: "client",
          value: `${w.client}${w.client_version === null ? "" : ` ${w.client_version}`}`,
          asked: true
        },
        { what: "dataset", value: w.dataset, asked: true },
        {
          what: "dataset file",
          value:
            w.dataset_file === undefined
              ? null
              : `${w.dataset_file.bytes} bytes, sha256 ${w.dataset_file.sha256}`,
          asked: true
        },
        { what: "input tokens", value: lengthsLine(w.input_tokens), asked: true },
        ...(withLoad
          ? [
              { what: "rate", value: w.rate === null ? null : String(w.rate), asked: true },
              {
                what: "concurrency",
                value: w.concurrency === null ? null : String(w.concurrency),
                asked: true
              }
            ]
          : []),
        { what: "arrival", value: w.arrival, asked: true },
        { what: "burstiness", value: w.burstiness === null ? null : String(w.burstiness), asked: true },
        { what: "requests", value: w.requests === null ? null : String(w.requests), asked: true },
        { what: "output tokens", value: lengthsLine(w.output_tokens), asked: false }
      ]

/**
 * The workload of a sweep, stated once (docs/clients.md#the-workload-on-record): the asked facts of
 * its runs' workloads (rate and concurrency are the points' loads, left to them), the first
 * recorded; `differs` names the facts some run recorded otherwise. undefined when no run recorded one.
 */
export const sweepWorkload = (
  workloads: ReadonlyArray<Workload>
):
  | { readonly facts: ReturnType<typeof workloadFacts>; readonly differs: ReadonlyArray<string> }
  | undefined => {
  const first = workloads[0]
  if (first === undefined) return undefined
  const facts = workloadFacts(first, false)
  const differs = new Set<string>()
  for (const w of workloads.slice(1)) {
    const other = new Map(workloadFacts(w, false).map((f) => [f.what, f.value]))
    for (const f of facts) if (f.asked && other.get(f.what) !== f.value) differs.add(f.what)
  }
  return { facts, differs: [...differs] }
}

/** A workload's asked facts on one line (`sweep show`). */
/**
 * The workload stated once for a session (`sweep show`, `state show`), from its runs' or attempts'
 * records, with which fact differed between `them` ("runs", "attempts"); undefined: none recorded.
 */
export const workloadSummary = (workloads: ReadonlyArray<Workload>, them: string): string | undefined => {
  const work = sweepWorkload(workloads)
  return work === undefined
    ? undefined
    : `${workloadLine(work.facts)}${work.differs.length === 0 ? "" : ` (differs between ${them}: ${work.differs.join(", ")})`}`
}

export const workloadLine = (facts: ReturnType<typeof workloadFacts>): string =>
  facts
    .filter((f) => f.value !== null)
    .map((f) => `${f.what} ${f.value}`)
    .join("; ")
