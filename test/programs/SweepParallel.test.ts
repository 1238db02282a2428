/**
 * Sweeps at cluster scale (docs/design.md#sweeps-at-cluster-scale) against the scripted engine:
 * `--parallel N` runs at most N combinations at once, handed out in the sweep's order, with the
 * same points and best as one at a time; a SIGKILL with several in flight resumes them all (no
 * point twice); Ctrl-C stops every engine; the hardware class of the first node granted holds, a
 * node of another class is left alone (avoided by every later lease) and named once; a resumed
 * sweep keeps its class.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Logger } from "effect"
import { type Experiment, type NodeRecord, parseSweep, type SweepDoc } from "../../src/domain/Sweep.js"
import { runSweep, type SweepOptions } from "../../src/programs/Sweep.js"
import * as SweepEngine from "../../src/programs/SweepEngine.js"
import { flag, model, seqsOf, setup, sweepExperiment, sweepOptions } from "../support/sweep.js"

const DIR = "/s/parallel"

const experiment = (over: Partial<Experiment> = {}): Experiment =>
  sweepExperiment({ params: [{ name: "seqs", values: ["2", "3", "4", "6", "8"] }], gpus: 1, ...over })

const options = (parallel: number, e: Experiment = experiment()): SweepOptions =>
  sweepOptions(DIR, e, { request: { gpus: 1, servingSlot: true }, parallel })

const engineLog = Effect.flatten(SweepEngine.FakeSweepEngineLog)

/** Every measured point: combination, load, status, median output throughput. */
const points = (doc: SweepDoc) =>
  doc.combinations.flatMap((c) =>
    c.points.map((p) => `${c.index}/${p.load}:${p.status}:${p.stats.output_throughput?.median ?? "-"}`)
  )

const node = (id: string, gpus: number): NodeRecord => ({
  hostname: `host-${id}`,
  node_id: id.repeat(56 / id.length),
  gpu_count: gpus,
  gpu_model: gpus > 0 ? "NVIDIA L4" : null,
  driver: null,
  cpu_model: "AMD EPYC",
  cpu_count: 8
})

/** Each run takes a few real milliseconds, so combinations in flight overlap. */
const slow = (server: string, argv: ReadonlyArray<string>) => ({ ...model(server, argv), runFor: 0.005 })

const readDoc = (files: Map<string, string>) => {
  const parsed = parseSweep(files.get(`${DIR}/sweep.json`)!)
  assert.strictEqual(parsed._tag, "Right")
  return (parsed as { right: SweepDoc }).right
}

/** Waits (real time) until `cond` holds of the engine log. */
const until = (cond: (log: SweepEngine.FakeEngineLog) => boolean) =>
  Effect.gen(function* () {
    for (let i = 0; i < 2000; i++) {
      if (cond(yield* engineLog)) return
      yield* Effect.sleep("2 millis")
    }
    assert.fail("timed out waiting for the scripted engine")
  })

