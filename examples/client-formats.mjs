/**
 * The report formats of two load clients, written by the stand-in client
 * (examples/fake-bench-client.mjs --format guidellm|aiperf) as the real tools write them
 * (docs/clients.md). Node, no dependencies.
 *
 * - GuideLLM's benchmark report (vllm-project/guidellm): `--report-version 0.3` writes the shape of
 *   GuideLLM before 0.4 (benchmark/benchmark.py: `args.strategy`, `request_totals`, `run_stats`,
 *   per-metric StatusDistributionSummary with `median` and percentiles p001…p999 but no p50);
 *   `0.7` (default) the shape of today's (benchmark/schemas/report.py `metadata.version` 2,
 *   `config`, benchmarks with `config.strategy`, `scheduler_metrics`, `metrics.request_totals`,
 *   `duration`). Per-request distributions are GuideLLM's: sorted unique values with summed
 *   weights, mean = Σ value × share, percentile q = the first value whose cumulative share reaches
 *   q; `time_per_output_token_ms` weighted by output tokens, `inter_token_latency_ms` by output
 *   tokens − 1. Its time-based distributions (requests_per_second, output_tokens_per_second, …)
 *   are written with their mean, count/duration, as every statistic: hyperloom reads none of them.
 * - AIPerf's artifact directory (ai-dynamo/aiperf): `profile_export_aiperf.json` (`--export-version
 *   0.1`: the metrics under `records` by tag, TTFT as `ttft`; `0.3`, default: the metrics at the
 *   top level, TTFT as `time_to_first_token`) and `profile_export.jsonl` (a record per request,
 *   `{"metadata", "metrics": {tag: {"value", "unit"}}, "error"}`); with several concurrencies, one
 *   folder per value (`concurrency_N/`, AIPerf's sweep layout). Aggregates are numpy's: mean, and
 *   percentiles by linear interpolation.
 */
import * as fs from "node:fs"
import * as path from "node:path"

// ---------------------------------------------------------------------------------------------
// Statistics, each as its tool computes it

const GUIDELLM_PERCENTILES = {
  p001: 0.001,
  p01: 0.01,
  p05: 0.05,
  p10: 0.1,
  p25: 0.25,
  p50: 0.5,
  p75: 0.75,
  p90: 0.9,
  p95: 0.95,
  p99: 0.99,
  p999: 0.999
}

/** GuideLLM's DistributionSummary.from_values (weights default to 1). */
export const guidellmDistribution = (values, weights, { legacy = false } = {}) => {
  const w = weights ?? values.map(() => 1)
  const byValue = new Map()
  values.forEach((v, i) => byValue.set(v, (byValue.get(v) ?? 0) + w[i]))
  const pairs = [...byValue.entries()].filter(([, x]) => x > 0).sort((a, b) => a[0] - b[0])
  const total = pairs.reduce((a, [, x]) => a + x, 0)
  const percentiles = {}
  if (pairs.length === 0) {
    for (const k of Object.keys(GUIDELLM_PERCENTILES)) if (!(legacy && k === "p50")) percentiles[k] = 0
    return {
      mean: 0,
      median: 0,
      mode: 0,
      variance: 0,
      std_dev: 0,
      min: 0,
      max: 0,
      count: 0,
      total_sum: 0,
      percentiles,
      [legacy ? "cumulative_distribution_function" : "pdf"]: null
    }
  }
  const probs = pairs.map(([, x]) => x / total)
  const cdf = []
  probs.reduce((acc, p, i) => ((cdf[i] = acc + p), acc + p), 0)
  const at = (q) => pairs[Math.min(pairs.length - 1, cdf.findIndex((c) => c >= q - 1e-12))][0]
  for (const [k, q] of Object.entries(GUIDELLM_PERCENTILES)) if (!(legacy && k === "p50")) percentiles[k] = at(q)
  const mean = pairs.reduce((a, [v], i) => a + v * probs[i], 0)
  const variance = pairs.reduce((a, [v], i) => a + (v - mean) ** 2 * probs[i], 0)
  const mode = pairs[probs.indexOf(Math.max(...probs))][0]
  const count = legacy ? values.length : Math.round(w.reduce((a, b) => a + b, 0))
  return {
    mean,
    median: at(0.5),
    mode,
    variance,
    std_dev: Math.sqrt(variance),
    min: pairs[0][0],
    max: pairs[pairs.length - 1][0],
    count,
    total_sum: legacy ? values.reduce((a, b) => a + b, 0) : mean * count,
    percentiles,
    [legacy ? "cumulative_distribution_function" : "pdf"]: null
  }
}

