import * as fs from "node:fs"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { errorHead } from "../../src/domain/Attempt.js"
import { AttemptOutcome, classifyAttempt, isTellingLine, MAX_ERROR_CHARS } from "../../src/domain/Failure.js"
import { isMeasurement, parseResult } from "../../src/domain/Results.js"

const fixture = (name: string) =>
  fs.readFileSync(path.join(import.meta.dirname, "..", "fixtures", "serving", name), "utf8")

describe("parseResult: the result formats, recognised by their keys", () => {
  it("vLLM bench serve --save-result: output-token throughput and the serving metrics (docs/design.md#results-and-metrics)", () => {
    const r = parseResult(fixture("vllm-bench-serve.json"))!
    assert.strictEqual(r.format, "vllm")
    assert.strictEqual(r.throughput, 4101.9)
    assert.deepStrictEqual(r.metrics, {
      request_throughput: 16.02,
      output_throughput: 4101.9,
      total_token_throughput: 20509.5,
      completed: 1000,
      // vLLM's result counts its failed requests too (vllm/benchmarks/serve.py `failed`)
      failed: 0,
      mean_ttft_ms: 212.4,
      median_ttft_ms: 187.9,
      p99_ttft_ms: 611.2,
      mean_tpot_ms: 14.8,
      median_tpot_ms: 14.6,
      p99_tpot_ms: 19.7,
      mean_itl_ms: 14.7,
      median_itl_ms: 13.9,
      p99_itl_ms: 41.3
    })
  })

  it("vLLM with --append-result (JSON lines): the last run counts", () => {
    const r = parseResult(fixture("vllm-bench-serve-append.jsonl"))!
    assert.strictEqual(r.format, "vllm")
    assert.strictEqual(r.records, 2)
    assert.strictEqual(r.throughput, 1896.3)
    assert.strictEqual(r.metrics.p99_ttft_ms, 260)
    assert.isUndefined(r.metrics.mean_itl_ms)
  })

  it("SGLang bench_serving --output-file (JSON lines, Python's Infinity): total_throughput is the total", () => {
    const r = parseResult(fixture("sglang-bench-serving.jsonl"))!
    assert.strictEqual(r.format, "sglang")
    assert.strictEqual(r.throughput, 4361.2)
    assert.strictEqual(r.metrics.total_token_throughput, 21805.8)
    assert.strictEqual(r.metrics.request_throughput, 17.04)
    assert.strictEqual(r.metrics.completed, 1000)
    assert.strictEqual(r.metrics.p99_itl_ms, 38.5)
  })

  it("the older SGLang record (median latencies only, no total_throughput) is still SGLang; its total is derived", () => {
    const r = parseResult(fixture("sglang-bench-serving-old.jsonl"))!
    assert.strictEqual(r.format, "sglang")
    assert.strictEqual(r.throughput, 1597.4)
    assert.deepStrictEqual(r.metrics, {
      output_throughput: 1597.4,
      // (total_input_tokens 226807 + total_output_tokens 193154) / duration 120.9 s
      total_token_throughput: (226807 + 193154) / 120.9,
      completed: 1000,
      median_ttft_ms: 95.3,
      median_itl_ms: 21.4,
      // SGLang's mean_/median_e2e_latency_ms: the end-to-end latency (docs/clients.md)
      mean_e2el_ms: 7331.5,
      median_e2el_ms: 6722
    })
  })

  it("SGLang without total_throughput: derived from total_input + total_output over duration; never from a zero duration", () => {
    const line = (extra: string) =>
      `{"backend": "sglang", "dataset_name": "random", "duration": 10.0, "completed": 5, "output_throughput": 40.0${extra}}`
    assert.strictEqual(
      parseResult(line(', "total_input": 100, "total_output": 400'))?.metrics.total_token_throughput,
      50
    )
    assert.isUndefined(
      parseResult(line(', "total_input": 100'))?.metrics.total_token_throughput,
      "no output total"
    )
    assert.strictEqual(
      parseResult(line(', "total_input": 100, "total_output": 400, "total_throughput": 51.5'))?.metrics
        .total_token_throughput,
      51.5,
      "the record's own figure wins"
    )
    const zero =
      '{"backend": "sglang", "dataset_name": "random", "duration": 0, "completed": 0, "output_throughput": 0, "total_input": 0, "total_output": 0}'
    assert.isUndefined(parseResult(zero)?.metrics.total_token_throughput)
  })

  it("{throughput} is the generic format; anything else is no report", () => {
    assert.deepStrictEqual(parseResult('{"throughput": 12.5}'), {
      format: "hyperloom",
      throughput: 12.5,
      metrics: {},
      records: 1
    })
    assert.strictEqual(parseResult('{"throughput": "fast"}')?.throughput, "fast")
    assert.isUndefined(parseResult(""))
    assert.isUndefined(parseResult("not json"))
    assert.isUndefined(parseResult("[1, 2]"))
    assert.isUndefined(parseResult('{"output_throughput": 5}'), "neither engine's keys")
    assert.isUndefined(parseResult('{"a": 1}\n{"b": 2'))
  })
})

