/**
 * The host's fair queue in the lease program (docs/design.md#fair-queue): a lease that asks for the
 * serving slot joins the host's queue before anything else and submits its actor only when no lease
 * that arrived before it is still waiting (services/HostQueue.ts, domain/Queue.ts).
 */
import { Clock, Duration, Effect } from "effect"
import type { YieldWrap } from "effect/Utils"
import { blockers, describeEntry, leaseAsksRay, type QueueEntry, splitQueue } from "../domain/Queue.js"
import { foreignHeadGrace, foreignHeadLook, queuePoll } from "../domain/Schedules.js"
import { ClusterInspector } from "../services/ClusterInspector.js"
import type { Ticket } from "../services/HostQueue.js"
import type { LockUnavailable } from "../services/LockFile.js"

/**
 * Which of `leaseIds` Ray shows an actor for (pending or alive: it asked Ray), read from the
 * cluster the lease would use; undefined when the cluster cannot be read (within 5 s).
 */
export const leasesInRay = Effect.fn("Queue.leasesInRay")(
  function* (leaseIds: ReadonlyArray<string>) {
    const inspector = yield* ClusterInspector
    const resolved = yield* inspector.resolve
    const snapshot = yield* inspector.snapshot(resolved.gcsAddress)
    return new Set(leaseIds.filter((id) => leaseAsksRay(snapshot, id))) as ReadonlySet<string>
  },
  Effect.timeout(Duration.seconds(5)),
  Effect.orElseSucceed(() => undefined)
)

/** How the queue asks Ray which leases it has seen (`leasesInRay`, or a test's). */
export type InRay<R> = (
  leaseIds: ReadonlyArray<string>
) => Effect.Effect<ReadonlySet<string> | undefined, never, R>

/** What a waiting lease has said and seen, for its "granted after" line and a `--wait` error. */
export interface WaitNotes {
  waited: boolean
  /** Who holds what it waits for, as last seen (the queue's holder, or the holder Ray shows). */
  holder?: string | undefined
  /** How many of the host's leases were ahead of it at the last look. */
  ahead?: number | undefined
}

/**
 * Waits until it is `ticket`'s turn: no live lease that arrived before it still waits. Says its
 * place, whom it waits behind and who holds the slot whenever that changes.
 */
export const awaitTurn = Effect.fn("Queue.awaitTurn")(function* <R = never>(
  ticket: Ticket,
  notes: WaitNotes,
  inRay?: InRay<R>
): Generator<YieldWrap<Effect.Effect<unknown, LockUnavailable, R>>, void, never> {
  let last = ""
  // A head of another user that Ray has not shown asking for the slot for foreignHeadGrace
  // while it is the head (as this waiter sees it) is passed over; same-user heads never are.
  const headSince = new Map<string, number>()
  const seenAt = new Map<string, number>()
  const passed = new Set<string>()
  let lastAsk = Number.NEGATIVE_INFINITY
  const passOver = (ahead: ReadonlyArray<QueueEntry>, now: number) =>
    Effect.gen(function* () {
      let rest = ahead.filter((e) => !passed.has(e.leaseId))
      while (inRay !== undefined && rest.length > 0 && rest[0]!.uid !== ticket.entry.uid) {
        const head = rest[0]!
        const since = headSince.get(head.leaseId) ?? now
        headSince.set(head.leaseId, since)
        if (now - lastAsk >= Duration.toMillis(foreignHeadLook)) {
          lastAsk = now
          if ((yield* inRay([head.leaseId]))?.has(head.leaseId) === true) seenAt.set(head.leaseId, now)
        }
        const quiet = now - Math.max(since, seenAt.get(head.leaseId) ?? since)
        if (quiet < Duration.toMillis(foreignHeadGrace)) break
        passed.add(head.leaseId)
        yield* Effect.logWarning(
          `passing over ${describeEntry(head, now)} in the host's queue: it has been the head for ${Math.round(quiet / 1000)} s without Ray showing its lease asking for the slot (a lease of another user that never asks Ray does not hold the line)`
        )
        rest = rest.slice(1)
      }
      return rest
    })
  const look = Effect.gen(function* () {
    const entries = yield* ticket.look
    const now = yield* Clock.currentTimeMillis
    const ahead = yield* passOver(blockers(entries, ticket.entry), now)
    notes.ahead = ahead.length
    const { holders } = splitQueue(entries.filter((e) => e.leaseId !== ticket.entry.leaseId))
    // Its turn, with the slot still held: the lease waits in Ray behind that holder, so a --wait
    // that passes now names it (not "nobody visible") until Ray's own view says more.
    if (ahead.length === 0) {
      if (holders.length > 0) notes.holder = holders.map((h) => describeEntry(h, now)).join(", ")
      return true
    }
    const head = ahead[0]!
    notes.holder =
      holders.length > 0 ? holders.map((h) => describeEntry(h, now)).join(", ") : describeEntry(head, now)
    const key = `${ahead.length}:${head.leaseId}:${holders.map((h) => h.leaseId).join(",")}`
    if (key !== last) {
      last = key
      notes.waited = true
      const held = holders.length > 0 ? `; the slot is held by ${notes.holder}` : ""
      yield* Effect.logInfo(
        `waiting for the serving slot in the host's queue: position ${ahead.length + 1} (lease ${ticket.entry.leaseId}), behind ${describeEntry(head, now)}${held}`
      )
    }
    return false
  })
  yield* Effect.repeat(look, { schedule: queuePoll, until: (turn) => turn })
})
