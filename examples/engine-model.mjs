/**
 * The stand-in engine's performance model (examples/fake-engine.mjs applies it to real requests).
 * Pure: no I/O, no clock; importable by tests. This header is the reference the sweep tests rely on
 * (its known answers below are what they assert).
 *
 * ## Settings (`modelFlags(argv)`: the engine's own argv; `--flag N` and `--flag=N`, `_` or `-`)
 *
 *   --max-num-seqs N            (SGLang: --max-running-requests)   batch limit B, default 256
 *   --max-model-len N           (SGLang: --context-length)         L, default 2048
 *   --gpu-memory-utilization F  (SGLang: --mem-fraction-static)    U, default 0.9
 *   --max-num-batched-tokens M  (SGLang: --chunked-prefill-size)   the tokens one step may hold,
 *                               default 8192: a prompt of P tokens prefills in k = ceil(P / M)
 *                               steps; M above (below) 8192 takes from (gives to) the KV cache
 *                               8 tokens per token of budget (vLLM sizes activations with M)
 *   --decode-ms MS              the model's own: per-token step time at an empty batch, default 20
 *   --decode-ms-per-seq MS      the model's own: what each running request adds, default 5
 *   --kv-tokens N               the model's own: KV-cache tokens at U = 1, default 600000
 *   --queue-ms MS               the model's own: a SATURATED engine (default 0: none): a request
 *                               that had to wait pays MS once admitted, holding its slot, before
 *                               its first token (the older stand-in's behaviour: past B the
 *                               throughput falls, which no real engine's does; kept for tests
 *                               that want a TTFT jump of seconds on short runs)
 *   --token-rate R              older stand-in flag: a fixed step of 1000/R ms (per-seq cost 0)
 *   --quantization Q            vLLM's and SGLang's flag: `fp8` makes every step FP8_STEP_FACTOR
 *                               (0.75) as long AND answers the known prompts wrong (a mode that
 *                               is faster because its answers are wrong); anything else: no effect
 *   --cold-requests N           the first N requests after start are cold: their steps take
 *   --cold-factor F             F times as long (default F = 3; N default 0: a warm engine)
 *   --fail=capped               the engine silently caps its batch limit to what its KV cache
 *                               holds (as SGLang lowers max_running_requests): a B × L over the
 *                               budget runs at B' = floor(KV tokens / L) instead of failing, and
 *                               the engine reports B' (`effective`)
 *   --fail=wrong-fast           the same as --quantization fp8
 *   --fail=cold-start           the same as --cold-requests COLD_START_REQUESTS (8)
 *
 * ## The engine (what fake-engine.mjs does)
 *
 * - At start, the KV-cache budget: it needs B × L tokens and has
 *   floor(U × KV_TOKENS − 8 × (M − 8192)) tokens. When it does not fit, the engine prints
 *   `kvFailure(settings)` (vLLM's own ValueError from vllm/v1/core/kv_cache_utils.py
 *   `_check_enough_kv_cache_memory`, then the API server's "Engine core initialization failed"
 *   line) on stderr and exits 1; hyperloom classifies it `kv_cache_oom`. With the defaults
 *   256 × 2048 = 524288 ≤ 540000 fits; B = 512, or B = 256 with L = 4096, or U = 0.5 does not.
 *   With L = 32768: B ≤ 16 fits, B = 32 fails.
 * - Up to B requests run at once; more wait in one FIFO queue (admitted as running ones end).
 *   Past B the engine stays full: its throughput PLATEAUS at B's, and the queueing shows in TTFT
 *   (a queued request waits for a running one to end), as a real engine's does.
 * - With b requests running, every running request gets one token per step of
 *   t(b) = DECODE_MS + DECODE_MS_PER_SEQ × b milliseconds (so per-request speed 1000 / t(b) tok/s
 *   falls as the batch grows, and the engine's output rate b × 1000 / t(b) rises towards
 *   1000 / DECODE_MS_PER_SEQ). A request's first token comes k = ceil(P / M) steps after it is
 *   admitted (its prompt's chunks; one step for P ≤ M), holding its slot.
 * - With --queue-ms Q > 0 only: a request that had to wait pays Q once admitted, holding its slot,
 *   before its first token; so does one that arrives, a slot free, while an admitted request is
 *   still paying it.
 *
 * ## Closed form (`predict`): a closed-loop client (`--max-concurrency c`, `--request-rate inf`,
 * N prompts of P input and n output tokens) against that engine runs in lockstep waves. Each wave
 * admits min(B, queued) requests together; a wave of b takes (k − 1 + n) × t(b) (plus Q when one
 * of its requests had waited); when it ends, its clients send their next requests. With
 * b = min(c, B), k = ceil(P / M) and N a multiple of b:
 *
 *   c ≤ B: output throughput  = b × n × 1000 / ((k − 1 + n) × t(b)) tok/s (k = 1: b × 1000 / t(b))
 *          TTFT = k × t(b), TPOT = t(b) (no queue)   duration = (N / b) × (k − 1 + n) × t(b) ms
 *   c > B: the same throughput as c = B (the plateau; the last, smaller wave aside), TPOT t(B);
 *          the c − B requests that wait per wave have TTFT = a whole wave + k × t(B): at c = 2B
 *          every request after the first wave waits one wave.
 *   With Q > 0 a later wave takes Q + (k − 1 + n) × t(B) and its queued requests' TTFT is Q more
 *   (2Q from the third wave on): throughput falls below the plateau.
 *
 * `predict` computes those waves exactly (also for N not a multiple of b: the last, smaller wave
 * is faster) and takes percentiles as numpy's `percentile` does (linear), as vLLM's client does.
 *
 * ## Known answers for a sweep (the defaults: t(b) = 20 + 5 × b ms, P ≤ M)
 *
 *   t(1) = 25 ms, t(2) = 30, t(4) = 40, t(8) = 60, t(16) = 100 ms
 *   output throughput at batch b = 200 × b / (4 + b): b = 1: 40, 2: 66.7, 4: 100, 8: 133.3,
 *   16: 160 tok/s (neighbours of a doubling grid up to 16 differ by ≥ 20 %)
 *   one wave n × t(B), n = 32: B = 2: 960 ms, B = 4: 1280 ms, B = 8: 1920 ms (n = 16: half)
 *
 * - Largest load under `p99_ttft_ms<=X`: for concurrency c ≤ B the p99 TTFT is k × t(c) (plus the
 *   machine's round trip: tens of ms; up to ~250 ms measured on a 2-core machine at load average
 *   17, more at 20); for c > B at least one request per later wave waits a whole wave, and with
 *   N ≤ 100 prompts the p99 (linear, rank 0.99 × (N − 1)) is then ≥ (1 − 0.01 × (N − 1)) × a wave.
 *   With --queue-ms 1500 (a saturated engine), n = 16…32 and N = 2 × c (or any N ≥ c + 1), X =
 *   1000 ms makes the largest passing concurrency exactly B for every B ≥ 1, with ~900 ms to spare
 *   on either side (the smallest jump: B = 1, c = 2, N = 4, n = 16: p99 ≥ 0.97 × (1500 + 16 × 25)
 *   = 1843 ms). Without it the jump is a wave: n × t(B) (B = 1, n = 16: 400 ms), so choose
 *   n × t(1) well above X + the round trip. `predict` gives the exact p99 for a chosen N.
 * - Best combination of a grid of B: the feasible (kvFailure undefined) combination with the
 *   largest B, at concurrency ≥ B: throughput 200 × B / (4 + B). Combinations over the KV budget
 *   are infeasible. With M and U on axes too, the best is the feasible combination with the
 *   largest B × n / ((k − 1 + n) × t(B)): `predict` over the grid (the bench's three-axis model,
 *   bench/sweep.mjs --adaptive, and test/examples/engine-model.test.ts compute it that way).
 * - A load point takes (N / min(c, B)) waves; keep N ≈ 2 × c and n = 16…32 for 1-3 s points.
 *
 * ## Known answers for validity (`VALIDITY`: what each failure would win if believed)
 *
 * `effective(settings)` is what the engine runs: in capped mode a batch limit over the KV budget
 * is lowered to floor(kvTokensAvailable / L); `predict` and `waves` use it. `answerFor(settings,
 * prompt)` is the text the engine answers a known prompt (KNOWN_PROMPTS) with: right, or wrong
 * under --quantization fp8. With VALIDITY's engine (t(b) = 20 + 0.5 × b ms, L = 12000, so the
 * KV cache holds 45 requests) and load (concurrency 64, 128 prompts, 16 output tokens):
 *   max-num-seqs 16: 571.4 tok/s; 32: 888.9 tok/s (the true best);
 *   64 with --fail=capped: runs 45 (waves of 45, 45, 38), 1032.3 tok/s (would win if believed:
 *   not engaged; without the cap it fails at start: KV cache);
 *   32 with --quantization fp8: 1185.2 tok/s (would win if believed: its answers are wrong).
 */

