import { assert, describe, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import {
  configKey,
  decodeEngineConfig,
  decodeObservations,
  type EngineConfig,
  reportedValue,
  SAMPLER_NAME
} from "../../src/domain/Observations.js"
import { AttemptRecord } from "../../src/domain/State.js"
import { parseRunnerMessage, RUNNER_MESSAGE_PREFIX } from "../../src/domain/Sweep/Runner.js"
import { RunRecord } from "../../src/domain/Sweep/Schema.js"

const observed = {
  duration_s: 41.2,
  client_cpu: { cores_mean: 0.97, cores_max: 1.01, cpu_seconds: 40, source: "cgroup", samples: 20 },
  engine_load: {
    source: "vllm",
    samples: 22,
    running_mean: 7.8,
    waiting_mean: 0,
    requests_total_delta: 64,
    generation_tokens_delta: 2048,
    prompt_tokens_delta: null
  },
  gpus: {
    tool: "nvidia-smi",
    samples: [
      {
        t_s: 2,
        index: 0,
        sm_clock_mhz: 1410,
        throttle_reasons: ["sw_thermal_slowdown"],
        temperature_c: 84,
        power_w: 390.5,
        processes: [{ pid: 4242, name: "python3", memory_mib: 70000, in_lease: false }]
      }
    ]
  },
  not_checked: []
}

describe("Observations", () => {
  it("decodes what the sampler writes, and nulls where a sampler could not run", () => {
    const full = decodeObservations(observed)
    assert.isTrue(Either.isRight(full))
    if (Either.isRight(full)) assert.strictEqual(full.right.gpus?.samples[0]?.processes[0]?.in_lease, false)
    const empty = decodeObservations({
      duration_s: 3,
      client_cpu: null,
      engine_load: null,
      gpus: null,
      not_checked: ["GPUs: no nvidia-smi or amd-smi on PATH"]
    })
    assert.isTrue(Either.isRight(empty))
  })

  it("refuses a source it does not know", () => {
    assert.isTrue(
      Either.isLeft(decodeObservations({ ...observed, client_cpu: { ...observed.client_cpu, source: "ps" } }))
    )
    assert.isTrue(
      Either.isLeft(decodeEngineConfig({ engine: "vllm", values: { a: 1 }, sources: { a: "a guess" } }))
    )
  })

  it("finds a --param's reported value with case, - and _ ignored", () => {
    const config: EngineConfig = {
      engine: "sglang",
      values: { max_running_requests: 128, Chunked_Prefill_Size: 8192 },
      sources: { max_running_requests: "/get_server_info", Chunked_Prefill_Size: "/get_server_info" }
    }
    assert.deepStrictEqual(reportedValue(config, "--max-running-requests"), {
      key: "max_running_requests",
      value: 128,
      source: "/get_server_info"
    })
    assert.strictEqual(reportedValue(config, "chunked-prefill-size")?.value, 8192)
    assert.isUndefined(reportedValue(config, "max-num-seqs"))
    assert.strictEqual(configKey(" Max-Num_Seqs "), "max_num_seqs")
  })
})

describe("the records carry them, optionally", () => {
  const attempt = {
    number: 1,
    started_at: "2026-12-07T09:00:00.000Z",
    ended_at: "2026-12-07T09:00:05.000Z",
    runtime_sec: 5,
    error_class: null,
    exit_code: 0,
    error: null,
    signature: null,
    throughput: 100,
    result_format: "vllm",
    metrics: null
  }
  const config = { engine: "vllm", values: { max_num_seqs: 45 }, sources: { max_num_seqs: "startup log" } }

  it("a baseline attempt's record: with what the node saw, and as written before (without)", () => {
    const decode = Schema.decodeUnknownEither(AttemptRecord)
    assert.isTrue(Either.isRight(decode(attempt)))
    const withObs = decode({ ...attempt, observations: observed, engine_config: config })
    assert.isTrue(Either.isRight(withObs))
    if (Either.isRight(withObs)) assert.strictEqual(withObs.right.engine_config?.values.max_num_seqs, 45)
  })

  it("a sweep run's record, and the runner's messages that bring them (observations by sampler name)", () => {
    const run = {
      repeat: 1,
      try: 1,
      dir: "/s/runs/1",
      client_argv: ["client"],
      started_at: "2026-12-07T09:00:00.000Z",
      ended_at: null,
      status: null,
      class: null,
      error: null,
      exit_code: null,
      runtime_sec: null,
      throughput: null,
      metrics: null,
      engine_died: false
    }
    const decode = Schema.decodeUnknownEither(RunRecord)
    assert.isTrue(Either.isRight(decode(run)))
    assert.isTrue(Either.isRight(decode({ ...run, observations: observed })))
    const done = parseRunnerMessage(
      `${RUNNER_MESSAGE_PREFIX}${JSON.stringify({
        done: {
          seq: 1,
          exit_code: 0,
          timed_out: false,
          runtime_sec: 2,
          between_exit_code: null,
          between_sec: null,
          engine_alive: true,
          engine_exit_code: null,
          client_started: 1,
          client_ended: 3,
          observations: { [SAMPLER_NAME]: observed }
        }
      })}`
    )
    assert.strictEqual(done?._tag, "done")
    if (done?._tag === "done")
      assert.isTrue(Either.isRight(decodeObservations(done.done.observations?.[SAMPLER_NAME])))
    const ready = parseRunnerMessage(
      `${RUNNER_MESSAGE_PREFIX}${JSON.stringify({
        engine: {
          version: 1,
          state: "ready",
          outcome: null,
          port: 1,
          base_url: "http://127.0.0.1:1",
          ready_sec: 1,
          exit_code: null,
          runtime_sec: null,
          gone: false,
          engine_config: config
        }
      })}`
    )
    assert.strictEqual(ready?._tag === "engine" ? ready.status.engine_config?.engine : undefined, "vllm")
  })
})
