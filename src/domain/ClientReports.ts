/**
 * The reports of the load clients that are not engines' own: GuideLLM's benchmark report and
 * AIPerf's `profile_export_aiperf.json` (docs/clients.md). Each of hyperloom's metrics has one
 * definition (docs/clients.md#one-definition-per-metric); a client's field feeds it only where the
 * field's formula (read in the tool's code) is that definition; otherwise the metric is computed
 * from the client's per-request records when the report holds all of them, or left out, and a note
 * says which and why. Pure: JSON in, data out.
 *
 * - GuideLLM (vllm-project/guidellm): `{"benchmarks": [...]}`, each benchmark with per-metric
 *   `StatusDistributionSummary`s (`successful`/`errored`/`incomplete`/`total`). Two shapes: before
 *   0.4 (`benchmark/benchmark.py`: `args.strategy`, `request_totals`, `request_loader`), and 0.4 on
 *   (`benchmark/schemas/…`: `config.strategy`, `metrics.request_totals`, `scheduler_metrics`; the
 *   report's `metadata.version` 1 or 2 from 0.5).
 * - AIPerf (ai-dynamo/aiperf): 0.1.x writes `{"records": {tag: {unit, avg, p50, p99, …}}}`, 0.3 on
 *   writes the tags at the top level (`common/models/export_models.py` JsonExportData); both carry
 *   `input_config` (the run's arguments). Its per-request `profile_export.jsonl`, when beside it,
 *   gives the records (`{"metadata", "metrics": {tag: {"value", "unit"}}, "error"?}`).
 */

import type {
  LengthSummary,
  MeasuredPoint,
  MetricKey,
  Metrics,
  ParsedResult,
  StatedLoad,
  Workload
} from "./ResultModel.js"
import { mean, percentileLinear } from "./Stats.js"

type Json = Record<string, unknown>

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)
const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined)
const obj = (v: unknown): Json | undefined => (isObject(v) ? v : undefined)
const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined)

/** The method hyperloom's own percentiles use (docs/clients.md#percentiles). */
export const HYPERLOOM_PERCENTILES = "linear interpolation between closest ranks (numpy's default)"

const setStats = (
  out: { [K in MetricKey]?: number },
  name: "ttft" | "tpot" | "itl" | "e2el",
  values: { mean?: number | undefined; median?: number | undefined; p99?: number | undefined }
) => {
  if (values.mean !== undefined) out[`mean_${name}_ms`] = values.mean
  if (values.median !== undefined) out[`median_${name}_ms`] = values.median
  if (values.p99 !== undefined) out[`p99_${name}_ms`] = values.p99
}

/** mean, median and p99 of per-request values, hyperloom's method. */
const ownStats = (xs: ReadonlyArray<number>) => ({
  mean: mean(xs),
  median: percentileLinear(xs, 50),
  p99: percentileLinear(xs, 99)
})

const throughputOf = (metrics: Metrics): number | undefined => metrics.output_throughput

// ---------------------------------------------------------------------------------------------
// GuideLLM

/** A report GuideLLM wrote: `benchmarks` whose entries are generative benchmarks. */
export const isGuidellmReport = (doc: unknown): doc is Json =>
  isObject(doc) &&
  Array.isArray(doc.benchmarks) &&
  doc.benchmarks.length > 0 &&
  doc.benchmarks.every(
    (b) =>
      isObject(b) &&
      (b.type_ === "generative_benchmark" || (isObject(b.metrics) && "request_latency" in b.metrics))
  )

const GUIDELLM_REPORT_VERSIONS = [1, 2]

/** A StatusDistributionSummary's `successful` part. */
const successfulOf = (metrics: Json, name: string): Json | undefined => obj(obj(metrics[name])?.successful)

