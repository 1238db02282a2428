/**
 * The group program (the lease entry with --nodes N >= 2) through test layers: the scripted
 * GroupBridge fake, a two-node cluster from the ClusterInspector test layer, a scripted RayCli.
 * What it shows: a multi-node run takes the group path; ranks' output is prefixed; the exit code
 * is the first failing rank's; "lease submitted" is marked before the placement group is asked
 * for; an infeasible cluster fails with insufficient_nodes before anything is submitted; a
 * cluster that does not answer is never started (no head behind a multi-node run); the group is
 * released on every exit path; the timeout counts from the commands' start.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Logger, TestClock } from "effect"
import { EnsureRefused, InvalidSetting, RayClusterInfeasible } from "../../src/domain/Errors.js"
import type { ClusterSnapshot } from "../../src/domain/Snapshot.js"
import { isGroupResult, runGroupLeased } from "../../src/programs/Group.js"
import type { LeaseRunSpec } from "../../src/programs/Lease.js"
import { LeasedCommand, runLeasedCommand } from "../../src/programs/Leased.js"

/** The lease entry with a plain argv (one node, or a group when the settings say --nodes >= 2). */
const runEntry = (spec: LeaseRunSpec) =>
  runLeasedCommand({ ...spec, command: LeasedCommand.Argv({ argv: spec.argv }) })

import * as ClusterInspector from "../../src/services/ClusterInspector.js"
import * as GroupBridge from "../../src/services/GroupBridge.js"
import * as HostQueue from "../../src/services/HostQueue.js"
import * as LeaseBridge from "../../src/services/LeaseBridge.js"
import * as ProcFs from "../../src/services/ProcFs.js"
import * as RayCli from "../../src/services/RayCli.js"
import * as Settings from "../../src/services/Settings.js"
import { WorkGate, layerTest as workGateTest } from "../../src/services/WorkGate.js"
import { idleHeadSnapshot, node, nodeId, nodeResources } from "../support/snapshots.js"

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "hl-group-program-"))
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }))

const ADDRESS = ClusterInspector.DEFAULT_TEST_CLUSTER.gcsAddress
const SLOT = { CPU: 2, GPU: 2, serving_slot: 1 }

const twoNodes = (worker: Record<string, number> = SLOT): ClusterSnapshot => {
  const base = idleHeadSnapshot({ ip: "192.0.2.2", port: 6379, resources: SLOT })
  const id = nodeId(0x200)
  return {
    ...base,
    nodes: [...base.nodes, node({ nodeId: id, isHead: false, address: "192.0.2.3", resourcesTotal: worker })],
    resources: [...base.resources, nodeResources({ nodeId: id, total: worker, available: worker })]
  }
}

const layers = (
  script: (spec: GroupBridge.GroupSpec, n: number) => GroupBridge.FakeGroup,
  options: { snapshot?: ClusterSnapshot; answers?: boolean; rankCwd?: string; rankEnv?: string[] } = {}
) => {
  const seenAtOpen: boolean[] = []
  const settings = Settings.layerTest({
    nodes: 2,
    rankCwd: options.rankCwd,
    rankEnv: options.rankEnv,
    rayTempDir: path.join(fs.mkdtempSync(path.join(tmp, "t-")), "ray")
  })
  const gate = workGateTest
  const queue = HostQueue.layerTest()
  const spying = Layer.effect(
    GroupBridge.GroupBridge,
    Effect.gen(function* () {
      const work = yield* WorkGate
      const inner = yield* GroupBridge.GroupBridge
      return GroupBridge.GroupBridge.of({
        open: (spec) =>
          Effect.flatMap(work.leaseSubmitted, (marked) => {
            seenAtOpen.push(marked)
            return inner.open(spec)
          })
      })
    })
  ).pipe(Layer.provideMerge(GroupBridge.layerTest(script)), Layer.provideMerge(gate))
  const rayCli = { calls: [] as Array<RayCli.RayCliCall> }
  const rayCliLayer = RayCli.layerTest(
    options.answers === false
      ? { probe: () => ({ answered: false, exitCode: 1, timedOut: false, output: "", elapsedMs: 1 }) }
      : {},
    rayCli.calls
  )
  const layer = Layer.mergeAll(
    spying,
    queue,
    settings,
    rayCliLayer,
    ProcFs.layerTest([]),
    LeaseBridge.layerTest(),
    ClusterInspector.layerTest({ snapshots: { [ADDRESS]: options.snapshot ?? twoNodes() } })
  )
  return { layer, seenAtOpen, rayCli }
}

const spec = (timeoutSec?: number, lines: string[] = []): LeaseRunSpec & { seen: string[] } => ({
  request: { gpus: 1, servingSlot: true },
  argv: ["serve"],
  env: { PATH: "/usr/bin" },
  cwd: "/",
  timeoutSec,
  seen: lines,
  onOutput: (o) => Effect.sync(() => lines.push(`${o.stream}:${o.line}`))
})

const logOf = Effect.flatten(GroupBridge.FakeGroupBridgeLog)

