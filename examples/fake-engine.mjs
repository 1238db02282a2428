#!/usr/bin/env node
/**
 * A stand-in serving engine (Node, no dependencies): an OpenAI-compatible HTTP server shaped like
 * `vllm serve` / SGLang's `launch_server`, so a whole serving baseline runs on a machine without
 * GPUs. It answers
 *   GET  /health            200 once "loaded" (503 before)
 *   GET  /v1/models         {"object":"list","data":[{"id":MODEL,...}]}
 *   POST /v1/completions    {"prompt","max_tokens","stream","stream_options"}: streams `data: {...}`
 *                            chunks (one token each) shaped as vLLM's (vllm/entrypoints/openai/
 *                            serving_completion.py), then, ONLY when the request sets
 *                            stream_options.include_usage (as vLLM's and SGLang's servers), the
 *                            usage-only chunk {"choices": [], "usage": …}, then `data: [DONE]`
 *   POST /generate          SGLang's native API ({"text","sampling_params":{"max_new_tokens"},
 *                            "stream"}): `data: {"text": <all text so far>, "meta_info":
 *                            {"completion_tokens", …}}` per token, then `data: [DONE]`, as
 *                            sglang/srt/entrypoints/http_server.py; one JSON object unstreamed
 *   GET  /get_model_info    as SGLang's (model_path, tokenizer_path, is_generation)
 *   GET  /get_server_info   as SGLang's (http_server.py: the server args, the scheduler info and
 *                            `internal_states`, one dict per DP rank: its last_gen_throughput and
 *                            memory_usage; avg_spec_accept_length only with speculative decoding,
 *                            so absent here). SGLang's bench_serving reads
 *                            `["internal_states"][0].get("avg_spec_accept_length")` after every
 *                            run of its sglang/sglang-oai backends: without the list it dies
 *                            with KeyError: 'internal_states'
 *   POST /flush_cache       SGLang's cache flush (bench_serving --flush-cache): 200
 *   POST /reset_prefix_cache, /reset_mm_cache, /reset_encoder_cache   vLLM's cache resets (what
 *                            `vllm bench sweep` posts after every run): 200, and, as in vLLM,
 *                            served only when VLLM_SERVER_DEV_MODE=1 (404 otherwise)
 *   POST /start_profile, /stop_profile   both clients' --profile: 200
 *   GET  /metrics           Prometheus text, as the face's engine writes it (--api): vLLM v1's
 *                            (vllm/v1/metrics/loggers.py PrometheusStatLogger: labels model_name and
 *                            engine) vllm:num_requests_running, vllm:num_requests_waiting,
 *                            vllm:kv_cache_usage_perc, vllm:prompt_tokens_total,
 *                            vllm:generation_tokens_total, vllm:request_success_total{finished_reason=
 *                            "stop"|"length"|"abort"}, the histograms vllm:e2e_request_latency_seconds
 *                            and vllm:request_queue_time_seconds (their _sum and _count, one +Inf
 *                            bucket), and the info gauge vllm:cache_config_info whose
 *                            labels are the CacheConfig's fields as str() (vllm/config/cache.py
 *                            `metrics_info`: "True", "None", "0.9", num_gpu_blocks …); SGLang's
 *                            (sglang/srt/metrics/collector.py, served only with --enable-metrics, as
 *                            SGLang does) sglang:num_running_reqs, sglang:num_queue_reqs (labels
 *                            model_name, engine_type, tp_rank, pp_rank), sglang:prompt_tokens_total,
 *                            sglang:generation_tokens_total, sglang:num_requests_total,
 *                            sglang:num_aborted_requests_total, sglang:e2e_request_latency_seconds,
 *                            sglang:queue_time_seconds
 *
 * --api vllm (default) or sglang: which engine the stand-in shows in its startup lines and
 * /metrics (/get_server_info is served by both, for SGLang's client). vLLM's startup lines:
 * "non-default args: {...}" (vllm/entrypoints/utils.py `log_non_default_args`: what was ASKED),
 * "Initializing a V1 LLM engine (vX) with config: model=..., max_seq_len=..., quantization=...,
 * kv_cache_dtype=..." (vllm/v1/engine/core.py, VllmConfig.__str__: what runs; the stand-in's line
 * also names max_num_seqs, which real vLLM's does not), "Chunked prefill is enabled with
 * max_num_batched_tokens=N.", "GPU KV cache size: N tokens", "Maximum concurrency for L tokens per
 * request: X.XXx". SGLang's: "server_args=ServerArgs(...)" and the scheduler's
 * "max_total_num_tokens=..., chunked_prefill_size=..., max_prefill_tokens=...,
 * max_running_requests=..., context_len=..." line; its /get_server_info gives the server args at
 * the top level (max_running_requests as asked) and, per DP rank in internal_states,
 * effective_max_running_requests_per_dp: what the scheduler runs (sglang/srt/managers/
 * tp_worker.py lowers it to what the KV cache's request pool holds).
 *
 * Validity failure modes (engine-model.mjs's header; a sweep's --server can carry them):
 *   --fail=capped      a batch limit whose KV cache does not fit is silently lowered to what does
 *                      (asked --max-num-seqs 64 with --max-model-len 12000 runs 45) and reported so
 *                      (the startup line, /get_server_info), instead of failing at start
 *   --fail=wrong-fast  (= --quantization fp8) every step 0.75 as long, and the known prompts
 *                      (engine-model.mjs KNOWN_PROMPTS; examples/known-answers.mjs asks them) get
 *                      wrong answers
 *   --fail=cold-start  (= --cold-requests 8) the first 8 requests after start take 3 × as long
 *                      per step (--cold-factor F)
 *
 *   node examples/fake-engine.mjs [--port P] [--model NAME] [--load-sec S]
 *        [--max-num-seqs N] [--max-model-len N] [--gpu-memory-utilization F]
 *        [--max-num-batched-tokens M] [--decode-ms MS] [--decode-ms-per-seq MS] [--kv-tokens N]
 *        [--queue-ms MS] [--token-rate R] [--slowdown F] [--noise CV] [--seed N]
 *        [--fail=kv-oom-vllm|kv-oom-sglang|arg-error|crash-after-ready|crash-mid-stream|capped|
 *               wrong-fast|cold-start] [--never-ready] [--api vllm|sglang] [--enable-metrics]
 *        [--quantization fp8] [--cold-requests N] [--cold-factor F]
 *
 * Its speed is the performance model of examples/engine-model.mjs (read its header): at most
 * --max-num-seqs requests run at once (SGLang's --max-running-requests works too), the rest wait
 * in a FIFO queue (past the limit the throughput plateaus and the wait shows in TTFT); each running
 * request gets one token per step of decode-ms + decode-ms-per-seq × (requests running) ms, its
 * first after ceil(prompt tokens / --max-num-batched-tokens) steps (its prompt's chunks); with
 * --queue-ms (default 0) a request that had to wait (or that joins a batch still paying it) waits
 * that much more, holding its slot, before its first token; a batch limit × --max-model-len over
 * the KV-cache budget (--gpu-memory-utilization × --kv-tokens, less 8 tokens per batched token
 * above 8192) fails at start with vLLM's own
 * "KV cache is needed, which is larger than the available KV cache memory" ValueError on stderr,
 * exit 1. `--token-rate R` (older flag) is a fixed step of 1000 / R ms.
 *
 * For comparing two runs (`hyperloom compare`): `--slowdown F` makes every step F times as long
 * (F = 1/0.9: throughput 10 % lower); `--noise CV [--seed N]` draws a factor 1 + CV·z (z standard
 * normal, from a generator seeded with N, default 1) for each request admitted, which scales that
 * request's steps: run-to-run noise that is the same on every start of the engine.
 *
 * The port is --port, else $HYPERLOOM_PORT, else 8000. Logs go to stdout like the engines' own.
 * Failure modes print what the real engines print (messages from their public sources; see
 * test/fixtures/serving/README.md) and exit:
 *   kv-oom-vllm     vLLM's engine core: "ValueError: No available memory for the cache blocks. …",
 *                   then the API server's "RuntimeError: Engine core initialization failed. See root
 *                   cause above" traceback; exit 1
 *   kv-oom-sglang   SGLang: "RuntimeError: Not enough memory. Please try to increase
 *                   --mem-fraction-static."; exit 1
 *   arg-error       argparse: "vllm serve: error: unrecognized arguments: …"; exit 2
 *   crash-after-ready  serves, then dies with exit 1 when the second completion request arrives
 *   crash-mid-stream   serves the first request, then dies with exit 1 after the third token of a
 *                   later one: open streams break off without [DONE], as when a real engine dies
 *   --never-ready   listens, but /health answers 503 forever
 * SIGTERM: logs "Shutting down" and exits 0.
 */
