/**
 * `hyperloom check` on a baseline session (src/programs/Check.ts): each measured attempt judged
 * again from its record, with the `--max-failed` it was judged with (docs/trust.md#is-the-number-valid).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { type AttemptRecord, initialState, renderState } from "../../src/domain/State.js"
import { checkSession } from "../../src/programs/Check.js"
import * as StateStore from "../../src/services/StateStore.js"
import * as SweepStore from "../../src/services/SweepStore.js"

const DIR = "/s/base"

/** A measured attempt whose client failed 5 of 400 requests (1.25 %), judged suspect under --max-failed 2. */
const attempt = (fields: Partial<AttemptRecord>): AttemptRecord => ({
  number: 1,
  started_at: "2026-12-07T10:00:00.000Z",
  ended_at: "2026-12-07T10:01:00.000Z",
  runtime_sec: 60,
  error_class: null,
  exit_code: 0,
  error: null,
  signature: null,
  throughput: 100,
  result_format: "vllm",
  metrics: { output_throughput: 100, completed: 395 },
  client: { completed: 395, failed: 5 },
  validity: {
    verdict: "suspect",
    findings: [
      {
        check: "failed_requests",
        severity: "suspect",
        evidence: "5 of 400 requests failed (1.3 %; --max-failed 2.0 %)",
        source: "the client's result"
      }
    ]
  },
  ...fields
})

const check = (a: AttemptRecord) =>
  checkSession(DIR).pipe(
    Effect.provide(
      Layer.mergeAll(
        StateStore.layerTest({ [DIR]: renderState({ ...initialState(), baseline_attempts: [a] }) }),
        SweepStore.layerTest()
      )
    )
  )

describe("hyperloom check on a baseline", () => {
  it.effect(
    "judges again with the --max-failed the attempt was judged with: 1.25 % failed stays suspect under 2 %",
    () =>
      Effect.gen(function* () {
        const r = yield* check(attempt({ max_failed: 0.02 }))
        assert.strictEqual(r.runs[0]!.now.verdict, "suspect", JSON.stringify(r.runs[0]))
        assert.isTrue(r.agrees)
      })
  )

  it.effect(
    "a record from before --max-failed was kept is judged at the default 1 %: invalid, said to disagree",
    () =>
      Effect.gen(function* () {
        const r = yield* check(attempt({}))
        assert.strictEqual(r.runs[0]!.now.verdict, "invalid")
        assert.isFalse(r.agrees)
      })
  )
})
