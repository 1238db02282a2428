import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import {
  configKey,
  decodeEngineConfig,
  decodeObservations,
  type EngineConfig,
  reportedValue
} from "../../src/domain/Observations.js"

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
