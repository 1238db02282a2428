/**
 * `hyperloom baseline run --server` on one real head
 * (docs/design.md#the-engines-life-in-an-attempt), through the bundled CLI, with the stand-in
 * engine (examples/fake-engine.mjs) and client (examples/fake-bench-client.mjs): a successful
 * serving attempt in both result formats (metrics recorded, logs kept, engine gone, slot free), an
 * engine dying with vLLM's real KV-cache message (classified, fast), one never ready (bounded,
 * engine gone), Ctrl-C and a SIGKILLed hyperloom while the engine runs (the engine gone before the
 * slot is free again). The tests share one head (each leaves it idle); each prints one `[serving
 * scenario]` line.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { cleanEnv, cliPath, runCli } from "../support/cli.js"
import { fakeGpuTool } from "../support/fakeGpuTools.js"
import { pidsWithArg, waitGone } from "../support/lease.js"
import { prepareRay, projectRoot, startHead, teardownRay, waitFor } from "../support/ray.js"

const PORT = 6397
const engine = (tag: string, extra = "") =>
  `${process.execPath} ${path.join(projectRoot, "examples/fake-engine.mjs")} --load-sec 1 --tag=${tag} ${extra}`.trim()
const client = (extra: ReadonlyArray<string> = []) => [
  process.execPath,
  "examples/fake-bench-client.mjs",
  "--num-prompts",
  "8",
  "--max-concurrency",
  "4",
  "--output-len",
  "16",
  ...extra
]

const sessions: Array<string> = []
const newSession = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-serving-"))
  sessions.push(dir)
  return dir
}
const readState = (dir: string) => JSON.parse(fs.readFileSync(path.join(dir, "state.json"), "utf8"))
let tagN = 0
const newTag = () => `hl-engine-${process.pid}-${Date.now()}-${tagN++}`

const serving = (
  session: string,
  server: string,
  args: ReadonlyArray<string>,
  cmd: ReadonlyArray<string>,
  env: Record<string, string> = {}
) =>
  runCli(
    [
      "baseline",
      "run",
      "--session",
      session,
      "--json",
      "--gpus",
      "1",
      "--server",
      server,
      ...args,
      "--",
      ...cmd
    ],
    { timeoutMs: 170_000, env }
  )

const report = (scenario: string, state: any, ms: number) =>
  console.log(
    `[serving scenario] ${scenario}: ${state?.baseline_attempts?.length ?? "?"} attempt(s), ${state?.status ?? "?"}` +
      `${state?.stop_reason ? ` ${state.stop_reason}` : ""}, ${(ms / 1000).toFixed(1)} s`
  )

/**
 * The slot is free again: a lease on it is granted. (Ray frees a killed actor's resources
 * asynchronously, so a lease right after hyperloom exits may wait a moment; it must not wait long.)
 */
const assertSlotFree = async () => {
  const r = await runCli(["lease", "run", "--gpus", "1", "--", "true"], { timeoutMs: 60_000 })
  assert.strictEqual(r.code, 0, r.stderr)
  assert.isBelow(r.ms, 20_000, r.stderr)
}

