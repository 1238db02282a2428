/**
 * The lease program (acquireLease / runLeased) through test layers: the scripted LeaseBridge fake,
 * a healthy cluster from the ClusterInspector test layer, a scripted RayCli. What it shows:
 * "lease submitted" is marked before the actor creation is sent (and stays marked when the open
 * fails); the lease is released on every exit path (exit, failure, timeout, interruption while
 * waiting and while running); the timeout counts from the command's start, never from the wait
 * for the slot (docs/design.md#waiting-is-not-failing); while it waits, it says for whom at the named
 * contention pace, on the Clock.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Layer, Logger, TestClock } from "effect"
import { RayClusterInfeasible } from "../../src/domain/Errors.js"
import { acquireLease, type LeaseRunSpec, runLeased } from "../../src/programs/Lease.js"
import * as ClusterInspector from "../../src/services/ClusterInspector.js"
import * as HostQueue from "../../src/services/HostQueue.js"
import * as LeaseBridge from "../../src/services/LeaseBridge.js"
import * as ProcFs from "../../src/services/ProcFs.js"
import * as RayCli from "../../src/services/RayCli.js"
import * as Settings from "../../src/services/Settings.js"
import { WorkGate, layerTest as workGateTest } from "../../src/services/WorkGate.js"
import { idleHeadSnapshot, withActor, withGroup, withHeld } from "../support/snapshots.js"

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "hl-lease-program-"))
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }))

const ADDRESS = ClusterInspector.DEFAULT_TEST_CLUSTER.gcsAddress
const healthy = idleHeadSnapshot({ ip: "192.0.2.2", port: 6379 })
const noSlot = (() => {
  const { serving_slot: _, ...rest } = healthy.nodes[0]!.resourcesTotal
  return idleHeadSnapshot({ ip: "192.0.2.2", port: 6379, resources: rest })
})()

/**
 * The program's layers around a scripted bridge. The bridge is wrapped to record, at the moment
 * each `open` (the actor creation) is sent, whether the gate already says "lease submitted".
 */
const layers = (
  script: (spec: LeaseBridge.LeaseSpec, n: number) => LeaseBridge.FakeLease,
  options: { snapshot?: typeof healthy | (() => typeof healthy) } = {}
) => {
  const seenAtOpen: boolean[] = []
  const settings = Settings.layerTest({ rayTempDir: path.join(fs.mkdtempSync(path.join(tmp, "t-")), "ray") })
  const gate = workGateTest
  const queue = HostQueue.layerTest()
  const spying = Layer.effect(
    LeaseBridge.LeaseBridge,
    Effect.gen(function* () {
      const work = yield* WorkGate
      const inner = yield* LeaseBridge.LeaseBridge
      return LeaseBridge.LeaseBridge.of({
        ...inner,
        open: (spec) =>
          Effect.flatMap(work.leaseSubmitted, (marked) => {
            seenAtOpen.push(marked)
            return inner.open(spec)
          })
      })
    })
  ).pipe(Layer.provideMerge(LeaseBridge.layerTest(script)), Layer.provideMerge(gate))
  const layer = Layer.mergeAll(
    spying,
    queue,
    settings,
    RayCli.layerTest(),
    ProcFs.layerTest([]),
    ClusterInspector.layerTest({
      snapshots: (address) =>
        address !== ADDRESS
          ? undefined
          : typeof options.snapshot === "function"
            ? options.snapshot()
            : (options.snapshot ?? healthy)
    })
  )
  return { layer, seenAtOpen }
}

const spec = (timeoutSec?: number): LeaseRunSpec => ({
  request: { gpus: 1, servingSlot: true },
  argv: ["bench"],
  env: { PATH: "/usr/bin" },
  cwd: "/",
  timeoutSec
})

const logOf = Effect.flatten(LeaseBridge.FakeLeaseBridgeLog)

/**
 * Waits (in real time) until the forked program has sent the actor creation and settled: the
 * host lock's file I/O around it is real, so the TestClock must not move before it is done.
 */