/** The load a GuideLLM scheduling strategy states (`scheduler/strategies.py`; pre-0.4 `scheduler/strategy.py`). */
const guidellmLoad = (
  strategy: Json | undefined
): { load: StatedLoad | null; label: string; arrival: string | null } => {
  const type = str(strategy?.type_) ?? "unknown"
  const rate = num(strategy?.rate)
  const streams = num(strategy?.streams)
  const maxConcurrency = num(strategy?.max_concurrency)
  switch (type) {
    case "synchronous":
      return { load: { kind: "concurrency", value: 1 }, label: "synchronous", arrival: "closed" }
    case "concurrent":
      return streams === undefined
        ? { load: null, label: type, arrival: "closed" }
        : { load: { kind: "concurrency", value: streams }, label: `concurrent@${streams}`, arrival: "closed" }
    case "throughput":
      return maxConcurrency === undefined
        ? { load: { kind: "rate", value: "inf" }, label: "throughput", arrival: "burst" }
        : {
            load: { kind: "concurrency", value: maxConcurrency },
            label: `throughput@${maxConcurrency}`,
            arrival: "burst"
          }
    case "constant":
    case "poisson":
      return rate === undefined
        ? { load: null, label: type, arrival: type }
        : { load: { kind: "rate", value: rate }, label: `${type}@${rate.toFixed(2)}`, arrival: type }
    default:
      return { load: null, label: type, arrival: null }
  }
}

const lengthsOf = (summary: Json | undefined): LengthSummary | null => {
  const m = num(summary?.mean)
  if (m === undefined || num(summary?.count) === 0) return null
  return { mean: m, p50: num(summary?.median), p99: num(obj(summary?.percentiles)?.p99) }
}

/**
 * The per-request values of a GuideLLM record (pre-0.4 `GenerativeTextResponseStats`, 0.4 on
 * `GenerativeRequestStats`; both serialize their computed fields): latency (s), TTFT (ms), the
 * decode time per token after the first (ms: `inter_token_latency_ms`, (last − first token) /
 * (output tokens − 1) in both versions' code), output tokens.
 */
const guidellmRecord = (r: unknown) => {
  if (!isObject(r)) return undefined
  const out = num(r.output_tokens) ?? num(obj(r.output_metrics)?.total_tokens)
  return {
    latency: num(r.request_latency),
    ttft: num(r.time_to_first_token_ms),
    decode: num(r.inter_token_latency_ms),
    outputTokens: out
  }
}

