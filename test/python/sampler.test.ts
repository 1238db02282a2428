/**
 * The samplers (python/hyperloom/sampler.py, docs/design.md#samplers) without Ray: the engines'
 * formats read once, here (test/fixtures/engines: vLLM's /metrics and startup lines, SGLang's
 * /get_server_info; the vendor tools' through examples/fake-gpu-tool.mjs), the effective
 * configuration each face of the stand-in engine reports (a capped batch limit among it), and one
 * client run through hyperloom.clientrun's sampler seam against the stand-in engine with a fake
 * nvidia-smi that throttles and shows a foreign process: the engine's counts match the client's,
 * the client's CPU is measured, the lease's GPUs sampled.
 */
import { type ChildProcess, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, afterEach, assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import { decodeEngineConfig, decodeObservations, SAMPLER_NAME } from "../../src/domain/Observations.js"
import { fakeGpuTool } from "../support/fakeGpuTools.js"
import { anyPython, pythonDir } from "../support/lease.js"

const root = path.resolve(import.meta.dirname, "../..")
const fixtures = path.join(root, "test/fixtures/engines")
const dirs: Array<string> = []
const children: Array<ChildProcess> = []
afterEach(() => {
  for (const c of children.splice(0)) c.kill("SIGKILL")
})
afterAll(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true })
})

/** Runs `code` with the package importable, `work` a fresh folder and `fixtures` set; its stdout's last line as JSON. */
const py = (code: string, env: Record<string, string> = {}) => {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "hl-sampler-"))
  dirs.push(work)
  const r = spawnSync(
    anyPython,
    [
      "-I",
      "-c",
      `import os, sys, json; sys.path.insert(0, sys.argv[1]); work = sys.argv[2]; fixtures = sys.argv[3]\n${code}`,
      pythonDir,
      work,
      fixtures
    ],
    { encoding: "utf8", timeout: 85_000, env: { ...process.env, ...env } }
  )
  assert.strictEqual(r.status, 0, r.stderr)
  return JSON.parse(r.stdout.trim().split("\n").pop()!)
}