const exited = (log: string, runtimeSec: number, exitCode = 1) => {
  const lines = log.split("\n")
  return classifyAttempt(
    AttemptOutcome.Exited({
      exitCode,
      runtimeSec,
      outputTail: log.slice(-MAX_ERROR_CHARS),
      evidence: lines.filter(isTellingLine),
      throughput: undefined
    })
  )
}

describe("classification of the engines' real failure messages", () => {
  it("vLLM's 'No available memory for the cache blocks' is kv_cache_oom, though its tail is the API server's traceback", () => {
    const log = fixture("vllm-kv-cache-oom.log")
    assert.notInclude(
      log.slice(-MAX_ERROR_CHARS),
      "No available memory",
      "the tail alone lost the root cause"
    )
    const r = exited(log, 52)
    assert.strictEqual(r.errorClass, "kv_cache_oom")
    assert.include(r.error!, "root cause: ")
    assert.include(r.error!, "No available memory for the cache blocks")
    assert.isAtMost(r.error!.length, MAX_ERROR_CHARS)
  })

  it("vLLM's 'larger than the available KV cache memory' is kv_cache_oom", () => {
    assert.strictEqual(exited(fixture("vllm-kv-cache-too-small.log"), 40).errorClass, "kv_cache_oom")
  })

  it("SGLang's 'Please try to increase --mem-fraction-static' is kv_cache_oom", () => {
    assert.strictEqual(exited(fixture("sglang-kv-cache-oom.log"), 25).errorClass, "kv_cache_oom")
  })

  it("argparse errors of vllm serve and SGLang's launch_server are fast_exit_arg_error", () => {
    assert.strictEqual(exited(fixture("vllm-arg-error.log"), 4, 2).errorClass, "fast_exit_arg_error")
    assert.strictEqual(exited(fixture("sglang-arg-error.log"), 3, 2).errorClass, "fast_exit_arg_error")
    assert.strictEqual(
      exited(fixture("vllm-arg-error.log"), 45, 2).errorClass,
      "subprocess_nonzero",
      "not fast"
    )
  })

  it("a server that exits before it is ready: classified from its log, with a header", () => {
    const log = fixture("vllm-kv-cache-oom.log")
    const r = classifyAttempt(
      AttemptOutcome.ServerNotReady({
        exitCode: 1,
        runtimeSec: 52.3,
        outputTail: log.slice(-MAX_ERROR_CHARS),
        evidence: log.split("\n").filter(isTellingLine)
      })
    )
    assert.strictEqual(r.errorClass, "kv_cache_oom")
    assert.isTrue(
      r.error!.startsWith("the server exited with code 1 after 52.3 s, before it was ready"),
      r.error!
    )
    const timedOut = classifyAttempt(
      AttemptOutcome.ServerNotReady({
        exitCode: null,
        runtimeSec: 30,
        outputTail: "Loading safetensors checkpoint shards: 3/999",
        readyTimeoutSec: 30
      })
    )
    assert.strictEqual(timedOut.errorClass, "timeout")
    assert.include(timedOut.error!, "not ready within 30 s")
  })
})