const opened = Effect.gen(function* () {
  const realSleep = (ms: number) => Effect.promise(() => new Promise((r) => setTimeout(r, ms)))
  while ((yield* logOf).opened.length === 0) yield* realSleep(5)
  yield* realSleep(50)
})

describe("the lease entry with --nodes 2 holds a group", () => {
  it.effect(
    "every rank gets a directory every node has and, of this environment, only HYPERLOOM_* (docs/design.md#what-each-node-is-given)",
    () => {
      const { layer } = layers(() => ({}))
      return Effect.gen(function* () {
        const fiber = yield* Effect.fork(
          runEntry({
            ...spec(),
            cwd: "/home/me/checkout",
            env: {
              PATH: "/launcher/bin",
              LD_LIBRARY_PATH: "/launcher/lib",
              HYPERLOOM_ATTEMPT: "1",
              HF_TOKEN: "x"
            }
          })
        )
        yield* opened
        yield* TestClock.adjust("1 second")
        yield* Fiber.join(fiber)
        const sent = (yield* logOf).opened[0]!
        assert.strictEqual(sent.cwd, "/tmp")
        assert.deepStrictEqual(sent.env, { HYPERLOOM_ATTEMPT: "1" })
        assert.include(GroupBridge.groupRequest(sent), '"env_base":"node"')
      }).pipe(Effect.provide(layer))
    }
  )

  it.effect("--rank-cwd and --rank-env: that directory, and those names besides HYPERLOOM_*", () => {
    const { layer } = layers(() => ({}), { rankCwd: "/srv/engine", rankEnv: ["HF_TOKEN", "NCCL_DEBUG"] })
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(
        runEntry({ ...spec(), env: { PATH: "/launcher/bin", HYPERLOOM_ATTEMPT: "1", HF_TOKEN: "x" } })
      )
      yield* opened
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(fiber)
      const sent = (yield* logOf).opened[0]!
      assert.strictEqual(sent.cwd, "/srv/engine")
      assert.deepStrictEqual(sent.env, { HYPERLOOM_ATTEMPT: "1", HF_TOKEN: "x" })
    }).pipe(Effect.provide(layer))
  })

  it.effect(
    "asks for 2 ranks after marking the lease submitted; output prefixed by rank; exit 0; released",
    () => {
      const { layer, seenAtOpen } = layers(() => ({
        ranks: [
          { output: [{ stream: "stdout", line: "leader up" }], runFor: "2 seconds" },
          { output: [{ stream: "stderr", line: "worker up" }], runFor: "1 second" }
        ]
      }))
      const s = spec()
      return Effect.gen(function* () {
        const fiber = yield* Effect.fork(runEntry(s))
        yield* opened
        yield* TestClock.adjust("3 seconds")
        const r = yield* Fiber.join(fiber)
        assert.isTrue(isGroupResult(r))
        if (!isGroupResult(r)) return
        assert.strictEqual(r.exitCode, 0)
        assert.strictEqual(r.nodes, 2)
        assert.deepStrictEqual(seenAtOpen, [true])
        assert.sameMembers(s.seen, ["stdout:[rank 0] leader up", "stderr:[rank 1] worker up"])
        const log = yield* logOf
        assert.strictEqual(log.opened[0]!.nodes, 2)
        assert.strictEqual(log.opened[0]!.gpus, 1)
        assert.deepStrictEqual([log.released, log.active], [1, 0])
      }).pipe(Effect.provide(layer))
    }
  )

  it.effect("one rank failing: the others are stopped, the exit code is the failing rank's", () => {
    const { layer } = layers(() => ({ ranks: [{ hang: true }, { runFor: "1 second", exitCode: 3 }] }))
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runEntry(spec()))
      yield* opened
      yield* TestClock.adjust("2 seconds")
      const r = yield* Fiber.join(fiber)
      if (!isGroupResult(r)) return assert.fail("not a group result")
      assert.strictEqual(r.exitCode, 3)
      assert.strictEqual(r.failedRank, 1)
      assert.deepStrictEqual(r.exits, [
        { rank: 1, code: 3 },
        { rank: 0, code: 143 }
      ])
      assert.strictEqual((yield* logOf).active, 0)
    }).pipe(Effect.provide(layer))
  })

  it.effect(
    "leader options: rank 0 runs its own argv and its end stops the others (their 143 is no failure)",
    () => {
      const { layer } = layers(() => ({ ranks: [{ runFor: "1 second", exitCode: 0 }, { hang: true }] }))
      return Effect.gen(function* () {
        const fiber = yield* Effect.fork(
          runGroupLeased(spec(), 2, { leaderArgv: ["engine+client"], endWithLeader: true })
        )
        yield* opened
        yield* TestClock.adjust("2 seconds")
        const r = yield* Fiber.join(fiber)
        assert.strictEqual(r.exitCode, 0)
        assert.isUndefined(r.failedRank)
        assert.deepStrictEqual(r.exits, [
          { rank: 0, code: 0 },
          { rank: 1, code: 143 }
        ])
        const opened_ = (yield* logOf).opened[0]!
        assert.deepStrictEqual(opened_.leaderArgv, ["engine+client"])
        assert.isTrue(opened_.endWithLeader)
      }).pipe(Effect.provide(layer))
    }
  )

  it.effect("a node without the slot: insufficient_nodes, nothing submitted, nothing started", () => {
    const { layer, seenAtOpen, rayCli } = layers(() => ({}), { snapshot: twoNodes({ CPU: 2, GPU: 2 }) })
    return Effect.gen(function* () {
      const error = yield* Effect.flip(runEntry(spec()))
      assert.instanceOf(error, RayClusterInfeasible)
      assert.strictEqual((error as RayClusterInfeasible).reason, "insufficient_nodes")
      assert.deepStrictEqual(seenAtOpen, [])
      assert.isFalse(yield* (yield* WorkGate).leaseSubmitted)
      assert.deepStrictEqual(
        rayCli.calls.map((c) => c.op),
        ["probe"],
        "a multi-node run never stops or starts Ray"
      )
    }).pipe(Effect.provide(layer))
  })

  it.effect("an empty bundle (no slot, no GPUs) is a usage error before anything is asked of Ray", () => {
    const { layer, rayCli } = layers(() => ({}))
    return Effect.gen(function* () {
      const error = yield* Effect.flip(runEntry({ ...spec(), request: { gpus: 0, servingSlot: false } }))
      assert.instanceOf(error, InvalidSetting)
      assert.deepStrictEqual(rayCli.calls, [])
      assert.strictEqual((yield* logOf).opened.length, 0)
    }).pipe(Effect.provide(layer))
  })

  it.effect(
    "--wait is a usage error for a group (groups are not queued on the host), before anything is asked of Ray",
    () => {
      const { layer, rayCli } = layers(() => ({}))
      return Effect.gen(function* () {
        const error = yield* Effect.flip(runEntry({ ...spec(), waitSec: 5 }))
        assert.instanceOf(error, InvalidSetting)
        assert.include(error.message, "--wait")
        assert.deepStrictEqual(rayCli.calls, [])
        assert.strictEqual((yield* logOf).opened.length, 0)
      }).pipe(Effect.provide(layer))
    }
  )

  it.effect("no cluster answers: refused, never starts a head", () => {
    const { layer, rayCli } = layers(() => ({}), { answers: false })
    return Effect.gen(function* () {
      const error = yield* Effect.flip(runEntry(spec()))
      assert.instanceOf(error, EnsureRefused)
      assert.include((error as EnsureRefused).message, "multi-node run (2 nodes)")
      assert.deepStrictEqual(
        rayCli.calls.map((c) => c.op),
        ["probe"]
      )
    }).pipe(Effect.provide(layer))
  })

  it.effect(
    "waiting to be placed is not charged to the timeout; a hung group times out and is released",
    () => {
      const { layer } = layers(() => ({ placeAfter: "30 seconds", ranks: [{ hang: true }, { hang: true }] }))
      return Effect.gen(function* () {
        const fiber = yield* Effect.fork(runEntry(spec(10)))
        yield* opened
        yield* TestClock.adjust("30 seconds")
        yield* TestClock.adjust("5 seconds")
        assert.isNull(fiber.unsafePoll(), "5 s after the ranks started: not timed out yet")
        yield* TestClock.adjust("6 seconds")
        const r = yield* Fiber.join(fiber)
        assert.isTrue(r.timedOut)
        assert.isNull(r.exitCode)
        assert.strictEqual(r.waitedSec, 30)
        assert.deepStrictEqual([(yield* logOf).released, (yield* logOf).active], [1, 0])
      }).pipe(Effect.provide(layer))
    }
  )
})

