/**
 * The result file of a baseline attempt (docs/design.md#results-and-metrics), recognised by its keys:
 *
 * - `hyperloom`: `{"throughput": <number>}`, the generic report (its own throughput, no metrics
 *   other than those it happens to carry under the names below);
 * - `vllm`: the JSON object `vllm bench serve --save-result` writes (vllm/benchmarks/serve.py:
 *   `date`, `backend`/`endpoint_type`, `model_id`, `tokenizer_id`, `num_prompts`, …, `completed`,
 *   `request_throughput`, `output_throughput`, `total_token_throughput`, `mean_/median_/pNN_ttft_ms`,
 *   `…_tpot_ms`, `…_itl_ms`); `--append-result` makes it JSON lines: the last record counts;
 * - `sglang`: the JSON lines SGLang's `bench_serving --output-file` appends, one record per run
 *   (sglang/bench_serving.py, sglang/benchmark/metrics.py: `backend`, `dataset_name`,
 *   `request_rate`, `duration`, `completed`, `request_throughput`, `input_throughput`,
 *   `output_throughput`, `total_throughput`, `mean_e2e_latency_ms`, `…_ttft_ms`, `…_itl_ms`);
 *   the last record counts;
 * - `guidellm`, `aiperf`: GuideLLM's benchmark report and AIPerf's profile_export_aiperf.json
 *   (ClientReports.ts; docs/clients.md), each benchmark a measured point at the load it states.
 *
 * `throughput` is the output-token throughput (tok/s) for the engines' formats. The metrics are the
 * ones docs/design.md#results-and-metrics names, where present and finite. Pure: text in, data out.
 */

import { isAiperfExport, isGuidellmReport, parseAiperfRuns, parseGuidellm } from "./ClientReports.js"
import {
  type ClientCounts,
  type LengthSummary,
  METRIC_KEYS,
  type MetricKey,
  type Metrics,
  type ParsedResult,
  type Workload
} from "./ResultModel.js"
import { mean, percentileLinear } from "./Stats.js"

export * from "./ResultModel.js"

type Json = Record<string, unknown>

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)

/** Keys only vLLM's `bench serve` result carries (SGLang's have none of them). */
const VLLM_KEYS = ["total_token_throughput", "endpoint_type", "model_id", "tokenizer_id", "mean_e2el_ms"]
/** Keys only SGLang's `bench_serving` result carries. */
const SGLANG_KEYS = [
  "total_throughput",
  "mean_e2e_latency_ms",
  "total_output_tokens_retokenized",
  "total_output_retokenized",
  "dataset_name",
  "server_info"
]

/** The engine whose result this record is, by its keys; undefined when neither's. */
export const engineFormatOf = (record: Json): "vllm" | "sglang" | undefined => {
  if (!("output_throughput" in record)) return undefined
  if (VLLM_KEYS.some((k) => k in record)) return "vllm"
  if (SGLANG_KEYS.some((k) => k in record)) return "sglang"
  return undefined
}

const finite = (v: unknown): number | undefined =>
  typeof v === "number" && Number.isFinite(v) ? v : undefined

/**
 * The total token throughput SGLang's record implies when it has no `total_throughput`: (input +
 * output tokens) / duration, from `total_input`/`total_output` (sglang/benchmark/metrics.py's
 * BenchmarkMetrics) or `total_input_tokens`/`total_output_tokens` (the older
 * python/sglang/bench_serving.py record, which writes no `total_throughput`); undefined unless
 * both totals and a positive duration are there.
 */
const derivedTotalThroughput = (record: Json): number | undefined => {
  const input = finite(record.total_input) ?? finite(record.total_input_tokens)
  const output = finite(record.total_output) ?? finite(record.total_output_tokens)
  const duration = finite(record.duration)
  if (input === undefined || output === undefined || duration === undefined || duration <= 0) return undefined
  return (input + output) / duration
}

/**
 * The serving metrics (docs/design.md#results-and-metrics) of one record (SGLang's
 * `total_throughput` is the total token throughput; a record without it gets the one its totals and
 * duration give).
 */
