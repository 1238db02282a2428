import { assert, describe, it } from "@effect/vitest"
import type { EngineConfig, GpuSample, GpuSamples, Observations } from "../../src/domain/Observations.js"
import { clientCountsOf, parseResult } from "../../src/domain/Results.js"
import type { Slo } from "../../src/domain/Sweep/Slo.js"
import {
  allInvalid,
  askedLoadOf,
  checkFailed,
  clientBound,
  cold,
  counts,
  countsDisagree,
  DEFAULT_MAX_FAILED,
  failedRequests,
  failuresMissSlo,
  gpuShared,
  judgeRun,
  loadNotDelivered,
  notCheckedOnce,
  notEngaged,
  reasonsOf,
  renderTally,
  requestsForBound,
  rerunHelps,
  sessionClockMedian,
  tally,
  throttled,
  tooFewRequests,
  VALID
} from "../../src/domain/Validity.js"

const sglangConfig: EngineConfig = {
  engine: "sglang",
  values: {
    max_running_requests: 128,
    chunked_prefill_size: 8192,
    enable_torch_compile: false,
    dtype: "auto"
  },
  sources: {
    max_running_requests: "/get_server_info",
    chunked_prefill_size: "/get_server_info",
    enable_torch_compile: "/get_server_info",
    dtype: "/get_server_info"
  }
}

const obs = (over: Partial<Observations> = {}): Observations => ({
  duration_s: 41,
  client_cpu: { cores_mean: 0.4, cores_max: 0.6, cpu_seconds: 16.4, source: "cgroup" },
  engine_load: {
    source: "vllm",
    samples: 22,
    running_mean: 60,
    waiting_mean: 2,
    requests_total_delta: 401,
    generation_tokens_delta: 51_328,
    prompt_tokens_delta: 100_000
  },
  gpus: null,
  not_checked: [],
  ...over
})

const sample = (over: Partial<GpuSample> = {}): GpuSample => ({
  t_s: 0,
  index: 0,
  sm_clock_mhz: 1980,
  throttle_reasons: [],
  temperature_c: 60,
  power_w: 300,
  processes: [{ pid: 100, name: "python", memory_mib: 70_000, in_lease: true }],
  ...over
})
const gpus = (samples: ReadonlyArray<GpuSample>): GpuSamples => ({ tool: "nvidia-smi", samples })

const p99: Slo = { metric: "p99_ttft_ms", op: "<=", bound: 500 }

describe("not_engaged", () => {
  it("compares a --param to the reported key with case, - and _ ignored, and names both values", () => {
    const r = notEngaged(sglangConfig, { "Max-Running-Requests": "256", "chunked-prefill-size": "8192" })
    assert.strictEqual(r.findings.length, 1)
    assert.deepStrictEqual(r.findings[0], {
      check: "not_engaged",
      severity: "invalid",
      evidence: "max_running_requests asked 256, the engine runs 128",
      source: "/get_server_info"
    })
    assert.deepStrictEqual(r.unverified, [])
  })
  it("a value the engine runs as asked is engaged: numbers by value, booleans by word", () => {
    const r = notEngaged(sglangConfig, {
      max_running_requests: "128.0",
      enable_torch_compile: "False",
      dtype: "AUTO"
    })
    assert.deepStrictEqual(r.findings, [])
  })
  it("lists a param the engine does not report as unverified, and every param with no report at all", () => {
    assert.deepStrictEqual(notEngaged(sglangConfig, { max_num_batched_tokens: "4096" }).unverified, [
      "max_num_batched_tokens"
    ])
    assert.deepStrictEqual(notEngaged(null, { a: "1", b: "2" }), { findings: [], unverified: ["a", "b"] })
  })
})

describe("check_failed", () => {
  it("quotes the check's last non-empty line and its exit code", () => {
    const f = checkFailed(1, "probe 1 ok\nprobe 2: expected 4, got 5\n\n")
    assert.strictEqual(f.severity, "invalid")
    assert.strictEqual(f.evidence, 'the check exited 1: "probe 2: expected 4, got 5"')
  })
})