const opened = Effect.gen(function* () {
  const realSleep = (ms: number) => Effect.promise(() => new Promise((r) => setTimeout(r, ms)))
  while ((yield* logOf).opened.length === 0) yield* realSleep(5)
  yield* realSleep(50)
})

describe("acquireLease", () => {
  it.effect("marks the lease submitted before the actor creation is sent", () => {
    const { layer, seenAtOpen } = layers(() => ({}))
    return Effect.gen(function* () {
      const gate = yield* WorkGate
      assert.isFalse(yield* gate.leaseSubmitted)
      yield* Effect.scoped(acquireLease(spec()))
      assert.deepStrictEqual(seenAtOpen, [true])
      assert.isTrue(yield* gate.leaseSubmitted)
      // The bridge's job was our own while the lease lived, and is no longer once it is released.
      assert.deepStrictEqual(yield* gate.ownJobIds, [])
    }).pipe(Effect.provide(layer))
  })

  it.effect("a failed open still counts as submitted (the creation may have been sent)", () => {
    const { layer, seenAtOpen } = layers(() => ({
      openError: new LeaseBridge.LeaseActorFailed({ kind: "actor_creation", actorId: undefined, reason: "x" })
    }))
    return Effect.gen(function* () {
      const exit = yield* Effect.exit(Effect.scoped(acquireLease(spec())))
      assert.isTrue(Exit.isFailure(exit))
      assert.deepStrictEqual(seenAtOpen, [true])
      assert.isTrue(yield* (yield* WorkGate).leaseSubmitted)
    }).pipe(Effect.provide(layer))
  })

  it.effect("an infeasible cluster fails before anything is submitted", () => {
    const { layer, seenAtOpen } = layers(() => ({}), { snapshot: noSlot })
    return Effect.gen(function* () {
      // No /proc daemons in the test layer: the repair is refused, the typed error comes back.
      const error = yield* Effect.flip(Effect.scoped(acquireLease(spec())))
      assert.instanceOf(error, RayClusterInfeasible)
      assert.deepStrictEqual(seenAtOpen, [])
      assert.isFalse(yield* (yield* WorkGate).leaseSubmitted)
      assert.strictEqual((yield* logOf).opened.length, 0)
    }).pipe(Effect.provide(layer))
  })
})

describe("runLeased releases the lease on every exit path", () => {
  it.effect("normal exit: the command's code, released once", () => {
    const { layer } = layers(() => ({ exitCode: 3, runFor: "1 second" }))
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runLeased(spec()))
      yield* opened
      yield* TestClock.adjust("2 seconds")
      const r = yield* Fiber.join(fiber)
      assert.strictEqual(r.exitCode, 3)
      assert.isFalse(r.timedOut)
      const log = yield* logOf
      assert.deepStrictEqual([log.released, log.active], [1, 0])
    }).pipe(Effect.provide(layer))
  })

  it.effect("the lease fails (actor died): the error comes back, released", () => {
    const died = new LeaseBridge.LeaseActorFailed({ kind: "actor_died", actorId: "a", reason: "gone" })
    const { layer } = layers(() => ({ failWith: died, runFor: "1 second" }))
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(Effect.flip(runLeased(spec())))
      yield* opened
      yield* TestClock.adjust("2 seconds")
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "LeaseActorFailed")
      assert.strictEqual((error as LeaseBridge.LeaseActorFailed).kind, "actor_died")
      const log = yield* logOf
      assert.deepStrictEqual([log.released, log.active], [1, 0])
    }).pipe(Effect.provide(layer))
  })

  it.effect("interrupted while waiting for the slot: released, the command never started", () => {
    const { layer } = layers(() => ({ startAfter: "1 hour" }))
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runLeased(spec()))
      yield* opened
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual((yield* logOf).active, 1)
      yield* Fiber.interrupt(fiber)
      const log = yield* logOf
      assert.deepStrictEqual([log.released, log.active], [1, 0])
    }).pipe(Effect.provide(layer))
  })

  it.effect("interrupted while the command runs: released", () => {
    const { layer } = layers(() => ({ hang: true }))
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runLeased(spec()))
      yield* opened
      yield* TestClock.adjust("10 seconds")
      yield* Fiber.interrupt(fiber)
      const log = yield* logOf
      assert.deepStrictEqual([log.released, log.active], [1, 0])
    }).pipe(Effect.provide(layer))
  })
})

