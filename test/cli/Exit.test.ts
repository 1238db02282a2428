import { assert, describe, it } from "@effect/vitest"
import { EXIT, EXIT_CODES_HELP, exitCodeForSession } from "../../src/cli/Exit.js"
import type { StopReason } from "../../src/domain/State.js"

describe("the exit-code table", () => {
  it("the help lists every code once, in the table's order, one line each (the help page wraps it)", () => {
    const lines = EXIT_CODES_HELP.split("\n").slice(1)
    const listed = lines.map((l) => Number(/^ {2}(\d+) +\S/.exec(l)?.[1]))
    assert.deepStrictEqual(listed, Object.values(EXIT))
    assert.strictEqual(new Set(listed).size, listed.length)
    for (const code of [14, 15, 74, 141]) assert.include(listed, code)
  })

  it("every stop reason has its own code; a stopped session without one is internal", () => {
    const codes = (
      [
        "baseline_failed",
        "baseline_arg_error",
        "enablement_stalled",
        "session_time_exhausted",
        "orchestrator_cancelled"
      ] satisfies ReadonlyArray<StopReason>
    ).map((r) => exitCodeForSession({ status: "stopped", stop_reason: r }))
    assert.deepStrictEqual(codes, [
      EXIT.baselineFailed,
      EXIT.baselineArgError,
      EXIT.enablementStalled,
      EXIT.sessionTimeExhausted,
      EXIT.cancelled
    ])
    assert.strictEqual(exitCodeForSession({ status: "stopped", stop_reason: null }), EXIT.internal)
    assert.strictEqual(exitCodeForSession({ status: "succeeded", stop_reason: null }), EXIT.ok)
    assert.strictEqual(exitCodeForSession({ status: "running", stop_reason: null }), EXIT.ok)
    assert.strictEqual(exitCodeForSession({ status: "cancelled", stop_reason: null }), EXIT.cancelled)
  })
})
