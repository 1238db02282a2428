/**
 * The workload kept on a run's record (docs/clients.md#the-workload-on-record): the client's report
 * completed from its arguments — the dataset vLLM's result does not name, and a local dataset
 * file's size and SHA-256 — with the notes of reading it.
 */
import { createHash } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { parseResult } from "../../src/domain/Results.js"
import { resultFacts } from "../../src/programs/ResultFacts.js"
import { makeMemoryAttemptFiles } from "../../src/services/AttemptFiles.js"

const vllm = JSON.stringify({
  endpoint_type: "openai",
  model_id: "m",
  num_prompts: 200,
  request_rate: 4,
  burstiness: 1,
  max_concurrency: 16,
  completed: 200,
  failed: 0,
  total_input_tokens: 102400,
  total_output_tokens: 25600,
  output_throughput: 900
})

describe("resultFacts", () => {
  it.effect(
    "vLLM: the dataset from --dataset-path, its size and SHA-256; rate, burstiness, concurrency, requests from its result",
    () =>
      Effect.gen(function* () {
        const memory = makeMemoryAttemptFiles()
        const data = '{"prompt": "hi"}\n'
        memory.files.set("/data/prompts.jsonl", data)
        const facts = yield* resultFacts(memory.service, parseResult(vllm), [
          "vllm",
          "bench",
          "serve",
          "--dataset-name",
          "custom",
          "--dataset-path",
          "/data/prompts.jsonl"
        ])
        assert.deepStrictEqual(facts.workload, {
          client: "vllm bench serve",
          client_version: null,
          dataset: "/data/prompts.jsonl",
          dataset_file: { bytes: data.length, sha256: createHash("sha256").update(data).digest("hex") },
          input_tokens: { mean: 512 },
          output_tokens: { mean: 128 },
          rate: 4,
          concurrency: 16,
          arrival: "poisson",
          burstiness: 1,
          requests: 200
        })
        assert.isUndefined(facts.resultNotes)
      })
  )

  it.effect(
    "a dataset that is no local file (GuideLLM's synthetic --data) keeps its name, no file facts; notes kept",
    () =>
      Effect.gen(function* () {
        const memory = makeMemoryAttemptFiles()
        const report = {
          benchmarks: [
            {
              type_: "generative_benchmark",
              args: { strategy: { type_: "concurrent", streams: 4 } },
              request_loader: { data: "prompt_tokens=256,output_tokens=128" },
              request_totals: { successful: 2, errored: 0, incomplete: 0, total: 2 },
              duration: 2,
              metrics: {
                output_token_count: {
                  successful: { mean: 128, median: 128, min: 100, max: 156, total_sum: 256, count: 2 }
                },
                request_latency: { successful: { mean: 1, median: 1, percentiles: { p99: 1 } } }
              },
              requests: { successful: [] }
            }
          ]
        }
        const facts = yield* resultFacts(memory.service, parseResult(JSON.stringify(report)), [
          "guidellm",
          "benchmark",
          "--data",
          "prompt_tokens=256,output_tokens=128"
        ])
        assert.strictEqual(facts.workload?.dataset, "prompt_tokens=256,output_tokens=128")
        assert.isUndefined(facts.workload?.dataset_file)
        assert.deepStrictEqual(facts.workload?.concurrency, 4)
        assert.isTrue(facts.resultNotes?.some((n) => n.startsWith("tpot: left out")))
      })
  )
})