describe("cold", () => {
  it("flags a first run outside the others' range widened by 5 % of their mean", () => {
    // others 520 and 530: mean 525, margin 26.25, range [493.75, 556.25]; 410 is 21.9 % under the mean
    const f = cold(410, [520, 530])
    assert.strictEqual(f?.severity, "suspect")
    assert.strictEqual(
      f?.evidence,
      "first run after the engine start 410 tok/s, the other 2 runs 520–530 tok/s (22 % off, beyond 5.0 %)"
    )
    // 500 lies inside [493.75, 556.25]: noise, not cold
    assert.strictEqual(cold(500, [520, 530]), undefined)
    // with no other run there is nothing to compare
    assert.strictEqual(cold(410, []), undefined)
  })
})

describe("client_bound", () => {
  it("a client at 0.9 core or more is suspect, with its CPU and the run's length", () => {
    const f = clientBound(
      obs({ client_cpu: { cores_mean: 0.97, cores_max: 1, cpu_seconds: 39.8, source: "cgroup" } })
    )
    assert.strictEqual(f?.evidence, "client CPU 0.97 core over 41 s (≥ 0.9)")
    assert.strictEqual(f?.severity, "suspect")
    assert.strictEqual(
      clientBound(obs({ client_cpu: { cores_mean: 0.89, cores_max: 1, cpu_seconds: 36, source: "proc" } })),
      undefined
    )
  })
  it("a client that wanted a whole core but waited for it on a busy host is suspect too, its wait said", () => {
    const starved = { cores_mean: 0.56, cores_max: 0.7, cpu_seconds: 6.7, source: "proc" as const }
    const f = clientBound(obs({ client_cpu: { ...starved, busiest_thread_runnable: 0.97 } }))
    assert.strictEqual(
      f?.evidence,
      "the client's busiest thread wanted a CPU 97 % of the time (ran or waited for one; the client ran 0.56 core in all) over 41 s (≥ 0.9)"
    )
    assert.strictEqual(f?.source, "/proc of the client's process tree; its threads' schedstat")
    // one that ran little and waited little is not the bottleneck
    assert.isUndefined(clientBound(obs({ client_cpu: { ...starved, busiest_thread_runnable: 0.6 } })))
    assert.isUndefined(clientBound(obs({ client_cpu: starved })))
  })
  it("a CPU figure that includes the engine's proves nothing", () => {
    const cpu = {
      cores_mean: 3,
      cores_max: 4,
      cpu_seconds: 120,
      source: "cgroup" as const,
      includes_engine: true
    }
    assert.strictEqual(clientBound(obs({ client_cpu: cpu })), undefined)
  })
})