/** A time-based GuideLLM distribution, written with its mean (events / duration) only. */
const guidellmRate = (events, duration, legacy) => {
  const rate = duration > 0 ? events / duration : 0
  const d = guidellmDistribution(events > 0 ? [rate] : [], undefined, { legacy })
  return { ...d, count: events, total_sum: legacy ? rate : rate * events }
}

/** numpy's np.percentile (linear interpolation between closest ranks). */
export const linearPercentile = (xs, q) => {
  if (xs.length === 0) return 0
  const s = [...xs].sort((a, b) => a - b)
  const rank = (q / 100) * (s.length - 1)
  const lo = Math.floor(rank)
  const hi = Math.ceil(rank)
  return s[lo] + (s[hi] - s[lo]) * (rank - lo)
}
const avg = (xs) => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length)

// ---------------------------------------------------------------------------------------------
// GuideLLM

/**
 * A request as measured: epoch seconds `start`, `end`, `first`, `last` (first and last token),
 * `promptTokens`, `outputTokens`, and `error` (a string) when it failed.
 */
const guidellmRequestLegacy = (r, k) => ({
  type_: r.error === undefined ? "generative_text_response" : "generative_text_error",
  request_id: `req-${k}`,
  request_type: "text_completions",
  scheduler_info: { requested: true, completed: true, errored: r.error !== undefined, canceled: false },
  prompt: "",
  output: "",
  ...(r.error === undefined ? {} : { error: r.error }),
  prompt_tokens: r.promptTokens,
  output_tokens: r.outputTokens,
  start_time: r.start,
  end_time: r.end,
  first_token_time: r.first ?? null,
  last_token_time: r.last ?? null,
  request_latency: r.end - r.start,
  time_to_first_token_ms: r.first === undefined ? null : 1000 * (r.first - r.start),
  time_per_output_token_ms: r.outputTokens > 0 && r.first !== undefined ? (1000 * (r.last - r.first)) / r.outputTokens : 0,
  inter_token_latency_ms: r.outputTokens > 1 && r.first !== undefined ? (1000 * (r.last - r.first)) / (r.outputTokens - 1) : 0
})

const guidellmRequestModern = (r, k) => ({
  type_: "generative_request_stats",
  request_id: `req-${k}`,
  info: {
    timings: {
      request_start: r.start,
      request_end: r.end,
      resolve_end: r.end,
      first_token_iteration: r.first ?? null,
      last_token_iteration: r.last ?? null,
      token_iterations: r.outputTokens
    },
    error: r.error ?? null
  },
  input_metrics: { text_tokens: r.promptTokens, total_tokens: r.promptTokens },
  output_metrics: { text_tokens: r.outputTokens, total_tokens: r.outputTokens },
  request_start_time: r.start,
  request_end_time: r.end,
  request_latency: r.end - r.start,
  prompt_tokens: r.promptTokens,
  output_tokens: r.outputTokens,
  total_tokens: r.promptTokens + r.outputTokens,
  time_to_first_token_ms: r.first === undefined ? null : 1000 * (r.first - r.start),
  // 0.4 on: from the request's start, TTFT included
  time_per_output_token_ms: r.outputTokens > 0 && r.last !== undefined ? (1000 * (r.last - r.start)) / r.outputTokens : null,
  inter_token_latency_ms: r.outputTokens > 1 && r.first !== undefined ? (1000 * (r.last - r.first)) / (r.outputTokens - 1) : null
})

/** A StatusDistributionSummary of per-request values (`value(r)` or undefined to skip, `weight(r)`). */
const statusDistribution = (groups, value, weight, legacy) => {
  const one = (rs) => {
    const kept = rs.filter((r) => value(r) !== undefined)
    return guidellmDistribution(
      kept.map(value),
      weight === undefined ? undefined : kept.map(weight),
      { legacy }
    )
  }
  const all = [...groups.successful, ...groups.incomplete, ...groups.errored]
  return {
    successful: one(groups.successful),
    errored: one(groups.errored),
    incomplete: one(groups.incomplete),
    total: one(all)
  }
}

const rateDistribution = (groups, count, duration, legacy) => ({
  successful: guidellmRate(count(groups.successful), duration, legacy),
  errored: guidellmRate(count(groups.errored), duration, legacy),
  incomplete: guidellmRate(count(groups.incomplete), duration, legacy),
  total: guidellmRate(count([...groups.successful, ...groups.errored, ...groups.incomplete]), duration, legacy)
})

