#!/usr/bin/env node
/**
 * A stand-in serving engine (Node, no dependencies): an OpenAI-compatible HTTP server shaped like
 * `vllm serve` / SGLang's `launch_server`, so a whole serving baseline runs on a machine without
 * GPUs. It answers
 *   GET  /health            200 once "loaded" (503 before)
 *   GET  /v1/models         {"object":"list","data":[{"id":MODEL,...}]}
 *   POST /v1/completions    {"prompt","max_tokens","stream"}: streams `data: {...}` chunks (one
 *                            token each) at --token-rate tokens/s per request, then `data: [DONE]`
 *
 *   node examples/fake-engine.mjs [--port P] [--model NAME] [--load-sec S] [--token-rate N]
 *        [--fail=kv-oom-vllm|kv-oom-sglang|arg-error|crash-after-ready] [--never-ready]
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
 *   crash-after-ready  serves, then dies with exit 1 after the first completion request
 *   --never-ready   listens, but /health answers 503 forever
 * SIGTERM: logs "Shutting down" and exits 0.
 */
import * as http from "node:http"

const args = process.argv.slice(2)
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
const tokenRate = Number(opt("token-rate", "200"))
const fail = opt("fail", "")
const neverReady = args.includes("--never-ready")

const ts = () => {
  const d = new Date()
  const p = (n) => String(n).padStart(2, "0")
  return `${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`
}
const info = (where, msg) => console.log(`INFO ${ts()} [${where}] ${msg}`)

info("api_server.py", `vLLM-compatible stand-in API server; model=${model} port=${port}`)
info("core.py", `Initializing engine with config: model='${model}', max_seq_len=4096, dtype=float16`)

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

if (fail === "kv-oom-vllm" || fail === "kv-oom-sglang" || fail === "arg-error") {
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
  let ready = false
  let served = 0
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
    if (req.method === "POST" && url.pathname === "/v1/completions") {
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
        const n = Math.max(1, Math.min(4096, Number(spec.max_tokens ?? 16)))
        served++
        info("logger.py", `Received request cmpl-${served}: max_tokens=${n}`)
        if (fail === "crash-after-ready" && served > 1) {
          console.log("ERROR: CUDA error: an illegal memory access was encountered")
          process.exit(1)
        }
        const id = `cmpl-${served}`
        if (spec.stream === false) {
          setTimeout(
            () => {
              res.writeHead(200, { "content-type": "application/json" })
              res.end(
                JSON.stringify({
                  id,
                  object: "text_completion",
                  model,
                  choices: [{ index: 0, text: " tok".repeat(n), finish_reason: "length" }],
                  usage: { prompt_tokens: 8, completion_tokens: n, total_tokens: 8 + n }
                })
              )
            },
            (n / tokenRate) * 1000
          )
          return
        }
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
        let i = 0
        const timer = setInterval(() => {
          if (i >= n) {
            clearInterval(timer)
            res.write(
              `data: ${JSON.stringify({ id, object: "text_completion", model, choices: [], usage: { prompt_tokens: 8, completion_tokens: n, total_tokens: 8 + n } })}\n\n`
            )
            res.end("data: [DONE]\n\n")
            return
          }
          i++
          res.write(
            `data: ${JSON.stringify({ id, object: "text_completion", model, choices: [{ index: 0, text: " tok", finish_reason: i === n ? "length" : null }] })}\n\n`
          )
        }, 1000 / tokenRate)
        res.on("close", () => clearInterval(timer))
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