describe("the engines' formats", () => {
  it("vLLM's /metrics: gauges and counters summed over the DP engines, aborts not finished, cache_config_info's labels", () => {
    const out = py(`
from hyperloom import sampler
s = sampler.parse_prometheus(open(os.path.join(fixtures, "vllm-metrics.txt")).read())
print(json.dumps({"kind": sampler.engine_of(s), "f": sampler.figures(s, "vllm"), "cache": sampler.cache_config_values(s), "name": sampler.NAME}))`)
    assert.strictEqual(out.kind, "vllm")
    assert.strictEqual(out.name, SAMPLER_NAME, "the runs' observations are read by this name")
    assert.deepStrictEqual(out.f, {
      running: 12,
      waiting: 2,
      requests: 152,
      generation: 77824,
      prompt: 19456,
      e2e_sum: 412.5,
      queue_sum: null
    })
    assert.strictEqual(out.cache.gpu_memory_utilization, 0.85)
    assert.strictEqual(out.cache.num_gpu_blocks, 27915)
    assert.strictEqual(out.cache.enable_prefix_caching, true)
    assert.strictEqual(out.cache.sliding_window, null)
    assert.strictEqual(out.cache.cache_dtype, "auto")
  })

  it("vLLM's startup lines: the engine line's values as run (max_seq_len is max_model_len), never the non-default args", () => {
    const v = py(`
from hyperloom import sampler
print(json.dumps(sampler.parse_vllm_log(open(os.path.join(fixtures, "vllm-startup.log")).read())))`)
    assert.strictEqual(v.max_model_len, 8192)
    assert.strictEqual(v.quantization, "fp8")
    assert.strictEqual(v.tensor_parallel_size, 1)
    assert.strictEqual(v.enforce_eager, false)
    assert.strictEqual(v.dtype, "torch.bfloat16")
    assert.strictEqual(v.model, "meta-llama/Llama-3.1-8B-Instruct")
    assert.strictEqual(v.max_num_batched_tokens, 2048)
    assert.strictEqual(v.kv_cache_size_tokens, 446624)
    assert.strictEqual(v.kv_cache_max_concurrency, 54.52)
    // asked, not reported as run: the non-default args line is not read
    assert.isUndefined(v.max_num_seqs)
    // nested configs are not one flag's value
    assert.isUndefined(v.compilation_config)
    assert.isUndefined(v.decoding_config)
  })

  it("SGLang's /get_server_info: the args at the top level, max_running_requests as the scheduler runs it", () => {
    const v = py(`
from hyperloom import sampler
print(json.dumps(sampler.server_info_values(json.load(open(os.path.join(fixtures, "sglang-server-info.json"))))))`)
    assert.strictEqual(v.max_running_requests, 128)
    assert.strictEqual(v.chunked_prefill_size, 8192)
    assert.strictEqual(v.mem_fraction_static, 0.836)
    assert.strictEqual(v.max_total_num_tokens, 20480)
    assert.isUndefined(v.internal_states)
    assert.isUndefined(v.version)
  })

  it("the vendor tools: nvidia-smi's CSV with its reason bitmask, amd-smi's JSON; [N/A] is null", () => {
    const out = py(`
from hyperloom import sampler
nv = sampler.parse_nvidia_gpus("0, GPU-a, 1410, 0x0000000000000024, 87, 349.50\\n1, GPU-b, [N/A], 0x0000000000000001, [N/A], [N/A]\\nbad line\\n")
amd = sampler.parse_amd_metric(json.dumps({"gpu_data": [{"gpu": 3, "power": {"socket_power": {"value": 542, "unit": "W"}, "throttle_status": "THROTTLED"}, "clock": {"gfx_0": {"clk": {"value": 1700, "unit": "MHz"}}}, "temperature": {"edge": 50, "hotspot": "N/A"}}]}))
print(json.dumps({"nv": nv, "amd": amd, "bad": sampler.parse_amd_metric("No GPUs"), "none": sampler.reasons_of("0x0")}))`)
    assert.deepStrictEqual(out.nv, [
      {
        index: 0,
        uuid: "GPU-a",
        sm_clock_mhz: 1410,
        throttle_reasons: ["sw_power_cap", "sw_thermal_slowdown"],
        temperature_c: 87,
        power_w: 349.5
      },
      {
        index: 1,
        uuid: "GPU-b",
        sm_clock_mhz: null,
        throttle_reasons: ["gpu_idle"],
        temperature_c: null,
        power_w: null
      }
    ])
    assert.deepStrictEqual(out.amd, [
      {
        index: 3,
        uuid: null,
        sm_clock_mhz: 1700,
        throttle_reasons: ["throttled"],
        temperature_c: 50,
        power_w: 542
      }
    ])
    assert.isNull(out.bad)
    assert.deepStrictEqual(out.none, [])
  })
})

const engineJs = path.join(root, "examples/fake-engine.mjs")
const clientJs = path.join(root, "examples/fake-bench-client.mjs")

/** The stand-in engine under hyperloom.engine.Engine, ready; `code` runs with `eng` and `env` set. */
const withEngine = (engineArgs: string, code: string, env: Record<string, string> = {}) =>
  py(
    `
import threading
from hyperloom import engine, sampler, clientrun
log = lambda m: sys.stderr.write(m + "\\n")
eng = engine.Engine(${JSON.stringify(`${process.execPath} ${engineJs} --load-sec 0.1 ${engineArgs}`)}, work, os.path.join(work, "server.log"), "server", log)
env = eng.environment()
eng.start(env)
assert eng.wait_ready("/health", 30, 60, threading.Event()) is None
try:
${code
  .trim()
  .split("\n")
  .map((l) => `    ${l}`)
  .join("\n")}
finally:
    eng.stop(1.0)`,
    env
  )

describe("the engine's effective configuration, read after readiness", () => {
  it("vLLM's face: the startup line and cache_config_info; asked 64 running requests, it runs 45", () => {
    const c = withEngine(
      "--max-model-len 12000 --max-num-seqs 64 --fail=capped",
      `print(json.dumps(sampler.read_engine_config(eng.base_url, eng.log_path)))`
    )
    assert.isTrue(Either.isRight(decodeEngineConfig(c)))
    assert.strictEqual(c.engine, "vllm")
    assert.strictEqual(c.values.max_num_seqs, 45)
    assert.strictEqual(c.values.max_model_len, 12000)
    assert.strictEqual(c.sources.max_model_len, "startup log")
    assert.strictEqual(c.values.gpu_memory_utilization, 0.9)
    assert.strictEqual(c.sources.gpu_memory_utilization, "/metrics vllm:cache_config_info")
  }, 60_000)

  it("SGLang's face, without /metrics: /get_server_info's scheduler value", () => {
    const c = withEngine(
      "--api sglang --max-model-len 12000 --max-running-requests 64 --fail=capped",
      `print(json.dumps(sampler.read_engine_config(eng.base_url, eng.log_path)))`
    )
    assert.strictEqual(c.engine, "sglang")
    assert.strictEqual(c.values.max_running_requests, 45)
    assert.strictEqual(c.values.context_length, 12000)
    assert.strictEqual(c.sources.max_running_requests, "/get_server_info")
  }, 60_000)
})