/**
 * One GuideLLM benchmark: `strategy` (e.g. `{type_: "concurrent", streams: 4}`), the requests
 * measured, `data` (its --data). `version`: "0.3" or "0.7".
 */
export const guidellmBenchmark = ({ strategy, requests, data, index, runId, version = "0.7", maxRequests }) => {
  const legacy = version === "0.3"
  const groups = {
    successful: requests.filter((r) => r.error === undefined),
    errored: requests.filter((r) => r.error !== undefined),
    incomplete: []
  }
  const start = Math.min(...requests.map((r) => r.start))
  const end = Math.max(...requests.map((r) => r.end))
  const duration = end - start
  const withOutput = (f) => (r) => (r.outputTokens > 0 && r.first !== undefined ? f(r) : undefined)
  const multi = (f) => (r) => (r.outputTokens > 1 && r.first !== undefined ? f(r) : undefined)
  const tpot = legacy
    ? (r) => (1000 * (r.last - r.first)) / r.outputTokens
    : (r) => (1000 * (r.last - r.start)) / r.outputTokens
  const metrics = {
    requests_per_second: rateDistribution(groups, (rs) => rs.length, duration, legacy),
    request_concurrency: rateDistribution(groups, (rs) => rs.length, duration, legacy),
    request_latency: statusDistribution(groups, (r) => r.end - r.start, undefined, legacy),
    prompt_token_count: statusDistribution(groups, (r) => r.promptTokens, undefined, legacy),
    output_token_count: statusDistribution(groups, withOutput((r) => r.outputTokens), undefined, legacy),
    time_to_first_token_ms: statusDistribution(groups, withOutput((r) => 1000 * (r.first - r.start)), undefined, legacy),
    time_per_output_token_ms: statusDistribution(groups, withOutput(tpot), (r) => r.outputTokens, legacy),
    inter_token_latency_ms: statusDistribution(
      groups,
      multi((r) => (1000 * (r.last - r.first)) / (r.outputTokens - 1)),
      (r) => r.outputTokens - 1,
      legacy
    ),
    output_tokens_per_second: rateDistribution(
      groups,
      (rs) => rs.reduce((a, r) => a + r.outputTokens, 0),
      duration,
      legacy
    ),
    tokens_per_second: rateDistribution(
      groups,
      (rs) => rs.reduce((a, r) => a + r.outputTokens + r.promptTokens, 0),
      duration,
      legacy
    )
  }
  const totals = {
    successful: groups.successful.length,
    errored: groups.errored.length,
    incomplete: 0,
    total: requests.length
  }
  if (legacy) {
    const asRecord = (rs, base) => rs.map((r, k) => guidellmRequestLegacy(r, base + k))
    return {
      type_: "generative_benchmark",
      id_: `${runId}-${index}`,
      run_id: runId,
      args: {
        profile: { type_: strategy.type_ },
        strategy_index: index,
        strategy,
        max_number: maxRequests ?? null,
        max_duration: null,
        warmup_number: null,
        warmup_duration: null,
        cooldown_number: null,
        cooldown_duration: null
      },
      run_stats: {
        start_time: start,
        end_time: end,
        requests_made: totals,
        queued_time_avg: 0,
        scheduled_time_delay_avg: 0,
        scheduled_time_sleep_avg: 0,
        worker_start_delay_avg: 0,
        worker_time_avg: 0,
        worker_start_time_targeted_delay_avg: 0,
        request_start_time_delay_avg: 0,
        request_start_time_targeted_delay_avg: 0,
        request_time_delay_avg: 0,
        request_time_avg: avg(requests.map((r) => r.end - r.start))
      },
      worker: { type_: "generative_requests_worker", backend_type: "openai_http" },
      request_loader: { type_: "generative_request_loader", data, data_args: null, processor: null, processor_args: null },
      extras: {},
      metrics,
      start_time: start,
      end_time: end,
      request_totals: totals,
      request_samples: null,
      requests: {
        successful: asRecord(groups.successful, 0),
        errored: asRecord(groups.errored, groups.successful.length),
        incomplete: [],
        total: null
      },
      duration
    }
  }
  const asRecord = (rs, base) => rs.map((r, k) => guidellmRequestModern(r, base + k))
  return {
    type_: "generative_benchmark",
    config: {
      id_: `${runId}-${index}`,
      run_id: runId,
      run_index: index,
      strategy,
      constraints: maxRequests === undefined ? {} : { max_requests: { max_num: maxRequests } },
      sample_size: null,
      profile: { type_: strategy.type_ },
      requests: { data: [data] },
      backend: { type_: "openai_http" },
      environment: {}
    },
    scheduler_state: {},
    scheduler_metrics: {
      start_time: start,
      request_start_time: start,
      measure_start_time: start,
      measure_end_time: end,
      request_end_time: end,
      end_time: end,
      requests_made: totals
    },
    metrics: { request_totals: totals, ...metrics },
    requests: {
      successful: asRecord(groups.successful, 0),
      incomplete: [],
      errored: asRecord(groups.errored, groups.successful.length),
      total: null
    },
    start_time: start,
    end_time: end,
    duration,
    warmup_duration: 0,
    cooldown_duration: 0
  }
}

