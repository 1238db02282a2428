/**
 * Every path the real load clients (and the sweeps people compare hyperloom with) read from a
 * server besides the stream, against the stand-in engine (issue 27, item 15). Each test ports the
 * client's own code for that path:
 *
 * - SGLang `python -m sglang.bench_serving` (sgl-project/sglang python/sglang/bench_serving.py
 *   @ 0033168f0f58b2bc05aa0273bd475d9c01bafb1c):
 *   - `run_benchmark`, without `--model`: `requests.get(base + "/v1/models").json().get("data",
 *     [])`, then `model_list[0]["id"]`;
 *   - `benchmark`, backends containing "sglang" (sglang, sglang-oai, …), after every run:
 *     `requests.get(base + "/get_server_info")`; on 200, `["decode"][0]` when present, then
 *     `["internal_states"][0].get("avg_spec_accept_length", None)` — a server without
 *     `internal_states` is `KeyError: 'internal_states'` (exit 1, no result file);
 *   - with `--flush-cache` (or SGLANG_IS_IN_CI): `requests.post(base + "/flush_cache")`.
 * - vLLM `vllm bench sweep serve` (vllm-project/vllm vllm/benchmarks/sweep/server.py,
 *   `ServerProcess.reset_caches`): after every run, `requests.post` to `/reset_prefix_cache`,
 *   `/reset_mm_cache`, `/reset_encoder_cache` with `raise_for_status()`; `/health` for readiness.
 * - `--profile` in both clients: POST `/start_profile` and `/stop_profile`.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { freePort } from "../support/freePort.js"

const root = path.resolve(import.meta.dirname, "../..")
const engineJs = path.join(root, "examples/fake-engine.mjs")

/** Python's `d[k]` / `l[i]`: KeyError / IndexError as the client would raise them. */
const pyIndex = (v: unknown, k: string | number): unknown => {
  if (typeof k === "number") {
    if (!Array.isArray(v)) throw new TypeError("'NoneType' object is not subscriptable")
    if (k >= v.length) throw new RangeError("IndexError: list index out of range")
    return v[k]
  }
  if (typeof v !== "object" || v === null || Array.isArray(v) || !(k in v))
    throw new Error(`KeyError: '${k}'`)
  return (v as Record<string, unknown>)[k]
}

let child: ChildProcess | undefined
let base = ""

beforeAll(async () => {
  const port = await freePort()
  base = `http://127.0.0.1:${port}`
  child = spawn(process.execPath, [engineJs, "--port", String(port), "--load-sec", "0.1", "--model", "m/x"], {
    stdio: "ignore",
    env: { ...process.env, VLLM_SERVER_DEV_MODE: "1" }
  })
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(`${base}/health`)).status === 200) return
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error("the stand-in engine did not become ready")
}, 20_000)

afterAll(() => {
  child?.kill("SIGKILL")
})

describe("the stand-in engine serves every path the real clients read", () => {
  it("SGLang's bench_serving after a run: /get_server_info has internal_states[0] (no KeyError)", async () => {
    const r = await fetch(`${base}/get_server_info`)
    assert.strictEqual(r.status, 200)
    let info = (await r.json()) as Record<string, unknown>
    if ("decode" in info) info = pyIndex(pyIndex(info, "decode"), 0) as Record<string, unknown>
    const state = pyIndex(pyIndex(info, "internal_states"), 0)
    assert.isObject(state)
    // `.get("avg_spec_accept_length", None)`: absent without speculative decoding, as SGLang's
    const accept = (state as Record<string, unknown>).avg_spec_accept_length ?? null
    assert.isNull(accept)
    // the server args and scheduler info SGLang's endpoint merges in
    assert.strictEqual(info.model_path, "m/x")
    assert.isNumber(info.max_running_requests)
    assert.isNumber(info.max_total_num_tokens)
    assert.isString(info.version)
  })

  it("SGLang's bench_serving without --model: /v1/models data[0].id", async () => {
    const models = (await (await fetch(`${base}/v1/models`)).json()) as Record<string, unknown>
    assert.strictEqual(pyIndex(pyIndex(models.data ?? [], 0), "id"), "m/x")
  })

  it("SGLang's --flush-cache: POST /flush_cache answers 200", async () => {
    const r = await fetch(`${base}/flush_cache`, { method: "POST" })
    assert.strictEqual(r.status, 200)
  })

  it("vLLM's sweep resets its caches after every run: each reset POST answers 2xx (raise_for_status)", async () => {
    for (const p of ["/reset_prefix_cache", "/reset_mm_cache", "/reset_encoder_cache"]) {
      const r = await fetch(`${base}${p}`, { method: "POST" })
      assert.isTrue(r.status >= 200 && r.status < 300, `${p}: ${r.status}`)
    }
  })

  it("--profile in both clients: POST /start_profile and /stop_profile answer 200", async () => {
    for (const p of ["/start_profile", "/stop_profile"]) {
      const r = await fetch(`${base}${p}`, { method: "POST" })
      assert.strictEqual(r.status, 200, p)
    }
  })
})
