#!/usr/bin/env node
/**
 * A stand-in load client (Node, no dependencies) shaped like `vllm bench serve`: it fetches the
 * model from GET /v1/models, sends --num-prompts streaming completions (--max-concurrency at a
 * time, --output-len tokens each) to /v1/completions, measures TTFT, TPOT and ITL per request, prints
 * vLLM's "Serving Benchmark Result" block and writes the result file:
 *
 *   node examples/fake-bench-client.mjs [--base-url URL] [--num-prompts N] [--max-concurrency C]
 *        [--request-rate R] [--input-len T] [--output-len T] [--result-filename FILE]
 *        [--format vllm|sglang|guidellm|aiperf] [--backend sglang|sglang-oai|vllm]
 *
 * As vLLM's client: --max-concurrency C bounds the requests in flight (a semaphore; default: no
 * bound), --request-rate R sends requests at Poisson arrivals of R per second (`inf`, the default:
 * all at once, so the semaphore alone paces them); vLLM's --random-input-len / --random-output-len
 * are accepted for --input-len / --output-len (prompts are T words).
 *
 * --format vllm (default) behaves as `vllm bench serve`: asks for the usage chunk
 * (stream_options.include_usage), raises "Initial test run failed - …" when its first request
 * fails, and when the engine dies during the run it still exits 0 and writes a result with
 * completed 0 (as vLLM's does). --format sglang behaves as SGLang's bench_serving: --backend
 * sglang (default: the native /generate) or sglang-oai / vllm (/v1/completions, no stream_options,
 * choices[0].text read on every event), "Warmup failed - …" on a failed first request, and after
 * the run GET /get_server_info, which raises ConnectionError (exit 1, no result) when the engine
 * died.
 *
 * Validity failure modes (the load client misbehaving in the ways hyperloom's checks catch):
 *   --fail=cpu-bound   burns --burn-ms MS (default 25) of CPU, really, on its one thread for every
 *                      token event it reads: the client saturates a core (what the lease's CPU
 *                      sampler sees) and, reading slowly, keeps fewer requests in flight than asked
 *   --fail=drop        abandons every --drop-every K-th request (default 10) after its first
 *                      token (the engine sees the request aborted) and counts it failed
 *   --fail=overcount   reports --overcount F (default 1.25) times the output tokens it received
 *                      (its totals and throughputs; the engine's counter says otherwise)
 *
 * --base-url defaults to $HYPERLOOM_BASE_URL; --result-filename to $HYPERLOOM_RESULT_FILE.
 * --format vllm (default) writes the JSON object of `vllm bench serve --save-result` (same keys as
 * vllm/benchmarks/serve.py); --format sglang appends one JSON line like SGLang's
 * `bench_serving --output-file` (sglang/benchmark/metrics.py `save_results`). --format guidellm and
 * --format aiperf take those clients' own load arguments and write their reports
 * (examples/client-formats.mjs): GuideLLM's report at --output-path (one benchmark per --rate),
 * AIPerf's artifact directory at --output-artifact-dir (a folder per --concurrency value).
 */
import * as fs from "node:fs"
import { runAiperf, runGuidellm } from "./client-formats.mjs"

const args = process.argv.slice(2)
const opt = (name, fallback) => {
  const hit = args.find((a) => a === `--${name}` || a.startsWith(`--${name}=`))
  if (hit === undefined) return fallback
  if (hit.includes("=")) return hit.slice(hit.indexOf("=") + 1)
  return args[args.indexOf(hit) + 1] ?? fallback
}
const baseUrl = opt("base-url", process.env.HYPERLOOM_BASE_URL ?? "http://127.0.0.1:8000")
const numPrompts = Number(opt("num-prompts", "16"))
const concurrencyArg = opt("max-concurrency", "")
const concurrency = concurrencyArg === "" ? numPrompts : Number(concurrencyArg)
const rateArg = opt("request-rate", "inf")
const requestRate = rateArg === "inf" ? Number.POSITIVE_INFINITY : Number(rateArg)
const inputLen = Number(opt("input-len", opt("random-input-len", "8")))
const outputLen = Number(opt("output-len", opt("random-output-len", "32")))
for (const [name, v] of [
  ["num-prompts", numPrompts],
  ["max-concurrency", concurrency],
  ["request-rate", requestRate],
  ["input-len", inputLen],
  ["output-len", outputLen]
]) {
  if (!(v > 0)) {
    console.error(`fake-bench-client: error: argument --${name}: invalid value`)
    process.exit(2)
  }
}
const prompt = Array.from({ length: inputLen }, () => "hi").join(" ")
const fail = opt("fail", "")
if (!["", "cpu-bound", "drop", "overcount"].includes(fail)) {
  console.error(`fake-bench-client: error: argument --fail: invalid choice: '${fail}' (cpu-bound, drop, overcount)`)
  process.exit(2)
}
const burnMs = fail === "cpu-bound" ? Number(opt("burn-ms", "25")) : 0
const dropEvery = fail === "drop" ? Number(opt("drop-every", "10")) : 0
const overcount = fail === "overcount" ? Number(opt("overcount", "1.25")) : 1
/**
 * Spins on this thread until it has used `ms` more milliseconds of CPU (not of wall time: on a busy
 * host the spin is descheduled too), as a client that cannot keep up spends it.
 */