describe("the one-line summary of an engine's failure is the line that decided its class", () => {
  // errorHead summarises an attempt in the live log (160 characters) and in `state show` (100).
  for (const [file, runtimeSec, errorClass, expected] of [
    ["vllm-kv-cache-oom.log", 52, "kv_cache_oom", "ValueError: No available memory for the cache blocks."],
    ["vllm-kv-cache-too-small.log", 40, "kv_cache_oom", "ValueError: To serve at least one request"],
    [
      "sglang-kv-cache-oom.log",
      25,
      "kv_cache_oom",
      "RuntimeError: Not enough memory. Please try to increase"
    ],
    ["vllm-arg-error.log", 4, "fast_exit_arg_error", "unrecognized arguments: --gpu-memory-utilisation"],
    ["sglang-arg-error.log", 3, "fast_exit_arg_error", "invalid int value: 'x'"]
  ] as const) {
    it(`${file}: ${errorClass}, summarised by "${expected}"`, () => {
      const r = exited(fixture(file), runtimeSec, errorClass === "fast_exit_arg_error" ? 2 : 1)
      assert.strictEqual(r.errorClass, errorClass)
      for (const max of [160, 100]) {
        const head = errorHead(r.error, r.errorClass, max)
        assert.include(head, expected, `max ${max}`)
        assert.notInclude(head, "Engine core initialization failed")
      }
    })
  }

  it("a server that died of a KV-cache OOM before it was ready: the KV-cache line, not the header", () => {
    const log = fixture("vllm-kv-cache-oom.log")
    const r = classifyAttempt(
      AttemptOutcome.ServerNotReady({
        exitCode: 1,
        runtimeSec: 52.3,
        outputTail: log.slice(-MAX_ERROR_CHARS),
        evidence: log.split("\n").filter(isTellingLine)
      })
    )
    assert.strictEqual(r.errorClass, "kv_cache_oom")
    assert.include(errorHead(r.error, r.errorClass), "ValueError: No available memory for the cache blocks.")
  })

  it("other classes keep the last error-like line", () => {
    const log = fixture("vllm-kv-cache-oom.log").replaceAll(
      "No available memory for the cache blocks",
      "boom"
    )
    const r = exited(log, 52)
    assert.strictEqual(r.errorClass, "subprocess_nonzero")
    assert.include(errorHead(r.error, r.errorClass), "Engine core initialization failed")
  })
})

describe("classified from what happened (issue 14 items 2, 3; docs/design.md#classified-from-what-happened)", () => {
  const died = (log: string, exitCode: number, resultFile?: string, serverExitCode?: number) => {
    const parsed = resultFile === undefined ? undefined : parseResult(fixture(resultFile))
    return classifyAttempt(
      AttemptOutcome.Exited({
        exitCode,
        runtimeSec: 6,
        outputTail: log.slice(-MAX_ERROR_CHARS),
        evidence: log.split("\n").filter(isTellingLine),
        throughput: parsed?.throughput,
        resultFormat: parsed?.format,
        metrics: parsed?.metrics,
        serverExitCode
      })
    )
  }

  it("SGLang's warm-up failure (its requests failed on the engine's stream) is not an argument error", () => {
    const r = died(fixture("sglang-bench-serving-warmup-failed.log"), 1)
    assert.strictEqual(r.errorClass, "subprocess_nonzero")
  })

  it("vLLM's 'Initial test run failed' after a connection reset is not an argument error either", () => {
    const log =
      "Starting initial single prompt test run...\nTraceback (most recent call last):\nValueError: Initial test run failed - Please make sure benchmark arguments are correctly specified. Error: Traceback (most recent call last):\naiohttp.client_exceptions.ServerDisconnectedError: Server disconnected\n"
    assert.strictEqual(died(log, 1).errorClass, "subprocess_nonzero")
  })

  it("a real argument error of a client stays one", () => {
    const log = "usage: vllm bench serve [-h] ...\nvllm bench serve: error: unrecognized arguments: --bogus\n"
    assert.strictEqual(died(log, 2).errorClass, "fast_exit_arg_error")
  })

  it("vLLM's client exits 0 with completed 0: never a measurement", () => {
    const r = died(
      "============ Serving Benchmark Result ============\n",
      0,
      "vllm-bench-serve-engine-died.json"
    )
    assert.strictEqual(r.errorClass, "invalid_measurement")
    assert.include(r.error ?? "", "completed 0")
  })

  it("completed 0 is never a measurement, even beside a positive throughput", () => {
    const r = classifyAttempt(
      AttemptOutcome.Exited({
        exitCode: 0,
        runtimeSec: 3,
        outputTail: "",
        throughput: 12,
        resultFormat: "vllm",
        metrics: { completed: 0, output_throughput: 12 }
      })
    )
    assert.strictEqual(r.errorClass, "invalid_measurement")
  })

  it("an engine that died while the client ran is one class whichever client ran (vLLM exits 0, SGLang raises)", () => {
    const vllm = died(
      "Starting initial single prompt test run...\n",
      0,
      "vllm-bench-serve-engine-died.json",
      1
    )
    const sglang = died(fixture("sglang-bench-serving-engine-died.log"), 1, undefined, 1)
    const sglangWarmup = died(fixture("sglang-bench-serving-warmup-failed.log"), 1, undefined, 137)
    assert.strictEqual(vllm.errorClass, "subprocess_nonzero")
    assert.strictEqual(sglang.errorClass, "subprocess_nonzero")
    assert.strictEqual(sglangWarmup.errorClass, "subprocess_nonzero")
    for (const r of [vllm, sglang, sglangWarmup]) {
      assert.match(r.error ?? "", /^the server exited with code (1|137) while the client ran/)
      assert.isNull(r.throughput === 0 ? null : r.throughput)
    }
  })

  it("an engine's KV-cache OOM in its log still decides the class when it died under the client", () => {
    const r = died(`${fixture("vllm-kv-cache-too-small.log")}\n`, 0, "vllm-bench-serve-engine-died.json", 1)
    assert.strictEqual(r.errorClass, "kv_cache_oom")
  })
})

