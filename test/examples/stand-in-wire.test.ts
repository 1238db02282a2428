/**
 * The stand-in engine (examples/fake-engine.mjs) on the wire, parsed the way each real client's
 * code parses a stream (issue 14 item 1; docs/design.md#classified-from-what-happened). The parsers
 * below are faithful ports:
 *
 * - vLLM `vllm bench serve`: vllm-project/vllm vllm/benchmarks/lib/endpoint_request_func.py
 *   @ 02cfb534df5674737558730b10f23d1b7aef9b7c, `StreamedResponseHandler` and
 *   `async_request_openai_completions` (asks for `stream_options.include_usage`; a request succeeds
 *   once a chunk with `choices` arrived; `output_tokens` from the usage chunk).
 * - SGLang `python -m sglang.bench_serving`: sgl-project/sglang python/sglang/bench_serving.py
 *   @ 0033168f0f58b2bc05aa0273bd475d9c01bafb1c, `async_request_openai_completions` (backends
 *   `vllm`, `sglang-oai`: iterates lines, reads `data["choices"][0]["text"]` on every data event, so
 *   a usage-only chunk raises IndexError) and `async_request_sglang_generate` (backend `sglang`:
 *   POST /generate, cumulative `text`, `meta_info.completion_tokens`).
 *
 * A Python exception inside those functions marks the request failed (`success = False`); here
 * any throw does the same. The recorded streams in test/fixtures/serving/ (their README says where
 * each shape comes from) are parsed by the same ports, so the ports are checked against the real
 * servers' shape as well as the stand-in.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { freePort } from "../support/freePort.js"

const root = path.resolve(import.meta.dirname, "../..")
const engineJs = path.join(root, "examples/fake-engine.mjs")
const fixture = (name: string) => fs.readFileSync(path.join(root, "test/fixtures/serving", name), "utf8")

interface Output {
  success: boolean
  error: string
  outputTokens: number
  ttft: number
  itl: Array<number>
  text: string
}

const newOutput = (): Output => ({ success: false, error: "", outputTokens: 0, ttft: 0, itl: [], text: "" })

/** Python's `str.removeprefix`. */
const removePrefix = (s: string, p: string) => (s.startsWith(p) ? s.slice(p.length) : s)

/** `data["choices"][0]`, raising as Python does (IndexError / KeyError / TypeError). */
const pyIndex = (v: unknown, k: string | number): unknown => {
  if (typeof k === "number") {
    if (!Array.isArray(v)) throw new TypeError("'NoneType' object is not subscriptable")
    if (k >= v.length) throw new RangeError("IndexError: list index out of range")
    return v[k]
  }
  if (typeof v !== "object" || v === null || !(k in v)) throw new Error(`KeyError: '${k}'`)
  return (v as Record<string, unknown>)[k]
}
const truthy = (v: unknown) =>
  !(
    v === undefined ||
    v === null ||
    v === false ||
    v === 0 ||
    v === "" ||
    (Array.isArray(v) && v.length === 0)
  )

/** vLLM's StreamedResponseHandler.add_chunk. */
class StreamedResponseHandler {
  buffer = ""
  addChunk(chunk: string): Array<string> {
    this.buffer += chunk
    const messages: Array<string> = []
    while (this.buffer.includes("\n\n")) {
      const at = this.buffer.indexOf("\n\n")
      const message = this.buffer.slice(0, at).trim()
      this.buffer = this.buffer.slice(at + 2)
      if (message) messages.push(message)
    }
    if (this.buffer.startsWith("data: ")) {
      const content = removePrefix(this.buffer, "data: ").trim()
      if (content === "[DONE]") {
        messages.push(this.buffer.trim())
        this.buffer = ""
      } else if (content) {
        try {
          JSON.parse(content)
          messages.push(this.buffer.trim())
          this.buffer = ""
        } catch {
          // incomplete JSON: wait for more
        }
      }
    }
    return messages
  }
}

/** The body as the chunks `iter_any()` yields (bytes as they arrive); throws when the stream breaks. */
async function* chunksOf(res: Response): AsyncGenerator<string> {
  const decoder = new TextDecoder()
  if (res.body === null) return
  for await (const c of res.body) yield decoder.decode(c, { stream: true })
}

