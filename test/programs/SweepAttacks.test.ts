/**
 * What a careless user or a hostile local user meets in a sweep session (issue 27, items 4, 5 and
 * 7), through the sweep program on its test layers.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer } from "effect"
import { renderSweepText } from "../../src/cli/RenderSweep.js"
import type { Experiment } from "../../src/domain/Sweep.js"
import { runSweep, type SweepOptions } from "../../src/programs/Sweep.js"
import * as SweepEngine from "../../src/programs/SweepEngine.js"
import * as AttemptFiles from "../../src/services/AttemptFiles.js"
import * as StateStore from "../../src/services/StateStore.js"
import * as SweepStore from "../../src/services/SweepStore.js"
import { model, setup, sweepExperiment, sweepOptions } from "../support/sweep.js"

const DIR = "/s/attacks"
const SWEEP = `${DIR}/sweep.json`

const experiment = (over: Partial<Experiment> = {}): Experiment =>
  sweepExperiment({ load: { kind: "points", name: "c", values: ["1", "2", "4"] }, ...over })

const options = (e: Experiment = experiment()): SweepOptions => sweepOptions(DIR, e)

const failure = (exit: Exit.Exit<unknown, unknown>) => {
  assert.isTrue(Exit.isFailure(exit), "expected the run to be refused")
  return Exit.isFailure(exit)
    ? (exit.cause as { error?: { _tag: string; message: string } }).error
    : undefined
}

describe("a sweep.json edited by hand is refused (exit 8), left as it is (issue 27 item 4)", () => {
  const edited = (edit: (doc: { combinations: Array<Record<string, unknown>> }) => void) =>
    Effect.gen(function* () {
      const files = new Map<string, string>()
      yield* runSweep(options()).pipe(Effect.provide(setup({ run: model }, files)))
      const doc = JSON.parse(files.get(SWEEP)!)
      edit(doc)
      const text = `${JSON.stringify(doc, null, 2)}\n`
      files.set(SWEEP, text)
      // a finished sweep that reopens (a point reset) or one with a record gone: the run must refuse it
      const exit = yield* runSweep(options()).pipe(Effect.provide(setup({ run: model }, files)), Effect.exit)
      return { error: failure(exit), after: files.get(SWEEP), text }
    })

  it.effect("one combination record removed", () =>
    Effect.gen(function* () {
      const r = yield* edited((doc) => {
        doc.combinations.splice(1, 1)
        doc.combinations[1]!.index = 1
      })
      assert.strictEqual(r.error?._tag, "StateCorrupt")
      assert.include(r.error?.message, "2 combination record(s) where its experiment's grid has 3")
      assert.strictEqual(r.after, r.text)
    })
  )

  it.effect("two records swapped and a point reset", () =>
    Effect.gen(function* () {
      const r = yield* edited((doc) => {
        const [a, b] = [doc.combinations[0]!, doc.combinations[1]!]
        doc.combinations[0] = b
        doc.combinations[1] = a
        const point = (b.points as Array<Record<string, unknown>>)[0]!
        point.status = "pending"
        point.runs = []
      })
      assert.strictEqual(r.error?._tag, "StateCorrupt")
      assert.include(r.error?.message, "combination record 0 has index 1")
      assert.strictEqual(r.after, r.text)
    })
  )

  it.effect("params changed under a record", () =>
    Effect.gen(function* () {
      const r = yield* edited((doc) => {
        doc.combinations[2]!.params = { seqs: "16" }
      })
      assert.strictEqual(r.error?._tag, "StateCorrupt")
      assert.include(r.error?.message, 'combination 2 has params {"seqs":"16"}')
    })
  )

  it.effect("a load point removed from a grid", () =>
    Effect.gen(function* () {
      const r = yield* edited((doc) => {
        ;(doc.combinations[0]!.points as Array<unknown>).pop()
      })
      assert.strictEqual(r.error?._tag, "StateCorrupt")
      assert.include(r.error?.message, "combination 0 has load points 1, 2 where the grid has 1, 2, 4")
    })
  )
})

describe("sweep run on a baseline's session folder (issue 27 item 6)", () => {
  it.effect(
    "is refused (SessionHoldsOther, exit 2) naming the baseline; no engine starts, no sweep.json",
    () => {
      const files = new Map<string, string>()
      const state = `${JSON.stringify({ schema_version: 1 })}\n`
      const layer = Layer.mergeAll(
        SweepEngine.layerTest({ run: model }).pipe(
          Layer.provideMerge(AttemptFiles.layerTest(AttemptFiles.makeMemoryAttemptFiles()))
        ),
        StateStore.layerTest({ [DIR]: state }),
        SweepStore.layerTest(files)
      )
      return Effect.gen(function* () {
        const error = failure(yield* Effect.exit(runSweep(options())))
        assert.strictEqual(error?._tag, "SessionHoldsOther")
        assert.include(error?.message, "holds a baseline (state.json), not a sweep")
        const log = yield* Effect.flatten(SweepEngine.FakeSweepEngineLog)
        assert.strictEqual(log.starts.length, 0)
        assert.isFalse(files.has(SWEEP))
      }).pipe(Effect.provide(layer))
    }
  )
})

describe("secrets in the server string or the client (issue 27 item 7)", () => {
  it.effect(
    "run as written, kept and shown redacted (sweep.json, sweep show); the same command resumes",
    () =>
      Effect.gen(function* () {
        const files = new Map<string, string>()
        const e = experiment({
          server: "HF_TOKEN=hf_abcdefghijkl engine --max-num-seqs {seqs} --api-key sk-abcdefgh12345678",
          client: ["client", "--max-concurrency", "{c}", "--api-key", "sk-abcdefgh12345678"]
        })
        const layer = setup({ run: model }, files)
        const first = yield* Effect.gen(function* () {
          const report = yield* runSweep(options(e))
          const log = yield* Effect.flatten(SweepEngine.FakeSweepEngineLog)
          return { report, log }
        }).pipe(Effect.provide(layer))
        // what ran: the secret as written
        assert.include(first.log.starts[0], "--api-key sk-abcdefgh12345678")
        assert.include(first.log.runs[0]!.argv.join(" "), "--api-key sk-abcdefgh12345678")
        // what is kept and shown: redacted
        const kept = [...files.values()].join("\n")
        const shown = renderSweepText(DIR, first.report.doc)
        for (const text of [kept, shown]) {
          assert.notInclude(text, "sk-abcdefgh12345678")
          assert.notInclude(text, "hf_abcdefghijkl")
          assert.include(text, "--api-key REDACTED")
        }
        assert.include(shown, "HF_TOKEN=REDACTED engine --max-num-seqs")
        // the same command on the same session is a resume, not another experiment
        const again = yield* runSweep(options(e)).pipe(Effect.provide(setup({ run: model }, files)))
        assert.isTrue(again.alreadyDone)
      })
  )
})

describe("the session folder deleted while a client runs (issue 27 item 5)", () => {
  it.effect("stops the sweep naming what happened (exit 8), blames no engine, recreates nothing", () =>
    Effect.gen(function* () {
      const files = new Map<string, string>()
      let runs = 0
      const layer = setup(
        {
          run: (server, argv) => {
            runs++
            if (runs === 2) {
              // the user removes the session folder; the runner can write nothing: on main this read
              // as the engine dying under the client
              files.clear()
              return { exitCode: 1, engineDies: true }
            }
            return model(server, argv)
          }
        },
        files
      )
      const exit = yield* runSweep(options()).pipe(Effect.provide(layer), Effect.exit)
      const error = failure(exit)
      assert.strictEqual(error?._tag, "SessionVanished")
      assert.include(error?.message, "vanished")
      assert.notInclude(error?.message ?? "", "engine exited")
      assert.strictEqual(runs, 2, "the sweep went on after the folder vanished")
      assert.strictEqual(files.size, 0, "the session folder's files were recreated")
    })
  )
})