describe("runLeased: the timeout counts from the command's start (waiting is not failing)", () => {
  it.effect("a lease that waits 30 s for the slot, then runs 1 s, is not timed out by a 2 s timeout", () => {
    const { layer } = layers(() => ({ startAfter: "30 seconds", runFor: "1 second", exitCode: 0 }))
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runLeased(spec(2)))
      yield* opened
      yield* TestClock.adjust("40 seconds")
      const r = yield* Fiber.join(fiber)
      assert.isFalse(r.timedOut)
      assert.strictEqual(r.exitCode, 0)
      assert.strictEqual(r.waitedSec, 30)
      assert.strictEqual(r.commandSec, 1)
    }).pipe(Effect.provide(layer))
  })

  it.effect("the command running past the timeout is stopped: timed out, released", () => {
    const { layer } = layers(() => ({ startAfter: "30 seconds", hang: true }))
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runLeased(spec(2)))
      yield* opened
      yield* TestClock.adjust("31 seconds")
      assert.strictEqual((yield* logOf).active, 1, "still running 1 s after its start")
      yield* TestClock.adjust("2 seconds")
      const r = yield* Fiber.join(fiber)
      assert.isTrue(r.timedOut)
      assert.isNull(r.exitCode)
      assert.strictEqual(r.waitedSec, 30)
      assert.strictEqual(r.commandSec, 2)
      const log = yield* logOf
      assert.deepStrictEqual([log.released, log.active], [1, 0])
    }).pipe(Effect.provide(layer))
  })

  it.effect("a command that never starts is bounded by the caller (interruption), not by the timeout", () => {
    const { layer } = layers(() => ({ startAfter: "1 hour" }))
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(Effect.timeoutOption(runLeased(spec(2)), Duration.minutes(10)))
      yield* opened
      yield* TestClock.adjust("11 minutes")
      const outcome = yield* Fiber.join(fiber)
      assert.isTrue(outcome._tag === "None", "still waiting after 10 minutes: the 2 s timeout did not fire")
      const log = yield* logOf
      assert.deepStrictEqual([log.released, log.active], [1, 0])
    }).pipe(Effect.provide(layer))
  })
})

/** Collects the lease's "waiting for …" and "lease granted …" lines. */
const contentionLines = () => {
  const lines: Array<string> = []
  const logger = Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ message }) => {
      const text = Array.isArray(message) ? message.join(" ") : String(message)
      if (text.startsWith("waiting for") || text.startsWith("lease granted")) lines.push(text)
    })
  )
  return { lines, logger }
}

describe("runLeased warns as ray ensure does", () => {
  it.effect("a head declaring serving_slot 2: the lease says two serving runs can overlap, and runs", () => {
    const twoSlots = idleHeadSnapshot({
      ip: "192.0.2.2",
      port: 6379,
      resources: { ...healthy.nodes[0]!.resourcesTotal, serving_slot: 2 }
    })
    const { layer } = layers(() => ({ runFor: "1 second", exitCode: 0 }), { snapshot: twoSlots })
    const warnings: Array<string> = []
    const logger = Logger.replace(
      Logger.defaultLogger,
      Logger.make(({ logLevel, message }) => {
        if (logLevel._tag === "Warning")
          warnings.push(Array.isArray(message) ? message.join(" ") : String(message))
      })
    )
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runLeased(spec()))
      yield* opened
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual((yield* Fiber.join(fiber)).exitCode, 0)
      assert.lengthOf(warnings, 1)
      assert.match(warnings[0]!, /^serving_slot total is 2 on node .* two serving runs can overlap$/)
    }).pipe(Effect.provide(Layer.merge(layer, logger)))
  })
})