describe("isMeasurement: what state show and the report may draw as a point", () => {
  it("a positive throughput with completed > 0 (or no completed count) is one; completed 0 or zero throughput is not", () => {
    assert.isTrue(isMeasurement(120, { completed: 10, output_throughput: 120 }))
    assert.isTrue(isMeasurement(120, {}))
    assert.isTrue(isMeasurement(null, { output_throughput: 5 }))
    assert.isFalse(isMeasurement(0, { completed: 0, output_throughput: 0 }))
    assert.isFalse(isMeasurement(12, { completed: 0, output_throughput: 12 }))
    assert.isFalse(isMeasurement(null, null))
    assert.isFalse(isMeasurement(-1, {}))
  })
})

describe("impossible measurements are invalid_measurement, naming the field (issue 27 item 2)", () => {
  const vllm = (extra: Record<string, unknown>) =>
    JSON.stringify({ ...JSON.parse(fixture("vllm-bench-serve.json")), ...extra })
  const classify = (text: string) => {
    const parsed = parseResult(text)!
    return classifyAttempt(
      AttemptOutcome.Exited({
        exitCode: 0,
        runtimeSec: 50,
        outputTail: "done",
        throughput: parsed.throughput,
        resultFormat: parsed.format,
        metrics: parsed.metrics,
        invalidMetric: parsed.invalid
      })
    )
  }
  it.each([
    ["a negative latency", vllm({ p99_ttft_ms: -5000 }), "p99_ttft_ms is -5000, negative"],
    ["a negative count", vllm({ completed: -3 }), "completed is -3, negative"],
    ["a fractional count", vllm({ completed: 0.4 }), "completed is 0.4, not a whole number"],
    [
      "NaN (Python's json.dumps)",
      fixture("vllm-bench-serve.json").replace(/"p99_tpot_ms": [0-9.]+/, '"p99_tpot_ms": NaN'),
      "p99_tpot_ms is NaN or infinite"
    ],
    ["a string", vllm({ mean_itl_ms: "12" }), 'mean_itl_ms is "12", not a finite number']
  ])("%s", (_what, text, detail) => {
    const r = classify(text)
    assert.strictEqual(r.errorClass, "invalid_measurement")
    assert.include(r.error!, detail)
  })

  it("metrics handed over without the parser's verdict are judged too (negative, fractional)", () => {
    const r = classifyAttempt(
      AttemptOutcome.Exited({
        exitCode: 0,
        runtimeSec: 50,
        outputTail: "",
        throughput: 100,
        metrics: { output_throughput: 100, completed: 2.5 }
      })
    )
    assert.strictEqual(r.errorClass, "invalid_measurement")
    assert.include(r.error!, "completed is 2.5")
  })

  it("the engines' real results stay measurements", () => {
    assert.isNull(classify(fixture("vllm-bench-serve.json")).errorClass)
    assert.isNull(classify(fixture("sglang-bench-serving.jsonl")).errorClass)
  })
})

describe("a process outside the lease on the engine's port (issue 27 item 1)", () => {
  const line =
    "hyperloom: port_taken: port 41234 is served by pid 999 of user mallory (python3 squat.py), not by the lease's engine (pid 17); its answers are not the engine's, so nothing is measured"
  it("fails the engine start as port_taken, naming the pid and user first, whatever the engine did", () => {
    const r = classifyAttempt(
      AttemptOutcome.ServerNotReady({
        exitCode: 1,
        runtimeSec: 3,
        outputTail: `${line}\nERROR: [Errno 98] error while attempting to bind on address: address already in use`
      })
    )
    assert.strictEqual(r.errorClass, "port_taken")
    assert.match(r.error!, /^port_taken: port 41234 is served by pid 999 of user mallory/)
  })
  it("fails a client run the runner refused as port_taken", () => {
    const r = classifyAttempt(
      AttemptOutcome.Exited({ exitCode: 3, runtimeSec: 0, outputTail: line, throughput: undefined })
    )
    assert.strictEqual(r.errorClass, "port_taken")
  })
})