export const DEFAULTS = Object.freeze({
  maxNumSeqs: 256,
  maxModelLen: 2048,
  gpuMemoryUtilization: 0.9,
  decodeMs: 20,
  decodeMsPerSeq: 5,
  kvTokens: 600_000,
  queueMs: 0,
  maxNumBatchedTokens: 8192,
  quantization: "",
  coldRequests: 0,
  coldFactor: 3,
  capped: false
})

/** A step under --quantization fp8 takes this much of a normal one (and the answers are wrong). */
export const FP8_STEP_FACTOR = 0.75

/** The cold requests of --fail=cold-start. */
export const COLD_START_REQUESTS = 8

/**
 * Prompts with one right answer (the text of the completion's first token), and the wrong one an
 * engine under --quantization fp8 gives: what a `--check` probe asks (examples/known-answers.mjs).
 */
export const KNOWN_PROMPTS = Object.freeze([
  { prompt: "The capital of France is", answer: " Paris", wrong: " Lyon" },
  { prompt: "2 + 2 =", answer: " 4", wrong: " 5" },
  { prompt: "The opposite of hot is", answer: " cold", wrong: " warm" }
])

/**
 * KV-cache tokens a batched-token budget above (below) the default's takes from (gives to) the
 * cache, per token of budget: vLLM sizes its activation memory with a profile run of
 * max_num_batched_tokens tokens, and the KV cache gets what is left.
 */