describe("runLeased: no 'waiting' while nothing visibly holds the slot (Ray starting the worker)", () => {
  it.effect("an actor that takes 3 s to start with the slot free: no waiting line", () => {
    const { layer } = layers(() => ({ startAfter: "3 seconds", runFor: "1 second", exitCode: 0 }))
    const { lines, logger } = contentionLines()
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runLeased(spec()))
      yield* opened
      yield* TestClock.adjust("4 seconds")
      const r = yield* Fiber.join(fiber)
      assert.strictEqual(r.exitCode, 0)
      assert.deepStrictEqual(
        lines.filter((l) => l.startsWith("waiting for")),
        [],
        "nobody holds the slot: not a wait for it"
      )
    }).pipe(Effect.provide(Layer.merge(layer, logger)))
  })

  it.effect("nothing visible for 5 s: says once that it is not granted yet", () => {
    const { layer } = layers(() => ({ startAfter: "12 seconds", runFor: "1 second", exitCode: 0 }))
    const { lines, logger } = contentionLines()
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runLeased(spec()))
      yield* opened
      yield* TestClock.adjust("4 seconds")
      assert.deepStrictEqual(lines, [])
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(lines, [
        "waiting for serving_slot and 1 GPU(s): not granted yet, though nothing visibly holds it"
      ])
      yield* TestClock.adjust("8 seconds")
      yield* Fiber.join(fiber)
      assert.deepStrictEqual(lines.slice(1), ["lease granted after waiting 12.0 s"])
    }).pipe(Effect.provide(Layer.merge(layer, logger)))
  })

  it.effect("another user's GPU actor beside a free slot and a free GPU is no holder: no line at all", () => {
    const { layer } = layers(() => ({ startAfter: "3 seconds", runFor: "1 second", exitCode: 0 }), {
      snapshot: () =>
        withHeld(
          withActor(healthy, {
            name: "other_users_model",
            requiredResources: { GPU: 1 },
            actorId: "ab".repeat(16)
          }),
          { GPU: 1 }
        )
    })
    const { lines, logger } = contentionLines()
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runLeased(spec()))
      yield* opened
      yield* TestClock.adjust("4 seconds")
      yield* Fiber.join(fiber)
      assert.deepStrictEqual(lines, [], "neither 'waiting for' nor 'lease granted after waiting'")
    }).pipe(Effect.provide(Layer.merge(layer, logger)))
  })

  it.effect(
    "the slot held by a lease, the GPUs by another user's actor: only the slot's holder is named",
    () => {
      const { layer } = layers(() => ({ startAfter: "3 seconds", runFor: "1 second", exitCode: 0 }), {
        snapshot: () =>
          withHeld(
            withActor(withActor(healthy, { name: "slot_holder", requiredResources: { serving_slot: 1 } }), {
              name: "other_users_model",
              requiredResources: { GPU: 1 },
              actorId: "ab".repeat(16)
            }),
            { GPU: 1, serving_slot: 1 }
          )
      })
      const { lines, logger } = contentionLines()
      return Effect.gen(function* () {
        const fiber = yield* Effect.fork(runLeased(spec()))
        yield* opened
        yield* TestClock.adjust("1 second")
        assert.lengthOf(lines, 1)
        assert.include(lines[0]!, "held by actor slot_holder (")
        assert.notInclude(lines[0]!, "other_users_model")
        yield* TestClock.adjust("3 seconds")
        yield* Fiber.join(fiber)
      }).pipe(Effect.provide(Layer.merge(layer, logger)))
    }
  )

  it.effect("a placement group reserving the slot is named as the holder", () => {
    const { layer } = layers(() => ({ startAfter: "2 seconds", runFor: "1 second", exitCode: 0 }), {
      snapshot: () =>
        withHeld(
          withGroup(healthy, {
            name: "hl_reserve",
            bundles: [{ index: 0, resources: { serving_slot: 1 }, nodeId: healthy.nodes[0]!.nodeId }]
          }),
          { serving_slot: 1 }
        )
    })
    const { lines, logger } = contentionLines()
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runLeased(spec()))
      yield* opened
      yield* TestClock.adjust("1 second")
      assert.lengthOf(lines, 1)
      assert.match(
        lines[0]!,
        /^waiting for serving_slot and 1 GPU\(s\): held by placement group hl_reserve \(job /
      )
      yield* TestClock.adjust("2 seconds")
      yield* Fiber.join(fiber)
    }).pipe(Effect.provide(Layer.merge(layer, logger)))
  })
})

