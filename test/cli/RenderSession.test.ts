import { assert, describe, it } from "@effect/vitest"
import { renderSession, whyStopped } from "../../src/cli/RenderSession.js"
import { errorHead } from "../../src/domain/Attempt.js"
import { type AttemptRecord, initialState, type SessionState } from "../../src/domain/State.js"

const attempt = (n: number, fields: Partial<AttemptRecord> = {}): AttemptRecord => ({
  number: n,
  started_at: "2024-06-01T12:00:00.000Z",
  ended_at: "2024-06-01T12:00:05.000Z",
  runtime_sec: 5,
  error_class: "subprocess_nonzero",
  exit_code: 1,
  error: "boom",
  signature: `v1:boom ${n}`,
  throughput: null,
  result_format: null,
  metrics: null,
  ...fields
})

const stopped = (reason: SessionState["stop_reason"], fields: Partial<SessionState> = {}): SessionState => ({
  ...initialState(),
  status: reason === "orchestrator_cancelled" ? "cancelled" : "stopped",
  stop_reason: reason,
  stop_ts: "2024-06-01T12:01:00.000Z",
  ...fields
})

describe("errorHead", () => {
  it("prefers the marker line, then the classifier's header, then the last error-like line", () => {
    assert.strictEqual(
      errorHead("ray_cluster_infeasible: no slot\nmore", "ray_cluster_infeasible"),
      "ray_cluster_infeasible: no slot"
    )
    assert.strictEqual(
      errorHead("attempt timed out after 30 s and was killed\nloading", "timeout"),
      "attempt timed out after 30 s and was killed"
    )
    assert.strictEqual(
      errorHead("bench: warmup 3/4\nRuntimeError: worker died\nbench: warmup 4/4", "subprocess_nonzero"),
      "RuntimeError: worker died"
    )
    assert.strictEqual(errorHead("…tail\nplain last line", "subprocess_nonzero"), "plain last line")
    assert.strictEqual(errorHead(null, null), "")
    assert.strictEqual(errorHead(`Error: ${"x".repeat(300)}`, "subprocess_nonzero", 20).length, 20)
  })
})

describe("whyStopped", () => {
  it("names the rule that stopped the session", () => {
    assert.include(
      whyStopped(
        stopped("baseline_failed", {
          baseline_attempts: [
            attempt(1, {
              error_class: "ray_cluster_infeasible",
              error: "ray_cluster_infeasible: x",
              signature: null
            })
          ]
        })
      ),
      "cannot grant the lease"
    )
    const same = [attempt(1, { signature: "v1:same" }), attempt(2, { signature: "v1:same" })]
    assert.strictEqual(
      whyStopped(stopped("baseline_failed", { baseline_attempts: same })),
      "attempt 2 failed the same way as attempt 1 (same signature)"
    )
    // Same signature separated by an uncharged round still counts as consecutive.
    const separated = [
      attempt(1, { signature: "v1:same" }),
      attempt(2, { error_class: "interrupted", signature: null }),
      attempt(3, { signature: "v1:same" })
    ]
    assert.include(
      whyStopped(stopped("baseline_failed", { baseline_attempts: separated })),
      "attempt 3 failed the same way as attempt 1"
    )
    assert.strictEqual(
      whyStopped(
        stopped("baseline_failed", {
          baseline_total_failures: 3,
          baseline_attempts: [attempt(1), attempt(2), attempt(3)]
        })
      ),
      "3 failures (limit 3)"
    )
    assert.include(
      whyStopped(stopped("baseline_arg_error", { baseline_arg_error_streak: 2 })),
      "2 argument errors in a row"
    )
    assert.include(
      whyStopped(
        stopped("enablement_stalled", {
          enablement: { ...initialState().enablement, attempts: 5, stall_streak: 5 }
        })
      ),
      "5 failed revalidations"
    )
    assert.include(
      whyStopped(
        stopped("session_time_exhausted", {
          baseline_attempts: [attempt(1, { error_class: "session_time_exhausted" })]
        })
      ),
      "the --deadline passed during attempt 1"
    )
    assert.include(
      whyStopped(
        stopped("orchestrator_cancelled", {
          baseline_attempts: [attempt(1, { error_class: "orchestrator_cancelled" })]
        })
      ),
      "cancelled by the operator during attempt 1"
    )
    assert.include(
      whyStopped({ ...initialState(), baseline_attempts: [attempt(1, { ended_at: null })] }),
      "attempt 1 is in flight"
    )
  })
})