export const ACTIVATION_TOKENS_PER_BATCHED_TOKEN = 8

/** Bytes of KV cache per token (a Llama-3-8B shape: 32 layers × 8 KV heads × 128 × 2 (K, V) × 2 bytes). */
export const KV_BYTES_PER_TOKEN = 131_072

const FLAGS = {
  "max-num-seqs": "maxNumSeqs",
  "max-running-requests": "maxNumSeqs",
  "max-model-len": "maxModelLen",
  "context-length": "maxModelLen",
  "gpu-memory-utilization": "gpuMemoryUtilization",
  "mem-fraction-static": "gpuMemoryUtilization",
  "decode-ms": "decodeMs",
  "decode-ms-per-seq": "decodeMsPerSeq",
  "kv-tokens": "kvTokens",
  "queue-ms": "queueMs",
  "max-num-batched-tokens": "maxNumBatchedTokens",
  "chunked-prefill-size": "maxNumBatchedTokens",
  "cold-requests": "coldRequests",
  "cold-factor": "coldFactor"
}

const positive = (name, text) => {
  const v = Number(text)
  if (text === undefined || text === "" || !Number.isFinite(v) || v < 0) {
    throw new Error(`argument --${name}: invalid value: '${text ?? ""}'`)
  }
  return v
}

const INTEGER = new Set(["maxNumSeqs", "maxModelLen", "kvTokens", "maxNumBatchedTokens", "coldRequests"])

/**
 * The model's settings from an engine argv (vLLM's names, SGLang's aliases, the model's own
 * constants). Unknown arguments are ignored (the engine has others). Throws on a bad value.
 */
export const modelFlags = (argv) => {
  const s = { ...DEFAULTS }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (!arg.startsWith("--")) continue
    const eq = arg.indexOf("=")
    const name = (eq < 0 ? arg.slice(2) : arg.slice(2, eq)).replaceAll("_", "-")
    if (name === "quantization") {
      s.quantization = eq < 0 ? (argv[++i] ?? "") : arg.slice(eq + 1)
      continue
    }
    if (name === "fail") {
      const mode = eq < 0 ? argv[i + 1] : arg.slice(eq + 1)
      if (mode === "capped") s.capped = true
      else if (mode === "wrong-fast") s.quantization = "fp8"
      else if (mode === "cold-start") s.coldRequests = Math.max(s.coldRequests, COLD_START_REQUESTS)
      continue
    }
    const key = FLAGS[name]
    if (key === undefined && name !== "token-rate") continue
    const value = eq < 0 ? argv[++i] : arg.slice(eq + 1)
    const v = positive(name, value)
    if (name === "token-rate") {
      if (v <= 0) throw new Error(`argument --token-rate: invalid value: '${value}'`)
      s.decodeMs = 1000 / v
      s.decodeMsPerSeq = 0
    } else {
      s[key] = INTEGER.has(key) ? Math.floor(v) : v
    }
  }
  if (s.maxNumSeqs < 1) throw new Error("argument --max-num-seqs: must be at least 1")
  if (s.maxNumBatchedTokens < 1) throw new Error("argument --max-num-batched-tokens: must be at least 1")
  return s
}

/** Milliseconds per step (one token for every running request) with `b` requests running. */
export const stepMs = (settings, b) =>
  (settings.decodeMs + settings.decodeMsPerSeq * b) * (settings.quantization === "fp8" ? FP8_STEP_FACTOR : 1)

