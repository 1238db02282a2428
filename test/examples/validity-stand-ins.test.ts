/**
 * The validity stand-ins (docs/design.md#samplers): the engine model's failure modes and the true
 * best they hide, the stand-in engine's vLLM and SGLang faces (/metrics, startup lines,
 * /get_server_info) counting what it served, the stand-in client's failure modes, and the fake
 * vendor tool's throttle and foreign process.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import {
  answerFor,
  effective,
  KNOWN_PROMPTS,
  kvFailure,
  modelFlags,
  predict,
  VALIDITY
} from "../../examples/engine-model.mjs"
import { fakeGpuTool } from "../support/fakeGpuTools.js"
import { freePort } from "../support/freePort.js"

const root = path.resolve(import.meta.dirname, "../..")
const engineJs = path.join(root, "examples/fake-engine.mjs")
const clientJs = path.join(root, "examples/fake-bench-client.mjs")

describe("engine model: the validity failure modes", () => {
  const at = (seqs: string, ...extra: Array<string>) =>
    modelFlags([...VALIDITY.engineArgs, "--max-num-seqs", seqs, ...extra])
  const tput = (s: ReturnType<typeof modelFlags>) => predict(s, VALIDITY.load).outputThroughput

  it("the true best is 32; a capped 64 and an fp8 32 would each beat it if believed", () => {
    const honest = VALIDITY.params[0]!.values.filter((v) => kvFailure(at(v)) === undefined)
    assert.deepStrictEqual(honest, ["16", "32"])
    const best = honest.reduce((a, b) => (tput(at(a)) >= tput(at(b)) ? a : b))
    assert.deepStrictEqual({ "max-num-seqs": best }, VALIDITY.trueBest)
    assert.approximately(tput(at("32")), 888.9, 0.1)
    // capped: asked 64, the KV cache holds 45 requests of 12000 tokens: it runs 45, no failure
    const capped = at("64", "--fail=capped")
    assert.isUndefined(kvFailure(capped))
    assert.strictEqual(effective(capped).maxNumSeqs, 45)
    assert.strictEqual(capped.maxNumSeqs, 64)
    assert.isAbove(tput(capped), tput(at("32")) * 1.1)
    // fp8: a quarter faster per step, and wrong
    const fp8 = at("32", "--quantization", "fp8")
    assert.approximately(tput(fp8), 1185.2, 0.1)
    assert.deepStrictEqual(modelFlags(["--fail=wrong-fast"]).quantization, "fp8")
    for (const k of KNOWN_PROMPTS) {
      assert.strictEqual(answerFor(at("32"), k.prompt), k.answer)
      assert.strictEqual(answerFor(fp8, k.prompt), k.wrong)
    }
    assert.isUndefined(answerFor(at("32"), "hi hi hi"))
  })
})

const waitHealthy = async (base: string) => {
  const until = Date.now() + 15_000
  while (Date.now() < until) {
    try {
      if ((await fetch(`${base}/health`)).status === 200) return
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`${base} not healthy`)
}

/** The client's argv for 10 prompts of 8 tokens, 5 at a time (and one alone before them). */
const clientArgv = (base: string, ...extra: Array<string>) => [
  clientJs,
  "--base-url",
  base,
  "--num-prompts",
  "10",
  "--max-concurrency",
  "5",
  "--output-len",
  "8",
  ...extra
]

const runClient = (base: string, file: string, ...extra: Array<string>) =>
  new Promise<{ code: number | null }>((resolve) => {
    const child = spawn(process.execPath, clientArgv(base, "--result-filename", file, ...extra), {
      stdio: "ignore"
    })
    child.on("close", (code) => resolve({ code }))
  })

/** The summed value of every series of `name` (labels ignored). */
const metric = (text: string, name: string, where: (labels: string) => boolean = () => true) =>
  text
    .split("\n")
    .filter((l) => l.startsWith(`${name}{`) && where(l.slice(l.indexOf("{"), l.indexOf("}") + 1)))
    .reduce((a, l) => a + Number(l.slice(l.lastIndexOf(" ") + 1)), 0)

