/**
 * A result with completed = 0 (vLLM's client after the engine died: exit 0, every metric 0) is
 * never a measurement (issue 14 item 3; docs/design.md#classified-from-what-happened): `state show`
 * does not print its zeros as figures, and the report draws it as a failed attempt (×), not a point
 * at 0.
 */
import { assert, describe, it } from "@effect/vitest"
import { renderReport } from "../../src/cli/RenderReport.js"
import { renderSession } from "../../src/cli/RenderSession.js"
import { type AttemptRecord, initialState, type SessionState } from "../../src/domain/State.js"

const zero: AttemptRecord = {
  number: 2,
  started_at: "2024-06-01T12:00:00.000Z",
  ended_at: "2024-06-01T12:01:00.000Z",
  runtime_sec: 60,
  error_class: "invalid_measurement",
  exit_code: 0,
  error: "exited 0 but its result has completed 0: every request failed, not a measurement",
  signature: null,
  throughput: 0,
  result_format: "vllm",
  metrics: {
    output_throughput: 0,
    total_token_throughput: 0,
    request_throughput: 0,
    completed: 0,
    mean_ttft_ms: 0,
    median_ttft_ms: 0,
    p99_ttft_ms: 0,
    mean_tpot_ms: 0,
    median_tpot_ms: 0,
    p99_tpot_ms: 0
  }
}
const good: AttemptRecord = {
  ...zero,
  number: 1,
  error_class: null,
  error: null,
  throughput: 4101.9,
  metrics: { output_throughput: 4101.9, completed: 1000, mean_ttft_ms: 212.4, mean_tpot_ms: 14.8 }
}
const state: SessionState = {
  ...initialState(),
  status: "stopped",
  stop_reason: "baseline_failed",
  baseline_attempts: [good, zero]
}

describe("a zero result is not shown as a measurement", () => {
  it("state show: no 0 tok/s and no TTFT 0.0/0.0/0.0 for it; the measured attempt keeps its figures", () => {
    const text = renderSession("/s", state)
    const lines = text.split("\n")
    const at = lines.findIndex((l) => l.startsWith("  #2"))
    const detail = lines[at + 1] ?? ""
    assert.include(detail, "no measurement: 0 completed")
    assert.notInclude(detail, "out 0")
    assert.notInclude(detail, "TTFT 0.0/0.0/0.0")
    assert.include(text, "out 4101.90 tok/s")
  })

  it("report: the zero attempt is a × in both charts, never a point at 0", () => {
    const html = renderReport([{ name: "s", state, environment: undefined }], "2024-06-01T12:02:00.000Z")
    // throughput: one circle (attempt 1), one × (attempt 2); latency: TTFT and TPOT series alike
    const circles = html.match(/<circle /g)?.length ?? 0
    const crosses = html.match(/<g class="failed">/g)?.length ?? 0
    assert.strictEqual(circles, 3, "attempt 1 in the throughput, TTFT and TPOT series")
    assert.strictEqual(crosses, 3, "attempt 2 in the throughput, TTFT and TPOT series")
    assert.notInclude(html, "<td>2</td><td>invalid_measurement</td><td>0</td><td>60</td><td>0</td>")
  })
})