describe("load_not_delivered", () => {
  it("reads the asked load from the load's name", () => {
    assert.deepStrictEqual(askedLoadOf("max_concurrency", "64"), { concurrency: 64 })
    assert.deepStrictEqual(askedLoadOf("request-rate", "8"), { rate: 8 })
    assert.deepStrictEqual(askedLoadOf("request_rate", "inf"), {})
    assert.deepStrictEqual(askedLoadOf("num_prompts", "100"), {})
  })
  it("mean in flight more than 10 % under the asked concurrency is invalid", () => {
    // 60 running + 2 waiting = 62 ≥ 0.9 × 64 = 57.6: delivered
    assert.strictEqual(loadNotDelivered(obs(), { concurrency: 64 }), undefined)
    // 50 + 2 = 52 < 0.9 × 64 = 57.6: 18.75 % under
    const o = obs({ engine_load: { ...obs().engine_load!, running_mean: 50 } })
    assert.strictEqual(
      loadNotDelivered(o, { concurrency: 64 })?.evidence,
      "asked 64 in flight, the engine saw 52 on average (19 % under)"
    )
  })
  it("means from the latency sums are taken over the client's own benchmark window, not its start-up", () => {
    // a clean client at 4 in flight for 1.3 s of a 2.4 s process: 4 × 1.3 / 2.4 = 2.17 over the process
    const o = obs({
      duration_s: 2.4,
      engine_load: { ...obs().engine_load!, running_mean: 2.17, waiting_mean: 0, means_from: "latency sums" }
    })
    assert.strictEqual(loadNotDelivered(o, { concurrency: 4 }, { duration_s: 1.3 }), undefined)
    // no window from the client, or means from scrapes: as measured
    assert.include(loadNotDelivered(o, { concurrency: 4 })?.evidence, "the engine saw 2.17 on average")
    const scraped = obs({ ...o, engine_load: { ...o.engine_load!, means_from: "scrapes" } })
    assert.include(loadNotDelivered(scraped, { concurrency: 4 }, { duration_s: 1.3 })?.evidence, "2.17")
    // a client that held 1.2 in flight over its window is still short: 0.65 × 2.4 / 1.3 = 1.2
    const short = obs({ ...o, engine_load: { ...o.engine_load!, running_mean: 0.65 } })
    assert.include(
      loadNotDelivered(short, { concurrency: 4 }, { duration_s: 1.3 })?.evidence,
      "asked 4 in flight, the engine saw 1.20 on average (70 % under)"
    )
  })
  it("a request rate more than 10 % under the asked rate, while nothing waited, is invalid", () => {
    // 287 requests over 41 s = 7 /s < 0.9 × 10 = 9 /s
    const o = obs({ engine_load: { ...obs().engine_load!, waiting_mean: 0, requests_total_delta: 287 } })
    assert.strictEqual(
      loadNotDelivered(o, { rate: 10 })?.evidence,
      "asked 10 requests/s, the engine finished 7/s with nothing waiting (30 % under)"
    )
    // 369 / 41 = 9 /s: exactly 10 % under, not more
    assert.strictEqual(
      loadNotDelivered(obs({ engine_load: { ...o.engine_load!, requests_total_delta: 369 } }), { rate: 10 }),
      undefined
    )
    // a queue at the engine: it set the pace, not the client
    assert.strictEqual(
      loadNotDelivered(obs({ engine_load: { ...o.engine_load!, waiting_mean: 5 } }), { rate: 10 }),
      undefined
    )
  })
})

describe("counts_disagree", () => {
  it("over 5 % of the larger plus one request's tokens apart is invalid, both numbers shown", () => {
    // client 400 × 128 = 51,200; engine 51,328 (the warm-up request's 128): agreed
    assert.strictEqual(countsDisagree({ completed: 400, output_tokens: 51_200 }, obs()), undefined)
    // a client that counts 60,000: 8,672 apart > 0.05 × 60,000 + 150 = 3,150
    const f = countsDisagree({ completed: 400, output_tokens: 60_000 }, obs())
    assert.strictEqual(f?.severity, "invalid")
    assert.strictEqual(
      f?.evidence,
      "the client counted 60000 output tokens, the engine generated 51328 (14 % apart, over 5.0 %)"
    )
  })
})