export const metricsOf = (record: Json): Metrics => {
  const out: { [K in MetricKey]?: number } = {}
  for (const key of METRIC_KEYS) {
    const v = finite(record[key])
    if (v !== undefined) out[key] = v
  }
  if (out.total_token_throughput === undefined) {
    const total = finite(record.total_throughput) ?? derivedTotalThroughput(record)
    if (total !== undefined) out.total_token_throughput = total
  }
  // SGLang names the end-to-end latency in full (sglang/benchmark/metrics.py)
  for (const stat of ["mean", "median", "p99"] as const) {
    const key = `${stat}_e2el_ms` as const
    if (out[key] === undefined) {
      const v = finite(record[`${stat}_e2e_latency_ms`])
      if (v !== undefined) out[key] = v
    }
  }
  return out
}

/** The client's counts of one record (ClientCounts), each where present and finite. */
export const clientCountsOf = (record: Json): ClientCounts => {
  const out: { -readonly [K in keyof ClientCounts]: number } = {}
  const completed = finite(record.completed)
  const failed = finite(record.failed)
  const tokens = finite(record.total_output_tokens) ?? finite(record.total_output)
  const duration = finite(record.duration)
  if (completed !== undefined) out.completed = completed
  if (failed !== undefined) out.failed = failed
  if (tokens !== undefined) out.output_tokens = tokens
  if (duration !== undefined) out.duration_s = duration
  return out
}

const lengthsOf = (
  lens: unknown,
  total: number | undefined,
  completed: number | undefined
): LengthSummary | null => {
  const xs = Array.isArray(lens)
    ? lens.filter((x): x is number => typeof x === "number" && Number.isFinite(x))
    : []
  if (xs.length > 0) return { mean: mean(xs), p50: percentileLinear(xs, 50), p99: percentileLinear(xs, 99) }
  return total !== undefined && completed !== undefined && completed > 0 ? { mean: total / completed } : null
}

/**
 * What vLLM's or SGLang's client says it sent (docs/clients.md#the-workload-on-record): vLLM's
 * `num_prompts`, `request_rate`, `burstiness`, `max_concurrency` and, with `--save-detailed`, its
 * `input_lens`/`output_lens` (else the means of its totals); SGLang's `dataset_name`,
 * `request_rate`, `max_concurrency`, totals. The dataset vLLM does not record comes from its argv.
 */
const engineWorkloadOf = (record: Json, format: "vllm" | "sglang"): Workload => {
  const completed = finite(record.completed)
  const rate =
    record.request_rate === "inf" || record.request_rate === null ? "inf" : finite(record.request_rate)
  const burstiness = finite(record.burstiness)
  return {
    client: format === "vllm" ? "vllm bench serve" : "sglang bench_serving",
    client_version: null,
    dataset: typeof record.dataset_name === "string" ? record.dataset_name : null,
    input_tokens: lengthsOf(
      record.input_lens,
      finite(record.total_input_tokens) ?? finite(record.total_input),
      completed
    ),
    output_tokens: lengthsOf(
      record.output_lens,
      finite(record.total_output_tokens) ?? finite(record.total_output),
      completed
    ),
    rate: rate ?? null,
    concurrency: finite(record.max_concurrency) ?? null,
    arrival: rate === "inf" ? "burst" : burstiness === undefined || burstiness === 1 ? "poisson" : "gamma",
    burstiness: rate === "inf" ? null : (burstiness ?? (format === "sglang" ? 1 : null)),
    requests: finite(record.num_prompts) ?? null
  }
}

/** Metrics that count requests: whole numbers. */
const COUNT_KEYS: ReadonlySet<MetricKey> = new Set(["completed", "failed"])

const shown = (v: unknown): string =>
  v === null ? "NaN or infinite (null)" : (JSON.stringify(v) ?? String(v))

/**
 * Why a record's metrics cannot be a measurement (issue 27 item 2), naming the first field: a
 * metric of docs/design.md#results-and-metrics that is there but not a finite number (Python's
 * `NaN`/`Infinity`, read as null; a string), negative (no latency, throughput or count is), or a
 * count (`completed`) that is not a whole number; undefined when every metric present is possible.
 * Both engines' clients write 0, never NaN, for an empty list (`np.mean(tpots or 0)`), so NaN is
 * never theirs.
 */