const guidellmBenchmark = (
  b: Json,
  index: number,
  file: string,
  reportVersion: string | null
): MeasuredPoint => {
  const where = `benchmarks[${index}]`
  const at = `${file} ${where}`
  const notes: Array<string> = []
  const modern = isObject(b.config) || isObject(b.scheduler_metrics)
  const metricsDoc = obj(b.metrics) ?? {}
  const totals =
    obj(modern ? metricsDoc.request_totals : b.request_totals) ??
    obj(metricsDoc.request_totals) ??
    obj(b.request_totals)
  const strategy = obj(modern ? obj(b.config)?.strategy : obj(b.args)?.strategy) ?? obj(obj(b.args)?.strategy)
  const { load, label, arrival } = guidellmLoad(strategy)
  if (load === null) notes.push(`load: ${at}: its strategy (${label}) states no rate or concurrency`)
  const duration =
    num(b.duration) ??
    (num(b.end_time) !== undefined && num(b.start_time) !== undefined
      ? (b.end_time as number) - (b.start_time as number)
      : undefined)
  const successful = num(totals?.successful)
  const errored = num(totals?.errored) ?? 0
  const incomplete = num(totals?.incomplete) ?? 0
  const base = { where, label, load }
  if (successful === undefined || duration === undefined || !(duration > 0)) {
    const missing =
      successful === undefined ? (modern ? "metrics.request_totals" : "request_totals") : "duration"
    return {
      ...base,
      throughput: undefined,
      metrics: {},
      invalid: `${at}: a GuideLLM report of a version hyperloom does not know: no ${missing} (renamed?)${reportVersion === null ? "" : `; report metadata.version ${reportVersion}`}`,
      notes
    }
  }
  const out: { [K in MetricKey]?: number } = { completed: successful, failed: errored + incomplete }
  const outputTokens = successfulOf(metricsDoc, "output_token_count")
  const promptTokens = successfulOf(metricsDoc, "prompt_token_count")
  const outputSum = num(outputTokens?.total_sum)
  // completed requests / the benchmark's duration (first request's start to last's end): vLLM's
  // definition; GuideLLM's own requests_per_second is a time-weighted rate over its own window
  out.request_throughput = successful / duration
  if (outputSum !== undefined) {
    out.output_throughput = outputSum / duration
    const promptSum = num(promptTokens?.total_sum)
    if (promptSum !== undefined) out.total_token_throughput = (promptSum + outputSum) / duration
  } else if (successful > 0) {
    notes.push(`output_throughput: ${at}: metrics.output_token_count.successful.total_sum missing: left out`)
  }
  if (successful === 0) {
    notes.push(
      `${at}: no request succeeded (errored ${errored}, incomplete ${incomplete}): not a measurement`
    )
    return {
      ...base,
      throughput: 0,
      metrics: out,
      client: { completed: 0, failed: errored + incomplete, output_tokens: 0, duration_s: duration },
      notes
    }
  }
  const percentileNote = "GuideLLM's percentiles (the lowest value whose cumulative share reaches q)"
  const fromSummary = (name: string, scale: number) => {
    const s = successfulOf(metricsDoc, name)
    if (s === undefined) return undefined
    const m = num(s.mean)
    const med = num(s.median) ?? num(obj(s.percentiles)?.p50)
    const p99 = num(obj(s.percentiles)?.p99)
    return {
      mean: m === undefined ? undefined : m * scale,
      median: med === undefined ? undefined : med * scale,
      p99: p99 === undefined ? undefined : p99 * scale
    }
  }
  // Per-request records: only when the report holds every successful one (GuideLLM samples them)
  const records = obj(b.requests)?.successful
  const complete =
    Array.isArray(records) && records.length === successful
      ? records.map(guidellmRecord).filter((r) => r !== undefined)
      : undefined
  const kept = Array.isArray(records) ? records.length : 0

  // ttft, e2e: per-request values, unweighted in both versions: the definitions
  const ttft = fromSummary("time_to_first_token_ms", 1)
  if (ttft === undefined) notes.push(`ttft: ${at}: metrics.time_to_first_token_ms missing: left out`)
  else setStats(out, "ttft", ttft)
  const e2e = fromSummary("request_latency", 1000)
  if (e2e === undefined) notes.push(`e2e: ${at}: metrics.request_latency missing: left out`)
  else setStats(out, "e2el", e2e)

  // tpot: the mean over requests of (last − first token) / (output tokens − 1). GuideLLM's
  // inter_token_latency_ms is that per request, but its distribution is weighted by output
  // tokens − 1: equal to the definition only when every output length is the same.
  const uniform = num(outputTokens?.min) !== undefined && num(outputTokens?.min) === num(outputTokens?.max)
  const fromRecords = complete?.filter((r) => r.decode !== undefined && (r.outputTokens ?? 0) > 1)
  if (complete !== undefined && fromRecords !== undefined && fromRecords.length > 0) {
    setStats(out, "tpot", ownStats(fromRecords.map((r) => r.decode as number)))
    notes.push(
      `tpot: computed from ${where}'s ${fromRecords.length} per-request records (inter_token_latency_ms, unweighted); percentiles: ${HYPERLOOM_PERCENTILES}`
    )
  } else if (uniform) {
    const itl = fromSummary("inter_token_latency_ms", 1)
    if (itl === undefined) notes.push(`tpot: ${at}: metrics.inter_token_latency_ms missing: left out`)
    else {
      setStats(out, "tpot", itl)
      notes.push(
        `tpot: from inter_token_latency_ms (every output ${num(outputTokens?.min)} tokens, so its token weights are equal); percentiles: ${percentileNote}`
      )
    }
  } else {
    notes.push(
      `tpot: left out: ${at}'s inter_token_latency_ms is weighted by output tokens and the lengths differ (${num(outputTokens?.min)}–${num(outputTokens?.max)}); its requests.successful keeps ${kept} of ${successful} records`
    )
  }
  notes.push(
    `itl: left out: GuideLLM records no per-chunk times (its inter_token_latency_ms is a per-request average, tpot's definition)`
  )
  notes.push(`ttft, e2e: percentiles: ${percentileNote}`)
  return {
    ...base,
    throughput: throughputOf(out),
    metrics: out,
    client: {
      completed: successful,
      failed: errored + incomplete,
      output_tokens: outputSum,
      duration_s: duration
    },
    notes,
    workload: {
      client: "guidellm",
      client_version: null,
      dataset: null,
      input_tokens: lengthsOf(promptTokens),
      output_tokens: lengthsOf(outputTokens),
      rate: load?.kind === "rate" ? load.value : null,
      concurrency:
        load?.kind === "concurrency" ? (load.value as number) : (num(strategy?.max_concurrency) ?? null),
      arrival,
      burstiness: arrival === "poisson" ? 1 : null,
      requests: num(totals?.total) ?? successful + errored + incomplete
    }
  }
}