describe("failed_requests", () => {
  it("K of N: invalid above --max-failed (1 % by default), suspect at or under it", () => {
    assert.strictEqual(DEFAULT_MAX_FAILED, 0.01)
    // 5 of 400: 1.25 % > 1 %
    assert.strictEqual(failedRequests({ completed: 395, failed: 5 })?.severity, "invalid")
    assert.strictEqual(
      failedRequests({ completed: 395, failed: 5 })?.evidence,
      "5 of 400 requests failed (1.3 %; --max-failed 1.0 %)"
    )
    // 4 of 400: exactly 1 %
    assert.strictEqual(failedRequests({ completed: 396, failed: 4 })?.severity, "suspect")
    assert.strictEqual(failedRequests({ completed: 395, failed: 5 }, 0.02)?.severity, "suspect")
    assert.strictEqual(failedRequests({ completed: 400, failed: 0 }), undefined)
  })
  it("failures are misses: more than 1 % failed and a p99 latency bound cannot hold", () => {
    assert.isTrue(failuresMissSlo(p99, { completed: 395, failed: 5 }))
    assert.isFalse(failuresMissSlo(p99, { completed: 396, failed: 4 }))
    // a median holds until half failed; a throughput bound is not a latency quantile
    assert.isFalse(
      failuresMissSlo({ metric: "median_ttft_ms", op: "<=", bound: 1 }, { completed: 395, failed: 5 })
    )
    assert.isFalse(
      failuresMissSlo({ metric: "output_throughput", op: ">=", bound: 1 }, { completed: 1, failed: 99 })
    )
  })
})

describe("too_few_requests", () => {
  it("derives the count a distribution-free 95 % bound needs: ⌈ln 0.05 ÷ ln q⌉", () => {
    // ln 0.05 = −2.9957; ln 0.99 = −0.010050: 298.07 → 299
    assert.strictEqual(requestsForBound(99), 299)
    // ln 0.5 = −0.6931: 4.32 → 5
    assert.strictEqual(requestsForBound(50), 5)
    // ln 0.9 = −0.10536: 28.43 → 29
    assert.strictEqual(requestsForBound(90), 29)
  })
  it("an SLO on p99 from fewer than 100 requests is judged on the maximum: suspect", () => {
    const f = tooFewRequests([p99], { completed: 71 })
    assert.strictEqual(f.length, 1)
    assert.strictEqual(
      f[0]!.evidence,
      "p99_ttft_ms from 71 requests is their maximum; a distribution-free 95 % bound on p99 needs 299"
    )
    assert.deepStrictEqual(tooFewRequests([p99], { completed: 100 }), [])
    assert.deepStrictEqual(
      tooFewRequests([{ metric: "mean_ttft_ms", op: "<=", bound: 1 }], { completed: 3 }),
      []
    )
  })
})

describe("throttled and gpu_shared", () => {
  it("an active reason other than idle is suspect; idle is not", () => {
    assert.strictEqual(throttled(gpus([sample({ throttle_reasons: ["gpu_idle"] })]), 1980), undefined)
    const f = throttled(
      gpus([sample(), sample({ t_s: 12, throttle_reasons: ["sw_thermal_slowdown"] })]),
      1980
    )
    assert.strictEqual(f?.evidence, "throttle reason sw_thermal_slowdown from 12 s")
    assert.strictEqual(f?.source, "nvidia-smi")
  })
  it("a run's median SM clock more than 10 % under the session's median is suspect", () => {
    // session: 1980 ×3 and 1580 ×3 → median (1980 + 1580) / 2 = 1780; 0.9 × 1780 = 1602
    const fast = obs({ gpus: gpus([sample(), sample(), sample()]) })
    const slow = obs({ gpus: gpus([1580, 1580, 1580].map((c) => sample({ sm_clock_mhz: c }))) })
    const m = sessionClockMedian([fast, slow, null])
    assert.strictEqual(m, 1780)
    assert.strictEqual(throttled(fast.gpus, m), undefined)
    assert.strictEqual(
      throttled(slow.gpus, m)?.evidence,
      "SM clock 1580 MHz, 11 % under the session's median 1780 MHz"
    )
  })
  it("a process outside the lease is invalid and re-running helps; one that cannot be told is not a finding", () => {
    const other = { pid: 4242, name: "train.py", memory_mib: 20_000, in_lease: false }
    const f = gpuShared(gpus([sample(), sample({ t_s: 6, processes: [other] })]))
    assert.strictEqual(f?.evidence, "pid 4242 (train.py) on GPU 0 at 6 s: outside the lease")
    assert.strictEqual(f?.severity, "invalid")
    assert.strictEqual(gpuShared(gpus([sample({ processes: [{ ...other, in_lease: null }] })])), undefined)
  })
})

