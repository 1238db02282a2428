/**
 * Which failure it was, in words too (issue 33 item 4), through the sweep program on its test
 * layers. A sweep where no engine ever became ready exits 17 (sweep_no_engine_ready), but its
 * sentence still blamed the SLO ("no point met every SLO (sweep_no_feasible_point)") in the CLI's
 * text, `--json` (summary.statement), `sweep show` and the report. And an engine's argument error
 * (argparse's `PROG: error: argument --x: …`, exit 2 at its start) in vLLM's own wording was no
 * argument error to the classifier: the combination was started a second time though the same
 * flags fail the same way.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { exitCodeForSweep } from "../../src/cli/Exit.js"
import { renderSweepText } from "../../src/cli/RenderSweep.js"
import { renderSweepReport } from "../../src/cli/RenderSweepReport.js"
import { AttemptOutcome, classifyAttempt } from "../../src/domain/Failure.js"
import { type Experiment, statementOf } from "../../src/domain/Sweep.js"
import { runSweep } from "../../src/programs/Sweep.js"
import * as SweepEngine from "../../src/programs/SweepEngine.js"
import { model, seqsOf, setup, sweepExperiment, sweepOptions } from "../support/sweep.js"

const DIR = "/s/no-engine"
const experiment = (over: Partial<Experiment> = {}): Experiment =>
  sweepExperiment({ load: { kind: "points", name: "c", values: ["1", "2"] }, ...over })
const engineLog = Effect.flatten(SweepEngine.FakeSweepEngineLog)

/**
 * vLLM's own argparse output for a value its type rejects (vllm/engine/arg_utils.py `parse_type`:
 * "Value {val} cannot be converted to {return_type}."; argparse prints the usage line, then
 * `PROG: error: argument NAME: MESSAGE`, and exits 2).
 */
const VLLM_TYPE_ERROR = [
  "usage: vllm serve [model_tag] [options]",
  "vllm serve: error: argument --max-model-len: Value 4kk cannot be converted to <function human_readable_int at 0x7f3a2c1e0ae0>."
].join("\n")

/** argparse's error for a value a custom check refuses (the stand-in engine's words, examples/engine-model.mjs). */
const CUSTOM_CHECK_ERROR = [
  "usage: vllm serve [model_tag] [options]",
  "vllm serve: error: argument --max-num-seqs: must be at least 1"
].join("\n")

describe("an engine's argument error at its start", () => {
  it("argparse's `error: argument --x: …` with exit 2 is fast_exit_arg_error, in vLLM's wording too", () => {
    for (const log of [VLLM_TYPE_ERROR, CUSTOM_CHECK_ERROR]) {
      const r = classifyAttempt(
        AttemptOutcome.ServerNotReady({ exitCode: 2, runtimeSec: 6, outputTail: log })
      )
      assert.strictEqual(r.errorClass, "fast_exit_arg_error", log)
    }
  })

  it.effect(
    "makes its combination infeasible after one start (not retried: the same flags fail the same way)",
    () =>
      Effect.gen(function* () {
        const report = yield* runSweep(sweepOptions(DIR, experiment()))
        const log = yield* engineLog
        assert.deepStrictEqual(
          log.starts.map((s) => seqsOf(s)),
          [2, 4, 8],
          "the combination with the argument error was started again"
        )
        const c = report.doc.combinations[0]!
        assert.strictEqual(c.status, "infeasible")
        assert.strictEqual(c.class, "fast_exit_arg_error")
        assert.include(c.error ?? "", "argument --max-model-len: Value 4kk cannot be converted")
      }).pipe(
        Effect.provide(
          setup({
            start: (server) =>
              seqsOf(server) === 2
                ? { notReady: { exitCode: 2, log: VLLM_TYPE_ERROR, runtimeSec: 6 } }
                : { ready: true },
            run: model
          })
        )
      )
  )
})

describe("a sweep where no engine ever became ready", () => {
  const NOT_READY = "sweep_no_engine_ready"
  it.effect(
    "says sweep_no_engine_ready and why (each engine's own line) everywhere, never the SLO's code",
    () =>
      Effect.gen(function* () {
        const report = yield* runSweep(sweepOptions(DIR, experiment()))
        const doc = report.doc
        assert.strictEqual(exitCodeForSweep(doc), 17)
        const statement = doc.summary.statement ?? ""
        // --json prints sweep.json itself: its summary.statement
        assert.include(statement, NOT_READY)
        assert.notInclude(statement, "sweep_no_feasible_point")
        assert.notInclude(statement, "no point met every SLO")
        // why: the engines' own lines (the argument error, the KV-cache error)
        assert.include(statement, "argument --max-model-len")
        assert.include(statement, "No available memory for the cache blocks")
        assert.strictEqual(statementOf(doc), statement)
        // the CLI's text (`sweep run` and `sweep show` print it) and the report
        const text = renderSweepText(DIR, doc)
        assert.include(text, NOT_READY)
        assert.notInclude(text, "sweep_no_feasible_point")
        const html = renderSweepReport([{ name: DIR, doc }], "2026-12-07T00:00:00.000Z")
        assert.include(html, NOT_READY)
        assert.notInclude(html, "sweep_no_feasible_point")
      }).pipe(
        Effect.provide(
          setup({
            start: (server) =>
              seqsOf(server) === 2
                ? { notReady: { exitCode: 2, log: VLLM_TYPE_ERROR, runtimeSec: 6 } }
                : {
                    notReady: {
                      exitCode: 1,
                      log: "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
                    }
                  },
            run: model
          })
        )
      )
  )

  it("a document written before, whose statement blamed the SLO, is said right by statementOf", () =>
    Effect.runPromise(
      Effect.gen(function* () {
        const report = yield* runSweep(
          sweepOptions(DIR, experiment({ params: [{ name: "seqs", values: ["2"] }] }))
        )
        const old = {
          ...report.doc,
          summary: {
            ...report.doc.summary,
            statement: "none — no point met every SLO (sweep_no_feasible_point)"
          }
        }
        assert.include(statementOf(old), NOT_READY)
      }).pipe(
        Effect.provide(
          setup({
            start: () => ({
              notReady: {
                exitCode: 1,
                log: "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
              }
            }),
            run: model
          })
        )
      )
    ))
})