describe("runLeased: while it waits for the slot it says for whom, on the Clock", () => {
  it.effect("first after 1 s, then whenever the holder changes (polled every 2 s); never charged", () => {
    let holder = "holder_a"
    const { layer } = layers(() => ({ startAfter: "7 seconds", runFor: "1 second", exitCode: 0 }), {
      snapshot: () =>
        withHeld(withActor(healthy, { name: holder, pid: holder === "holder_a" ? 111 : 222 }), {
          GPU: 1,
          serving_slot: 1
        })
    })
    const lines: Array<string> = []
    const logs = Logger.replace(
      Logger.defaultLogger,
      Logger.make(({ message }) => {
        const text = Array.isArray(message) ? message.join(" ") : String(message)
        if (text.startsWith("waiting for") || text.startsWith("lease granted")) lines.push(text)
      })
    )
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runLeased(spec()))
      yield* opened
      assert.deepStrictEqual(lines, [], "nothing said before the first look")
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(lines, [
        "waiting for serving_slot and 1 GPU(s): held by actor holder_a (pid 111, job 02000000)"
      ])
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual(lines.length, 1, "the same holder is not repeated")
      holder = "holder_b"
      yield* TestClock.adjust("1 second")
      assert.strictEqual(lines.length, 1, "the next look is due 2 s after the last, not sooner")
      yield* TestClock.adjust("1 second")
      assert.strictEqual(
        lines[1],
        "waiting for serving_slot and 1 GPU(s): held by actor holder_b (pid 222, job 02000000)"
      )
      yield* TestClock.adjust("3 seconds")
      const r = yield* Fiber.join(fiber)
      assert.strictEqual(r.exitCode, 0)
      assert.strictEqual(r.waitedSec, 7)
      assert.strictEqual(r.commandSec, 1)
      assert.deepStrictEqual(lines.slice(2), ["lease granted after waiting 7.0 s"])
    }).pipe(Effect.provide(Layer.merge(layer, logs)))
  })
})

