/**
 * A cluster sweep survives its nodes' faults (docs/design.md#sweeps-at-cluster-scale, "Faults";
 * domain/Sweep/Requeue.ts) against the scripted engine: a node lost during a combination (its lease's
 * actor died with it) makes the run in flight `interrupted` and sends the combination back to the
 * queue, to run again from its first point not done, nothing measured lost or measured twice, the
 * same best; a node without the engine, the client or `--between` is avoided by that combination,
 * which fails naming the nodes when none is left; a node lost again and again fails the combination.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import {
  afterSetback,
  emptyRequeue,
  interruptCombination,
  isNotInstalled,
  MAX_NODE_LOSSES
} from "../../src/domain/Sweep/Requeue.js"
import {
  beginEngine,
  beginRun,
  finishPoint,
  finishRun,
  initialSweep,
  type NodeRecord,
  type SweepDoc,
  updateEngine
} from "../../src/domain/Sweep.js"
import { runSweep } from "../../src/programs/Sweep.js"
import * as SweepEngine from "../../src/programs/SweepEngine.js"
import { LeaseActorFailed } from "../../src/services/BridgeProcess.js"
import { flag, model, seqsOf, setup, sweepExperiment, sweepOptions } from "../support/sweep.js"

const DIR = "/s/faults"
const options = (parallel: number) =>
  sweepOptions(DIR, sweepExperiment({ gpus: 1 }), { request: { gpus: 1, servingSlot: true }, parallel })

const node = (id: string): NodeRecord => ({
  hostname: `host-${id}`,
  node_id: id.repeat(56),
  gpu_count: 1,
  gpu_model: "NVIDIA L4",
  driver: null,
  cpu_model: "AMD EPYC",
  cpu_count: 8
})
const ids = (...names: Array<string>) => names.map((n) => n.repeat(56))

const engineLog = Effect.flatten(SweepEngine.FakeSweepEngineLog)

/** Every point: combination, load, status, median output throughput, runs kept. */
const points = (doc: SweepDoc) =>
  doc.combinations.flatMap((c) =>
    c.points.map(
      (p) => `${c.index}/${p.load}:${p.status}:${p.stats.output_throughput?.median ?? "-"}:${p.runs.length}`
    )
  )

/** The sweep without any fault: what every faulty one must come to. */
const clean = Effect.map(runSweep(options(1)), (r) => r.doc).pipe(Effect.provide(setup({ run: model })))

const loadsRun = (log: SweepEngine.FakeEngineLog, seqs: number) =>
  log.runs.filter((r) => seqsOf(r.server) === seqs).map((r) => flag(r.argv, "--max-concurrency"))