describe("a group waiting to be placed says so only when something visibly holds a slot", () => {
  const waitingLines = () => {
    const lines: Array<string> = []
    const logger = Logger.replace(
      Logger.defaultLogger,
      Logger.make(({ message }) => {
        const text = Array.isArray(message) ? message.join(" ") : String(message)
        if (text.startsWith("waiting for")) lines.push(text)
      })
    )
    return { lines, logger }
  }

  it.effect("nothing held anywhere: silent for 4 s, then once 'not granted yet' at 5 s", () => {
    const { layer } = layers(() => ({
      placeAfter: "8 seconds",
      ranks: [{ runFor: "1 second", exitCode: 0 }, {}]
    }))
    const { lines, logger } = waitingLines()
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runEntry(spec()))
      yield* opened
      yield* TestClock.adjust("4 seconds")
      assert.deepStrictEqual(lines, [], "Ray placing the group is no wait for anyone")
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(lines, [
        "waiting for 2 nodes with serving_slot and 1 GPU(s) each: not granted yet, though nothing visibly holds it"
      ])
      yield* TestClock.adjust("5 seconds")
      yield* Fiber.join(fiber)
      assert.lengthOf(lines, 1)
    }).pipe(Effect.provide(Layer.merge(layer, logger)))
  })
})