import { readFileSync } from "node:fs"
import * as http from "node:http"
import { fileURLToPath } from "node:url"
import { answerFor, effective, kvFailure, kvTokensAvailable, modelFlags, prefillSteps, stepMs } from "./engine-model.mjs"

const args = process.argv.slice(2)
if (args.includes("--help") || args.includes("-h")) {
  const header = readFileSync(fileURLToPath(import.meta.url), "utf8").split("\n")
  const end = header.findIndex((l) => l.trim() === "*/")
  console.log("usage: fake-engine.mjs [options]   (a stand-in vLLM / SGLang server)")
  for (const l of header.slice(2, end)) console.log(l.replace(/^ \* ?/, "  "))
  process.exit(0)
}
const opt = (name, fallback) => {
  const hit = args.find((a) => a === `--${name}` || a.startsWith(`--${name}=`))
  if (hit === undefined) return fallback
  if (hit.includes("=")) return hit.slice(hit.indexOf("=") + 1)
  const v = args[args.indexOf(hit) + 1]
  return v === undefined || v.startsWith("--") ? "" : v
}
const port = Number(opt("port", process.env.HYPERLOOM_PORT ?? "8000"))
const model = opt("model", "fake/stand-in-7b")
const loadSec = Number(opt("load-sec", "1"))
let settings
try {
  settings = modelFlags(args)
} catch (e) {
  console.error("usage: vllm serve [model_tag] [options]")
  console.error(`vllm serve: error: ${e.message}`)
  process.exit(2)
}
const fail = opt("fail", "")
const api = opt("api", "vllm")
if (api !== "vllm" && api !== "sglang") {
  console.error(`vllm serve: error: argument --api: invalid choice: '${api}' (choose from 'vllm', 'sglang')`)
  process.exit(2)
}
const metricsOn = api === "vllm" || args.includes("--enable-metrics")
/** What the engine runs (capped mode lowers the batch limit to what its KV cache holds). */
const running_ = effective(settings)
const factorOpt = (name, fallback, ok) => {
  const text = opt(name, fallback)
  const v = Number(text)
  if (text === "" || !Number.isFinite(v) || !ok(v)) {
    console.error(`vllm serve: error: argument --${name}: invalid value: '${text}'`)
    process.exit(2)
  }
  return v
}
const slowdown = factorOpt("slowdown", "1", (v) => v > 0)
const noiseCv = factorOpt("noise", "0", (v) => v >= 0 && v < 1)
// mulberry32 seeded by --seed, Box–Muller for the normal draw: the same noise on every start
let seedState = factorOpt("seed", "1", Number.isInteger) >>> 0
const uniform = () => {
  seedState = (seedState + 0x6d2b79f5) >>> 0
  let t = seedState
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
const stepFactor = () =>
  noiseCv === 0
    ? slowdown
    : slowdown *
      Math.max(0.05, 1 + noiseCv * Math.sqrt(-2 * Math.log(1 - uniform())) * Math.cos(2 * Math.PI * uniform()))
const neverReady = args.includes("--never-ready")

const ts = () => {
  const d = new Date()
  const p = (n) => String(n).padStart(2, "0")
  return `${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`
}
const info = (where, msg) => console.log(`INFO ${ts()} [${where}] ${msg}`)

const VERSION = "0.10.1.stand-in"
const pyValue = (v) => (typeof v === "string" ? `'${v}'` : v === true ? "True" : v === false ? "False" : v === null ? "None" : String(v))
/** The engine argv's --flags as vLLM's log_non_default_args prints them: a Python dict of what was asked. */
const asked = () => {
  const out = [`'model_tag': '${model}'`]
  for (let i = 0; i < args.length; i++) {
    if (!args[i].startsWith("--") || args[i] === "--api" || args[i].startsWith("--api=")) continue
    const eq = args[i].indexOf("=")
    const key = (eq < 0 ? args[i].slice(2) : args[i].slice(2, eq)).replaceAll("-", "_")
    let v = eq < 0 ? args[i + 1] : args[i].slice(eq + 1)
    if (eq < 0 && (v === undefined || v.startsWith("--"))) v = true
    else if (eq < 0) i++
    out.push(`'${key}': ${typeof v === "string" && v !== "" && Number.isFinite(Number(v)) ? v : pyValue(v)}`)
  }
  return `{${out.join(", ")}}`
}
const kvTokens = kvTokensAvailable(running_)
if (api === "vllm") {
  info("api_server.py", `vLLM API server version ${VERSION}`)
  info("utils.py", `non-default args: ${asked()}`)
  info(
    "core.py",
    `Initializing a V1 LLM engine (v${VERSION}) with config: model='${model}', speculative_config=None, tokenizer='${model}', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, tokenizer_revision=None, trust_remote_code=False, dtype=torch.bfloat16, max_seq_len=${running_.maxModelLen}, download_dir=None, load_format=auto, tensor_parallel_size=1, pipeline_parallel_size=1, data_parallel_size=1, disable_custom_all_reduce=False, quantization=${running_.quantization === "" ? "None" : running_.quantization}, enforce_eager=False, kv_cache_dtype=auto, device_config=cuda, max_num_seqs=${running_.maxNumSeqs}, seed=0, served_model_name=${model}, enable_prefix_caching=True, chunked_prefill_enabled=True, pooler_config=None, compilation_config={"level":3,"cudagraph_capture_sizes":[${Math.min(512, running_.maxNumSeqs)},1],"max_capture_size":${Math.min(512, running_.maxNumSeqs)}}`
  )
  info("scheduler.py", `Chunked prefill is enabled with max_num_batched_tokens=${running_.maxNumBatchedTokens}.`)
} else {
  console.log(
    `[${new Date().toISOString()}] server_args=ServerArgs(model_path='${model}', tokenizer_path='${model}', host='127.0.0.1', port=${port}, mem_fraction_static=${settings.gpuMemoryUtilization}, max_running_requests=${settings.maxNumSeqs}, chunked_prefill_size=${settings.maxNumBatchedTokens}, context_length=${settings.maxModelLen}, quantization=${pyValue(settings.quantization === "" ? null : settings.quantization)}, tp_size=1, dp_size=1, enable_metrics=${pyValue(metricsOn)})`
  )
}

const vllmKvOom = () => {
  const pid = process.pid + 1
  const ec = (line) => `(EngineCore_DP0 pid=${pid}) ${line}`
  const lines = [
    ec(`INFO ${ts()} [gpu_model_runner.py:1347] Model loading took 13.5 GiB and 11.2 seconds`),
    ec(`INFO ${ts()} [gpu_worker.py:276] Available KV cache memory: -0.62 GiB`),
    ec(`ERROR ${ts()} [core.py:708] EngineCore failed to start.`),
    ec(`ERROR ${ts()} [core.py:708] Traceback (most recent call last):`),
    ec(
      `ERROR ${ts()} [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 699, in run_engine_core`
    ),
    ec(`ERROR ${ts()} [core.py:708]     engine_core = EngineCoreProc(*args, **kwargs)`),
    ec(
      `ERROR ${ts()} [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 254, in _initialize_kv_caches`
    ),
    ec(`ERROR ${ts()} [core.py:708]     kv_cache_configs = get_kv_cache_configs(`),
    ec(
      `ERROR ${ts()} [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py", line 616, in _check_enough_kv_cache_memory`
    ),
    ec(`ERROR ${ts()} [core.py:708]     raise ValueError(`),
    ec(
      `ERROR ${ts()} [core.py:708] ValueError: No available memory for the cache blocks. Try increasing \`gpu_memory_utilization\` when initializing the engine.`
    ),
    "Traceback (most recent call last):",
    '  File "/usr/local/bin/vllm", line 10, in <module>',
    "    sys.exit(main())"
  ]
  // the API server's long traceback that ends every engine start failure the same way
  for (let i = 0; i < 40; i++) {
    lines.push(
      `  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/api_server.py", line ${1500 + i}, in build_async_engine_client_from_engine_args`
    )
    lines.push("    async with build_async_engine_client_from_engine_args(")
  }
  lines.push(
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}"
  )
  for (const l of lines) console.log(l)
}

