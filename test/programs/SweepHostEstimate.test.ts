/**
 * `sweep run`'s record of each run's end among the user's recent sweeps, and `--dry-run`'s
 * estimate from them (docs/design.md#time-to-the-answer), through the test layers: the scripted engine, the memory stores,
 * the in-memory host queue.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Layer, Option, TestClock } from "effect"
import { renderPlan, sweepPlan } from "../../src/domain/Sweep/Plan.js"
import { dryRunEstimate, recordSweepEnd } from "../../src/programs/Sweep/HostSweeps.js"
import { runSweep } from "../../src/programs/Sweep.js"
import * as HostQueue from "../../src/services/HostQueue.js"
import { SweepStore } from "../../src/services/SweepStore.js"
import { model, setup, sweepExperiment, sweepOptions } from "../support/sweep.js"

const experiment = sweepExperiment({
  params: [{ name: "seqs", values: ["4", "8"] }],
  load: { kind: "points", name: "c", values: ["1", "2"] },
  slos: [],
  repeats: 1
})

describe("--dry-run from the host's recent sweeps", () => {
  it.effect("a finished sweep leaves its medians; a new empty session's dry run estimates from them", () =>
    Effect.gen(function* () {
      const files = new Map<string, string>()
      const layer = Layer.merge(setup({ run: model }, files), HostQueue.layerTest())
      yield* Effect.gen(function* () {
        const done = yield* runSweep(sweepOptions("/s/first", experiment))
        assert.strictEqual(done.doc.status, "done")
        yield* recordSweepEnd("/s/first", 0)
        const q = yield* HostQueue.HostQueue
        const [r] = yield* q.recentSweeps
        assert.strictEqual(r?.session, "/s/first")
        assert.strictEqual(r?.startSec, 1)
        assert.deepStrictEqual([r?.engineStarts, r?.clientRuns], [2, 4])
        // a session that does not exist records nothing; nor does a run that wrote nothing there
        // (e.g. refused as a different sweep): the session's last write is older than the run
        yield* recordSweepEnd("/s/none", 0)
        yield* TestClock.adjust("10 seconds")
        yield* recordSweepEnd("/s/first", yield* Clock.currentTimeMillis)
        assert.strictEqual((yield* q.recentSweeps).length, 1)

        // a new, empty session: the host's sweeps
        const fresh = yield* Effect.flatMap(SweepStore, (s) => s.load("/s/new"))
        assert.isTrue(Option.isNone(fresh))
        const { estimate: est } = yield* dryRunEstimate(null, fresh, experiment.server)
        assert.strictEqual(est?.source, "host")
        assert.strictEqual(est?.start_sec, 1)
        assert.strictEqual(est?.sweeps, 1)
        const plan = sweepPlan(experiment, "grid", est)
        assert.include(
          renderPlan(plan),
          "s per client run (from this host's 1 recent sweep(s) of the same engine (engine): /s/first; the last ended "
        )
        assert.strictEqual(JSON.parse(JSON.stringify({ dry_run: true, ...plan })).estimate.source, "host")

        // the session's own measurements come first; the options win over both
        const held = yield* Effect.flatMap(SweepStore, (s) => s.load("/s/first"))
        assert.strictEqual((yield* dryRunEstimate(null, held, experiment.server)).estimate?.source, "session")
        const given = { start_sec: 5, run_sec: 2, source: "options" as const }
        assert.deepStrictEqual((yield* dryRunEstimate(given, held, experiment.server)).estimate, given)
        assert.deepStrictEqual((yield* dryRunEstimate(given, fresh, experiment.server)).estimate, given)
      }).pipe(Effect.provide(layer))
    })
  )

  it.effect("no recent sweeps and nothing measured: no estimate", () =>
    Effect.gen(function* () {
      const { estimate: est } = yield* dryRunEstimate(null, Option.none(), experiment.server).pipe(
        Effect.provide(HostQueue.layerTest())
      )
      assert.isNull(est)
      assert.include(
        renderPlan(sweepPlan(experiment, "grid", est)),
        "estimate: none (give --estimate-start S"
      )
    })
  )

  it.effect(
    "issue 33 item 7: a vLLM sweep is not estimated from a stand-in sweep; like sweeps are matched by engine and named",
    () =>
      Effect.gen(function* () {
        const files = new Map<string, string>()
        const layer = Layer.merge(setup({ run: model }, files), HostQueue.layerTest())
        const vllm = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-seqs {seqs}"
        yield* Effect.gen(function* () {
          // this host's last sweep: the stand-in engine (0 s per engine start here)
          yield* runSweep(sweepOptions("/s/stand-in", experiment))
          yield* recordSweepEnd("/s/stand-in", 0)
          const fresh = Option.none()
          const vllmExperiment = { ...experiment, server: vllm }
          const none = yield* dryRunEstimate(null, fresh, vllm)
          assert.isNull(none.estimate)
          const text = renderPlan(sweepPlan(vllmExperiment, "grid", none.estimate, undefined, none.unlike))
          assert.include(
            text,
            "estimate: none — none of this host's 1 recent sweep(s) ran this engine (vllm, model meta-llama/Llama-3.1-8B-Instruct): they ran engine (1)"
          )
          // the stand-in's own next sweep is estimated from it, and says which sweep it rests on
          const alike = yield* dryRunEstimate(null, fresh, experiment.server)
          assert.strictEqual(alike.estimate?.source, "host")
          assert.deepStrictEqual(alike.estimate?.sessions, ["/s/stand-in"])
          assert.include(
            renderPlan(sweepPlan(experiment, "grid", alike.estimate)),
            "from this host's 1 recent sweep(s) of the same engine (engine): /s/stand-in; the last ended "
          )
          // a vLLM sweep of the same model on this host: the vLLM sweep only
          yield* runSweep(sweepOptions("/s/vllm", vllmExperiment))
          yield* recordSweepEnd("/s/vllm", 0)
          const like = yield* dryRunEstimate(
            null,
            fresh,
            vllm.replace("{seqs}", "{seqs} --max-model-len 4096")
          )
          assert.deepStrictEqual(like.estimate?.sessions, ["/s/vllm"])
          const json = JSON.parse(
            JSON.stringify({
              dry_run: true,
              ...sweepPlan(vllmExperiment, "grid", none.estimate, undefined, none.unlike)
            })
          )
          assert.deepStrictEqual(json.host_sweeps_unlike, {
            engine: "vllm, model meta-llama/Llama-3.1-8B-Instruct",
            ran: [{ engine: "engine", sweeps: 1 }]
          })
        }).pipe(Effect.provide(layer))
      })
  )
})
