import { Schema } from "effect"

/**
 * What the node reports about a measured run, for the validity checks to judge
 * (docs/design.md#samplers): the engine's effective configuration once per engine start, and what
 * the samplers saw during one client run (python/hyperloom/sampler.py writes both; this is their
 * schema on the TypeScript side). Nothing here is a verdict: only measurements and where they came
 * from. Every field the sampler could not fill is `null` (or absent in older records) and the reason
 * is in `not_checked`; a record written before the samplers existed has neither object.
 *
 * Field names are snake_case: they are written by Python into the runner's JSON files and kept
 * as written.
 */

/** Which engine the configuration came from; `unknown` when none of the sources answered. */
export const EngineKind = Schema.Literal("vllm", "sglang", "unknown")
export type EngineKind = typeof EngineKind.Type

/**
 * Where one effective value was read:
 * - `startup log`: vLLM's startup lines in the server's log: `non-default args: {...}`
 *   (vllm/entrypoints/utils.py `log_non_default_args`) and `Initializing a V1 LLM engine ... with
 *   config: model=..., max_seq_len=..., ...` (vllm/v1/engine/core.py, the VllmConfig's `__str__`);
 * - `/metrics vllm:cache_config_info`: the labels of vLLM's info gauge (vllm/v1/metrics/loggers.py
 *   `log_metrics_info("cache_config", ...)`: the CacheConfig's fields, num_gpu_blocks among them);
 * - `/get_server_info`: SGLang's server args as the scheduler adjusted them, and its scheduler info
 *   (sglang/srt/entrypoints/http_server.py `get_server_info`).
 */
export const ConfigSource = Schema.Literal(
  "startup log",
  "/metrics vllm:cache_config_info",
  "/get_server_info"
)
export type ConfigSource = typeof ConfigSource.Type

export const ConfigValue = Schema.Union(Schema.String, Schema.Number, Schema.Boolean, Schema.Null)
export type ConfigValue = typeof ConfigValue.Type

/**
 * The engine's effective configuration, read once per engine start after readiness (before the
 * first client run). `values` keys are the engine's own names as it reports them (`max_num_seqs`,
 * `max_running_requests`, `gpu_memory_utilization`, ...); compare a `--param` to a key with case,
 * `-` and `_` ignored. `sources[key]` says where each value came from (a key reported by two sources
 * keeps the later, more authoritative one: `/get_server_info` and `/metrics` over the startup log).
 */
export const EngineConfig = Schema.Struct({
  engine: EngineKind,
  values: Schema.Record({ key: Schema.String, value: ConfigValue }),
  sources: Schema.Record({ key: Schema.String, value: ConfigSource }),
  /** Why nothing (or not everything) was read: "no /metrics and no /get_server_info (HTTP 404)". */
  not_reported_reason: Schema.optional(Schema.String),
  /** Seconds after readiness the reading took (the three sources together). */
  read_s: Schema.optional(Schema.Number)
})
export type EngineConfig = typeof EngineConfig.Type

/**
 * The load client's CPU over the run: its whole process tree (the client and its children), from
 * the lease's cgroup (`cpu.stat` usage_usec) where there is one, else summed from /proc/PID/stat of
 * the tree. `cores_mean` = cpu_seconds / duration_s; `cores_max` the largest of the per-interval
 * rates (at most one interval per 2 s). With the cgroup the engine shares it: `source` says which,
 * and `includes_engine` whether the engine's own CPU is in the figure.
 */
export const ClientCpu = Schema.Struct({
  cores_mean: Schema.Number,
  cores_max: Schema.Number,
  cpu_seconds: Schema.Number,
  source: Schema.Literal("cgroup", "proc"),
  samples: Schema.optional(Schema.Number),
  includes_engine: Schema.optional(Schema.Boolean),
  /**
   * The share of the time the client's busiest thread wanted a CPU (ran, or waited on a run queue
   * for one: /proc/PID/task/TID/schedstat) between its first and last samples; absent on a run
   * shorter than a second or a kernel without schedstat.
   */
  busiest_thread_runnable: Schema.optional(Schema.Number)
})
export type ClientCpu = typeof ClientCpu.Type

/**
 * The engine's own view of the load, scraped from its Prometheus `/metrics` during the run (vLLM v1:
 * vllm/v1/metrics/loggers.py; SGLang: sglang/srt/metrics/collector.py), summed over every label
 * set (model, engine index, DP rank). Means are over the scrapes (at most one every 2 s); the
 * `_delta` counters are last scrape minus first (a scrape just before the client starts and one
 * just after it ends), `null` where the engine has no such counter.
 */