export const invalidMetricOf = (record: Json): string | undefined => {
  for (const key of METRIC_KEYS) {
    if (!(key in record)) continue
    const v = record[key]
    if (typeof v !== "number" || !Number.isFinite(v)) return `${key} is ${shown(v)}, not a finite number`
    if (v < 0) return `${key} is ${v}, negative`
    if (COUNT_KEYS.has(key) && !Number.isInteger(v)) return `${key} is ${v}, not a whole number of requests`
  }
  return undefined
}

/** `invalidMetricOf` on metrics already read (finite numbers): negative values and fractional counts. */
export const impossibleMetricOf = (metrics: Metrics | null | undefined): string | undefined =>
  metrics == null ? undefined : invalidMetricOf(metrics as Json)

/**
 * Python's `json.dumps` writes the non-standard `Infinity`, `-Infinity` and `NaN` (SGLang's
 * `"request_rate": Infinity` when no rate is set): read them as null, as values only.
 */
const PYTHON_NON_FINITE = /([:[,]\s*)(?:-?Infinity|NaN)(?=\s*[,\]}])/g

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch (e) {
    const relaxed = text.replace(PYTHON_NON_FINITE, "$1null")
    if (relaxed === text) throw e
    return JSON.parse(relaxed)
  }
}

/** The JSON records of a text: one JSON value, or JSON lines (blank lines skipped); undefined if neither. */
const recordsOf = (text: string): Array<unknown> | undefined => {
  const trimmed = text.trim()
  if (trimmed === "") return undefined
  try {
    return [parseJson(trimmed)]
  } catch {
    // not one JSON value: maybe JSON lines
  }
  const out: Array<unknown> = []
  for (const line of trimmed.split("\n")) {
    if (line.trim() === "") continue
    try {
      out.push(parseJson(line))
    } catch {
      return undefined
    }
  }
  return out.length > 0 ? out : undefined
}

const invalidOf = (record: Json): { invalid?: string } => {
  const invalid = invalidMetricOf(record)
  return invalid === undefined ? {} : { invalid }
}

/** Where a result's text came from, and what lay beside it (AIPerf's per-request records). */
export interface ResultSource {
  /** How notes name the file (`result.json`, `runs/3/profile_export_aiperf.json`). */
  readonly file?: string | undefined
  /** AIPerf's `profile_export.jsonl` from the same folder. */
  readonly jsonl?: string | undefined
}

/**
 * Reads a result file's text. undefined means "no report": not JSON (nor JSON lines), or no record
 * of a known format. The last record of JSON lines is the result. A GuideLLM report or an AIPerf
 * export (ClientReports.ts) gives its benchmarks as `points`.
 */
export const parseResult = (text: string, source: ResultSource = {}): ParsedResult | undefined => {
  const records = recordsOf(text)
  if (records === undefined) return undefined
  const last = records[records.length - 1]
  if (records.length === 1 && isGuidellmReport(last)) return parseGuidellm(last, source.file)
  if (records.length === 1 && isAiperfExport(last)) {
    const file = source.file ?? "profile_export_aiperf.json"
    return parseAiperfRuns([{ doc: last, where: file, jsonl: source.jsonl }])
  }
  if (!isObject(last)) return undefined
  const engine = engineFormatOf(last)
  if (engine !== undefined) {
    return {
      format: engine,
      workload: engineWorkloadOf(last, engine),
      throughput: last.output_throughput,
      metrics: metricsOf(last),
      client: clientCountsOf(last),
      records: records.length,
      ...invalidOf(last)
    }
  }
  if ("throughput" in last) {
    return {
      format: "hyperloom",
      throughput: last.throughput,
      metrics: metricsOf(last),
      records: records.length,
      ...invalidOf(last)
    }
  }
  return undefined
}

/**
 * Whether an attempt's figures are a measurement a table or chart may show as a point
 * (docs/design.md#classified-from-what-happened: "a result with `completed` = 0 is never a
 * measurement"): its throughput (else the metrics' `output_throughput`) is a positive finite number
 * and its `completed`, where recorded, is not 0.
 */
export const isMeasurement = (
  throughput: number | null | undefined,
  metrics: Metrics | null | undefined
): boolean => {
  const value = throughput ?? metrics?.output_throughput
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) return false
  return metrics?.completed !== 0
}