describe("the time a client's busiest thread wanted a CPU (schedstat)", () => {
  it("a client that never stops computing wants its core all the time, on a busy host too; one that sleeps never", () => {
    // two busy loops beside the measured one: on two cores it must wait for its turn, and the time
    // it ran plus the time it waited is still its whole wall time
    const out = py(`
import subprocess, time
from hyperloom import sampler
busy = [sys.executable, "-c", "import time\\nt = time.time()\\nwhile time.time() - t < 4: pass"]
others = [subprocess.Popen(busy) for _ in range(2)]
def wanted(argv):
    p = subprocess.Popen(argv)
    time.sleep(0.3)
    t0, s0, c0 = time.monotonic(), sampler.tree_sched(p.pid), sampler.tree_cpu(p.pid)
    time.sleep(1.5)
    t1, s1, c1 = time.monotonic(), sampler.tree_sched(p.pid), sampler.tree_cpu(p.pid)
    p.kill(); p.wait()
    busiest = max((s1[k] - s0[k]) / (t1 - t0) for k in s0 if k in s1)
    return {"wanted": busiest, "ran": (c1 - c0) / (t1 - t0), "threads": len(s1)}
out = {"busy": wanted(busy), "sleeping": wanted(["sleep", "5"])}
for o in others: o.kill(); o.wait()
print(json.dumps(out))`)
    const ctx = JSON.stringify(out)
    assert.isAtLeast(out.busy.wanted, 0.9, ctx)
    assert.isAtMost(out.busy.wanted, 1.1, ctx)
    assert.isBelow(out.sleeping.wanted, 0.05, ctx)
  })
})