/**
 * What the engine runs: the settings as asked, except that in capped mode (--fail=capped) a batch
 * limit whose KV cache does not fit is lowered to what does (floor(KV tokens / L), at least 1),
 * as SGLang's scheduler lowers max_running_requests.
 */
export const effective = (settings) => {
  if (settings.capped !== true) return settings
  const fits = Math.floor(kvTokensAvailable(settings) / settings.maxModelLen)
  return fits >= 1 && fits < settings.maxNumSeqs ? { ...settings, maxNumSeqs: fits } : settings
}

/** The engine's answer to a known prompt (KNOWN_PROMPTS), right or (fp8) wrong; undefined for others. */
export const answerFor = (settings, prompt) => {
  const known = KNOWN_PROMPTS.find((k) => k.prompt === String(prompt ?? "").trim())
  if (known === undefined) return undefined
  return settings.quantization === "fp8" ? known.wrong : known.answer
}

/**
 * The KV-cache tokens the engine has: floor(gpu_memory_utilization × KV tokens at full − what a
 * batched-token budget other than the default's takes: 8 × (M − 8192)).
 */
export const kvTokensAvailable = (settings) =>
  Math.floor(
    settings.gpuMemoryUtilization * settings.kvTokens -
      ACTIVATION_TOKENS_PER_BATCHED_TOKEN * (settings.maxNumBatchedTokens - DEFAULTS.maxNumBatchedTokens)
  )

/** The steps a prompt of `promptTokens` takes to prefill: its chunks of at most M tokens (at least 1). */
export const prefillSteps = (settings, promptTokens) =>
  Math.max(1, Math.ceil(Math.max(0, promptTokens) / settings.maxNumBatchedTokens))

/** The KV-cache tokens the engine needs: max_num_seqs × max_model_len. */
export const kvTokensNeeded = (settings) => settings.maxNumSeqs * settings.maxModelLen

const gib = (tokens) => ((tokens * KV_BYTES_PER_TOKEN) / 2 ** 30).toFixed(2)

/**
 * `undefined` when the KV-cache budget fits; else the lines vLLM prints when it does not: the
 * engine core's ValueError (the text of vllm/v1/core/kv_cache_utils.py
 * `_check_enough_kv_cache_memory` @ 001cabc1be16a59a70d720ed61a13b678c060a18: "No available memory
 * for the cache blocks…" when nothing is left, else "To serve at least one request with the
 * models's max seq len (…), (… GiB KV cache is needed, which is larger than the available KV cache
 * memory (… GiB)…"), then the API server's "Engine core initialization failed" line.
 */
export const kvFailure = (asked) => {
  const settings = effective(asked)
  const has = kvTokensAvailable(settings)
  const needs = kvTokensNeeded(settings)
  if (needs <= has) return undefined
  const ec = (line) => `(EngineCore_DP0 pid=1) ${line}`
  const estimated = Math.floor(has / settings.maxNumSeqs)
  const message =
    has <= 0
      ? "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
      : `ValueError: To serve at least one request with the models's max seq len (${settings.maxModelLen}), (${gib(needs)} GiB KV cache is needed, which is larger than the available KV cache memory (${gib(has)} GiB). ${
          estimated > 0 ? `Based on the available memory, the estimated maximum model length is ${estimated}. ` : ""
        }Try increasing \`gpu_memory_utilization\` or decreasing \`max_model_len\` when initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.`
  return [
    ec(`INFO [gpu_worker.py:276] Available KV cache memory: ${gib(has)} GiB`),
    ec("ERROR [core.py:708] EngineCore failed to start."),
    ec("ERROR [core.py:708] Traceback (most recent call last):"),
    ec(
      'ERROR [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py", line 686, in _check_enough_kv_cache_memory'
    ),
    ec("ERROR [core.py:708]     raise ValueError("),
    ec(`ERROR [core.py:708] ${message}`),
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}"
  ]
}

/** numpy's `percentile` (linear interpolation), which vLLM's client uses; 0 for no values. */
export const percentile = (xs, p) => {
  if (xs.length === 0) return 0
  const s = [...xs].sort((a, b) => a - b)
  const rank = (p / 100) * (s.length - 1)
  const lo = Math.floor(rank)
  const hi = Math.ceil(rank)
  return s[lo] + (s[hi] - s[lo]) * (rank - lo)
}

/**
 * The per-request figures of a closed-loop run (request rate inf): the waves, exactly.
 * Returns { durationMs, requests: [{ ttftMs, tpotMs, e2elMs }] }.
 */