describe("the stand-in engine's faces", () => {
  const engines: Array<ChildProcess> = []
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-validity-stand-ins-"))
  const start = async (...args: Array<string>) => {
    const port = await freePort()
    const log = path.join(dir, `engine-${port}.log`)
    const out = fs.openSync(log, "w")
    engines.push(
      spawn(process.execPath, [engineJs, "--port", String(port), "--load-sec", "0.1", ...args], {
        stdio: ["ignore", out, out]
      })
    )
    const base = `http://127.0.0.1:${port}`
    await waitHealthy(base)
    return { base, log: () => fs.readFileSync(log, "utf8") }
  }
  afterAll(() => {
    for (const e of engines) e.kill("SIGKILL")
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it("vLLM: /metrics counts what the client got; the startup lines name what was asked and what runs", async () => {
    const e = await start(...VALIDITY.engineArgs, "--max-num-seqs", "64", "--fail=capped")
    const file = path.join(dir, "vllm.json")
    assert.strictEqual((await runClient(e.base, file)).code, 0)
    const text = await (await fetch(`${e.base}/metrics`)).text()
    const result = JSON.parse(fs.readFileSync(file, "utf8"))
    // the client sends one request alone before its run (vLLM's initial test run): 11 in all
    assert.strictEqual(metric(text, "vllm:generation_tokens_total"), result.total_output_tokens + 8)
    assert.strictEqual(
      metric(text, "vllm:request_success_total", (l) => l.includes('"length"')),
      11
    )
    assert.strictEqual(metric(text, "vllm:num_requests_running"), 0)
    assert.match(text, /vllm:cache_config_info\{[^}]*gpu_memory_utilization="0\.9"[^}]*\} 1\.0/)
    assert.match(text, /# TYPE vllm:generation_tokens counter/)
    assert.strictEqual((await fetch(`${e.base}/v1/models`)).status, 200)
    const log = e.log()
    assert.include(log, "non-default args: {'model_tag': 'fake/stand-in-7b'")
    assert.include(log, "'max_num_seqs': 64")
    assert.match(
      log,
      /Initializing a V1 LLM engine \(v[^)]+\) with config: model='fake\/stand-in-7b', .*max_seq_len=12000, .*max_num_seqs=45, /
    )
    assert.include(log, "Maximum concurrency for 12,000 tokens per request: 45.00x")
  })

  it("SGLang: /get_server_info gives the args as asked and what the scheduler runs; /metrics only with --enable-metrics", async () => {
    const plain = await start(
      "--api",
      "sglang",
      ...VALIDITY.engineArgs,
      "--max-running-requests",
      "64",
      "--fail=capped"
    )
    assert.strictEqual((await fetch(`${plain.base}/metrics`)).status, 404)
    const info = (await (await fetch(`${plain.base}/get_server_info`)).json()) as Record<string, unknown>
    assert.strictEqual(info.max_running_requests, 64)
    const states = info.internal_states as Array<Record<string, unknown>>
    assert.strictEqual(states[0]?.effective_max_running_requests_per_dp, 45)
    assert.include(plain.log(), "max_running_requests=45, context_len=12000")
    const e = await start("--api", "sglang", "--enable-metrics")
    const file = path.join(dir, "sglang.json")
    assert.strictEqual((await runClient(e.base, file)).code, 0)
    const text = await (await fetch(`${e.base}/metrics`)).text()
    const result = JSON.parse(fs.readFileSync(file, "utf8"))
    assert.strictEqual(metric(text, "sglang:generation_tokens_total"), result.total_output_tokens + 8)
    assert.strictEqual(metric(text, "sglang:num_requests_total"), 11)
    assert.strictEqual(metric(text, "sglang:num_queue_reqs"), 0)
  })

  it("cold-start: the first 8 requests after a start take 3 × as long per step; the next run is warm", async () => {
    const e = await start("--fail=cold-start")
    const tput = async (name: string) => {
      const file = path.join(dir, name)
      assert.strictEqual((await runClient(e.base, file)).code, 0)
      return JSON.parse(fs.readFileSync(file, "utf8")).output_throughput as number
    }
    const cold = await tput("cold.json")
    const warm = await tput("warm.json")
    // 7 of the first run's 10 requests are cold (the client's warm-up request took the 8th)
    assert.isBelow(cold, warm * 0.75, `cold ${cold} tok/s, warm ${warm} tok/s`)
  })

  it("wrong-fast answers the known prompts wrong; the honest engine right", async () => {
    const ask = async (base: string, prompt: string) => {
      const r = await fetch(`${base}/v1/completions`, {
        method: "POST",
        body: JSON.stringify({ prompt, max_tokens: 2, stream: false })
      })
      return ((await r.json()) as { choices: Array<{ text: string }> }).choices[0]!.text
    }
    const honest = await start()
    const wrong = await start("--fail=wrong-fast")
    for (const k of KNOWN_PROMPTS) {
      assert.isTrue((await ask(honest.base, k.prompt)).startsWith(k.answer))
      assert.isTrue((await ask(wrong.base, k.prompt)).startsWith(k.wrong))
    }
    // the probe a --check runs: exit 0 on the honest engine, 1 with the wrong answer quoted
    const probe = (base: string) =>
      spawnSync(process.execPath, [path.join(root, "examples/known-answers.mjs")], {
        encoding: "utf8",
        env: { ...process.env, HYPERLOOM_BASE_URL: base }
      })
    assert.strictEqual(probe(honest.base).status, 0)
    const failed = probe(wrong.base)
    assert.strictEqual(failed.status, 1)
    assert.include(failed.stdout, "wrong: 'The capital of France is' answered ' Lyon")
  })

  it("the client's failure modes: dropped requests counted failed, overcounted tokens, a burnt core", async () => {
    const e = await start()
    const drop = path.join(dir, "drop.json")
    assert.strictEqual((await runClient(e.base, drop, "--fail=drop", "--drop-every", "5")).code, 0)
    const dropped = JSON.parse(fs.readFileSync(drop, "utf8"))
    assert.deepStrictEqual([dropped.completed, dropped.failed], [8, 2])
    const text = await (await fetch(`${e.base}/metrics`)).text()
    assert.strictEqual(
      metric(text, "vllm:request_success_total", (l) => l.includes('"abort"')),
      2
    )
    const over = path.join(dir, "over.json")
    assert.strictEqual((await runClient(e.base, over, "--fail=overcount")).code, 0)
    assert.strictEqual(JSON.parse(fs.readFileSync(over, "utf8")).total_output_tokens, 100)
    // --burn-ms of CPU per token event: 11 requests × 8 tokens × 5 ms ≥ 0.44 s of the client's
    // CPU, as the shell's `times` counts its children's (its second line: user and system)
    const out = execFileSync(
      "sh",
      [
        "-c",
        '"$@" >/dev/null; times',
        "sh",
        process.execPath,
        ...clientArgv(e.base, "--fail=cpu-bound", "--burn-ms", "5")
      ],
      { encoding: "utf8" }
    )
    const sec = (t: string) => {
      const m = /^(\d+)m([\d.]+)s$/.exec(t)
      return m === null ? Number.NaN : Number(m[1]) * 60 + Number(m[2])
    }
    const [user, sys] = (out.trim().split("\n").at(-1) ?? "").split(/\s+/)
    const childCpuSec = sec(user ?? "") + sec(sys ?? "")
    assert.isAtLeast(childCpuSec, 0.44, `client CPU ${childCpuSec} s (${out.trim()})`)
  })
})