describe("runLeased: the host's queue (docs/design.md#fair-queue)", () => {
  it.effect("a lease submits its actor only once the lease that arrived before it holds the slot", () => {
    // (n counts opens from 0.) Lease 1 waits 5 s in Ray before its command starts; lease 2 arrives meanwhile.
    const { layer } = layers((_, n) =>
      n === 0
        ? { startAfter: "5 seconds", runFor: "10 seconds", exitCode: 0 }
        : { runFor: "1 second", exitCode: 0 }
    )
    const { lines, logger } = contentionLines()
    return Effect.gen(function* () {
      const first = yield* Effect.fork(runLeased(spec()))
      yield* opened
      const second = yield* Effect.fork(runLeased(spec()))
      yield* TestClock.adjust("1 second")
      assert.strictEqual(
        (yield* logOf).opened.length,
        1,
        "the second lease submitted while the first still waited"
      )
      assert.isTrue(
        lines.some((l) => l.startsWith("waiting for the serving slot in the host's queue: position 2")),
        lines.join("\n")
      )
      yield* TestClock.adjust("4 seconds")
      // The first holds the slot now: the second is the queue's head and submits (Ray grants it in turn).
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* logOf).opened.length, 2)
      yield* TestClock.adjust("20 seconds")
      assert.strictEqual((yield* Fiber.join(first)).exitCode, 0)
      const r = yield* Fiber.join(second)
      assert.strictEqual(r.exitCode, 0)
      assert.isAtLeast(r.waitedSec, 5)
      // Both left the queue with their leases.
      assert.deepStrictEqual((yield* (yield* HostQueue.HostQueue).view).entries, [])
    }).pipe(Effect.provide(Layer.merge(layer, logger)))
  })

  it.effect(
    "a lease Ray has placed no longer holds the queue: the next lease of the host (bound for another node) submits while the first's command has not started",
    () => {
      // Lease 1 is placed at once (its node's slot held) but its command starts only after 20 s
      // (a clean-GPU wait, a slow worker); lease 2 would go to another node's free slot.
      const { layer } = layers((_, n) =>
        n === 0
          ? { placedAfter: "0 seconds", startAfter: "20 seconds", runFor: "5 seconds", exitCode: 0 }
          : { runFor: "1 second", exitCode: 0 }
      )
      return Effect.gen(function* () {
        const first = yield* Effect.fork(runLeased(spec()))
        yield* opened
        const second = yield* Effect.fork(runLeased(spec()))
        yield* TestClock.adjust("2 seconds")
        assert.strictEqual(
          (yield* logOf).opened.length,
          2,
          "the second lease waited behind the first's start, though Ray had placed the first"
        )
        const r = yield* Fiber.join(second)
        assert.strictEqual(r.exitCode, 0)
        assert.isBelow(r.waitedSec, 5)
        yield* TestClock.adjust("30 seconds")
        assert.strictEqual((yield* Fiber.join(first)).exitCode, 0)
      }).pipe(Effect.provide(layer))
    }
  )

  it.effect(
    "--wait: a lease not granted in time fails naming the holder, and nothing of it was submitted",
    () => {
      const { layer } = layers((_, n) =>
        n === 0 ? { startAfter: "100 seconds", exitCode: 0 } : { exitCode: 0 }
      )
      return Effect.gen(function* () {
        const first = yield* Effect.fork(runLeased(spec()))
        yield* opened
        const second = yield* Effect.fork(Effect.flip(runLeased({ ...spec(), waitSec: 3 })))
        yield* TestClock.adjust("2 seconds")
        assert.isTrue((yield* Fiber.poll(second))._tag === "None", "gave up before its 3 s")
        yield* TestClock.adjust("2 seconds")
        const e = yield* Fiber.join(second)
        assert.strictEqual(e._tag, "LeaseWaitExpired")
        assert.include(e.message, "lease_wait_expired: the lease was not granted within --wait 3 s")
        assert.include(e.message, "lease test-1 of test")
        assert.strictEqual((yield* logOf).opened.length, 1)
        // It left the queue: only the first is in it.
        assert.deepStrictEqual(
          (yield* (yield* HostQueue.HostQueue).view).entries.map((x) => x.ticket),
          [1]
        )
        yield* Fiber.interrupt(first)
      }).pipe(Effect.provide(layer))
    }
  )

  it.effect(
    "--wait behind a holder and nobody else waiting: the error names the queue's holder (it said 'nobody visible')",
    () => {
      // The first holds the slot (started at once, runs 100 s); Ray does not grant the second in time.
      const { layer } = layers((_, n) =>
        n === 0 ? { runFor: "100 seconds", exitCode: 0 } : { startAfter: "100 seconds", exitCode: 0 }
      )
      return Effect.gen(function* () {
        const first = yield* Effect.fork(runLeased(spec()))
        yield* opened
        yield* TestClock.adjust("1 second")
        const second = yield* Effect.fork(Effect.flip(runLeased({ ...spec(), waitSec: 3 })))
        yield* TestClock.adjust("4 seconds")
        const e = yield* Fiber.join(second)
        assert.strictEqual(e._tag, "LeaseWaitExpired")
        assert.notInclude(e.message, "nobody visible")
        assert.include(e.message, "the serving slot is held by lease test-1 of test")
        assert.include(e.message, "holding for")
        yield* Fiber.interrupt(first)
      }).pipe(Effect.provide(layer))
    }
  )

  it.effect("a lease without the slot (--no-serving-slot) does not queue", () => {
    const { layer } = layers(() => ({ runFor: "1 second", exitCode: 0 }))
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(runLeased({ ...spec(), request: { gpus: 1, servingSlot: false } }))
      yield* opened
      assert.deepStrictEqual((yield* (yield* HostQueue.HostQueue).view).entries, [])
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual((yield* Fiber.join(fiber)).exitCode, 0)
    }).pipe(Effect.provide(layer))
  })
})