export const EngineLoad = Schema.Struct({
  /** `vllm` (`vllm:` names) or `sglang` (`sglang:` names). */
  source: Schema.Literal("vllm", "sglang"),
  /** How many scrapes answered during the run (the bracketing two included). */
  samples: Schema.Number,
  /** vllm:num_requests_running / sglang:num_running_reqs, mean over the scrapes taken while the client ran. */
  running_mean: Schema.Number,
  running_max: Schema.optional(Schema.Number),
  /** vllm:num_requests_waiting / sglang:num_queue_reqs. */
  waiting_mean: Schema.Number,
  waiting_max: Schema.optional(Schema.Number),
  /**
   * Requests the engine finished during the run: vllm:request_success_total summed over
   * finished_reason; SGLang: sglang:num_requests_total.
   */
  requests_total_delta: Schema.NullOr(Schema.Number),
  /** vllm:generation_tokens_total / sglang:generation_tokens_total. */
  generation_tokens_delta: Schema.NullOr(Schema.Number),
  /** vllm:prompt_tokens_total / sglang:prompt_tokens_total. */
  prompt_tokens_delta: Schema.NullOr(Schema.Number),
  /**
   * How the means were made: `latency sums` (the e2e-latency and queue-time histograms' sums over
   * the run ÷ duration_s: Little's law, exact) or `scrapes` (the gauges' mean over the scrapes).
   * Either way over the client's whole life, its start-up and its own warm-up request included.
   */
  means_from: Schema.optional(Schema.Literal("latency sums", "scrapes")),
  /**
   * The e2e-latency histogram's sum over the run (seconds; vllm:e2e_request_latency_seconds,
   * sglang:e2e_request_latency_seconds): divided by the client's own duration of its measured
   * part (its result's `duration`) it is the mean in flight while the client measured, its
   * start-up left out (what a real client's imports and tokenizer take: seconds).
   */
  e2e_latency_sum_delta: Schema.optional(Schema.NullOr(Schema.Number)),
  /** The queue-time histogram's sum over the run (seconds): ÷ a duration, the mean waiting. */
  queue_time_sum_delta: Schema.optional(Schema.NullOr(Schema.Number))
})
export type EngineLoad = typeof EngineLoad.Type

/** A process the vendor tool lists on a GPU (a compute context). */
export const GpuProcess = Schema.Struct({
  pid: Schema.Number,
  name: Schema.String,
  memory_mib: Schema.NullOr(Schema.Number),
  /**
   * Whether the pid is the lease's own (in its cgroup, or a descendant of its process group); `null`
   * when the sampler could not tell (a pid from another pid namespace, unreadable /proc).
   */
  in_lease: Schema.NullOr(Schema.Boolean)
})
export type GpuProcess = typeof GpuProcess.Type

/** One reading of one GPU: a field the tool does not give is `null`. */
export const GpuSample = Schema.Struct({
  /** Seconds since the run's sampling started. */
  t_s: Schema.Number,
  index: Schema.Number,
  uuid: Schema.optional(Schema.NullOr(Schema.String)),
  sm_clock_mhz: Schema.NullOr(Schema.Number),
  /**
   * Active throttle (NVIDIA "clocks event") reasons by the tool's own names, idle included when the
   * tool says so (`gpu_idle`, `sw_power_cap`, `hw_slowdown`, `sw_thermal_slowdown`, ...; amd-smi's
   * throttle status). Empty: none active.
   */
  throttle_reasons: Schema.Array(Schema.String),
  temperature_c: Schema.NullOr(Schema.Number),
  power_w: Schema.NullOr(Schema.Number),
  processes: Schema.Array(GpuProcess)
})
export type GpuSample = typeof GpuSample.Type

export const GpuSamples = Schema.Struct({
  tool: Schema.Literal("nvidia-smi", "amd-smi"),
  /** The lease's GPU indices the samples are of. */
  gpus: Schema.optional(Schema.Array(Schema.Number)),
  samples: Schema.Array(GpuSample)
})
export type GpuSamples = typeof GpuSamples.Type

/**
 * What the samplers saw during one client run (a baseline attempt, a sweep point's run). A sampler
 * that could not run leaves its field `null` and says why in `not_checked`
 * ("client CPU: no cgroup and /proc unreadable", "engine load: /metrics answered 404",
 * "GPUs: no nvidia-smi or amd-smi on PATH").
 */
export const Observations = Schema.Struct({
  /** Seconds from the client's start to its end, as the sampler timed it. */
  duration_s: Schema.Number,
  client_cpu: Schema.NullOr(ClientCpu),
  engine_load: Schema.NullOr(EngineLoad),
  gpus: Schema.NullOr(GpuSamples),
  not_checked: Schema.Array(Schema.String),
  /** The sampler's own CPU seconds over the run (its cost, measured). */
  sampler_cpu_s: Schema.optional(Schema.Number)
})
export type Observations = typeof Observations.Type

/**
 * The name the node's sampler is registered under (python/hyperloom/sampler.py NAME): a run's
 * `observations` from the runners are `{[SAMPLER_NAME]: Observations}`.
 */
export const SAMPLER_NAME = "validity"

export const decodeObservations = Schema.decodeUnknownEither(Observations)
export const decodeEngineConfig = Schema.decodeUnknownEither(EngineConfig)

/** `max-num-seqs`, `Max_Num_Seqs` and `max_num_seqs` are one key: lower case, `-` as `_`. */
export const configKey = (name: string): string => name.trim().toLowerCase().replaceAll("-", "_")

/** The reported value for a `--param` name (case, `-` and `_` ignored), with its source. */
export const reportedValue = (
  config: EngineConfig,
  param: string
):
  | { readonly key: string; readonly value: ConfigValue; readonly source: ConfigSource | undefined }
  | undefined => {
  const want = configKey(param.replace(/^-+/, ""))
  for (const [key, value] of Object.entries(config.values)) {
    if (configKey(key) === want) return { key, value, source: config.sources[key] }
  }
  return undefined
}