export const waves = (asked, { concurrency, numPrompts, inputLen = 0, outputLen }) => {
  const settings = effective(asked)
  const B = settings.maxNumSeqs
  const k = prefillSteps(settings, inputLen)
  const n = Math.max(1, outputLen)
  const N = Math.max(0, Math.floor(numPrompts))
  const queue = []
  const requests = []
  let sent = Math.min(Math.max(1, Math.floor(concurrency)), N)
  for (let i = 0; i < sent; i++) queue.push(0)
  let t = 0
  while (queue.length > 0) {
    const wave = queue.splice(0, B)
    const step = stepMs(settings, wave.length)
    // a wave one of whose requests had waited pays the queue's cost, every request of it
    const paid = wave.some((arrived) => arrived < t) ? settings.queueMs : 0
    for (const arrived of wave) {
      requests.push({
        ttftMs: t - arrived + paid + k * step,
        tpotMs: step,
        e2elMs: t - arrived + paid + (k - 1 + n) * step
      })
    }
    t += paid + (k - 1 + n) * step
    const next = Math.min(wave.length, N - sent)
    for (let i = 0; i < next; i++) queue.push(t)
    sent += next
  }
  return { durationMs: t, requests }
}

/**
 * The expected result of `fake-bench-client.mjs --max-concurrency C --num-prompts N
 * --output-len n` against the engine (check `kvFailure` first: a failing engine never serves).
 * Returns { outputThroughput, requestThroughput, medianTtftMs, p99TtftMs, medianTpotMs,
 * p99TpotMs, durationMs, batch } (throughputs per second, as vLLM's result file).
 */
export const predict = (settings, { concurrency, numPrompts, inputLen = 0, outputLen }) => {
  const run = waves(settings, { concurrency, numPrompts, inputLen, outputLen })
  const sec = run.durationMs / 1000
  const N = run.requests.length
  const n = Math.max(1, outputLen)
  const ttfts = run.requests.map((r) => r.ttftMs)
  const tpots = n > 1 ? run.requests.map((r) => r.tpotMs) : []
  return {
    outputThroughput: sec > 0 ? (N * n) / sec : 0,
    requestThroughput: sec > 0 ? N / sec : 0,
    medianTtftMs: percentile(ttfts, 50),
    p99TtftMs: percentile(ttfts, 99),
    medianTpotMs: percentile(tpots, 50),
    p99TpotMs: percentile(tpots, 99),
    durationMs: run.durationMs,
    batch: Math.min(effective(settings).maxNumSeqs, Math.max(1, Math.floor(concurrency)), Math.max(1, N))
  }
}

/**
 * The adaptive strategy's proving ground (bench/sweep.mjs --adaptive, test/domain/Adaptive.test.ts,
 * the program's and the real-Ray tests): three numeric params of four values each, unimodal along
 * each (throughput rises with the batch limit; the batched-token budget's prompt chunks cost
 * steps, and a budget over 2048 costs KV cache; memory only moves the KV limit), and a
 * KV-infeasible corner (a batch limit of 32 × 16384 tokens with U ≤ 0.6, or with M = 4096 and
 * U = 0.8). Its closed-form best (`predict` over the grid, at concurrency 32 with 64 prompts of
 * 2048 input and 16 output tokens): max-num-seqs 32, max-num-batched-tokens 2048,
 * gpu-memory-utilization 0.8 or 0.9 (tied: memory beyond the need buys no speed), 32 × 16 ×
 * 1000 / (16 × t(32)) = 444.4 tok/s with t(32) = 8 + 2 × 32 = 72 ms.
 */
export const THREE_AXES = Object.freeze({
  engineArgs: ["--decode-ms", "8", "--decode-ms-per-seq", "2", "--max-model-len", "16384"],
  params: [
    { name: "max-num-seqs", values: ["4", "8", "16", "32"] },
    { name: "max-num-batched-tokens", values: ["512", "1024", "2048", "4096"] },
    { name: "gpu-memory-utilization", values: ["0.5", "0.6", "0.8", "0.9"] }
  ],
  load: { concurrency: 32, numPrompts: 64, inputLen: 2048, outputLen: 16 }
})

/** VALIDITY's header: the grid where a capped and a wrong-but-fast combination would each win if believed. */
export const VALIDITY = Object.freeze({
  engineArgs: ["--decode-ms", "20", "--decode-ms-per-seq", "0.5", "--max-model-len", "12000"],
  params: [{ name: "max-num-seqs", values: ["16", "32", "64"] }],
  load: { concurrency: 64, numPrompts: 128, outputLen: 16 },
  trueBest: { "max-num-seqs": "32" }
})
