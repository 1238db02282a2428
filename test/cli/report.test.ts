/**
 * `hyperloom report` through the bundled CLI (no Ray needed): one self-contained HTML page for
 * two sessions, with both charts drawn from the attempts' metrics and the side-by-side table.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { type AttemptRecord, initialState, renderState, type SessionState } from "../../src/domain/State.js"
import { bundleCli, runBundled } from "../support/bundle.js"

let cli = ""
let work = ""

const attempt = (n: number, tput: number | null, over: Partial<AttemptRecord> = {}): AttemptRecord => ({
  number: n,
  started_at: "2024-06-01T12:00:00.000Z",
  ended_at: "2024-06-01T12:05:00.000Z",
  runtime_sec: 300,
  error_class: tput === null ? "kv_cache_oom" : null,
  exit_code: tput === null ? 1 : 0,
  error:
    tput === null
      ? "the server exited with code 1 after 52.3 s, before it was ready\nroot cause: ValueError: No available memory for the cache blocks"
      : null,
  signature: null,
  throughput: tput,
  result_format: tput === null ? null : "vllm",
  metrics:
    tput === null
      ? null
      : {
          output_throughput: tput,
          total_token_throughput: tput * 5,
          request_throughput: 16.02,
          completed: 1000,
          mean_ttft_ms: 212.4,
          median_ttft_ms: 187.9,
          p99_ttft_ms: 611.2,
          mean_tpot_ms: 14.8,
          median_tpot_ms: 14.6,
          p99_tpot_ms: 19.7
        },
  ...over
})

const writeSession = (name: string, state: SessionState, env?: unknown) => {
  const dir = path.join(work, name)
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, "state.json"), renderState(state))
  if (env !== undefined) fs.writeFileSync(path.join(dir, "environment.json"), JSON.stringify(env))
  return dir
}

describe("hyperloom report", () => {
  beforeAll(async () => {
    ;({ cli, work } = await bundleCli())
  }, 120_000)
  afterAll(() => fs.rmSync(work, { recursive: true, force: true }))

  it("writes one self-contained page: charts of throughput and latency per attempt, sessions side by side", () => {
    const a = writeSession(
      "vllm-tp1",
      {
        ...initialState(),
        status: "succeeded",
        baseline_tput: 4101.9,
        baseline_attempts: [attempt(1, null), attempt(2, 4101.9)]
      },
      {
        recorded_at: "2024-06-01T12:05:00.000Z",
        attempt: 2,
        hyperloom_version: "0.1.0",
        ray_version: "2.58.0",
        node: {
          id: null,
          hostname: "gpu-7",
          gpu_count: 1,
          cuda_visible_devices: "0",
          accelerators: ["NVIDIA H100 80GB HBM3"]
        },
        server_argv: ["sh", "-c", "vllm serve meta-llama/Llama-3.1-8B-Instruct --port $HYPERLOOM_PORT"],
        client_argv: ["vllm", "bench", "serve"],
        engines: { vllm: "0.9.2" },
        python: "3.12.3"
      }
    )
    const b = writeSession("sglang-tp1", {
      ...initialState(),
      status: "succeeded",
      baseline_tput: 4361.2,
      baseline_attempts: [attempt(1, 4361.2, { result_format: "sglang" })]
    })
    const out = path.join(work, "out", "..", "report.html")
    const r = runBundled(cli, work, ["report", "--session", a, "--session", b, "--out", out])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.include(r.stdout, "report.html (2 session(s)")
    const html = fs.readFileSync(path.join(work, "report.html"), "utf8")
    // self-contained: nothing is fetched
    assert.notMatch(html, /<script|<link|<img|<iframe|@import|url\(/i)
    assert.notMatch(html, /(src|href)=/i)
    // two charts, each with a line per session, points for measured attempts, a × for the failed one
    assert.strictEqual(html.match(/<svg class="chart"/g)?.length, 2)
    assert.include(html, "Output token throughput per attempt")
    assert.include(html, "Latency per attempt")
    assert.include(html, "vllm-tp1 attempt 2: succeeded, 4,102 tok/s")
    assert.include(html, "vllm-tp1 attempt 1: kv_cache_oom")
    assert.include(html, '<g class="failed">')
    assert.include(html, "TTFT mean 212 ms, p99 611 ms")
    // the table
    assert.include(html, "<td>vllm 0.9.2</td>")
    assert.include(html, "NVIDIA H100 80GB HBM3")
    assert.include(html, "<td>4,102</td>")
    assert.include(html, "<td>4,361</td>")
    assert.include(html, "212 / 188 / 611")
    assert.include(html, "vllm serve meta-llama/Llama-3.1-8B-Instruct --port $HYPERLOOM_PORT")
    assert.include(html, "the server exited with code 1 after 52.3 s")
  })

  it("a directory without a session is one clear line and a non-zero exit", () => {
    const r = runBundled(cli, work, ["report", "--session", path.join(work, "nothing-here")])
    assert.notStrictEqual(r.code, 0)
    assert.include(r.stderr, "no baseline session in")
    assert.notMatch(r.stderr, /\n\s+at .+:\d+:\d+/)
  })
})
