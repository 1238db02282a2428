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
        const est = yield* dryRunEstimate(null, fresh)
        assert.strictEqual(est?.source, "host")
        assert.strictEqual(est?.start_sec, 1)
        assert.strictEqual(est?.sweeps, 1)
        const plan = sweepPlan(experiment, "grid", est)
        assert.include(
          renderPlan(plan),
          "s per client run (from this host's 1 recent sweeps (the last ended "
        )
        assert.strictEqual(JSON.parse(JSON.stringify({ dry_run: true, ...plan })).estimate.source, "host")

        // the session's own measurements come first; the options win over both
        const held = yield* Effect.flatMap(SweepStore, (s) => s.load("/s/first"))
        assert.strictEqual((yield* dryRunEstimate(null, held))?.source, "session")
        const given = { start_sec: 5, run_sec: 2, source: "options" as const }
        assert.deepStrictEqual(yield* dryRunEstimate(given, held), given)
        assert.deepStrictEqual(yield* dryRunEstimate(given, fresh), given)
      }).pipe(Effect.provide(layer))
    })
  )

  it.effect("no recent sweeps and nothing measured: no estimate", () =>
    Effect.gen(function* () {
      const est = yield* dryRunEstimate(null, Option.none()).pipe(Effect.provide(HostQueue.layerTest()))
      assert.isNull(est)
      assert.include(
        renderPlan(sweepPlan(experiment, "grid", est)),
        "estimate: none (give --estimate-start S"
      )
    })
  )
})