describe("one client run through the sampler seam", () => {
  it("the engine's counts match the client's, the client's CPU, the lease's GPUs throttling with a foreign process", () => {
    const tools = fakeGpuTool({ gpus: 2, throttleAfter: 1, foreignAfter: 1, foreignPid: 1, foreignGpu: 1 })
    dirs.push(tools.dir)
    const out = withEngine(
      "--decode-ms 20 --decode-ms-per-seq 5",
      `
s = sampler.RunSampler(eng.base_url, gpus=[1], interval=0.5, log=log)
result_file = os.path.join(work, "result.json")
argv = [${JSON.stringify(process.execPath)}, ${JSON.stringify(clientJs)}, "--num-prompts", "16", "--max-concurrency", "4", "--output-len", "16", "--result-filename", result_file]
r = clientrun.run(argv, env, work, work, eng, threading.Event(), 1.0, log, samplers=[("validity", s)])
result = json.load(open(result_file))
# the same sampler around a second run (a sweep's engine serves many)
again = clientrun.run(argv[:3] + ["2"] + argv[4:], env, work, work, eng, threading.Event(), 1.0, log, samplers=[("validity", s)])
print(json.dumps({"obs": r.observations["validity"], "again": again.observations["validity"], "result": result, "code": r.exit_code}))`,
      { PATH: tools.path }
    )
    const ctx = JSON.stringify(out)
    assert.strictEqual(out.code, 0, ctx)
    const obs = out.obs
    assert.isTrue(Either.isRight(decodeObservations(obs)), ctx)
    assert.deepStrictEqual(obs.not_checked, [], ctx)
    // the engine counted what the client received, plus the client's one warm-up request
    assert.strictEqual(obs.engine_load.source, "vllm", ctx)
    assert.strictEqual(obs.engine_load.generation_tokens_delta, out.result.total_output_tokens + 16, ctx)
    assert.strictEqual(obs.engine_load.requests_total_delta, out.result.completed + 1, ctx)
    assert.strictEqual(obs.engine_load.means_from, "latency sums", ctx)
    // the latency sum over the client's measured part: its result's duration; 4 in flight then
    const inFlight = obs.engine_load.e2e_latency_sum_delta / out.result.duration
    assert.isAtLeast(inFlight, 3.2, ctx)
    assert.isAtMost(inFlight, 4.6, ctx)
    // in flight over the client's whole life (its start and its warm-up request included): above 1
    assert.isAbove(obs.engine_load.running_mean, 1, ctx)
    assert.isAtMost(obs.engine_load.running_max, 4, ctx)
    // the client's own CPU, from its reaped rusage
    assert.strictEqual(obs.client_cpu.source, "proc", ctx)
    assert.isAbove(obs.client_cpu.cpu_seconds, 0, ctx)
    assert.isBelow(obs.client_cpu.cores_mean, 1.5, ctx)
    assert.isAtLeast(obs.client_cpu.busiest_thread_runnable, 0, ctx)
    assert.isAtMost(obs.client_cpu.busiest_thread_runnable, 1.05, ctx)
    // GPU 1 only; the clock drops and a reason appears at 1 s; pid 1 is outside the lease
    const samples = obs.gpus.samples as Array<any>
    assert.strictEqual(obs.gpus.tool, "nvidia-smi", ctx)
    assert.isTrue(
      samples.every((x) => x.index === 1),
      ctx
    )
    assert.deepStrictEqual(samples[0].throttle_reasons, [], ctx)
    assert.strictEqual(samples[0].sm_clock_mhz, 1980, ctx)
    const late = samples.at(-1)
    assert.isAtLeast(late.t_s, 1, ctx)
    assert.deepStrictEqual(late.throttle_reasons, ["sw_thermal_slowdown"], ctx)
    assert.strictEqual(late.sm_clock_mhz, 1410, ctx)
    assert.deepStrictEqual(
      late.processes,
      [{ pid: 1, name: "python3", memory_mib: 20480, in_lease: false }],
      ctx
    )
    assert.isAbove(obs.sampler_cpu_s, 0, ctx)
    // the second run: 2 prompts and the warm-up request, 16 tokens each
    assert.strictEqual(out.again.engine_load.generation_tokens_delta, 48, ctx)
    assert.isAtLeast(out.again.engine_load.samples, 2, ctx)
  }, 90_000)

  it("what cannot be sampled is said: no /metrics (SGLang without --enable-metrics), no GPU tool, no GPU", () => {
    const out = withEngine(
      "--api sglang",
      `
s = sampler.RunSampler(eng.base_url, gpus=[0], interval=0.5, log=log)
t = sampler.RunSampler(eng.base_url, gpus=[], interval=0.5, log=log)
argv = [${JSON.stringify(process.execPath)}, ${JSON.stringify(clientJs)}, "--num-prompts", "2", "--output-len", "4"]
r = clientrun.run(argv, env, work, work, eng, threading.Event(), 1.0, log, samplers=[("a", s), ("b", t)])
print(json.dumps(r.observations))`,
      { PATH: "/usr/bin:/bin" }
    )
    assert.isNull(out.a.engine_load)
    assert.isNull(out.a.gpus)
    assert.match(
      out.a.not_checked[0],
      /^load_not_delivered, counts_disagree: the engine's \/metrics could not be read \(\/metrics answered 404\)/
    )
    assert.strictEqual(
      out.a.not_checked[1],
      "throttled, gpu_shared: neither nvidia-smi nor amd-smi is on this node's PATH"
    )
    assert.strictEqual(out.b.not_checked[1], "throttled, gpu_shared: the lease holds no GPU")
    assert.isNotNull(out.a.client_cpu)
  }, 90_000)
})

describe("HYPERLOOM_SAMPLERS=0, the bench's and a diagnosis's switch (docs/design.md#samplers)", () => {
  const code = `
from hyperloom import sampler
print(json.dumps([[n, type(s).__name__, s.base_url] for n, s in sampler.run_samplers("http://127.0.0.1:9")]))`
  it("off: the runner gets no sampler, so no scrape, no tool query, no observations", () => {
    assert.deepStrictEqual(py(code, { HYPERLOOM_SAMPLERS: "0" }), [])
  })
  it("on by default (unset, or any other value): the one RunSampler on the engine's URL", () => {
    const on = [[SAMPLER_NAME, "RunSampler", "http://127.0.0.1:9"]]
    assert.deepStrictEqual(py(code, { HYPERLOOM_SAMPLERS: "" }), on)
    assert.deepStrictEqual(py(code, { HYPERLOOM_SAMPLERS: "1" }), on)
  })
})
