import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import { RayClusterInfeasible } from "../../src/domain/Errors.js"
import { LeaseWaitExpired } from "../../src/domain/Queue.js"
import { type Experiment, parseSweep, type SweepDoc } from "../../src/domain/Sweep.js"
import { runSweep, type SweepOptions } from "../../src/programs/Sweep.js"
import * as SweepEngine from "../../src/programs/SweepEngine.js"
import { flag, model, seqsOf, setup, sweepExperiment, sweepOptions } from "../support/sweep.js"

const DIR = "/s/sweep"

const experiment = (over: Partial<Experiment> = {}): Experiment =>
  sweepExperiment({ load: { kind: "points", name: "c", values: ["1", "2", "4", "8", "16"] }, ...over })

const options = (e: Experiment = experiment()): SweepOptions => sweepOptions(DIR, e)

const engineLog = Effect.flatten(SweepEngine.FakeSweepEngineLog)

const statuses = (doc: SweepDoc, i: number) => doc.combinations[i]!.points.map((p) => `${p.load}:${p.status}`)

describe("sweep program", () => {
  it.effect("a grid: one engine per combination, loads ascending, the known best", () =>
    Effect.gen(function* () {
      const report = yield* runSweep(options())
      const log = yield* engineLog
      assert.deepStrictEqual(log.starts, [
        "engine --max-num-seqs 2",
        "engine --max-num-seqs 4",
        "engine --max-num-seqs 8"
      ])
      assert.strictEqual(log.live, 0)
      assert.deepStrictEqual(
        log.runs.filter((r) => r.server.endsWith(" 2")).map((r) => flag(r.argv, "--max-concurrency")),
        [1, 2, 4, 8, 16]
      )
      const doc = report.doc
      assert.strictEqual(doc.status, "done")
      assert.deepStrictEqual(statuses(doc, 0), [
        "1:ok",
        "2:ok",
        "4:slo_failed",
        "8:slo_failed",
        "16:slo_failed"
      ])
      assert.deepStrictEqual(
        doc.summary.combinations.map((c) => c.largest_passing_load),
        ["2", "4", "8"]
      )
      assert.strictEqual(doc.summary.verdict, "best")
      assert.strictEqual(doc.summary.best?.combination, 2)
      assert.strictEqual(doc.summary.best?.load, "8")
      assert.closeTo(doc.summary.best!.output_throughput, 1600 / 12, 1e-9)
      assert.strictEqual(doc.summary.best?.client_cmd, "client --max-concurrency 8")
    }).pipe(Effect.provide(setup({ run: model })))
  )

  it.effect("search: doubling then bisection finds B per combination, every point recorded", () =>
    Effect.gen(function* () {
      const report = yield* runSweep(
        options(
          experiment({
            params: [{ name: "seqs", values: ["3", "5"] }],
            load: { kind: "search", name: "c", max: 64 }
          })
        )
      )
      const doc = report.doc
      assert.deepStrictEqual(
        doc.summary.combinations.map((c) => c.largest_passing_load),
        ["3", "5"]
      )
      assert.deepStrictEqual(
        doc.combinations[1]!.points.map((p) => p.load),
        ["1", "2", "4", "8", "6", "5"]
      )
      assert.strictEqual((yield* engineLog).starts.length, 2)
    }).pipe(Effect.provide(setup({ run: model })))
  )

  it.effect(
    "an engine over its KV budget is infeasible at once (no retry); another failure is retried once",
    () =>
      Effect.gen(function* () {
        const report = yield* runSweep(options())
        const log = yield* engineLog
        // seqs=2: kv oom once; seqs=4: fails twice (not deterministic): started twice; seqs=8 fine
        assert.deepStrictEqual(
          log.starts.map((s) => seqsOf(s)),
          [2, 4, 4, 8]
        )
        const doc = report.doc
        assert.strictEqual(doc.combinations[0]!.status, "infeasible")
        assert.strictEqual(doc.combinations[0]!.class, "kv_cache_oom")
        assert.isTrue(doc.combinations[0]!.points.every((p) => p.status === "not_run"))
        assert.strictEqual(doc.combinations[1]!.status, "failed")
        assert.strictEqual(doc.combinations[1]!.class, "subprocess_nonzero")
        assert.strictEqual(doc.combinations[2]!.status, "done")
        assert.strictEqual(doc.summary.best?.combination, 2)
      }).pipe(
        Effect.provide(
          setup({
            start: (server) =>
              seqsOf(server) === 2
                ? {
                    notReady: {
                      exitCode: 1,
                      log: "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
                    }
                  }
                : seqsOf(server) === 4
                  ? { notReady: { exitCode: 1, log: "Segmentation fault" } }
                  : { ready: true },
            run: model
          })
        )
      )
  )

  it.effect(
    "an engine dying mid-point fails it and ends the combination; a failed client run is retried once",
    () =>
      Effect.gen(function* () {
        const doc = (yield* runSweep(options())).doc
        assert.deepStrictEqual(statuses(doc, 0), ["1:ok", "2:failed", "4:not_run", "8:not_run", "16:not_run"])
        assert.strictEqual(doc.combinations[0]!.status, "engine_died")
        assert.isTrue(doc.combinations[0]!.points[1]!.runs[0]!.engine_died)
        // the engine's death classifies the run (Failure.ts's server-exit branch), not the
        // client's completed = 0 it caused
        const died = doc.combinations[0]!.points[1]!
        assert.strictEqual(died.class, "subprocess_nonzero")
        assert.match(died.runs[0]!.error ?? "", /^the server exited with code 1 while the client ran/)
        // seqs=4 at c=2: the client fails once, passes on its retry
        const p = doc.combinations[1]!.points[1]!
        assert.strictEqual(p.status, "ok")
        assert.deepStrictEqual(
          p.runs.map((r) => `${r.try}:${r.status}`),
          ["1:failed", "2:ok"]
        )
        // seqs=8 at c=4: completed = 0 twice: failed, never a measurement
        const q = doc.combinations[2]!.points[2]!
        assert.strictEqual(q.status, "failed")
        assert.strictEqual(q.class, "invalid_measurement")
        assert.strictEqual(doc.combinations[2]!.points[3]!.status, "ok")
      }).pipe(
        Effect.provide(
          setup({
            run: (() => {
              let failedOnce = false
              return (server, argv) => {
                const B = seqsOf(server)
                const c = flag(argv, "--max-concurrency")
                if (B === 2 && c === 2)
                  return { exitCode: 0, engineDies: true, metrics: { completed: 0, output_throughput: 0 } }
                if (B === 4 && c === 2 && !failedOnce) {
                  failedOnce = true
                  return { exitCode: 1 }
                }
                if (B === 8 && c === 4) return { metrics: { completed: 0, output_throughput: 0.0 } }
                return model(server, argv)
              }
            })()
          })
        )
      )
  )

  it.effect(
    "an engine dying under a client that timed out: the engine's death is the class, not timeout",
    () =>
      Effect.gen(function* () {
        const doc = (yield* runSweep(options(experiment({ params: [{ name: "seqs", values: ["2"] }] })))).doc
        const p = doc.combinations[0]!.points[1]!
        assert.strictEqual(doc.combinations[0]!.status, "engine_died")
        assert.strictEqual(p.status, "failed")
        assert.strictEqual(p.class, "subprocess_nonzero")
        assert.match(p.runs[0]!.error ?? "", /^the server exited with code 1 while the client ran/)
      }).pipe(
        Effect.provide(
          setup({
            run: (server, argv) =>
              flag(argv, "--max-concurrency") === 2
                ? { timedOut: true, engineDies: true }
                : model(server, argv)
          })
        )
      )
  )

  it.effect("ray_cluster_infeasible stops the sweep at once", () =>
    Effect.gen(function* () {
      const doc = (yield* runSweep(options())).doc
      assert.strictEqual(doc.status, "stopped")
      assert.strictEqual(doc.stop_reason, "ray_cluster_infeasible")
      assert.strictEqual((yield* engineLog).starts.length, 1)
      assert.isTrue(doc.combinations.slice(1).every((c) => c.status === "pending"))
    }).pipe(
      Effect.provide(
        setup({
          start: () => ({
            error: new RayClusterInfeasible({
              reason: "insufficient_gpus",
              message: "ray_cluster_infeasible: cluster has 0 GPU(s), 1 requested"
            } as never)
          }),
          run: model
        })
      )
    )
  )

  it.effect("no point meets the SLO: verdict none", () =>
    Effect.gen(function* () {
      const doc = (yield* runSweep(
        options(experiment({ slos: [{ metric: "p99_ttft_ms", op: "<=", bound: 1 }] }))
      )).doc
      assert.strictEqual(doc.status, "done")
      assert.strictEqual(doc.summary.verdict, "none")
      assert.isNull(doc.summary.best)
    }).pipe(Effect.provide(setup({ run: model })))
  )

  it.effect("repeats: noise within the spread is a tie naming the tied combinations", () =>
    Effect.gen(function* () {
      const doc = (yield* runSweep(
        options(
          experiment({
            params: [{ name: "seqs", values: ["7", "8"] }],
            load: { kind: "points", name: "c", values: ["4"] },
            repeats: 3
          })
        )
      )).doc
      assert.strictEqual(doc.summary.verdict, "tie")
      assert.deepStrictEqual(
        doc.summary.tied_with.map((t) => t.combination),
        [doc.summary.best!.combination === 0 ? 1 : 0]
      )
      assert.strictEqual(doc.combinations[0]!.points[0]!.runs.length, 3)
    }).pipe(
      Effect.provide(
        setup({
          run: (() => {
            let n = 0
            return () => ({
              metrics: { output_throughput: 100 + ((n++ * 7) % 5), p99_ttft_ms: 10, completed: 8 }
            })
          })()
        })
      )
    )
  )

  it.effect(
    "resume: a finished point never runs again, the one in flight does; a different experiment is refused",
    () =>
      Effect.gen(function* () {
        const files = new Map<string, string>()
        // first run: hangs at seqs=4, c=2 and is interrupted (the process "dies" there)
        const first = yield* Effect.fork(
          runSweep(options()).pipe(
            Effect.provide(
              setup(
                {
                  run: (s, a) =>
                    seqsOf(s) === 4 && flag(a, "--max-concurrency") === 2 ? { hang: true } : model(s, a)
                },
                files
              )
            )
          )
        )
        yield* TestClock.adjust("1 second")
        yield* Effect.yieldNow()
        yield* Fiber.interrupt(first)
        const saved = parseSweep(files.get(`${DIR}/sweep.json`)!)
        assert.isTrue(saved._tag === "Right")
        const mid = (saved as { right: SweepDoc }).right
        assert.strictEqual(mid.status, "cancelled")
        assert.deepStrictEqual(statuses(mid, 1).slice(0, 2), ["1:ok", "2:pending"])
        assert.strictEqual(mid.combinations[1]!.points[1]!.interrupted_runs.length, 1)

        // a different experiment on the session: refused, naming the difference
        const refused = yield* Effect.flip(
          runSweep(options(experiment({ params: [{ name: "seqs", values: ["2", "4", "16"] }] }))).pipe(
            Effect.provide(setup({ run: model }, files))
          )
        )
        assert.strictEqual(refused._tag, "ExperimentChanged")
        assert.include(refused.message, "--param: the session has seqs=2,4,8, this run gives seqs=2,4,16")

        // the same command completes it, running only what was not finished
        const runs: Array<string> = []
        const second = yield* runSweep(options()).pipe(
          Effect.provide(
            setup(
              {
                run: (s, a) => {
                  runs.push(`${seqsOf(s)}/${flag(a, "--max-concurrency")}`)
                  return model(s, a)
                }
              },
              files
            )
          )
        )
        assert.deepStrictEqual(runs, ["4/2", "4/4", "4/8", "4/16", "8/1", "8/2", "8/4", "8/8", "8/16"])
        assert.strictEqual(second.doc.status, "done")
        assert.strictEqual(second.doc.summary.best?.combination, 2)
      })
  )

  it.effect(
    "--wait: a lease not granted in time stops the sweep (lease_wait_expired, the holder named), nothing runs; the same command resumes it",
    () =>
      Effect.gen(function* () {
        const files = new Map<string, string>()
        const small = options(experiment({ params: [{ name: "seqs", values: ["2", "4"] }] }))
        const waiting = { ...small, waitSec: 2 }
        const holder = "lease 1a2b (pid 4242, user ann: sleep 600)"
        const failed = yield* Effect.flip(
          runSweep(waiting).pipe(
            Effect.provide(
              setup(
                {
                  start: () => ({ error: new LeaseWaitExpired({ waitSec: 2, holder, ahead: 0 }) }),
                  run: model
                },
                files
              )
            )
          )
        )
        assert.strictEqual(failed._tag, "LeaseWaitExpired")
        assert.include(failed.message, "pid 4242")
        const saved = parseSweep(files.get(`${DIR}/sweep.json`)!)
        assert.isTrue(saved._tag === "Right")
        const mid = (saved as { right: SweepDoc }).right
        assert.strictEqual(mid.status, "stopped")
        assert.strictEqual(mid.stop_reason, "lease_wait_expired")
        assert.include(mid.stop_error, "pid 4242")
        assert.isTrue(mid.combinations.every((c) => c.points.every((p) => p.runs.length === 0)))
        assert.deepStrictEqual(
          mid.combinations[0]!.engine_starts.map((s) => s.outcome),
          ["interrupted"]
        )

        // the wait reaches every engine's lease; once the slot is free the same command completes
        const second = yield* Effect.gen(function* () {
          const r = yield* runSweep(waiting)
          return { r, log: yield* engineLog }
        }).pipe(Effect.provide(setup({ run: model }, files)))
        assert.deepStrictEqual(second.log.waits, [2, 2])
        assert.strictEqual(second.r.doc.status, "done")
        assert.strictEqual(second.r.doc.stop_reason, null)
        assert.strictEqual(second.r.doc.summary.best?.combination, 1)
      })
  )

  it.effect("an unreadable sweep.json is refused before anything runs and left byte-identical", () =>
    Effect.gen(function* () {
      const bytes = '{"schema_version": 1, "kind": "hyperloom.sweep", "status": "runn'
      const files = new Map([[`${DIR}/sweep.json`, bytes]])
      const { e, log } = yield* Effect.gen(function* () {
        const e = yield* Effect.flip(runSweep(options()))
        return { e, log: yield* engineLog }
      }).pipe(Effect.provide(setup({ run: model }, files)))
      assert.strictEqual(e._tag, "StateCorrupt")
      assert.deepStrictEqual([log.starts, log.runs], [[], []])
      assert.strictEqual(files.get(`${DIR}/sweep.json`), bytes)
      assert.isFalse(files.has(`${DIR}/summary.csv`))
    })
  )
})