/** aiohttp's `async for line in response.content`: lines, each with its "\n". */
async function* linesOf(res: Response): AsyncGenerator<string> {
  let buf = ""
  for await (const c of chunksOf(res)) {
    buf += c
    let at = buf.indexOf("\n")
    while (at >= 0) {
      yield buf.slice(0, at + 1)
      buf = buf.slice(at + 1)
      at = buf.indexOf("\n")
    }
  }
  if (buf !== "") yield buf
}

const post = (url: string, payload: unknown) =>
  fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(payload)
  })

/** vLLM endpoint_request_func.py async_request_openai_completions, over a response. */
const vllmParse = async (response: Promise<Response>, outputLen: number): Promise<Output> => {
  const output = newOutput()
  const st = performance.now()
  let recent = st
  let first = false
  try {
    // session.post(...) is inside the clients' try: a refused or cut connection fails the request
    const res = await response
    if (res.status !== 200) {
      output.error = res.statusText
      return output
    }
    const handler = new StreamedResponseHandler()
    for await (const raw of chunksOf(res)) {
      const chunkBytes = raw.trim()
      if (!chunkBytes) continue
      for (const message of handler.addChunk(chunkBytes)) {
        if (message.startsWith(":")) continue
        const chunk = removePrefix(message, "data: ")
        if (chunk !== "[DONE]") {
          const data = JSON.parse(chunk) as Record<string, unknown>
          const choices = data.choices
          if (truthy(choices)) {
            const text = (pyIndex(choices, 0) as Record<string, unknown>).text
            const now = performance.now()
            if (!first) {
              first = true
              output.ttft = now - st
            } else output.itl.push(now - recent)
            recent = now
            output.text += typeof text === "string" ? text : ""
          } else if (truthy(data.usage)) {
            output.outputTokens = (data.usage as Record<string, number>).completion_tokens ?? 0
          }
        }
      }
    }
    if (first) output.success = true
    else
      output.error = "Never received a valid chunk to calculate TTFT.This response will be marked as failed!"
  } catch (e) {
    output.success = false
    output.error = String(e)
  }
  void outputLen
  return output
}

/** SGLang bench_serving.py async_request_openai_completions, over a response. */
const sglangOaiParse = async (response: Promise<Response>, outputLen: number): Promise<Output> => {
  const output = newOutput()
  let outLen = outputLen
  const st = performance.now()
  let recent = st
  let ttft = 0
  try {
    // session.post(...) is inside the clients' try: a refused or cut connection fails the request
    const res = await response
    if (res.status !== 200) {
      output.error = res.statusText
      return output
    }
    for await (const line of linesOf(res)) {
      const chunkBytes = line.trim()
      if (!chunkBytes) continue
      const chunk = removePrefix(chunkBytes, "data: ")
      if (chunk === "[DONE]") continue
      const data = JSON.parse(chunk) as Record<string, unknown>
      const text = pyIndex(pyIndex(pyIndex(data, "choices"), 0), "text")
      if (truthy(text)) {
        const now = performance.now()
        if (ttft === 0) {
          ttft = now - st || 1e-9
          output.ttft = ttft
        } else output.itl.push(now - recent)
        recent = now
        output.text += String(text)
        const usage = (data.usage ?? {}) as Record<string, number>
        outLen = usage.completion_tokens ?? outLen
      }
    }
    output.success = true
    output.outputTokens = outLen
  } catch (e) {
    output.success = false
    output.error = String(e)
  }
  return output
}