const burn = (ms) => {
  const cpu = () => {
    const u = process.cpuUsage()
    return (u.user + u.system) / 1000
  }
  const end = cpu() + ms
  let x = 0
  while (cpu() < end) {
    for (let k = 0; k < 20000; k++) x += Math.sqrt(k) // ~20 µs between two clock reads
  }
  return x
}
const resultFile = opt("result-filename", process.env.HYPERLOOM_RESULT_FILE ?? "")
const format = opt("format", "vllm")
// SGLang's --backend: sglang (native /generate, its default) or sglang-oai / vllm (/v1/completions)
const backend = opt("backend", format === "sglang" ? "sglang" : "vllm")

const mean = (xs) => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length)
const percentile = (xs, p) => {
  if (xs.length === 0) return 0
  const s = [...xs].sort((a, b) => a - b)
  const rank = (p / 100) * (s.length - 1)
  const lo = Math.floor(rank)
  const hi = Math.ceil(rank)
  return s[lo] + (s[hi] - s[lo]) * (rank - lo)
}
const std = (xs) => {
  const m = mean(xs)
  return Math.sqrt(mean(xs.map((x) => (x - m) ** 2)))
}

const main = async () => {
  console.log(`Namespace(base_url='${baseUrl}', num_prompts=${numPrompts}, max_concurrency=${concurrency})`)
  const models = await (await fetch(`${baseUrl}/v1/models`)).json()
  const model = models.data[0].id
  console.log(`Using model: ${model}`)
  const one = async (drop = false) => {
    const start = performance.now()
    const abort = new AbortController()
    const native = format === "sglang" && backend === "sglang"
    const body = native
      ? {
          text: prompt,
          sampling_params: { temperature: 0.0, max_new_tokens: outputLen, ignore_eos: true },
          stream: true,
          lora_path: null,
          return_logprob: false,
          logprob_start_len: -1
        }
      : format === "sglang"
        ? { model, prompt, temperature: 0.0, best_of: 1, max_tokens: outputLen, stream: true, ignore_eos: true }
        : {
            model,
            prompt,
            repetition_penalty: 1.0,
            max_tokens: outputLen,
            logprobs: null,
            stream: true,
            stream_options: { include_usage: true },
            ignore_eos: true
          }
    const res = await fetch(`${baseUrl}${native ? "/generate" : "/v1/completions"}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: abort.signal
    })
    if (!res.ok) throw new Error(res.statusText || `HTTP ${res.status}`)
    const times = []
    let promptTokens = inputLen
    let outputTokens
    let buf = ""
    const decoder = new TextDecoder()
    // The events as each real client reads them (test/examples/stand-in-wire.test.ts ports them):
    // vLLM's: a chunk with choices is a token, the usage-only chunk gives the counts; SGLang's
    // OpenAI: choices[0].text on every event (an empty choices list raises IndexError); SGLang's
    // /generate: all text so far and meta_info.completion_tokens.
    const onEvent = (data) => {
      if (burnMs > 0) burn(burnMs)
      if (native) {
        if (data.text) {
          const n = data.meta_info.completion_tokens
          if (times.length === 0 || n > (outputTokens ?? 0)) times.push(performance.now())
          outputTokens = n
          promptTokens = data.meta_info.prompt_tokens ?? promptTokens
        }
      } else if (format === "sglang") {
        if (!Array.isArray(data.choices) || data.choices.length === 0) throw new Error("IndexError: list index out of range")
        if (data.choices[0].text) times.push(performance.now())
      } else if (data.choices?.length > 0) times.push(performance.now())
      else if (data.usage) {
        outputTokens = data.usage.completion_tokens
        promptTokens = data.usage.prompt_tokens ?? promptTokens
      }
    }
    for await (const chunk of res.body) {
      buf += decoder.decode(chunk, { stream: true })
      let i = buf.indexOf("\n\n")
      while (i >= 0) {
        const event = buf.slice(0, i).trim()
        buf = buf.slice(i + 2)
        if (event.startsWith("data: ") && event !== "data: [DONE]") onEvent(JSON.parse(event.slice(6)))
        i = buf.indexOf("\n\n")
      }
      if (drop && times.length > 0) {
        abort.abort()
        throw new Error("the client dropped this request (--fail=drop)")
      }
    }
    if (times.length === 0) throw new Error("Never received a valid chunk to calculate TTFT.This response will be marked as failed!")
    const latency = (performance.now() - start) / 1000
    const ttft = (times[0] - start) / 1000
    const itl = times.slice(1).map((t, k) => (t - times[k]) / 1000)
    const received = outputTokens ?? times.length
    return { latency, ttft, itl, tokens: overcount === 1 ? received : Math.round(received * overcount), promptTokens, start, times }
  }
  // vLLM's benchmark() first sends one request alone ("Starting initial single prompt test run...")
  // and raises when it fails; SGLang's sends a warm-up request and raises likewise. It also warms
  // up both ends before the clock starts.
  console.log(format === "sglang" ? "Starting warmup with 1 sequences..." : "Starting initial single prompt test run...")
  try {
    await one()
  } catch (e) {
    throw new Error(
      `ValueError: ${format === "sglang" ? "Warmup failed" : "Initial test run failed"} - Please make sure benchmark arguments are correctly specified. Error: ${e.message}`
    )
  }
  console.log(
    format === "sglang"
      ? "Warmup completed with 1 sequences. Starting main benchmark run..."
      : "Initial test run completed. Starting main benchmark run..."
  )
  if (format === "guidellm" || format === "aiperf") {
    // GuideLLM's and AIPerf's command lines and reports: examples/client-formats.mjs
    const run = format === "guidellm" ? runGuidellm : runAiperf
    await run({ opt, one, resultFile })
    process.exit(0)
  }
  const outputs = []
  let failed = 0
  // vLLM's benchmark(): arrivals from get_request (Poisson at --request-rate, here with a seeded
  // generator), each request then waits for the --max-concurrency semaphore.
  let seed = 0
  const random = () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  let slots = concurrency
  const queue = []
  const acquire = () =>
    slots > 0 ? (slots--, Promise.resolve()) : new Promise((resolve) => queue.push(resolve))
  const release = () => {
    const next = queue.shift()
    if (next !== undefined) next()
    else slots++
  }
  const t0 = performance.now()
  const tasks = []
  for (let k = 0; k < numPrompts; k++) {
    tasks.push(
      (async () => {
        await acquire()
        try {
          outputs.push(await one(dropEvery > 0 && (k + 1) % dropEvery === 0))
        } catch (e) {
          failed++
          console.error(`request failed: ${e.message}`)
        } finally {
          release()
        }
      })()
    )
    if (Number.isFinite(requestRate) && k < numPrompts - 1) {
      await new Promise((resolve) => setTimeout(resolve, (-Math.log(1 - random()) / requestRate) * 1000))
    }
  }
  await Promise.all(tasks)
  if (format === "sglang") {
    // SGLang's benchmark() asks the server for its info after the run (`requests.get`), which
    // raises against an engine that died: SGLang's client fails where vLLM's writes zeros.
    try {
      await fetch(`${baseUrl}/get_server_info`)
    } catch (e) {
      const where = new URL(baseUrl)
      throw new Error(
        `requests.exceptions.ConnectionError: HTTPConnectionPool(host='${where.hostname}', port=${where.port}): Max retries exceeded with url: /get_server_info (Caused by NewConnectionError('Failed to establish a new connection: ${e.cause?.code ?? e.message}'))`
      )
    }
  }
  const duration = (performance.now() - t0) / 1000
  if (outputs.length === 0 && format !== "sglang") {
    // vllm/benchmarks/serve.py calculate_metrics: a warning, then the result all the same
    console.error(
      "UserWarning: All requests failed. This is likely due to a misconfiguration on the benchmark arguments."
    )
  }
  const totalOut = outputs.reduce((a, o) => a + o.tokens, 0)
  const totalIn = outputs.reduce((a, o) => a + o.promptTokens, 0)
  const ttfts = outputs.map((o) => o.ttft * 1000)
  const tpots = outputs.filter((o) => o.tokens > 1).map((o) => ((o.latency - o.ttft) / (o.tokens - 1)) * 1000)
  const itls = outputs.flatMap((o) => o.itl.map((x) => x * 1000))
  const e2els = outputs.map((o) => o.latency * 1000)
  const r = {
    duration,
    completed: outputs.length,
    failed,
    total_input_tokens: totalIn,
    total_output_tokens: totalOut,
    request_throughput: outputs.length / duration,
    output_throughput: totalOut / duration,
    total_token_throughput: (totalIn + totalOut) / duration
  }
  const stats = {}
  for (const [name, xs] of [
    ["ttft", ttfts],
    ["tpot", tpots],
    ["itl", itls],
    ["e2el", e2els]
  ]) {
    stats[`mean_${name}_ms`] = mean(xs)
    stats[`median_${name}_ms`] = percentile(xs, 50)
    stats[`std_${name}_ms`] = std(xs)
    stats[`p99_${name}_ms`] = percentile(xs, 99)
  }
  console.log("============ Serving Benchmark Result ============")
  console.log(`${"Successful requests:".padEnd(40)} ${r.completed}`)
  console.log(`${"Benchmark duration (s):".padEnd(40)} ${duration.toFixed(2)}`)
  console.log(`${"Output token throughput (tok/s):".padEnd(40)} ${r.output_throughput.toFixed(2)}`)
  console.log(`${"Mean TTFT (ms):".padEnd(40)} ${stats.mean_ttft_ms.toFixed(2)}`)
  console.log(`${"Mean TPOT (ms):".padEnd(40)} ${stats.mean_tpot_ms.toFixed(2)}`)
  console.log("==================================================")
  if (resultFile !== "") {
    if (format === "sglang") {
      const line = {
        backend,
        dataset_name: "random",
        request_rate: Number.isFinite(requestRate) ? requestRate : "inf",
        max_concurrency: concurrency,
        duration,
        completed: r.completed,
        total_input: totalIn,
        total_output: totalOut,
        total_output_retokenized: totalOut,
        request_throughput: r.request_throughput,
        input_throughput: totalIn / duration,
        output_throughput: r.output_throughput,
        total_throughput: r.total_token_throughput,
        mean_ttft_ms: stats.mean_ttft_ms,
        median_ttft_ms: stats.median_ttft_ms,
        p99_ttft_ms: stats.p99_ttft_ms,
        mean_tpot_ms: stats.mean_tpot_ms,
        median_tpot_ms: stats.median_tpot_ms,
        p99_tpot_ms: stats.p99_tpot_ms,
        mean_itl_ms: stats.mean_itl_ms,
        median_itl_ms: stats.median_itl_ms,
        p99_itl_ms: stats.p99_itl_ms,
        mean_e2e_latency_ms: stats.mean_e2el_ms,
        median_e2e_latency_ms: stats.median_e2el_ms
      }
      fs.appendFileSync(resultFile, `${JSON.stringify(line)}\n`)
    } else {
      const doc = {
        date: new Date().toISOString().replace(/[-:]/g, "").slice(0, 15),
        endpoint_type: "openai",
        backend: "openai",
        label: null,
        model_id: model,
        tokenizer_id: model,
        num_prompts: numPrompts,
        request_rate: Number.isFinite(requestRate) ? requestRate : "inf",
        burstiness: 1.0,
        max_concurrency: concurrency,
        ...r,
        request_goodput: null,
        ...stats
      }
      fs.writeFileSync(resultFile, JSON.stringify(doc))
    }
  }
  // vLLM's client exits 0 even when every request failed (its result says completed 0)
  process.exit(0)
}

main().catch((e) => {
  const message = /^[A-Za-z_.]+(?:Error|Exception): /.test(e.message) ? e.message : `RuntimeError: ${e.message}`
  console.error(`Traceback (most recent call last):\n${message}`)
  process.exit(1)
})
