/**
 * The stand-in client fails as the real clients fail (issue 14 item 3;
 * docs/design.md#classified-from-what-happened): an engine that dies while the client runs makes
 * vLLM's `bench serve` exit 0 with a result of completed 0 (vllm/benchmarks/serve.py: failed
 * requests are counted, the result is still written), and SGLang's bench_serving raise
 * (python/sglang/bench_serving.py @ 0033168f: after the run it GETs /get_server_info with
 * `requests`, which raises ConnectionError against a dead engine). Both are also checked to succeed
 * against a live engine, SGLang's on its native /generate (`--backend sglang`) without asking for
 * the usage chunk.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { clientJs, runNode, withEngine } from "../support/standIns.js"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-stand-in-client-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

const run = runNode

const client = (base: string, file: string, extra: ReadonlyArray<string> = []) =>
  run([
    clientJs,
    "--base-url",
    base,
    "--num-prompts",
    "6",
    "--max-concurrency",
    "3",
    "--output-len",
    "8",
    "--result-filename",
    file,
    ...extra
  ])

const fast = ["--decode-ms", "3", "--decode-ms-per-seq", "0"]

describe("the stand-in client against an engine that dies while it runs", () => {
  it("as vLLM's: exit 0, a result with completed 0 and every request failed", async () => {
    const file = path.join(dir, "vllm-died.json")
    const r = await withEngine([...fast, "--fail=crash-after-ready"], (base) => client(base, file))
    assert.strictEqual(r.code, 0, r.out)
    assert.include(r.out, "All requests failed")
    const doc = JSON.parse(fs.readFileSync(file, "utf8"))
    assert.strictEqual(doc.completed, 0)
    assert.strictEqual(doc.failed, 6)
    assert.strictEqual(doc.output_throughput, 0)
  })

  it("as SGLang's: raises (ConnectionError at /get_server_info), exit 1, no result line", async () => {
    const file = path.join(dir, "sglang-died.jsonl")
    const r = await withEngine([...fast, "--fail=crash-after-ready"], (base) =>
      client(base, file, ["--format", "sglang", "--backend", "sglang"])
    )
    assert.strictEqual(r.code, 1, r.out)
    assert.include(r.out, "Traceback (most recent call last):")
    assert.include(r.out, "requests.exceptions.ConnectionError")
    assert.isFalse(fs.existsSync(file))
  })
})

describe("the stand-in client against a live engine", () => {
  it("as vLLM's (usage chunk) and as SGLang's on /v1/completions and on /generate: every request completes", async () => {
    await withEngine(fast, async (base) => {
      const v = await client(base, path.join(dir, "v.json"))
      assert.strictEqual(v.code, 0, v.out)
      assert.strictEqual(JSON.parse(fs.readFileSync(path.join(dir, "v.json"), "utf8")).completed, 6)
      for (const backend of ["sglang", "sglang-oai"]) {
        const file = path.join(dir, `s-${backend}.jsonl`)
        const s = await client(base, file, ["--format", "sglang", "--backend", backend])
        assert.strictEqual(s.code, 0, s.out)
        const line = JSON.parse(fs.readFileSync(file, "utf8").trim().split("\n").at(-1) ?? "{}")
        assert.strictEqual(line.completed, 6, backend)
        assert.strictEqual(line.backend, backend)
        assert.strictEqual(line.total_output, 48, backend)
      }
    })
  })
})