/** SGLang bench_serving.py async_request_sglang_generate, over a response. */
const sglangGenerateParse = async (response: Promise<Response>, outputLen: number): Promise<Output> => {
  const output = newOutput()
  let outLen = outputLen
  const st = performance.now()
  let recent = st
  let ttft = 0
  let lastLen = 0
  try {
    // session.post(...) is inside the clients' try: a refused or cut connection fails the request
    const res = await response
    if (res.status !== 200) {
      output.error = res.statusText
      return output
    }
    for await (const line of linesOf(res)) {
      const chunkBytes = line.trim()
      if (!chunkBytes) continue
      const chunk = removePrefix(chunkBytes, "data: ")
      if (chunk === "[DONE]") continue
      const data = JSON.parse(chunk) as Record<string, unknown>
      if ("text" in data && truthy(data.text)) {
        const now = performance.now()
        output.text = String(data.text)
        outLen = pyIndex(pyIndex(data, "meta_info"), "completion_tokens") as number
        if (ttft === 0) {
          ttft = now - st || 1e-9
          output.ttft = ttft
        } else {
          const fresh = outLen - lastLen
          if (fresh === 0) continue
          for (let k = 0; k < fresh; k++) output.itl.push((now - recent) / fresh)
        }
        recent = now
        lastLen = outLen
      }
    }
    output.success = true
    output.outputTokens = outLen
  } catch (e) {
    output.success = false
    output.error = String(e)
  }
  return output
}

/** A Response whose body is the given text, arriving in pieces of `size` characters. */
const recorded = (text: string, size = 7) =>
  new Response(
    new ReadableStream({
      start(c) {
        const enc = new TextEncoder()
        for (let i = 0; i < text.length; i += size) c.enqueue(enc.encode(text.slice(i, i + size)))
        c.close()
      }
    }),
    { status: 200 }
  )

// The payloads the real clients send (same sources).
const vllmPayload = (n: number) => ({
  model: "m",
  prompt: "hi hi hi",
  repetition_penalty: 1.0,
  max_tokens: n,
  logprobs: null,
  stream: true,
  stream_options: { include_usage: true },
  ignore_eos: true
})
const sglangOaiPayload = (n: number) => ({
  model: "m",
  prompt: "hi hi hi",
  temperature: 0.0,
  best_of: 1,
  max_tokens: n,
  stream: true,
  ignore_eos: true
})
const sglangGeneratePayload = (n: number) => ({
  text: "hi hi hi",
  sampling_params: { temperature: 0.0, max_new_tokens: n, ignore_eos: true },
  stream: true,
  lora_path: null,
  return_logprob: false,
  logprob_start_len: -1
})

describe("the ports parse the recorded real streams", () => {
  it("vLLM's completions stream with include_usage: vLLM's client counts the usage chunk's tokens", async () => {
    const out = await vllmParse(Promise.resolve(recorded(fixture("vllm-completions-stream-usage.txt"))), 4)
    assert.isTrue(out.success, out.error)
    assert.strictEqual(out.outputTokens, 4)
    assert.strictEqual(out.itl.length, 3)
  })

  it("SGLang's client on a stream without the usage chunk succeeds, and raises IndexError on one with it", async () => {
    const ok = await sglangOaiParse(Promise.resolve(recorded(fixture("vllm-completions-stream.txt"))), 4)
    assert.isTrue(ok.success, ok.error)
    assert.strictEqual(ok.itl.length, 3)
    const bad = await sglangOaiParse(
      Promise.resolve(recorded(fixture("vllm-completions-stream-usage.txt"))),
      4
    )
    assert.isFalse(bad.success)
    assert.include(bad.error, "IndexError")
  })

  it("SGLang's /generate stream: cumulative text, completion_tokens from meta_info", async () => {
    const out = await sglangGenerateParse(Promise.resolve(recorded(fixture("sglang-generate-stream.txt"))), 4)
    assert.isTrue(out.success, out.error)
    assert.strictEqual(out.outputTokens, 4)
    assert.strictEqual(out.itl.length, 3)
  })
})