/** The dataset a GuideLLM report names (pre-0.4 `request_loader.data`; 0.4 on `args.data`/`config.data`). */
const guidellmDataset = (doc: Json, b: Json | undefined): string | null => {
  const data = obj(b?.request_loader)?.data ?? obj(doc.args)?.data ?? obj(doc.config)?.data
  if (typeof data === "string") return data
  if (Array.isArray(data) && data.length > 0)
    return data.map((d) => (typeof d === "string" ? d : JSON.stringify(d))).join(",")
  return null
}

export const parseGuidellm = (doc: Json, file = "the result file"): ParsedResult => {
  const benchmarks = doc.benchmarks as Array<Json>
  const metadata = obj(doc.metadata)
  const versionNo = num(metadata?.version)
  const reportVersion = versionNo === undefined ? null : String(versionNo)
  const notes: Array<string> = []
  if (versionNo !== undefined && !GUIDELLM_REPORT_VERSIONS.includes(versionNo))
    notes.push(
      `${file}: GuideLLM report metadata.version ${versionNo} is one hyperloom does not know (known: ${GUIDELLM_REPORT_VERSIONS.join(", ")}); read where its fields match`
    )
  const clientVersion = str(metadata?.guidellm_version) ?? null
  const points = benchmarks.map((b, i) => {
    const p = guidellmBenchmark(b, i, file, reportVersion)
    return p.workload === undefined
      ? p
      : { ...p, workload: { ...p.workload, client_version: clientVersion, dataset: guidellmDataset(doc, b) } }
  })
  return fromPoints("guidellm", points, notes)
}

// ---------------------------------------------------------------------------------------------
// AIPerf

/** AIPerf's names of a metric, newest first (0.1.x `ttft`/`ttst`, 0.3 on the full names). */
const AIPERF_TAGS = {
  request_count: ["request_count"],
  error_request_count: ["error_request_count"],
  request_throughput: ["request_throughput"],
  output_token_throughput: ["output_token_throughput"],
  benchmark_duration: ["benchmark_duration"],
  total_isl: ["total_isl"],
  total_osl: ["total_osl"],
  ttft: ["time_to_first_token", "ttft"],
  inter_token_latency: ["inter_token_latency"],
  inter_chunk_latency: ["inter_chunk_latency"],
  request_latency: ["request_latency"],
  input_sequence_length: ["input_sequence_length"],
  output_sequence_length: ["output_sequence_length"]
} as const
type AiperfMetric = keyof typeof AIPERF_TAGS