describe("a run's verdict", () => {
  const settings = { maxFailed: DEFAULT_MAX_FAILED, slos: [p99], sessionClockMedian: null }
  const clean = {
    metrics: { completed: 400 },
    client: { completed: 400, failed: 0, output_tokens: 51_200 },
    observations: obs(),
    engineConfig: sglangConfig,
    params: { max_running_requests: "128" },
    asked: { concurrency: 64 }
  }
  it("a clean run is valid, with nothing unverified and nothing unchecked", () => {
    assert.deepStrictEqual(judgeRun(clean, settings), VALID)
  })
  it("invalid over suspect, every finding kept; an invalid run does not count", () => {
    const v = judgeRun(
      {
        ...clean,
        params: { max_running_requests: "256" },
        observations: obs({
          client_cpu: { cores_mean: 0.97, cores_max: 1, cpu_seconds: 39.8, source: "cgroup" }
        })
      },
      settings
    )
    assert.strictEqual(v.verdict, "invalid")
    assert.deepStrictEqual(
      v.findings.map((f) => f.check),
      ["not_engaged", "client_bound"]
    )
    assert.isFalse(counts(v))
    assert.isFalse(rerunHelps(v))
    assert.isTrue(counts({ verdict: "suspect", findings: [] }))
    assert.isTrue(counts(undefined))
  })
  it("says what it could not check", () => {
    const v = judgeRun(
      {
        ...clean,
        observations: obs({ gpus: null, not_checked: ["GPUs: no nvidia-smi or amd-smi on PATH"] })
      },
      settings
    )
    assert.deepStrictEqual(v.not_checked, ["GPUs: no nvidia-smi or amd-smi on PATH"])
    assert.strictEqual(v.verdict, "valid")
    const none = judgeRun({ ...clean, observations: null, engineConfig: null }, settings)
    assert.deepStrictEqual(none.unverified, ["max_running_requests"])
    assert.strictEqual(none.not_checked?.length, 1)
  })
})

describe("many runs", () => {
  const bad = { verdict: "invalid" as const, findings: [checkFailed(1, "wrong")] }
  const odd = { verdict: "suspect" as const, findings: [], not_checked: ["GPUs: none"] }
  it("tallies and says how many runs were valid", () => {
    const t = tally([VALID, VALID, odd, bad, undefined])
    assert.deepStrictEqual(t, { runs: 5, valid: 2, suspect: 1, invalid: 1, unjudged: 1 })
    assert.strictEqual(renderTally(t), "3 of 5 runs valid (1 suspect, 1 invalid)")
  })
  it("a point whose measured runs are all invalid is invalid, with its reasons once", () => {
    assert.isTrue(allInvalid([bad, bad]))
    assert.isFalse(allInvalid([bad, odd]))
    assert.isFalse(allInvalid([]))
    assert.deepStrictEqual(reasonsOf([bad, bad]), [
      'check_failed (invalid): the check exited 1: "wrong" (from --check)'
    ])
    assert.deepStrictEqual(notCheckedOnce([odd, odd, VALID]), ["GPUs: none"])
  })
})

describe("the client's counts from its result", () => {
  it("reads vLLM's completed, failed and total_output_tokens, and SGLang's total_output", () => {
    assert.deepStrictEqual(
      clientCountsOf({ completed: 395, failed: 5, total_output_tokens: 50_560, duration: 41.2 }),
      { completed: 395, failed: 5, output_tokens: 50_560, duration_s: 41.2 }
    )
    const sglang = parseResult(
      JSON.stringify({
        output_throughput: 1,
        total_throughput: 2,
        completed: 10,
        total_output: 1280,
        duration: 4
      })
    )
    assert.deepStrictEqual(sglang?.client, { completed: 10, output_tokens: 1280, duration_s: 4 })
  })
})