describe("a sweep survives its nodes' faults", () => {
  for (const parallel of [1, 3])
    it.live(
      `a node lost mid-combination (--parallel ${parallel}): interrupted, requeued, the same points and best`,
      () =>
        Effect.gen(function* () {
          const want = yield* clean
          let lost = false
          const r = yield* Effect.gen(function* () {
            const r = yield* runSweep(options(parallel))
            return { doc: r.doc, log: yield* engineLog }
          }).pipe(
            Effect.provide(
              setup({
                // seqs=4's first engine is on node a, every other start on b (or c, d)
                node: (server, n) =>
                  seqsOf(server) === 4 && !lost ? node("a") : node(String.fromCharCode(97 + n)),
                run: (server, argv) => {
                  if (!lost && seqsOf(server) === 4 && flag(argv, "--max-concurrency") === 4) {
                    lost = true
                    return { nodeLost: true }
                  }
                  return { ...model(server, argv), runFor: 0.002 }
                }
              })
            )
          )
          const { doc, log } = r
          assert.strictEqual(doc.status, "done")
          assert.deepStrictEqual(points(doc), points(want))
          assert.deepStrictEqual(doc.summary.best, want.summary.best)
          const c = doc.combinations[1]!
          assert.strictEqual(c.status, "done")
          // its first engine interrupted, naming the node; the second ran the rest
          assert.deepStrictEqual(
            c.engine_starts.map((s) => s.outcome),
            ["interrupted", "ready"]
          )
          assert.include(c.engine_starts[0]!.error ?? "", "node host-a was lost")
          // the run in flight kept as interrupted; c=1 and c=2, measured before, not run again
          const p4 = c.points.find((p) => p.load === "4")!
          assert.deepStrictEqual(
            p4.interrupted_runs.map((x) => x.status),
            ["interrupted"]
          )
          assert.deepStrictEqual(loadsRun(log, 4), [1, 2, 4, 4, 8])
          assert.strictEqual(log.live, 0)
        })
    )

  it.live("a node lost before the engine was ready (its actor died): requeued, not a failed lease", () =>
    Effect.gen(function* () {
      const want = yield* clean
      const doc = yield* Effect.map(runSweep(options(1)), (r) => r.doc).pipe(
        Effect.provide(
          setup({
            start: (_, n) =>
              n === 2
                ? {
                    error: new LeaseActorFailed({
                      kind: "actor_died",
                      actorId: "a1",
                      reason: "The actor died because its node has died."
                    })
                  }
                : { ready: true },
            run: model
          })
        )
      )
      assert.strictEqual(doc.status, "done")
      assert.deepStrictEqual(points(doc), points(want))
      assert.deepStrictEqual(
        doc.combinations[1]!.engine_starts.map((s) => s.outcome),
        ["interrupted", "ready"]
      )
      assert.include(
        doc.combinations[1]!.engine_starts[0]!.error ?? "",
        "its node was lost while the combination ran (the lease actor a1 died: The actor died because its node has died.)"
      )
    })
  )

  it.live(
    `a node lost ${MAX_NODE_LOSSES} times fails the combination, naming the nodes; the sweep goes on`,
    () =>
      Effect.gen(function* () {
        const doc = yield* Effect.map(runSweep(options(1)), (r) => r.doc).pipe(
          Effect.provide(
            setup({
              node: (_, n) => node(String.fromCharCode(97 + n)),
              run: (server, argv) =>
                seqsOf(server) === 8 && flag(argv, "--max-concurrency") === 2
                  ? { nodeLost: true }
                  : model(server, argv)
            })
          )
        )
        assert.strictEqual(doc.status, "done")
        const c = doc.combinations[2]!
        assert.strictEqual(c.status, "failed")
        assert.include(c.error ?? "", `lost ${MAX_NODE_LOSSES} times (host-d, host-e, host-f)`)
        // c=1 measured once and kept; c=2 interrupted each time, never failed; the rest not run
        assert.deepStrictEqual(
          c.points.map((p) => `${p.load}:${p.status}:${p.runs.length}:${p.interrupted_runs.length}`),
          ["1:ok:1:0", "2:not_run:0:3", "4:not_run:0:0", "8:not_run:0:0"]
        )
        assert.strictEqual(doc.summary.best?.label, "seqs=4")
      })
  )

  // how a launch fails on a node without the engine: the shell's 127 for a command (`vllm serve`),
  // Python's exit 1 for `python -m sglang.launch_server` (its runpy line, as CPython 3.11 prints it)
  for (const miss of [
    { how: "the shell's 127", exitCode: 127, line: "sh: 1: engine: not found" },
    {
      how: "python -m's exit 1",
      exitCode: 1,
      line: "/usr/bin/python3: Error while finding module specification for 'sglang.launch_server' (ModuleNotFoundError: No module named 'sglang')"
    }
  ])
    it.live(
      `a node without the engine (${miss.how}): named, that combination avoids it and runs on another node`,
      () =>
        Effect.gen(function* () {
          const want = yield* clean
          const r = yield* Effect.gen(function* () {
            const r = yield* runSweep(options(1))
            return { doc: r.doc, log: yield* engineLog }
          }).pipe(
            Effect.provide(
              setup({
                eligible: () => ids("a", "b"),
                // node a has no engine
                start: (_, n) =>
                  n === 1
                    ? { notReady: { exitCode: miss.exitCode, log: `${miss.line}\n`, runtimeSec: 0.01 } }
                    : { ready: true },
                node: (_, n) => (n === 1 ? node("a") : node("b")),
                run: model
              })
            )
          )
          assert.strictEqual(r.doc.status, "done")
          assert.deepStrictEqual(points(r.doc), points(want))
          const c = r.doc.combinations[0]!
          assert.deepStrictEqual(
            c.engine_starts.map((s) => `${s.outcome}@${s.node?.hostname}`),
            ["interrupted@host-a", "ready@host-b"]
          )
          assert.include(
            c.engine_starts[0]!.error ?? "",
            `the engine is not installed on node host-a ("${miss.line}")`
          )
          // back to the queue, after the others; its next start (and only that combination's) avoided node a
          assert.deepStrictEqual(r.log.starts.map(seqsOf), [2, 4, 8, 2])
          assert.deepStrictEqual(r.log.avoids, [[], [], [], ids("a")])
        })
    )

  it.live(
    "a node without the client: the run is interrupted, not failed; the combination avoids the node",
    () =>
      Effect.gen(function* () {
        const want = yield* clean
        let onA = false
        const doc = yield* Effect.map(runSweep(options(1)), (r) => r.doc).pipe(
          Effect.provide(
            setup({
              eligible: () => ids("a", "b"),
              node: (server, n) => {
                onA = seqsOf(server) === 2 && n === 1
                return onA ? node("a") : node("b")
              },
              run: (server, argv) =>
                onA && flag(argv, "--max-concurrency") === 2 ? { exitCode: 127 } : model(server, argv)
            })
          )
        )
        assert.strictEqual(doc.status, "done")
        assert.deepStrictEqual(points(doc), points(want))
        const c = doc.combinations[0]!
        assert.include(c.engine_starts[0]!.error ?? "", "the client is not installed on node host-a")
        assert.deepStrictEqual(
          c.points.map((p) => `${p.load}:${p.interrupted_runs.length}`),
          ["1:0", "2:1", "4:0", "8:0"]
        )
      })
  )

  it.live("no node has the engine: the combination fails naming each node and what it lacks", () =>
    Effect.gen(function* () {
      const doc = yield* Effect.map(runSweep(options(1)), (r) => r.doc).pipe(
        Effect.provide(
          setup({
            eligible: () => ids("a", "b"),
            start: (server) =>
              seqsOf(server) === 8
                ? { notReady: { exitCode: 127, log: "sh: 1: engine: not found\n", runtimeSec: 0.01 } }
                : { ready: true },
            node: (server, n) => (seqsOf(server) === 8 ? node(n % 2 === 0 ? "a" : "b") : node("b")),
            run: model
          })
        )
      )
      const c = doc.combinations[2]!
      assert.strictEqual(c.status, "failed")
      assert.include(c.error ?? "", "no node can run it")
      assert.include(c.error ?? "", "host-a lacks the engine")
      assert.include(c.error ?? "", "host-b lacks the engine")
      assert.strictEqual(c.engine_starts.length, 2)
      assert.strictEqual(doc.status, "done")
      assert.strictEqual(doc.summary.best?.label, "seqs=4")
    })
  )
})