const startEngine = async (extra: ReadonlyArray<string> = []) => {
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const child = spawn(process.execPath, [engineJs, "--port", String(port), "--load-sec", "0.1", ...extra], {
    stdio: "ignore"
  })
  const until = Date.now() + 15_000
  while (Date.now() < until) {
    try {
      if ((await fetch(`${base}/health`)).status === 200) return { base, child }
    } catch {
      // not yet
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  child.kill("SIGKILL")
  throw new Error("the stand-in engine did not become ready")
}

describe("the stand-in engine, parsed as each real client parses it", () => {
  let engine: { base: string; child: ChildProcess } | undefined
  beforeAll(async () => {
    engine = await startEngine(["--decode-ms", "2", "--decode-ms-per-seq", "0"])
  }, 20_000)
  afterAll(() => {
    engine?.child.kill("SIGKILL")
  })
  const base = () => engine?.base ?? ""

  it("vLLM's client (include_usage): every request succeeds with the usage chunk's token count", async () => {
    const out = await vllmParse(post(`${base()}/v1/completions`, vllmPayload(6)), 6)
    assert.isTrue(out.success, out.error)
    assert.strictEqual(out.outputTokens, 6)
    assert.strictEqual(out.itl.length, 5)
  })

  it("SGLang's client, backends vllm / sglang-oai (no stream_options): succeeds, no usage-only chunk is sent", async () => {
    const out = await sglangOaiParse(post(`${base()}/v1/completions`, sglangOaiPayload(6)), 6)
    assert.isTrue(out.success, out.error)
    assert.strictEqual(out.itl.length, 5)
    const raw = await (await post(`${base()}/v1/completions`, sglangOaiPayload(3))).text()
    assert.notInclude(raw, '"choices":[]')
    assert.match(raw, /data: \[DONE\]\n\n$/)
  })

  it("the usage-only chunk comes only with stream_options.include_usage, as in vLLM's and SGLang's servers", async () => {
    const raw = await (await post(`${base()}/v1/completions`, vllmPayload(3))).text()
    const events = raw.split("\n\n").filter((e) => e !== "")
    assert.strictEqual(events.length, 5, raw)
    const usage = JSON.parse(removePrefix(events[3] ?? "", "data: "))
    assert.deepStrictEqual(usage.choices, [])
    assert.strictEqual(usage.usage.completion_tokens, 3)
  })

  it("SGLang's client, backend sglang: POST /generate streams as SGLang's server does", async () => {
    const out = await sglangGenerateParse(post(`${base()}/generate`, sglangGeneratePayload(6)), 6)
    assert.isTrue(out.success, out.error)
    assert.strictEqual(out.outputTokens, 6)
    assert.strictEqual(out.itl.length, 5)
  })

  it("SGLang's non-streaming /generate answers one object with text and meta_info", async () => {
    const r = await post(`${base()}/generate`, { ...sglangGeneratePayload(3), stream: false })
    const body = (await r.json()) as { text: string; meta_info: { completion_tokens: number } }
    assert.strictEqual(body.meta_info.completion_tokens, 3)
    assert.isAbove(body.text.length, 0)
  })
})

describe("the stand-in engine dying mid-stream, as a real engine dies", () => {
  it("the stream breaks without [DONE]: every real client's parser marks the request failed", async () => {
    const engine = await startEngine([
      "--decode-ms",
      "5",
      "--decode-ms-per-seq",
      "0",
      "--fail=crash-mid-stream"
    ])
    try {
      // the first request completes (the clients' warm-up); the engine dies during the next one
      const warm = await vllmParse(post(`${engine.base}/v1/completions`, vllmPayload(4)), 4)
      assert.isTrue(warm.success, warm.error)
      const [v, s] = await Promise.all([
        vllmParse(post(`${engine.base}/v1/completions`, vllmPayload(40)), 40),
        sglangOaiParse(post(`${engine.base}/v1/completions`, sglangOaiPayload(40)), 40)
      ])
      assert.isFalse(v.success, "vLLM's client")
      assert.isFalse(s.success, "SGLang's client")
      assert.isBelow(v.text.length, 40 * 4)
      await new Promise<void>((resolve) => {
        if (engine.child.exitCode !== null) resolve()
        else engine.child.on("exit", () => resolve())
      })
      assert.strictEqual(engine.child.exitCode, 1)
    } finally {
      engine.child.kill("SIGKILL")
    }
  })
})

describe("fake-engine.mjs --help", () => {
  it("prints its usage and exits 0 without starting a server", () => {
    const r = spawnSync(process.execPath, [engineJs, "--help"], { encoding: "utf8", timeout: 10_000 })
    assert.strictEqual(r.status, 0, r.stderr)
    assert.match(r.stdout, /^usage: fake-engine\.mjs/m)
    assert.include(r.stdout, "--max-num-seqs")
    assert.notInclude(r.stdout, "Starting vLLM-compatible API server")
  })
})