/** The metrics of an AIPerf export: its `records` (0.1.x) or the document itself (0.3 on). */
const aiperfMetricsOf = (doc: Json): Json => obj(doc.records) ?? doc

const AIPERF_KNOWN = ["request_count", "request_throughput", "time_to_first_token", "ttft", "request_latency"]

/** An AIPerf export: its run's `input_config` and at least one of its metrics (or its version). */
export const isAiperfExport = (doc: unknown): doc is Json =>
  isObject(doc) &&
  (typeof doc.aiperf_version === "string" ||
    (isObject(doc.input_config) &&
      (isObject(doc.records) || AIPERF_KNOWN.some((k) => isObject(doc[k])) || "was_cancelled" in doc)))

interface AiperfRecord {
  readonly ok: boolean
  readonly values: Readonly<Record<string, unknown>>
}

/** The records of `profile_export.jsonl` (lines that are not JSON objects are skipped). */
export const aiperfRecordsOf = (jsonl: string): ReadonlyArray<AiperfRecord> => {
  const out: Array<AiperfRecord> = []
  for (const line of jsonl.split("\n")) {
    if (line.trim() === "") continue
    let r: unknown
    try {
      r = JSON.parse(line)
    } catch {
      continue
    }
    if (!isObject(r) || !isObject(r.metrics)) continue
    const values: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(r.metrics)) if (isObject(v)) values[k] = v.value
    out.push({ ok: r.error === undefined || r.error === null, values })
  }
  return out
}

const aiperfLoad = (
  config: Json | undefined
): { load: StatedLoad | null; label: string; arrival: string | null } => {
  const loadgen = obj(config?.loadgen)
  const rate = num(loadgen?.request_rate)
  const concurrency = num(loadgen?.concurrency)
  const mode = str(loadgen?.request_rate_mode) ?? str(loadgen?.arrival_pattern) ?? null
  if (rate !== undefined)
    return { load: { kind: "rate", value: rate }, label: `request rate ${rate}`, arrival: mode }
  if (concurrency !== undefined)
    return {
      load: { kind: "concurrency", value: concurrency },
      label: `concurrency ${concurrency}`,
      arrival: mode
    }
  return { load: null, label: "aiperf", arrival: mode }
}

