/**
 * The turn of a lease in the host's queue (programs/Queue.ts) when the head is another user's
 * lease (docs/design.md#fair-queue: a queue that a foreign local user cannot squat): a foreign head
 * that Ray never shows asking for the slot is passed over once it has been the head for
 * foreignHeadGrace; one that Ray shows asking is waited for however long; a head of the same user
 * is waited for as before. TestClock drives the waits; Ray's answers are the test's.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Logger, TestClock } from "effect"
import type { QueueEntry } from "../../src/domain/Queue.js"
import { leaseAsksRay } from "../../src/domain/Queue.js"
import { foreignHeadGrace } from "../../src/domain/Schedules.js"
import type { ClusterSnapshot } from "../../src/domain/Snapshot.js"
import { awaitTurn, type WaitNotes } from "../../src/programs/Queue.js"
import type { Ticket } from "../../src/services/HostQueue.js"

const entry = (n: number, uid: number): QueueEntry => ({
  ticket: n,
  leaseId: `h-${uid}-${n}`,
  pid: 100 + n,
  uid,
  user: uid === 0 ? "root" : "nobody",
  command: `lease ${n}`,
  gpus: 0,
  joinedAt: 0
})

const mine = entry(9, 0)
const ticketBehind = (head: QueueEntry): Ticket => ({
  entry: mine,
  look: Effect.succeed([head, mine]),
  markHolding: () => Effect.void
})

/** Runs awaitTurn behind `head`; `shown(now)` says whether Ray shows the head's lease asking then. */
const behind = (head: QueueEntry, shown: (sinceStartMs: number) => boolean) =>
  Effect.gen(function* () {
    const logs: Array<string> = []
    const logger = Logger.make(({ message }) => {
      logs.push(String(message))
    })
    let asked = 0
    const t0 = yield* TestClockNow
    const fiber = yield* Effect.fork(
      awaitTurn(ticketBehind(head), { waited: false } as WaitNotes, (ids) =>
        Effect.map(TestClockNow, (now) => {
          asked++
          return shown(now - t0) ? new Set(ids) : new Set<string>()
        })
      ).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
    )
    return { fiber, logs, asked: () => asked }
  })

const TestClockNow = TestClock.currentTimeMillis
const grace = Duration.toMillis(foreignHeadGrace)

describe("a foreign head of the host's queue (programs/Queue.ts awaitTurn)", () => {
  it.effect(
    "one that Ray never shows asking is passed over once it has been the head for the grace, not sooner",
    () =>
      Effect.gen(function* () {
        const { fiber, logs, asked } = yield* behind(entry(1, 65534), () => false)
        yield* TestClock.adjust(Duration.millis(grace - 1_000))
        assert.isNull(fiber.unsafePoll(), "passed over before the grace")
        yield* TestClock.adjust(Duration.seconds(2))
        assert.isNotNull(fiber.unsafePoll(), "still waiting behind a head that never asked Ray")
        yield* Fiber.join(fiber)
        assert.isAbove(asked(), 1)
        assert.isTrue(logs.some((l) => l.includes("passing over lease h-65534-1 of nobody")))
      })
  )

  it.effect("one that Ray shows asking for the slot is waited for however long", () =>
    Effect.gen(function* () {
      const { fiber } = yield* behind(entry(1, 65534), () => true)
      yield* TestClock.adjust(Duration.millis(grace * 5))
      assert.isNull(fiber.unsafePoll())
      yield* Fiber.interrupt(fiber)
    })
  )

  it.effect("one that Ray stopped showing is passed over the grace after it was last seen", () =>
    Effect.gen(function* () {
      const { fiber } = yield* behind(entry(1, 65534), (t) => t < 30_000)
      yield* TestClock.adjust(Duration.millis(30_000 + grace - 2_000))
      assert.isNull(fiber.unsafePoll())
      yield* TestClock.adjust(Duration.seconds(4))
      assert.isNotNull(fiber.unsafePoll())
    })
  )

  it.effect("a head of the same user is never passed over (and Ray is not asked about it)", () =>
    Effect.gen(function* () {
      const { fiber, asked } = yield* behind(entry(1, 0), () => false)
      yield* TestClock.adjust(Duration.millis(grace * 5))
      assert.isNull(fiber.unsafePoll())
      assert.strictEqual(asked(), 0)
      yield* Fiber.interrupt(fiber)
    })
  )
})

describe("whether Ray shows a lease asking for the slot (domain/Queue.ts leaseAsksRay)", () => {
  const node = { nodeId: "n1", state: "ALIVE", resourcesTotal: { CPU: 2, GPU: 4, serving_slot: 1 } }
  const actor = (name: string, state: string, requiredResources: Record<string, number>) => ({
    actorId: "a",
    jobId: "j",
    state,
    isDetached: false,
    name,
    className: "HyperloomLease",
    pid: 0,
    nodeId: "",
    requiredResources
  })
  const snap = (actors: ReadonlyArray<ReturnType<typeof actor>>) =>
    ({ nodes: [node], actors }) as unknown as ClusterSnapshot
  const named =
    "lease `sleep 1` of nobody, 1 GPU, since 2026-12-01 19:00:00 UTC (bridge h:12, lease h-65534-1)"

  it("pending or alive for the slot and feasible: yes; dead, another lease, no slot, or never grantable: no", () => {
    assert.isTrue(
      leaseAsksRay(snap([actor(named, "PENDING_CREATION", { serving_slot: 1, GPU: 1 })]), "h-65534-1")
    )
    assert.isTrue(leaseAsksRay(snap([actor(named, "ALIVE", { serving_slot: 1 })]), "h-65534-1"))
    assert.isFalse(leaseAsksRay(snap([actor(named, "DEAD", { serving_slot: 1 })]), "h-65534-1"))
    assert.isFalse(leaseAsksRay(snap([actor(named, "PENDING_CREATION", { serving_slot: 1 })]), "h-65534-10"))
    assert.isFalse(leaseAsksRay(snap([actor(named, "PENDING_CREATION", { GPU: 1 })]), "h-65534-1"))
    assert.isFalse(
      leaseAsksRay(snap([actor(named, "PENDING_CREATION", { serving_slot: 1, GPU: 64 })]), "h-65534-1")
    )
    assert.isFalse(
      leaseAsksRay(snap([actor(named, "PENDING_CREATION", { serving_slot: 1, made_up: 1 })]), "h-65534-1")
    )
  })
})