/** A GuideLLM report of several benchmarks. */
export const guidellmReport = ({ benchmarks, data, version = "0.7" }) =>
  version === "0.3"
    ? { benchmarks }
    : {
        metadata: { version: 2, guidellm_version: "0.7.3", python_version: "3.12.0", platform: "Linux" },
        config: { data: [data] },
        benchmarks
      }

/** The strategy of one GuideLLM rate (--rate-type/--profile and one --rate value). */
export const guidellmStrategy = (profile, rate) => {
  switch (profile) {
    case "synchronous":
      return { type_: "synchronous" }
    case "concurrent":
      return { type_: "concurrent", streams: Number(rate) }
    case "throughput":
      return { type_: "throughput", max_concurrency: rate === undefined ? null : Number(rate) }
    case "poisson":
      return { type_: "poisson", rate: Number(rate), random_seed: 42 }
    default:
      return { type_: "constant", rate: Number(rate), initial_burst: true }
  }
}

// ---------------------------------------------------------------------------------------------
// AIPerf

const NS = 1e9

/** AIPerf's JsonMetricResult of a record metric (every percentile) or a derived one (avg only). */
const aiperfStats = (unit, xs) =>
  xs.length === 0
    ? null
    : {
        unit,
        avg: avg(xs),
        p1: linearPercentile(xs, 1),
        p5: linearPercentile(xs, 5),
        p10: linearPercentile(xs, 10),
        p25: linearPercentile(xs, 25),
        p50: linearPercentile(xs, 50),
        p75: linearPercentile(xs, 75),
        p90: linearPercentile(xs, 90),
        p95: linearPercentile(xs, 95),
        p99: linearPercentile(xs, 99),
        min: Math.min(...xs),
        max: Math.max(...xs),
        std: Math.sqrt(avg(xs.map((x) => (x - avg(xs)) ** 2)))
      }
const aiperfValue = (unit, v) => ({ unit, avg: v })

/**
 * One AIPerf run's files: `{json, jsonl}`. Requests as for GuideLLM, plus `chunks` (epoch seconds
 * of every streamed chunk). `loadgen`: AIPerf's input_config.loadgen (`concurrency`,
 * `request_rate`, `request_count`, `request_rate_mode`).
 */