/** One AIPerf run: its export (and its per-request records when beside it). */
export const parseAiperfRun = (
  doc: Json,
  file = "profile_export_aiperf.json",
  jsonl?: string,
  where = "profile_export_aiperf.json"
): MeasuredPoint => {
  const metricsDoc = aiperfMetricsOf(doc)
  const notes: Array<string> = []
  const tagOf = (m: AiperfMetric) => AIPERF_TAGS[m].find((t) => isObject(metricsDoc[t]))
  const get = (m: AiperfMetric): Json | undefined => {
    const tag = tagOf(m)
    return tag === undefined ? undefined : obj(metricsDoc[tag])
  }
  const config = obj(doc.input_config)
  const { load, label, arrival } = aiperfLoad(config)
  if (load === null) notes.push(`load: ${file}: input_config.loadgen states no concurrency or request_rate`)
  const base = { where, label, load }
  const completed = num(get("request_count")?.avg)
  const errors = num(get("error_request_count")?.avg) ?? 0
  const records = jsonl === undefined ? undefined : aiperfRecordsOf(jsonl)
  if (completed === undefined) {
    if (errors > 0 || (records !== undefined && records.length > 0 && records.every((r) => !r.ok))) {
      notes.push(`${file}: no request succeeded (error_request_count ${errors}): not a measurement`)
      return { ...base, throughput: 0, metrics: { completed: 0, failed: errors }, notes }
    }
    return {
      ...base,
      throughput: undefined,
      metrics: {},
      invalid: `${file}: an AIPerf export of a version hyperloom does not know: no request_count (renamed?)`,
      notes
    }
  }
  const out: { [K in MetricKey]?: number } = { completed, failed: errors }
  // request_throughput = valid requests / (last response − first request), output_token_throughput
  // = every generated token (reasoning included) / the same duration: vLLM's definitions
  const rt = num(get("request_throughput")?.avg)
  const ot = num(get("output_token_throughput")?.avg)
  const duration = num(get("benchmark_duration")?.avg)
  if (rt !== undefined) out.request_throughput = rt
  else if (duration !== undefined && duration > 0) out.request_throughput = completed / duration
  else notes.push(`request_throughput: ${file}: request_throughput missing: left out`)
  if (ot !== undefined) out.output_throughput = ot
  else notes.push(`output_throughput: ${file}: output_token_throughput missing: left out`)
  const isl = num(get("total_isl")?.avg)
  const osl = num(get("total_osl")?.avg)
  if (isl !== undefined && osl !== undefined && duration !== undefined && duration > 0)
    out.total_token_throughput = (isl + osl) / duration
  const okRecords = records?.filter((r) => r.ok)
  const recordsComplete = okRecords !== undefined && okRecords.length === completed
  const stat = (
    name: "ttft" | "tpot" | "itl" | "e2el",
    m: AiperfMetric,
    perRequest: (r: AiperfRecord) => ReadonlyArray<number>
  ) => {
    const s = get(m)
    if (s !== undefined && num(s.avg) !== undefined) {
      setStats(out, name, { mean: num(s.avg), median: num(s.p50), p99: num(s.p99) })
      return
    }
    if (recordsComplete) {
      const xs = okRecords.flatMap(perRequest)
      if (xs.length > 0) {
        setStats(out, name, ownStats(xs))
        notes.push(
          `${name}: ${file} has no ${AIPERF_TAGS[m][0]}: computed from the ${okRecords.length} records of profile_export.jsonl; percentiles: ${HYPERLOOM_PERCENTILES}`
        )
        return
      }
    }
    notes.push(
      `${name}: left out: ${file} has no ${AIPERF_TAGS[m][0]}${records === undefined ? " and no profile_export.jsonl beside it" : ` and profile_export.jsonl holds ${okRecords?.length ?? 0} of its ${completed} requests`}`
    )
  }
  const values = (r: AiperfRecord, m: AiperfMetric): ReadonlyArray<number> => {
    for (const t of AIPERF_TAGS[m]) {
      const v = r.values[t]
      if (typeof v === "number" && Number.isFinite(v)) return [v]
      if (Array.isArray(v)) return v.filter((x): x is number => typeof x === "number" && Number.isFinite(x))
    }
    return []
  }
  stat("ttft", "ttft", (r) => values(r, "ttft"))
  // inter_token_latency = (request latency − TTFT) / (output tokens − 1) per request: vLLM's TPOT
  stat("tpot", "inter_token_latency", (r) => values(r, "inter_token_latency"))
  // inter_chunk_latency = every gap between consecutive chunks, pooled: vLLM's ITL
  stat("itl", "inter_chunk_latency", (r) => values(r, "inter_chunk_latency"))
  stat("e2el", "request_latency", (r) => values(r, "request_latency"))
  const prompt = obj(obj(config?.input)?.prompt)
  const loadgen = obj(config?.loadgen)
  const file_ = obj(config?.input)?.file
  const customDataset =
    str(obj(config?.input)?.custom_dataset_type) ?? str(obj(config?.input)?.public_dataset)
  const lengths = (m: AiperfMetric): LengthSummary | null => {
    const s = get(m)
    const avg = num(s?.avg)
    return avg === undefined ? null : { mean: avg, p50: num(s?.p50), p99: num(s?.p99) }
  }
  return {
    ...base,
    throughput: out.output_throughput,
    metrics: out,
    client: { completed, failed: errors, output_tokens: osl, duration_s: duration },
    notes,
    workload: {
      client: "aiperf",
      client_version: str(doc.aiperf_version) ?? null,
      dataset:
        str(file_) ??
        customDataset ??
        (isObject(prompt)
          ? `synthetic ${JSON.stringify({ input_tokens: prompt.input_tokens ?? null, output_tokens: prompt.output_tokens ?? null })}`
          : null),
      input_tokens: lengths("input_sequence_length"),
      output_tokens: lengths("output_sequence_length"),
      rate: load?.kind === "rate" ? load.value : null,
      concurrency: num(loadgen?.concurrency) ?? null,
      arrival,
      burstiness: null,
      requests: num(loadgen?.request_count) ?? null
    }
  }
}