const sglangKvOom = () => {
  console.log(`[${new Date().toISOString()} TP0] Load weight end. type=LlamaForCausalLM, mem usage=14.99 GB.`)
  console.log(`[${new Date().toISOString()} TP0] Scheduler hit an exception: Traceback (most recent call last):`)
  console.log(
    '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/pool_configurator.py", line 41, in __post_init__'
  )
  console.log("    raise RuntimeError(msg)")
  console.log(
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.3"
  )
  console.log(`[${new Date().toISOString()}] Received sigquit from a child process. It usually means the child failed.`)
}

const kvLines = ["", "capped", "wrong-fast", "cold-start"].includes(fail) ? kvFailure(settings) : undefined

if (kvLines !== undefined) {
  setTimeout(
    () => {
      for (const l of kvLines) console.error(l)
      process.exit(1)
    },
    Math.min(loadSec, 1) * 1000
  )
} else if (fail === "kv-oom-vllm" || fail === "kv-oom-sglang" || fail === "arg-error") {
  setTimeout(
    () => {
      if (fail === "kv-oom-vllm") vllmKvOom()
      else if (fail === "kv-oom-sglang") sglangKvOom()
      else {
        console.error("usage: vllm serve [model_tag] [options]")
        console.error("vllm serve: error: unrecognized arguments: --gpu-memory-utilisation 0.9")
      }
      process.exit(fail === "arg-error" ? 2 : 1)
    },
    fail === "arg-error" ? 200 : Math.min(loadSec, 1) * 1000
  )
} else {
  if (api === "vllm") {
    const ec = (where, msg) => console.log(`(EngineCore_DP0 pid=${process.pid}) INFO ${ts()} [${where}] ${msg}`)
    ec("gpu_worker.py:276", `Available KV cache memory: ${((kvTokens * 131072) / 2 ** 30).toFixed(2)} GiB`)
    ec("kv_cache_utils.py:1087", `GPU KV cache size: ${kvTokens.toLocaleString("en-US")} tokens`)
    ec(
      "kv_cache_utils.py:1091",
      `Maximum concurrency for ${running_.maxModelLen.toLocaleString("en-US")} tokens per request: ${(kvTokens / running_.maxModelLen).toFixed(2)}x`
    )
  } else {
    console.log(
      `[${new Date().toISOString()}] max_total_num_tokens=${kvTokens}, chunked_prefill_size=${running_.maxNumBatchedTokens}, max_prefill_tokens=16384, max_running_requests=${running_.maxNumSeqs}, context_len=${running_.maxModelLen}, available_gpu_mem=12.34 GB`
    )
  }
  let ready = false
  let served = 0
  let tokensOut = 0
  // the engine's own counters, as its /metrics shows them
  let promptTokensTotal = 0
  const finished = { stop: 0, length: 0, abort: 0 }
  let generationTokensTotal = 0
  // the sums of the e2e-latency and queue-time histograms (seconds), over finished requests
  const latency = { count: 0, e2e: 0, queue: 0 }
  let admitted = 0
  const createdAt = Date.now() / 1000
  const num = (v) => (Number.isInteger(v) ? `${v}.0` : String(v))
  const esc = (v) => String(v).replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n")
  const labels = (o) => `{${Object.entries(o).map(([k, v]) => `${k}="${esc(v)}"`).join(",")}}`
  const family = (name, type, help, samples) =>
    [`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, ...samples.map(([suffix, l, v]) => `${name}${suffix}${labels(l)} ${num(v)}`)].join("\n")
  const counter = (name, help, series) =>
    family(name, "counter", help, series.flatMap(([l, v]) => [["_total", l, v], ["_created", l, createdAt]]))
  const gauge = (name, help, series) => family(name, "gauge", help, series.map(([l, v]) => ["", l, v]))
  /** A histogram with only its +Inf bucket (the sampler reads its _sum; the buckets are the engines'). */
  const histogram = (name, help, l, sum) =>
    family(name, "histogram", help, [
      ["_bucket", { ...l, le: "+Inf" }, latency.count],
      ["_count", l, latency.count],
      ["_sum", l, sum]
    ])
  /** The Prometheus text of the face's engine (see the header), from the scheduler's own state. */
  const metricsText = () => {
    const open = waiting.filter((j) => !j.closed).length
    if (api === "vllm") {
      const l = { model_name: model, engine: "0" }
      // vllm/config/cache.py CacheConfig fields, str() of each, as metrics_info() gives them
      const cache = {
        block_size: "16",
        gpu_memory_utilization: String(settings.gpuMemoryUtilization),
        swap_space: "4",
        cache_dtype: "auto",
        is_attention_free: "False",
        num_gpu_blocks_override: "None",
        sliding_window: "None",
        enable_prefix_caching: "True",
        prefix_caching_hash_algo: "sha256",
        cpu_offload_gb: "0",
        calculate_kv_scales: "False",
        num_gpu_blocks: String(Math.floor(kvTokens / 16)),
        num_cpu_blocks: "None",
        engine: "0"
      }
      return `${[
        gauge("vllm:num_requests_running", "Number of requests in model execution batches.", [[l, running]]),
        gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", [[l, open]]),
        gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", [
          [l, Math.min(1, (running * running_.maxModelLen) / Math.max(1, kvTokens))]
        ]),
        counter("vllm:prompt_tokens", "Number of prefill tokens processed.", [[l, promptTokensTotal]]),
        counter("vllm:generation_tokens", "Number of generation tokens processed.", [[l, generationTokensTotal]]),
        counter(
          "vllm:request_success",
          "Count of successfully processed requests.",
          ["stop", "length", "abort"].map((r) => [{ ...l, finished_reason: r }, finished[r]])
        ),
        histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", l, latency.e2e),
        histogram(
          "vllm:request_queue_time_seconds",
          "Histogram of time spent in WAITING phase for request.",
          l,
          latency.queue
        ),
        gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", [[cache, 1]])
      ].join("\n")}\n`
    }
    const l = { model_name: model, engine_type: "unified", tp_rank: "0", pp_rank: "0" }
    const t = { model_name: model }
    return `${[
      gauge("sglang:num_running_reqs", "The number of running requests.", [[l, running]]),
      gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", [[l, open]]),
      counter("sglang:prompt_tokens", "Number of prefill tokens processed.", [[t, promptTokensTotal]]),
      counter("sglang:generation_tokens", "Number of generation tokens processed.", [[t, generationTokensTotal]]),
      counter("sglang:num_requests", "Number of requests processed.", [[t, finished.length + finished.stop]]),
      counter("sglang:num_aborted_requests", "Number of requests aborted.", [[t, finished.abort]]),
      histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", t, latency.e2e),
      histogram("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", t, latency.queue)
    ].join("\n")}\n`
  }
  const startedAt = performance.now()
  // The scheduler (engine-model.mjs): at most maxNumSeqs running, the rest in one FIFO queue; a
  // request that waited pays queueMs once admitted, and so does one that joins it meanwhile.
  let running = 0
  const waiting = []
  let payingUntil = 0
  const admit = () => {
    while (running < running_.maxNumSeqs && waiting.length > 0) {
      const job = waiting.shift()
      if (!job.closed) start(job)
    }
  }
  // One request's tokens: one per step of stepMs(running), on a drift-free schedule (each due time
  // from the last due time, not from when the timer fired), so timer lateness does not add up.
  const start = (job) => {
    running++
    admitted++
    job.admittedAt = performance.now()
    promptTokensTotal += job.p
    const factor = stepFactor() * (admitted <= running_.coldRequests ? running_.coldFactor : 1)
    let due = performance.now()
    if (settings.queueMs > 0 && (job.waited || due < payingUntil)) {
      due += settings.queueMs
      payingUntil = Math.max(payingUntil, due)
    }
    let i = 0
    const finish = () => {
      if (job.done) return
      job.done = true
      running--
      if (i >= job.n) finished.length++
      else finished.abort++
      latency.count++
      latency.e2e += (performance.now() - job.arrived) / 1000
      latency.queue += (job.admittedAt - job.arrived) / 1000
      admit()
    }
    job.release = finish
    const tick = () => {
      if (job.closed) return finish()
      i++
      generationTokensTotal++
      job.token(i)
      if (i >= job.n) {
        finish()
        return
      }
      due += stepMs(running_, running) * factor
      job.timer = setTimeout(tick, Math.max(0, due - performance.now()))
    }
    // the prompt's chunks: its first token comes after the last one's step
    for (let chunk = prefillSteps(running_, job.p); chunk > 0; chunk--) due += stepMs(running_, running) * factor
    job.timer = setTimeout(tick, Math.max(0, due - performance.now()))
  }
  const enqueue = (job) => {
    job.arrived = performance.now()
    job.waited = running >= running_.maxNumSeqs
    waiting.push(job)
    admit()
  }
  const promptTokens = (prompt) =>
    Array.isArray(prompt)
      ? Math.max(1, prompt.length)
      : Math.max(1, String(prompt ?? "").split(/\s+/).filter((w) => w !== "").length)
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x")
    if (req.method === "GET" && url.pathname === "/health") {
      res.writeHead(ready ? 200 : 503).end()
      return
    }
    if (req.method === "GET" && url.pathname === "/v1/models") {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ object: "list", data: [{ id: model, object: "model", owned_by: "hyperloom" }] }))
      return
    }
    if (req.method === "GET" && url.pathname === "/get_model_info") {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ model_path: model, tokenizer_path: model, is_generation: true }))
      return
    }
    if (req.method === "GET" && url.pathname === "/get_server_info") {
      const upSec = Math.max(1e-3, (performance.now() - startedAt) / 1000)
      // SGLang's: the server args at the top level (max_running_requests as asked), the
      // scheduler's info, and one internal state per DP rank (its own copy of the server args,
      // its last_gen_throughput and memory_usage, and what its scheduler runs; no
      // avg_spec_accept_length: no speculative decoding here)
      const serverArgs = {
        model_path: model,
        tokenizer_path: model,
        host: "127.0.0.1",
        port,
        max_running_requests: settings.maxNumSeqs,
        chunked_prefill_size: settings.maxNumBatchedTokens,
        context_length: settings.maxModelLen,
        mem_fraction_static: settings.gpuMemoryUtilization,
        quantization: settings.quantization === "" ? null : settings.quantization,
        kv_cache_dtype: "auto",
        tp_size: 1,
        dp_size: 1,
        enable_dp_attention: false,
        enable_metrics: metricsOn
      }
      res.writeHead(200, { "content-type": "application/json" })
      res.end(
        JSON.stringify({
          ...serverArgs,
          status: "ready",
          max_total_num_tokens: kvTokens,
          max_req_input_len: running_.maxModelLen - 6,
          internal_states: [
            {
              ...serverArgs,
              last_gen_throughput: tokensOut / upSec,
              memory_usage: { weight: 0, kvcache: 0, token_capacity: kvTokens, graph: 0 },
              effective_max_running_requests_per_dp: running_.maxNumSeqs
            }
          ],
          version: "stand-in"
        })
      )
      return
    }
    if (req.method === "GET" && url.pathname === "/metrics" && metricsOn) {
      res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" })
      res.end(metricsText())
      return
    }
    if (req.method === "POST" && url.pathname === "/flush_cache") {
      res.writeHead(200, { "content-type": "text/plain" }).end("Cache flushed.\n")
      return
    }
    if (
      req.method === "POST" &&
      ["/reset_prefix_cache", "/reset_mm_cache", "/reset_encoder_cache"].includes(url.pathname)
    ) {
      res.writeHead(process.env.VLLM_SERVER_DEV_MODE === "1" ? 200 : 404).end()
      return
    }
    if (req.method === "POST" && (url.pathname === "/start_profile" || url.pathname === "/stop_profile")) {
      res.writeHead(200).end()
      return
    }
    const native = url.pathname === "/generate"
    if ((req.method === "POST" || (native && req.method === "PUT")) && (native || url.pathname === "/v1/completions")) {
      let body = ""
      req.on("data", (c) => {
        body += c
      })
      req.on("end", () => {
        let spec = {}
        try {
          spec = JSON.parse(body)
        } catch {
          res.writeHead(400).end()
          return
        }
        const maxTokens = native ? spec.sampling_params?.max_new_tokens : spec.max_tokens
        const n = Math.max(1, Math.min(4096, Number(maxTokens ?? 16)))
        const p = promptTokens(native ? (spec.text ?? spec.input_ids) : spec.prompt)
        // a known prompt's first token is its answer (right, or wrong under --quantization fp8)
        const first = answerFor(running_, native ? spec.text : spec.prompt) ?? " tok"
        const textSoFar = (i) => (i <= 0 ? "" : first + " tok".repeat(i - 1))
        served++
        info("logger.py", `Received request cmpl-${served}: max_tokens=${n}`)
        if (fail === "crash-after-ready" && served > 1) {
          console.log("ERROR: CUDA error: an illegal memory access was encountered")
          process.exit(1)
        }
        const id = native ? `${served.toString(16).padStart(32, "0")}` : `cmpl-${served}`
        const created = Math.floor(Date.now() / 1000)
        const usage = { prompt_tokens: p, total_tokens: p + n, completion_tokens: n, prompt_tokens_details: null }
        const job = { n, p, closed: false, done: false, timer: undefined, release: undefined, token: () => {} }
        res.on("close", () => {
          job.closed = true
          clearTimeout(job.timer)
          job.release?.()
        })
        // SGLang's /generate object (tokenizer_manager's output): all text so far, and meta_info.
        const generated = (i) => ({
          text: textSoFar(i),
          output_ids: Array.from({ length: i }, (_, k) => 1000 + k),
          meta_info: {
            id,
            finish_reason: i === n ? { type: "length", length: n } : null,
            prompt_tokens: p,
            completion_tokens: i,
            cached_tokens: 0
          }
        })
        // vLLM's CompletionStreamResponse (model_dump_json: every field, usage null on token chunks).
        const chunk = (choices, u) => ({ id, object: "text_completion", created, model, choices, usage: u })
        const choice = (text, i) => ({
          index: 0,
          text,
          logprobs: null,
          finish_reason: i === n ? "length" : null,
          stop_reason: null
        })
        if (spec.stream !== true && !(spec.stream === undefined && !native)) {
          // not streamed (SGLang's default for /generate; `"stream": false` on /v1/completions)
          job.token = (i) => {
            if (i < n) return
            res.writeHead(200, { "content-type": "application/json" })
            res.end(
              JSON.stringify(native ? generated(n) : { ...chunk([choice(textSoFar(n), n)], usage), usage })
            )
          }
          enqueue(job)
          return
        }
        const includeUsage = !native && spec.stream_options?.include_usage === true
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
        job.token = (i) => {
          tokensOut++
          if (fail === "crash-mid-stream" && served > 1 && i === 3) {
            console.log("ERROR: CUDA error: an illegal memory access was encountered")
            process.exit(1)
          }
          res.write(`data: ${JSON.stringify(native ? generated(i) : chunk([choice(i === 1 ? first : " tok", i)], null))}\n\n`)
          if (i < n) return
          if (includeUsage) res.write(`data: ${JSON.stringify(chunk([], usage))}\n\n`)
          res.end("data: [DONE]\n\n")
        }
        enqueue(job)
      })
      return
    }
    res.writeHead(404).end()
  })
  server.listen(port, "127.0.0.1", () => {
    info("launcher.py", `Starting vLLM-compatible API server on http://127.0.0.1:${port}`)
  })
  if (!neverReady) {
    setTimeout(() => {
      ready = true
      info("api_server.py", "Application startup complete.")
    }, loadSec * 1000)
  } else {
    let t = 0
    setInterval(() => info("gpu_model_runner.py", `Loading safetensors checkpoint shards: ${++t}/999`), 1000)
  }
  const stop = () => {
    info("launcher.py", "Shutting down FastAPI HTTP server.")
    server.close()
    process.exit(0)
  }
  process.on("SIGTERM", stop)
  process.on("SIGINT", stop)
}