describe("renderSession", () => {
  it("shows an in-flight attempt and a pending enablement", () => {
    const text = renderSession("/s", {
      ...initialState(),
      enablement: {
        attempts: 2,
        stall_streak: 1,
        inflight: true,
        launch_log_path: "/s/attempts/2/launch.log",
        succeeded: false
      },
      baseline_attempts: [
        attempt(1),
        attempt(2, { ended_at: null, error_class: null, exit_code: null, runtime_sec: null, error: null })
      ]
    })
    assert.include(text, "status      running")
    assert.match(text, /#2 +in flight +- +- +since 2024-06-01T12:00:00.000Z/)
    assert.include(
      text,
      "enablement  2 run(s), stall 1/5, one pending, not revalidated, launch log /s/attempts/2/launch.log"
    )
  })
})

describe("state show: per-attempt serving metrics (docs/design.md#results-and-metrics)", () => {
  it("prints the format, throughputs and mean/median/p99 latencies under the attempt", () => {
    const s: SessionState = {
      ...initialState(),
      status: "succeeded",
      baseline_tput: 4101.9,
      baseline_attempts: [
        attempt(1, {
          error_class: null,
          error: null,
          exit_code: 0,
          signature: null,
          throughput: 4101.9,
          result_format: "vllm",
          metrics: {
            output_throughput: 4101.9,
            total_token_throughput: 20509.5,
            request_throughput: 16.02,
            completed: 1000,
            mean_ttft_ms: 212.4,
            median_ttft_ms: 187.9,
            p99_ttft_ms: 611.2,
            mean_tpot_ms: 14.8,
            median_tpot_ms: 14.6,
            p99_tpot_ms: 19.7
          }
        })
      ]
    }
    const text = renderSession("/s", s)
    assert.include(
      text,
      "[vllm] · out 4101.90 tok/s · total 20509.50 tok/s · 16.02 req/s · 1000 completed · TTFT 212.40/187.90/611.20 ms · TPOT 14.80/14.60/19.70 ms (mean/median/p99)"
    )
    assert.notInclude(renderSession("/s", { ...s, baseline_attempts: [attempt(1)] }), "req/s")
  })
})

describe("numbers as `vllm bench serve` prints them", () => {
  it("a throughput has two decimals and its unit, everywhere the session is shown", () => {
    const tput = 2761.4136788198753
    const s: SessionState = {
      ...initialState(),
      status: "succeeded",
      baseline_tput: tput,
      baseline_attempts: [
        attempt(1, {
          error_class: null,
          exit_code: 0,
          error: null,
          signature: null,
          throughput: tput,
          runtime_sec: 12.3456789
        })
      ]
    }
    const text = renderSession("/s", s)
    assert.notInclude(text, "2761.4136")
    assert.include(text, "throughput  2761.41 tok/s")
    assert.include(text, "why         attempt 1 succeeded with throughput 2761.41 tok/s")
    assert.match(text, /#1 +succeeded +exit 0 +12\.35 s +throughput 2761\.41 tok\/s/)
  })
})

describe("renderSession: the workload on record", () => {
  const workload = {
    client: "guidellm",
    client_version: "0.3.0",
    dataset: "/data/prompts.jsonl",
    dataset_file: { bytes: 27, sha256: "ab12" },
    input_tokens: null,
    output_tokens: null,
    rate: null,
    concurrency: 4,
    arrival: "closed",
    burstiness: null,
    requests: 100
  }
  const ok = (n: number, w: object) =>
    attempt(n, {
      error_class: null,
      exit_code: 0,
      error: null,
      signature: null,
      throughput: 10,
      workload: w as any
    })

  it("states what the client sent once, the dataset file's size and SHA-256 with it (docs/clients.md#the-workload-on-record)", () => {
    const text = renderSession("/s", {
      ...initialState(),
      baseline_attempts: [ok(1, workload), ok(2, workload)]
    })
    assert.include(
      text,
      "\nworkload    client guidellm 0.3.0; dataset /data/prompts.jsonl; dataset file 27 bytes, sha256 ab12; arrival closed; requests 100\n"
    )
    assert.strictEqual(text.split("workload").length, 2)
  })

  it("says which fact differs between attempts, and nothing without a report's workload", () => {
    const other = { ...workload, dataset_file: { bytes: 30, sha256: "cd34" } }
    assert.include(
      renderSession("/s", { ...initialState(), baseline_attempts: [ok(1, workload), ok(2, other)] }),
      "(differs between attempts: dataset file)"
    )
    assert.notInclude(renderSession("/s", { ...initialState(), baseline_attempts: [attempt(1)] }), "workload")
  })
})
