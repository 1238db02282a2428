/**
 * The sweep program on the new grid forms (issue 27, item 13): listed combinations start exactly
 * their engines; linked values run each engine at its own load only.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Experiment } from "../../src/domain/Sweep.js"
import { runSweep } from "../../src/programs/Sweep.js"
import * as SweepEngine from "../../src/programs/SweepEngine.js"
import * as AttemptFiles from "../../src/services/AttemptFiles.js"
import { flag, model, seqsOf, setup, sweepExperiment, sweepOptions } from "../support/sweep.js"

const run = (e: Experiment) => runSweep(sweepOptions("/s/forms", e))

const base: Experiment = sweepExperiment({
  load: { kind: "points", name: "c", values: ["2", "4", "8"] },
  slos: []
})

describe("grid forms in the sweep program", () => {
  it.effect("--combo: exactly the listed engines start, in order", () =>
    Effect.gen(function* () {
      const r = yield* run({
        ...base,
        params: [{ name: "seqs", values: ["8", "2"] }],
        combos: [{ seqs: "8" }, { seqs: "2" }]
      })
      const log = yield* Effect.flatten(SweepEngine.FakeSweepEngineLog)
      assert.deepStrictEqual(log.starts, ["engine --max-num-seqs 8", "engine --max-num-seqs 2"])
      assert.strictEqual(r.doc.experiment.combos?.length, 2)
    }).pipe(Effect.provide(setup({ run: model })))
  )

  it.effect("--link-vars seqs=c: each engine runs only the concurrency equal to its batch limit", () =>
    Effect.gen(function* () {
      yield* run({ ...base, links: [{ param: "seqs", load: "c" }] })
      const log = yield* Effect.flatten(SweepEngine.FakeSweepEngineLog)
      assert.deepStrictEqual(
        log.runs.map((x) => `${seqsOf(x.server)}@${flag(x.argv, "--max-concurrency")}`),
        ["2@2", "4@4", "8@8"]
      )
    }).pipe(Effect.provide(setup({ run: model })))
  )
})

describe("a sweep keeps an environment record, as a baseline does (issue 27 item 14)", () => {
  it.effect("environment.json: the version, the node, the engine's and client's command lines", () =>
    Effect.gen(function* () {
      yield* runSweep({
        sessionDir: "/s/env",
        experiment: base,
        request: { gpus: 0, servingSlot: true },
        readiness: { path: "/health", timeoutSec: 10 },
        env: {},
        cwd: "/",
        version: "9.9.9"
      })
      const files = yield* AttemptFiles.AttemptFiles
      const env = (yield* files.readJson("/s/env/environment.json")) as Record<string, unknown> | undefined
      assert.isDefined(env)
      assert.strictEqual(env?.hyperloom_version, "9.9.9")
      assert.deepStrictEqual(env?.server_argv, ["sh", "-c", "engine --max-num-seqs 8"])
      assert.strictEqual(env?.combination, 2)
      assert.isObject(env?.node)
    }).pipe(Effect.provide(setup({ run: model })))
  )
})