export const aiperfRun = ({ requests, loadgen, prompt, version = "0.3", cli }) => {
  const ok = requests.filter((r) => r.error === undefined)
  const failed = requests.filter((r) => r.error !== undefined)
  const ms = (s) => s * 1000
  const ttft = ok.map((r) => ms(r.first - r.start))
  const latency = ok.map((r) => ms(r.end - r.start))
  const itl = ok.filter((r) => r.outputTokens > 1).map((r) => (ms(r.end - r.start) - ms(r.first - r.start)) / (r.outputTokens - 1))
  const icl = ok.flatMap((r) => r.chunks.slice(1).map((t, k) => ms(t - r.chunks[k])))
  const osl = ok.map((r) => r.outputTokens)
  const isl = ok.map((r) => r.promptTokens)
  const first = Math.min(...requests.map((r) => r.start))
  const last = Math.max(...ok.map((r) => r.end), first)
  const duration = last - first
  const metrics = {
    request_throughput: aiperfValue("requests/sec", ok.length / duration),
    request_latency: aiperfStats("ms", latency),
    request_count: ok.length === 0 ? null : aiperfValue("requests", ok.length),
    [version === "0.1" ? "ttft" : "time_to_first_token"]: aiperfStats("ms", ttft),
    inter_token_latency: aiperfStats("ms", itl),
    output_token_throughput: aiperfValue("tokens/sec", osl.reduce((a, b) => a + b, 0) / duration),
    output_sequence_length: aiperfStats("tokens", osl),
    input_sequence_length: aiperfStats("tokens", isl),
    inter_chunk_latency: aiperfStats("ms", icl),
    min_request_timestamp: aiperfValue("ns", first * NS),
    max_response_timestamp: aiperfValue("ns", last * NS),
    benchmark_duration: aiperfValue("sec", duration),
    total_isl: aiperfValue("tokens", isl.reduce((a, b) => a + b, 0)),
    total_osl: aiperfValue("tokens", osl.reduce((a, b) => a + b, 0)),
    error_request_count: failed.length === 0 ? null : aiperfValue("requests", failed.length)
  }
  const input_config = {
    endpoint: { model_names: ["stand-in"], type: "completions", streaming: true },
    input: { prompt },
    loadgen,
    cli_command: cli
  }
  const tail = {
    input_config,
    was_cancelled: false,
    error_summary:
      failed.length === 0 ? [] : [{ error_details: { code: 500, type: "RequestError", message: failed[0].error }, count: failed.length }],
    start_time: new Date(first * 1000).toISOString().replace("Z", ""),
    end_time: new Date(last * 1000).toISOString().replace("Z", "")
  }
  const json =
    version === "0.1"
      ? {
          records: Object.fromEntries(
            Object.entries(metrics)
              .filter(([, v]) => v !== null)
              .map(([tag, v]) => [tag, { tag, header: tag, count: 1, ...v }])
          ),
          ...tail
        }
      : { ...metrics, ...tail }
  const jsonl = requests
    .map((r, k) => {
      const metadata = {
        session_num: k,
        x_request_id: `req-${k}`,
        request_start_ns: Math.round(r.start * NS),
        request_end_ns: Math.round(r.end * NS),
        benchmark_phase: "profiling",
        was_cancelled: false
      }
      if (r.error !== undefined)
        return { metadata, metrics: { error_request_count: { value: 1, unit: "requests" } }, error: { code: 500, type: "RequestError", message: r.error } }
      const m = {
        input_sequence_length: { value: r.promptTokens, unit: "tokens" },
        output_sequence_length: { value: r.outputTokens, unit: "tokens" },
        [version === "0.1" ? "ttft" : "time_to_first_token"]: { value: ms(r.first - r.start), unit: "ms" },
        request_latency: { value: ms(r.end - r.start), unit: "ms" },
        inter_chunk_latency: { value: r.chunks.slice(1).map((t, k2) => ms(t - r.chunks[k2])), unit: "ms" }
      }
      if (r.outputTokens > 1)
        m.inter_token_latency = { value: (ms(r.end - r.start) - ms(r.first - r.start)) / (r.outputTokens - 1), unit: "ms" }
      return { metadata, metrics: m, error: null }
    })
    .map((x) => JSON.stringify(x))
    .join("\n")
  return { json, jsonl: `${jsonl}\n` }
}

/** Writes an AIPerf run into its artifact directory. */
export const writeAiperfRun = (dir, run) => {
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, "profile_export.jsonl"), run.jsonl)
  fs.writeFileSync(path.join(dir, "profile_export_aiperf.json"), JSON.stringify(run.json))
}

// ---------------------------------------------------------------------------------------------
// The stand-in's runs

/**
 * Sends `n` requests through `one` (fake-bench-client's request: it resolves to `{start, times,
 * tokens, promptTokens}` in performance.now() milliseconds) at a load: `concurrency` requests in
 * flight at most, arrivals at `rate` per second (`constant`: evenly spaced, `poisson`: exponential
 * gaps; no rate: all at once). Each request in epoch seconds, as the reports want them.
 */