/** Several AIPerf runs (an artifact directory's runs, one per folder) as one result, a point each. */
export const parseAiperfRuns = (
  runs: ReadonlyArray<{ readonly doc: Json; readonly where: string; readonly jsonl?: string | undefined }>
): ParsedResult | undefined =>
  runs.length === 0
    ? undefined
    : fromPoints(
        "aiperf",
        runs.map((r) => parseAiperfRun(r.doc, r.where, r.jsonl, r.where)),
        []
      )

// ---------------------------------------------------------------------------------------------

/** A result of points: the last point's figures stand for the whole when one result is asked. */
const fromPoints = (
  format: "guidellm" | "aiperf",
  points: ReadonlyArray<MeasuredPoint>,
  notes: ReadonlyArray<string>
): ParsedResult => {
  const last = points[points.length - 1]!
  const many =
    points.length > 1
      ? [
          `the report holds ${points.length} benchmarks (${points.map((p) => p.label).join(", ")}); as one result its last (${last.label}) counts; a sweep takes each as a point at its load`
        ]
      : []
  return {
    format,
    throughput: last.throughput,
    metrics: last.metrics,
    client: last.client,
    records: points.length,
    ...(last.invalid === undefined ? {} : { invalid: last.invalid }),
    notes: [...notes, ...many, ...last.notes],
    workload: last.workload,
    load: last.load,
    points
  }
}

// ---------------------------------------------------------------------------------------------
// The dataset named in a client's arguments

/** The options that name a dataset, in each client's spelling (vLLM, SGLang, GuideLLM, AIPerf). */
const DATASET_PATH_OPTIONS = ["--dataset-path", "--data", "--input-file", "--dataset"]
const DATASET_NAME_OPTIONS = ["--dataset-name", "--public-dataset", "--custom-dataset-type"]

const optionValue = (argv: ReadonlyArray<string>, names: ReadonlyArray<string>): string | undefined => {
  for (const [i, a] of argv.entries()) {
    for (const n of names) {
      if (a === n && i + 1 < argv.length) return argv[i + 1]
      if (a.startsWith(`${n}=`)) return a.slice(n.length + 1)
    }
  }
  return undefined
}

/**
 * The workload completed from the client's arguments: the dataset the report does not name
 * (vLLM's result has none: `--dataset-path`, else `--dataset-name`); and the paths that may be a
 * local dataset file, to be sized and hashed (`--dataset-path`, GuideLLM's `--data`, AIPerf's
 * `--input-file`).
 */
export const workloadWithArgv = (
  workload: Workload,
  argv: ReadonlyArray<string>
): { readonly workload: Workload; readonly datasetPaths: ReadonlyArray<string> } => {
  const path = optionValue(argv, DATASET_PATH_OPTIONS)
  const name = optionValue(argv, DATASET_NAME_OPTIONS)
  const dataset = workload.dataset ?? path ?? name ?? null
  return {
    workload: { ...workload, dataset },
    datasetPaths: [
      ...new Set([path, workload.dataset].filter((p): p is string => p !== undefined && p !== null))
    ]
  }
}