describe("the re-queue policy (domain/Sweep/Requeue.ts)", () => {
  it("not installed: the shell's 127/126, python -m's own exit-1 line; not an ImportError inside a program, not another exit", () => {
    assert.isTrue(isNotInstalled(127))
    assert.isTrue(isNotInstalled(126))
    assert.isTrue(isNotInstalled(1, "/usr/bin/python3: No module named sglang.launch_server"))
    assert.isTrue(
      isNotInstalled(
        1,
        "/usr/bin/python3: Error while finding module specification for 'sglang.launch_server' (ModuleNotFoundError: No module named 'sglang')"
      )
    )
    // an engine that starts and then misses an optional package: its own failure, on every node
    assert.isFalse(isNotInstalled(1, "ModuleNotFoundError: No module named 'flash_attn'"))
    assert.isFalse(isNotInstalled(1, "error: argument --max-num-seqs: must be at least 1"))
    assert.isFalse(isNotInstalled(2, "/usr/bin/python3: No module named sglang"))
    assert.isFalse(isNotInstalled(1))
  })

  it("avoids a node lacking the engine while another can run it; a node with no Ray id cannot be avoided", () => {
    const miss = { _tag: "Missing", what: "engine", node: node("a"), line: undefined } as const
    const again = afterSetback(emptyRequeue, miss, {
      eligible: ids("a", "b"),
      leftAlone: [],
      perCombination: 1
    })
    assert.strictEqual(again._tag, "again")
    // b left alone by the sweep: nothing left
    const none = afterSetback(emptyRequeue, miss, {
      eligible: ids("a", "b"),
      leftAlone: ids("b"),
      perCombination: 1
    })
    assert.strictEqual(none._tag, "give_up")
    // a group of two needs two nodes
    const group = afterSetback(emptyRequeue, miss, {
      eligible: ids("a", "b", "c"),
      leftAlone: [],
      perCombination: 2
    })
    assert.strictEqual(group._tag, "again")
    const anon = afterSetback(
      emptyRequeue,
      { ...miss, node: { ...node("a"), node_id: null } },
      { eligible: ids("a", "b"), leftAlone: [], perCombination: 1 }
    )
    assert.strictEqual(anon._tag, "give_up")
    // the cluster not read: no way to know another node is left
    assert.strictEqual(
      afterSetback(emptyRequeue, miss, { eligible: undefined, leftAlone: [], perCombination: 1 })._tag,
      "give_up"
    )
  })

  it("interruptCombination touches only its combination and keeps every finished run", () => {
    const doc = inFlightDoc()
    const out = interruptCombination(doc, 0, "2026-01-01T00:01:00.000Z", "node x was lost")
    assert.strictEqual(out.combinations[1], doc.combinations[1])
    const c = out.combinations[0]!
    assert.strictEqual(c.status, "pending")
    assert.deepStrictEqual(
      c.engine_starts.map((s) => [s.outcome, s.error]),
      [["interrupted", "node x was lost"]]
    )
    assert.deepStrictEqual(
      c.points.map((p) => `${p.status}:${p.runs.length}:${p.interrupted_runs.length}`),
      ["ok:1:0", "pending:0:1", "pending:0:0", "pending:0:0"]
    )
  })
})

/** Combination 0 ready, c=1 measured, c=2 in flight. */
function inFlightDoc(): SweepDoc {
  const t = "2026-01-01T00:00:00.000Z"
  let d = initialSweep(sweepExperiment(), t)
  d = beginEngine(d, 0, "/e", t)
  d = updateEngine(d, 0, { outcome: "ready", ready_sec: 1 })
  d = beginRun(d, 0, "1", { repeat: 1, try: 1, dir: "/r1", client_argv: [], started_at: t })
  d = finishRun(d, 0, "1", {
    ended_at: t,
    status: "ok",
    class: null,
    error: null,
    exit_code: 0,
    runtime_sec: 1,
    throughput: 10,
    metrics: { output_throughput: 10, p99_ttft_ms: 10, completed: 2 },
    engine_died: false
  })
  d = finishPoint(d, 0, "1")
  d = beginRun(d, 0, "2", { repeat: 1, try: 1, dir: "/r2", client_argv: [], started_at: t })
  return d
}