describe("baseline run --server on a real head", () => {
  beforeAll(async () => {
    await prepareRay()
    await startHead({ port: PORT, slot: true, numGpus: 1 })
  }, 120_000)
  afterAll(async () => {
    await teardownRay()
    for (const s of sessions) fs.rmSync(s, { recursive: true, force: true })
  }, 120_000)

  it("a serving attempt: vLLM result format, metrics recorded, logs kept, environment recorded, engine gone, slot free; what the node sampled is in its record", async () => {
    const session = newSession()
    const tag = newTag()
    // a fake nvidia-smi first on the node's PATH: GPU 0 (the lease's) throttles 0.5 s into the run
    const gpuTool = fakeGpuTool({ gpus: 1, throttleAfter: 0.5 })
    sessions.push(gpuTool.dir)
    // a local dataset file the client names (vLLM's --dataset-path): its size and SHA-256 on record
    const data = path.join(gpuTool.dir, "prompts.jsonl")
    fs.writeFileSync(data, '{"prompt": "count to ten"}\n')
    const sha256 = createHash("sha256").update(fs.readFileSync(data)).digest("hex")
    // the client's $HYPERLOOM_… arguments are expanded by the runner (no shell, the port is known there)
    const r = await serving(
      session,
      engine(tag),
      ["--ready-timeout", "60"],
      client([
        "--base-url",
        "$HYPERLOOM_BASE_URL",
        "--result-filename",
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the runner expands ${…} (a shell-style reference), not JavaScript
        "${HYPERLOOM_RESULT_FILE}",
        "--dataset-path",
        data
      ]),
      { PATH: gpuTool.path }
    )
    report("success (vllm format)", r.json, r.ms)
    assert.strictEqual(r.code, 0, r.stderr)
    const state = readState(session)
    assert.strictEqual(state.status, "succeeded")
    const a = state.baseline_attempts[0]
    assert.strictEqual(a.result_format, "vllm")
    assert.isAbove(a.throughput, 0)
    assert.strictEqual(a.metrics.output_throughput, a.throughput)
    assert.strictEqual(a.metrics.completed, 8)
    for (const k of [
      "request_throughput",
      "total_token_throughput",
      "mean_ttft_ms",
      "p99_tpot_ms",
      "median_itl_ms"
    ]) {
      assert.isNumber(a.metrics[k], k)
    }
    const dir = path.join(session, "attempts", "1")
    const serverLog = fs.readFileSync(path.join(dir, "server.log"), "utf8")
    assert.include(serverLog, "Application startup complete.")
    assert.include(serverLog, "Received request cmpl-8")
    assert.include(fs.readFileSync(path.join(dir, "client.log"), "utf8"), "Serving Benchmark Result")
    assert.isTrue(fs.existsSync(path.join(dir, "result.json")))
    const status = JSON.parse(fs.readFileSync(path.join(dir, "serve.json"), "utf8"))
    assert.strictEqual(status.outcome, "client_exited")
    assert.isTrue(status.server.gone)
    // the default warm-up ran after readiness, discarded; the run was judged (docs/trust.md)
    assert.deepInclude(status.warmup, { requests: 8, ok: 8, failed: 0 })
    assert.deepInclude(a.warmup, { requests: 8, ok: 8 })
    assert.notStrictEqual(a.validity.verdict, "invalid")
    assert.deepStrictEqual(a.client, { ...a.client, completed: 8, failed: 0 })
    // what the node sampled (docs/design.md#samplers): the engine's counters over the run agree
    // with the client (its 8 requests and its one warm-up request, 16 tokens each; hyperloom's own
    // warm-up came before), the client's CPU, the lease's GPU through the fake tool
    const obs = a.observations
    assert.strictEqual(obs.engine_load.source, "vllm", JSON.stringify(obs))
    assert.strictEqual(obs.engine_load.requests_total_delta, 9, JSON.stringify(obs))
    assert.strictEqual(
      obs.engine_load.generation_tokens_delta,
      a.client.output_tokens + 16,
      JSON.stringify(obs)
    )
    assert.isAbove(obs.client_cpu.cpu_seconds, 0)
    assert.strictEqual(obs.gpus.tool, "nvidia-smi")
    assert.isTrue(obs.gpus.samples.every((g: any) => g.index === 0))
    assert.deepStrictEqual(obs.gpus.samples[0].throttle_reasons, [])
    assert.deepStrictEqual(obs.gpus.samples.at(-1).throttle_reasons, ["sw_thermal_slowdown"])
    assert.deepStrictEqual(obs.not_checked, [])
    assert.strictEqual(a.engine_config.engine, "vllm")
    assert.deepStrictEqual(
      [a.engine_config.values.max_num_seqs, a.engine_config.sources.max_num_seqs],
      [256, "startup log"]
    )
    assert.isTrue(
      a.validity.findings.some((f: any) => f.check === "throttled"),
      JSON.stringify(a.validity)
    )
    const env = JSON.parse(fs.readFileSync(path.join(session, "environment.json"), "utf8"))
    assert.strictEqual(env.ray_version, "2.58.0")
    assert.strictEqual(env.node.gpu_count, 1)
    assert.strictEqual(env.node.cuda_visible_devices, "0")
    assert.match(env.node.id, /^[0-9a-f]{56}$/)
    assert.deepStrictEqual(env.server_argv, ["sh", "-c", engine(tag)])
    // progress while waiting, then readiness, live client output
    assert.include(r.stderr, "waiting for")
    assert.match(r.stderr, /server ready after [\d.]+ s/)
    assert.include(r.stderr, "Serving Benchmark Result")
    assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [], "the engine is gone")
    assert.deepStrictEqual(a.workload.dataset_file, { bytes: 27, sha256 })
    // state show prints the metrics, and the workload once
    const show = await runCli(["state", "show", "--session", session])
    assert.include(show.stdout, "[vllm] · out ")
    assert.include(show.stdout, `\nworkload    client vllm`)
    assert.include(show.stdout, `dataset file 27 bytes, sha256 ${sha256}`)
    await assertSlotFree()
  })

  it("SGLang's result format (JSON lines) is recognised too; --check failing on the first engine start: nothing measured (check_failed, its last line quoted, check.log kept), the next attempt measures", async () => {
    const session = newSession()
    const count = path.join(session, "checks")
    // fails the first time only; says what it was given
    const check = `n=$(cat ${count} 2>/dev/null || echo 0); echo $((n+1)) > ${count}; echo "probing $HYPERLOOM_BASE_URL"; [ "$n" -ge 1 ] || { echo 'probe 1: expected " 4", got " 5"'; exit 1; }`
    const r = await serving(
      session,
      engine(newTag()),
      ["--check", check, "--warmup", "0"],
      client(["--format", "sglang"])
    )
    const state = readState(session)
    report("success (sglang format) after a failed check", state, r.ms)
    assert.strictEqual(r.code, 0, r.stderr)
    const [failed, a] = state.baseline_attempts
    assert.strictEqual(failed.error_class, "invalid_measurement")
    assert.include(
      failed.error,
      'check_failed (invalid): the check exited 1: "probe 1: expected \\" 4\\", got \\" 5\\""'
    )
    assert.deepStrictEqual(
      failed.validity.findings.map((f: any) => f.check),
      ["check_failed"]
    )
    assert.isNull(failed.throughput)
    const dir1 = path.join(session, "attempts", "1")
    assert.match(fs.readFileSync(path.join(dir1, "check.log"), "utf8"), /probing http:\/\/127\.0\.0\.1:\d+/)
    assert.isFalse(
      fs.existsSync(path.join(dir1, "client.log")),
      "the client never ran on an engine that failed its check"
    )
    assert.strictEqual(a.error_class, null)
    assert.strictEqual(a.check.exit_code, 0)
    assert.isUndefined(a.warmup, "--warmup 0 sends nothing")
    assert.strictEqual(state.baseline_tput, a.throughput)
    assert.strictEqual(a.result_format, "sglang")
    assert.strictEqual(a.metrics.total_token_throughput > a.throughput, true)
  })

  it("an engine dying with vLLM's KV-cache message: kv_cache_oom, fast, engine gone", async () => {
    const session = newSession()
    const tag = newTag()
    const r = await serving(session, engine(tag, "--fail=kv-oom-vllm"), [], client())
    report("kv-cache oom", r.json, r.ms)
    assert.strictEqual(r.code, 10, r.stderr)
    const state = readState(session)
    assert.deepStrictEqual(
      state.baseline_attempts.map((a: any) => a.error_class),
      ["kv_cache_oom", "kv_cache_oom", "kv_cache_oom"]
    )
    const a = state.baseline_attempts[0]
    assert.match(a.error, /^the server exited with code 1 after [\d.]+ s, before it was ready/)
    assert.include(a.error, "No available memory for the cache blocks")
    assert.isBelow(a.runtime_sec, 10, "the failure is reported as soon as the engine dies")
    assert.notInclude(
      fs.readFileSync(path.join(session, "attempts", "1", "server.log"), "utf8").slice(-2000),
      "No available memory",
      "the root cause is outside the last 2000 characters: classified from the whole log"
    )
    assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [])
  })

  it("an engine that never becomes ready: timeout after --ready-timeout, engine gone each time", async () => {
    const session = newSession()
    const tag = newTag()
    const r = await serving(session, engine(tag, "--never-ready"), ["--ready-timeout", "3"], client())
    report("never ready", r.json, r.ms)
    assert.strictEqual(r.code, 10, r.stderr)
    const state = readState(session)
    assert.deepStrictEqual(
      state.baseline_attempts.map((a: any) => a.error_class),
      ["timeout", "timeout", "timeout"]
    )
    assert.include(state.baseline_attempts[0].error, "the server was not ready within 3 s and was stopped")
    assert.include(
      state.baseline_attempts[0].error,
      "[launcher.py] Starting",
      state.baseline_attempts[0].error
    )
    for (const a of state.baseline_attempts) assert.isBelow(a.runtime_sec, 15)
    assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [])
  })

  /** Starts a serving run whose engine loads "forever"; resolves once the engine runs. */
  const startLongRun = async (session: string, tag: string) => {
    const child: ChildProcess = spawn(
      process.execPath,
      [
        cliPath,
        "baseline",
        "run",
        "--session",
        session,
        "--json",
        "--gpus",
        "1",
        "--server",
        engine(tag, "--never-ready"),
        "--",
        ...client()
      ],
      { cwd: projectRoot, env: cleanEnv(), stdio: ["ignore", "pipe", "pipe"] }
    )
    const out = { stdout: "", stderr: "" }
    child.stdout!.on("data", (d) => (out.stdout += d))
    child.stderr!.on("data", (d) => (out.stderr += d))
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
    await waitFor(
      "the engine to run",
      () => (pidsWithArg(`--tag=${tag}`).length > 0 ? true : undefined),
      90_000
    )
    await waitFor("a progress line", () => out.stderr.includes("waiting for the server") || undefined, 30_000)
    return { child, out, exited }
  }

  it("Ctrl-C while the engine loads: cancelled, the engine's group stopped before the slot is free", async () => {
    const session = newSession()
    const tag = newTag()
    const run = await startLongRun(session, tag)
    try {
      const t = Date.now()
      run.child.kill("SIGINT")
      const code = await Promise.race([
        run.exited,
        new Promise<"hung">((r) => setTimeout(() => r("hung"), 30_000))
      ])
      console.log(`[serving scenario] ctrl-c: exit ${code} ${Date.now() - t} ms after SIGINT`)
      assert.strictEqual(code, 130, run.out.stderr)
      assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [], "the engine is gone when hyperloom has exited")
      const state = readState(session)
      assert.strictEqual(state.status, "cancelled")
      assert.deepStrictEqual(
        state.baseline_attempts.map((a: any) => a.error_class),
        ["orchestrator_cancelled"]
      )
      const status = JSON.parse(fs.readFileSync(path.join(session, "attempts", "1", "serve.json"), "utf8"))
      assert.strictEqual(status.outcome, "stopped")
      assert.isTrue(status.server.gone)
    } finally {
      if (run.child.exitCode === null) run.child.kill("SIGKILL")
    }
    await assertSlotFree()
  })

  it("hyperloom SIGKILLed while the engine loads: the lease releases itself, engine gone first", async () => {
    const session = newSession()
    const tag = newTag()
    const run = await startLongRun(session, tag)
    const t = Date.now()
    run.child.kill("SIGKILL")
    await run.exited
    // The bridge sees EOF and releases: the runner stops the engine's group, then the actor goes.
    await waitGone("the engine", () => pidsWithArg(`--tag=${tag}`), 20_000)
    console.log(`[serving scenario] hyperloom SIGKILL: engine gone ${Date.now() - t} ms after the kill`)
    const status = await waitFor(
      "serve.json to record the stop",
      () => {
        try {
          const s = JSON.parse(fs.readFileSync(path.join(session, "attempts", "1", "serve.json"), "utf8"))
          return s.outcome === "stopped" ? s : undefined
        } catch {
          return undefined
        }
      },
      20_000
    )
    assert.isTrue(status.server.gone)
    await assertSlotFree()
  })
})
