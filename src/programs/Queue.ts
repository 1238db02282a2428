/**
 * The host's fair queue in the lease program (SPEC §13 "Fair"): a lease that asks for the serving
 * slot joins the host's queue before anything else and submits its actor only when no lease that
 * arrived before it is still waiting (services/HostQueue.ts, domain/Queue.ts).
 */
import { Clock, Effect } from "effect"
import { blockers, describeEntry, splitQueue } from "../domain/Queue.js"
import { queuePoll } from "../domain/Schedules.js"
import type { Ticket } from "../services/HostQueue.js"

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
export const awaitTurn = (ticket: Ticket, notes: WaitNotes) =>
  Effect.gen(function* () {
    let last = ""
    const look = Effect.gen(function* () {
      const entries = yield* ticket.look
      const ahead = blockers(entries, ticket.entry.ticket)
      notes.ahead = ahead.length
      const now = yield* Clock.currentTimeMillis
      const { holders } = splitQueue(entries.filter((e) => e.ticket !== ticket.entry.ticket))
      // Its turn, with the slot still held: the lease waits in Ray behind that holder, so a --wait
      // that passes now names it (not "nobody visible") until Ray's own view says more.
      if (ahead.length === 0) {
        if (holders.length > 0) notes.holder = holders.map((h) => describeEntry(h, now)).join(", ")
        return true
      }
      const head = ahead[0]!
      notes.holder =
        holders.length > 0 ? holders.map((h) => describeEntry(h, now)).join(", ") : describeEntry(head, now)
      const key = `${ahead.length}:${head.ticket}:${holders.map((h) => h.ticket).join(",")}`
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