describe("sweep --parallel", () => {
  it.live(
    "at most N at once, handed out in the sweep's order, the same points and best as one at a time",
    () =>
      Effect.gen(function* () {
        const one = yield* Effect.gen(function* () {
          const r = yield* runSweep(options(1))
          return { doc: r.doc, log: yield* engineLog }
        }).pipe(Effect.provide(setup({ run: slow })))
        const three = yield* Effect.gen(function* () {
          const r = yield* runSweep(options(3))
          return { doc: r.doc, log: yield* engineLog }
        }).pipe(Effect.provide(setup({ run: slow })))
        assert.strictEqual(one.log.maxLive, 1)
        assert.strictEqual(three.log.maxLive, 3)
        assert.strictEqual(three.log.live, 0)
        // handed out in order: the first three at once, then each as a place frees
        assert.deepStrictEqual(three.log.starts.map(seqsOf), [2, 3, 4, 6, 8])
        assert.strictEqual(three.doc.status, "done")
        assert.deepStrictEqual(points(three.doc), points(one.doc))
        // the same verdict; where the time went (summary.time) is the wall clock's, so it differs
        const { time: _t3, ...threeSummary } = three.doc.summary
        const { time: _t1, ...oneSummary } = one.doc.summary
        assert.deepStrictEqual(threeSummary, oneSummary)
        assert.strictEqual(three.doc.summary.best?.combination, 4)
        // every combination's record is whole: each point run once
        for (const c of three.doc.combinations)
          for (const p of c.points) assert.strictEqual(p.runs.length, 1, `${c.index}/${p.load}`)
      })
  )

  it.live("a sweep with fewer combinations than N starts only as many", () =>
    Effect.gen(function* () {
      const r = yield* runSweep(options(8, experiment({ params: [{ name: "seqs", values: ["2", "4"] }] })))
      const log = yield* engineLog
      assert.strictEqual(log.starts.length, 2)
      assert.strictEqual(log.maxLive, 2)
      assert.strictEqual(r.doc.status, "done")
    }).pipe(Effect.provide(setup({ run: slow })))
  )

  it.live("SIGKILL with three in flight: the same command resumes all three, no point twice", () =>
    Effect.gen(function* () {
      const files = new Map<string, string>()
      // the first process: every combination's c=4 hangs; killed once three hang (no finalizer
      // runs after a SIGKILL: what it leaves is the document as saved at that moment)
      const killed = yield* Effect.gen(function* () {
        const first = yield* Effect.fork(runSweep(options(3)))
        yield* until((log) => log.runs.filter((r) => flag(r.argv, "--max-concurrency") === 4).length === 3)
        yield* Effect.sleep("20 millis")
        const left = new Map(files)
        yield* Fiber.interrupt(first)
        return left
      }).pipe(
        Effect.provide(
          setup({ run: (s, a) => (flag(a, "--max-concurrency") === 4 ? { hang: true } : slow(s, a)) }, files)
        )
      )
      const mid = readDoc(killed)
      assert.strictEqual(mid.status, "running")
      assert.deepStrictEqual(
        mid.combinations.map((c) => c.status),
        ["running", "running", "running", "pending", "pending"]
      )

      const runs: Array<string> = []
      const second = yield* Effect.gen(function* () {
        const r = yield* runSweep(options(3))
        return { r, log: yield* engineLog }
      }).pipe(
        Effect.provide(
          setup(
            {
              run: (s, a) => {
                runs.push(`${seqsOf(s)}/${flag(a, "--max-concurrency")}`)
                return slow(s, a)
              }
            },
            killed
          )
        )
      )
      const doc = second.r.doc
      assert.strictEqual(doc.status, "done")
      // the three in flight start again, each from its point in flight; nothing finished runs twice
      for (const seqs of [2, 3, 4]) {
        const mine = runs.filter((r) => r.startsWith(`${seqs}/`))
        assert.deepStrictEqual(mine, [`${seqs}/4`, `${seqs}/8`])
      }
      for (const c of doc.combinations) {
        for (const p of c.points) assert.strictEqual(p.runs.length, 1, `${c.index}/${p.load}`)
        if (c.index < 3) {
          assert.strictEqual(c.points[2]!.interrupted_runs.length, 1)
          assert.deepStrictEqual(
            c.engine_starts.map((s) => s.outcome),
            ["interrupted", "ready"]
          )
        }
      }
      assert.strictEqual(second.log.starts.length, 5)
      assert.strictEqual(doc.summary.best?.combination, 4)
    })
  )

  it.live("Ctrl-C with three engines up: every engine stopped, the sweep cancelled, resumable", () =>
    Effect.gen(function* () {
      const files = new Map<string, string>()
      const out = yield* Effect.gen(function* () {
        const fiber = yield* Effect.fork(runSweep(options(3)))
        yield* until((log) => log.runs.filter((r) => flag(r.argv, "--max-concurrency") === 2).length === 3)
        const up = (yield* engineLog).live
        yield* Fiber.interrupt(fiber)
        return { up, log: yield* engineLog }
      }).pipe(
        Effect.provide(
          setup({ run: (s, a) => (flag(a, "--max-concurrency") === 2 ? { hang: true } : slow(s, a)) }, files)
        )
      )
      assert.strictEqual(out.up, 3)
      assert.strictEqual(out.log.live, 0)
      const doc = readDoc(files)
      assert.strictEqual(doc.status, "cancelled")
      assert.strictEqual(doc.stop_reason, "orchestrator_cancelled")
      for (const c of doc.combinations.slice(0, 3)) {
        assert.strictEqual(c.status, "pending")
        assert.strictEqual(c.points[1]!.status, "pending")
        assert.strictEqual(c.points[1]!.interrupted_runs[0]?.status, "interrupted")
        assert.strictEqual(c.engine_starts[0]?.outcome, "interrupted")
      }
    })
  )

  it.live(
    "the first node's class holds: a node of another GPU count is left alone, named once, avoided by every later lease; a resume keeps the class",
    () =>
      Effect.gen(function* () {
        const files = new Map<string, string>()
        const lines: Array<string> = []
        const logger = Logger.replace(
          Logger.defaultLogger,
          Logger.make(({ message }) => {
            lines.push(String(Array.isArray(message) ? message.join(" ") : message))
          })
        )
        // starts 1 and 3 are granted node a (1 GPU); start 2 node b (2 GPUs); the rest node c (1 GPU)
        const nodeOf = (_: string, n: number) =>
          n === 1 || n === 3 ? node("a", 1) : n === 2 ? node("b", 2) : node("c", 1)
        const small = options(2, experiment({ params: [{ name: "seqs", values: ["2", "4", "8"] }] }))
        const first = yield* Effect.gen(function* () {
          const r = yield* runSweep(small)
          return { doc: r.doc, log: yield* engineLog }
        }).pipe(Effect.provide(setup({ run: slow, node: nodeOf }, files)), Effect.provide(logger))
        const doc = first.doc
        assert.strictEqual(doc.status, "done")
        assert.deepStrictEqual(doc.hardware_class, { gpu_count: 1, gpu_model: "NVIDIA L4", cpu_model: null })
        assert.deepStrictEqual(
          (doc.left_alone ?? []).map((n) => n.hostname),
          ["host-b"]
        )
        const b = node("b", 2).node_id!
        // the start on b ended at once, not charged; the combination ran on another node
        const onB = doc.combinations.find((c) => c.engine_starts.some((s) => s.node?.hostname === "host-b"))!
        assert.deepStrictEqual(
          onB.engine_starts.map((s) => `${s.node?.hostname}:${s.outcome}`),
          ["host-b:left_alone", `${onB.engine_starts[1]!.node?.hostname}:ready`]
        )
        assert.notStrictEqual(onB.engine_starts[1]!.node?.hostname, "host-b")
        assert.strictEqual(onB.status, "done")
        assert.isTrue(onB.points.every((p) => p.runs.length === 1))
        // every lease after it avoids b
        assert.deepStrictEqual(first.log.avoids.slice(0, 2), [[], []])
        assert.isTrue(first.log.avoids.slice(2).every((a) => a.includes(b)))
        // named once
        assert.strictEqual(lines.filter((l) => l.includes("leaving node host-b")).length, 1)
        // every combination records its node
        for (const c of doc.combinations) assert.isDefined(c.engine_starts.at(-1)?.node)

        // a resume (here a grown grid would be refused; the same finished sweep reopened by a
        // cancelled status) keeps the class and the nodes it leaves alone
        const reopened: SweepDoc = {
          ...doc,
          status: "cancelled",
          combinations: doc.combinations.map((c) =>
            c.index === 2
              ? {
                  ...c,
                  status: "pending",
                  points: c.points.map((p) => ({ ...p, status: "pending", runs: [], stats: {}, slo: [] }))
                }
              : c
          )
        }
        const kept = new Map(files)
        kept.set(`${DIR}/sweep.json`, JSON.stringify(reopened))
        const second = yield* Effect.gen(function* () {
          const r = yield* runSweep(small)
          return { doc: r.doc, log: yield* engineLog }
        }).pipe(
          Effect.provide(setup({ run: slow, node: (_, n) => (n === 1 ? node("d", 2) : node("c", 1)) }, kept))
        )
        assert.deepStrictEqual(second.doc.hardware_class, doc.hardware_class)
        assert.deepStrictEqual(second.log.avoids[0], [b])
        assert.deepStrictEqual(
          (second.doc.left_alone ?? []).map((n) => n.hostname),
          ["host-b", "host-d"]
        )
        assert.strictEqual(second.doc.status, "done")
      })
  )

  it.live(
    "issue 33 item 3: the class is decided before the first lease from what the nodes tell: the class with the most nodes; another class's node is avoided by every lease, never started on; --hardware-class chooses another",
    () =>
      Effect.gen(function* () {
        const lines: Array<string> = []
        const logger = Logger.replace(
          Logger.defaultLogger,
          Logger.make(({ message }) => {
            lines.push(String(Array.isArray(message) ? message.join(" ") : message))
          })
        )
        // before any lease, Ray tells: three one-GPU L4 nodes (its token), one two-GPU L4 node
        const told = (id: string, gpus: number): NodeRecord => ({
          ...node(id, gpus),
          gpu_model: gpus > 0 ? "L4" : null,
          driver: null,
          cpu_model: null,
          cpu_count: null
        })
        const serving = () => [told("a", 1), told("b", 2), told("c", 1), told("e", 1)]
        const b = node("b", 2).node_id!
        const small = options(3, experiment({ params: [{ name: "seqs", values: ["2", "4", "8"] }] }))
        // the engines come up on the one-GPU nodes, whose vendor tool says "NVIDIA L4"
        const nodeOf = (_: string, n: number) => node(["a", "c", "e"][(n - 1) % 3]!, 1)
        const r = yield* Effect.gen(function* () {
          const report = yield* runSweep(small)
          return { doc: report.doc, log: yield* engineLog }
        }).pipe(
          Effect.provide(setup({ run: slow, node: nodeOf, serving }, new Map())),
          Effect.provide(logger)
        )
        assert.strictEqual(r.doc.status, "done")
        // every lease, the first included, avoids the two-GPU node: no engine is ever started there
        assert.lengthOf(r.log.starts, 3)
        assert.isTrue(
          r.log.avoids.every((a) => a.includes(b)),
          JSON.stringify(r.log.avoids)
        )
        assert.deepStrictEqual(
          (r.doc.left_alone ?? []).map((n) => n.hostname),
          ["host-b"]
        )
        // the class Ray told (L4), refined by what the first node granted told (its vendor's name)
        assert.deepStrictEqual(r.doc.hardware_class, {
          gpu_count: 1,
          gpu_model: "NVIDIA L4",
          cpu_model: null
        })
        assert.isTrue(
          r.doc.combinations.every((c) => c.engine_starts.every((s) => s.outcome !== "left_alone"))
        )
        // stated once, before the first engine start, naming the others
        const stated = lines.filter((l) => l.includes("hardware class: 1 × L4 per node"))
        assert.lengthOf(stated, 1)
        assert.include(stated[0], "left alone (another class): 2 × L4 per node (host-b)")
        assert.isBelow(
          lines.findIndex((l) => l.includes("hardware class: 1 × L4")),
          lines.findIndex((l) => l.includes("starting the engine"))
        )

        // --hardware-class chooses the other class: only the two-GPU node serves
        const chosen = yield* Effect.gen(function* () {
          const report = yield* runSweep({ ...small, sessionDir: "/s/chosen", hardwareClass: "2xL4" })
          return { doc: report.doc, log: yield* engineLog }
        }).pipe(Effect.provide(setup({ run: slow, node: () => node("b", 2), serving }, new Map())))
        assert.deepStrictEqual(chosen.doc.hardware_class?.gpu_count, 2)
        assert.deepStrictEqual((chosen.doc.left_alone ?? []).map((n) => n.hostname).sort(), [
          "host-a",
          "host-c",
          "host-e"
        ])
        assert.isTrue(chosen.log.avoids.every((a) => !a.includes(b) && a.length === 3))
        // a class none of them is: refused before anything starts, naming what is there
        const absent = yield* Effect.flip(
          runSweep({ ...small, sessionDir: "/s/absent", hardwareClass: "H100" }).pipe(
            Effect.provide(setup({ run: slow, serving }, new Map()))
          )
        )
        assert.strictEqual(absent._tag, "HardwareClassAbsent")
        assert.include(
          absent.message,
          "--hardware-class H100: no node of that class could serve; present: 1 × L4 per node (host-a, host-c, host-e); 2 × L4 per node (host-b)"
        )
      })
  )
})