export const runAt = async ({ one, n, concurrency, rate, arrival = "constant" }) => {
  const epoch = (t) => (performance.timeOrigin + t) / 1000
  const requests = []
  let slots = concurrency ?? n
  const queue = []
  const acquire = () => (slots > 0 ? (slots--, Promise.resolve()) : new Promise((resolve) => queue.push(resolve)))
  const release = () => {
    const next = queue.shift()
    if (next !== undefined) next()
    else slots++
  }
  let seed = 7
  const random = () => {
    seed = (seed * 16807) % 2147483647
    return seed / 2147483647
  }
  const tasks = []
  for (let k = 0; k < n; k++) {
    tasks.push(
      (async () => {
        await acquire()
        const sent = performance.now()
        try {
          const o = await one()
          requests.push({
            start: epoch(o.start),
            end: epoch(o.start + o.latency * 1000),
            first: epoch(o.times[0]),
            last: epoch(o.times[o.times.length - 1]),
            chunks: o.times.map(epoch),
            promptTokens: o.promptTokens,
            outputTokens: o.tokens
          })
        } catch (e) {
          const t = epoch(performance.now())
          requests.push({ start: epoch(sent), end: t, promptTokens: 0, outputTokens: 0, chunks: [], error: e.message })
        } finally {
          release()
        }
      })()
    )
    if (rate !== undefined && Number.isFinite(rate) && k < n - 1) {
      const gap = arrival === "poisson" ? -Math.log(1 - random()) / rate : 1 / rate
      await new Promise((resolve) => setTimeout(resolve, gap * 1000))
    }
  }
  await Promise.all(tasks)
  return requests
}

const list = (v) => String(v).split(",").filter((x) => x !== "")

/**
 * fake-bench-client --format guidellm: GuideLLM's command line (`--rate-type`/`--profile`
 * synchronous|concurrent|throughput|constant|poisson, `--rate` a comma list, `--max-requests`,
 * `--data`, `--output-path`), one benchmark per rate, the report at --output-path.
 */
export const runGuidellm = async ({ opt, one, resultFile }) => {
  const profile = opt("profile", opt("rate-type", "concurrent"))
  const rates = profile === "synchronous" ? [undefined] : list(opt("rate", "1"))
  const n = Number(opt("max-requests", "8"))
  const data = opt("data", "prompt_tokens=8,output_tokens=32")
  const version = opt("report-version", "0.7")
  const out = opt("output-path", resultFile)
  const benchmarks = []
  for (const [index, rate] of rates.entries()) {
    const strategy = guidellmStrategy(profile, rate)
    const requests = await runAt({
      one,
      n,
      concurrency: strategy.streams ?? strategy.max_concurrency ?? (profile === "synchronous" ? 1 : undefined),
      rate: strategy.rate,
      arrival: strategy.type_
    })
    console.log(`guidellm: benchmark ${index} ${strategy.type_}@${rate ?? 1}: ${requests.filter((r) => r.error === undefined).length}/${requests.length} ok`)
    benchmarks.push(guidellmBenchmark({ strategy, requests, data, index, runId: "stand-in", version, maxRequests: n }))
  }
  if (out !== "") fs.writeFileSync(out, JSON.stringify(guidellmReport({ benchmarks, data, version })))
}

/**
 * fake-bench-client --format aiperf: AIPerf's command line (`--concurrency` one value or a comma
 * list, `--request-rate`, `--request-count`, `--output-artifact-dir`, default the result file's
 * folder), its artifact directory; several concurrencies: a `concurrency_N/` folder each.
 */
export const runAiperf = async ({ opt, one, resultFile }) => {
  const concurrencies = list(opt("concurrency", ""))
  const rateArg = opt("request-rate", "")
  const n = Number(opt("request-count", "8"))
  const version = opt("export-version", "0.3")
  const dir = opt("output-artifact-dir", resultFile === "" ? "artifacts" : path.dirname(resultFile))
  const prompt = { input_tokens: { mean: Number(opt("synthetic-input-tokens-mean", "8")) }, output_tokens: { mean: Number(opt("output-tokens-mean", "32")) } }
  const values = concurrencies.length > 0 ? concurrencies : [undefined]
  for (const c of values) {
    const concurrency = c === undefined ? undefined : Number(c)
    const rate = rateArg === "" ? undefined : Number(rateArg)
    const requests = await runAt({ one, n, concurrency, rate, arrival: "poisson" })
    const loadgen = {
      ...(concurrency === undefined ? {} : { concurrency }),
      ...(rate === undefined ? {} : { request_rate: rate }),
      request_rate_mode: rate === undefined ? "concurrency_burst" : "poisson",
      request_count: n
    }
    console.log(`aiperf: concurrency ${concurrency ?? "-"}: ${requests.filter((r) => r.error === undefined).length}/${requests.length} ok`)
    const run = aiperfRun({ requests, loadgen, prompt, version, cli: `aiperf profile --concurrency ${concurrency ?? ""}` })
    writeAiperfRun(values.length > 1 ? path.join(dir, `concurrency_${concurrency}`) : dir, run)
  }
}