describe("the fake vendor tool", () => {
  const tools = fakeGpuTool({ gpus: 2, throttleAfter: 0.3, foreignAfter: 0.3, foreignPid: 4242 })
  afterAll(() => tools.remove())
  const smi = (...args: Array<string>) =>
    execFileSync("nvidia-smi", args, { encoding: "utf8", env: { ...process.env, PATH: tools.path } })

  it("throttles and shows a foreign process from its time on, in nvidia-smi's and amd-smi's formats", async () => {
    const query = [
      "--query-gpu=index,uuid,clocks.sm,clocks_event_reasons.active,temperature.gpu,power.draw",
      "--format=csv,noheader,nounits"
    ]
    const apps = ["--query-compute-apps=pid,process_name,gpu_uuid,used_memory", "--format=csv,noheader"]
    assert.strictEqual(smi(...apps), "", "nothing before the first clocks query")
    const before = smi(...query)
      .trim()
      .split("\n")
    assert.deepStrictEqual(before[0]?.split(", ").slice(2), ["1980", "0x0000000000000000", "45", "300.25"])
    await new Promise((r) => setTimeout(r, 400))
    const after = smi(...query)
      .trim()
      .split("\n")
    assert.strictEqual(after.length, 2)
    assert.deepStrictEqual(after[1]?.split(", ").slice(2), ["1410", "0x0000000000000020", "87", "349.50"])
    assert.strictEqual(smi(...apps), "4242, python3, GPU-5e5c2c7e-8a49-7d3b-4d7e-0e6f4c1b9a21, 20480 MiB\n")
    const amd = (...args: Array<string>) =>
      execFileSync("amd-smi", args, { encoding: "utf8", env: { ...process.env, PATH: tools.path } })
    const metric = JSON.parse(amd("metric", "--json")) as Array<Record<string, any>>
    assert.strictEqual(metric[0]?.power.throttle_status, "THROTTLED")
    assert.deepStrictEqual(metric[0]?.clock.gfx_0.clk, { value: 1410, unit: "MHz" })
    const procs = JSON.parse(amd("process", "--json")) as Array<Record<string, any>>
    assert.strictEqual(procs[0]?.process_list[0].process_info.pid, 4242)
    assert.strictEqual(procs[1]?.process_list[0].process_info, "No running processes detected")
    assert.throws(() => smi("--query-gpu=bogus", "--format=csv"))
  })
})
