/**
 * The host's fair queue (docs/design.md#fair-queue), as data and decisions: who may submit its actor, who
 * holds the slot, who waits and for about how long. The files and locks live in
 * services/HostQueue.ts; this room only orders and estimates.
 */
import { Data } from "effect"
import { isSlotResource } from "./Group.js"
import type { ClusterSnapshot } from "./Snapshot.js"

/** One lease in the host's queue, as its own process wrote it when it joined. */
export interface QueueEntry {
  /** Arrival order on the host (the in-memory queue: one counter; the files: `arrival` says it). */
  readonly ticket: number
  /**
   * The live queue's arrival key, compared as text before `ticket` (services/HostQueue.ts: the
   * ticket file's ctime, which no user can set earlier, then its record's time, then its name).
   */
  readonly arrival?: string | undefined
  /** The lease's id in the queue (unique on the host; the Ray actor of the lease names it). */
  readonly leaseId: string
  readonly pid: number
  readonly uid: number
  readonly user: string
  /** The hyperloom command line that asked for the lease (what waiters are told). */
  readonly command: string
  readonly gpus: number
  /** When it joined (ms since the epoch). */
  readonly joinedAt: number
  /** Set once its command runs: it holds the slot since then. */
  readonly holding?:
    | {
        readonly since: number
        readonly actorId: string
      }
    | undefined
}

/** One finished lease of the host's history: how long it held the slot. */
export interface HistoryEntry {
  readonly endedAt: number
  readonly heldSec: number
  readonly gpus: number
}

/**
 * The live entries ahead of `mine` that keep it from submitting its actor: those that arrived
 * before it and do not hold the slot yet. Only the queue's head submits, so Ray never has two of
 * this host's leases waiting for the slot at once and cannot reorder them; an entry ahead that
 * holds the slot does not block (Ray grants the slot to the one waiting actor when it is freed,
 * or at once on a cluster with a free slot on another node).
 */
export const blockers = (
  entries: ReadonlyArray<QueueEntry>,
  mine: number | Pick<QueueEntry, "ticket" | "arrival">
): ReadonlyArray<QueueEntry> => {
  const me = typeof mine === "number" ? { ticket: mine } : mine
  return entries.filter((e) => byArrival(e, me) < 0 && e.holding === undefined).sort(byArrival)
}

/** Arrival order: the live queue's `arrival` keys when both have one, else the tickets. */
export const byArrival = (
  a: Pick<QueueEntry, "ticket" | "arrival">,
  b: Pick<QueueEntry, "ticket" | "arrival">
): number =>
  a.arrival !== undefined && b.arrival !== undefined
    ? a.arrival < b.arrival
      ? -1
      : a.arrival > b.arrival
        ? 1
        : 0
    : a.ticket - b.ticket

/**
 * Whether a Ray actor's name is the lease's (`python/hyperloom/leasename.py` `lease_name` ends the
 * default name with `, lease <id>)`): by it, waiters see that a lease of the queue asked Ray.
 */
export const isLeaseActor = (actorName: string, leaseId: string): boolean =>
  actorName.endsWith(`, lease ${leaseId})`)

/**
 * Whether Ray shows the lease asking for the slot now: an actor of its (`isLeaseActor`), not dead,
 * that asks for the serving slot and for nothing that no alive node has in total (an actor that
 * can never be granted does not count as asking).
 */
export const leaseAsksRay = (snapshot: ClusterSnapshot, leaseId: string): boolean => {
  const alive = snapshot.nodes.filter((n) => n.state === "ALIVE")
  return snapshot.actors.some(
    (a) =>
      a.state !== "DEAD" &&
      isLeaseActor(a.name, leaseId) &&
      Object.entries(a.requiredResources).some(([k, v]) => v > 0 && isSlotResource(k)) &&
      (a.state !== "PENDING_CREATION" ||
        alive.some((n) =>
          Object.entries(a.requiredResources).every(
            ([k, v]) => v <= 0 || k.includes("_group_") || (n.resourcesTotal[k] ?? 0) >= v
          )
        ))
  )
}

/** The holders (their command runs) and the waiters in arrival order. */
export const splitQueue = (entries: ReadonlyArray<QueueEntry>) => {
  const sorted = [...entries].sort(byArrival)
  return {
    holders: sorted.filter((e) => e.holding !== undefined),
    waiters: sorted.filter((e) => e.holding === undefined)
  }
}

/** How many recent leases the estimate looks at. */
export const ESTIMATE_WINDOW = 20

/** The median of the recent leases' hold times, undefined without history. */
export const typicalHoldSec = (history: ReadonlyArray<HistoryEntry>): number | undefined => {
  const recent = [...history]
    .sort((a, b) => a.endedAt - b.endedAt)
    .slice(-ESTIMATE_WINDOW)
    .map((h) => h.heldSec)
    .filter((s) => Number.isFinite(s) && s >= 0)
    .sort((a, b) => a - b)
  if (recent.length === 0) return undefined
  const mid = Math.floor(recent.length / 2)
  return recent.length % 2 === 1 ? recent[mid]! : (recent[mid - 1]! + recent[mid]!) / 2
}

/**
 * About how long the waiter at `position` (1 = the head) still waits, from the host's recent hold
 * times: what the typical lease has left of the holder's time (the one holding longest), then a
 * typical lease per waiter ahead. Undefined without history.
 */
export const estimateWaitSec = (
  position: number,
  holders: ReadonlyArray<QueueEntry>,
  history: ReadonlyArray<HistoryEntry>,
  now: number
): number | undefined => {
  const typical = typicalHoldSec(history)
  if (typical === undefined) return undefined
  const since = holders.map((h) => h.holding?.since ?? now)
  const left = since.length === 0 ? 0 : Math.max(0, typical - (now - Math.min(...since)) / 1000)
  return left + (position - 1) * typical
}

/** How a queue entry is named to a waiter or in an error. */
export const describeEntry = (e: QueueEntry, now: number): string => {
  const since = e.holding !== undefined ? `holding for ${fmtSec((now - e.holding.since) / 1000)}` : "waiting"
  return `lease ${e.leaseId} of ${e.user} (pid ${e.pid}, ${e.gpus} GPU(s), \`${e.command}\`, ${since})`
}

export const fmtSec = (sec: number): string => {
  const s = Math.max(0, Math.round(sec))
  if (s < 60) return `${s} s`
  const m = Math.floor(s / 60)
  return m < 60 ? `${m} min ${s % 60} s` : `${Math.floor(m / 60)} h ${m % 60} min`
}

/**
 * `--wait S` passed before the lease was granted (docs/design.md#fair-queue): nothing ran. Names
 * whoever holds the slot (the queue's holders, else the holder Ray shows) and the leases still
 * ahead.
 */
export class LeaseWaitExpired extends Data.TaggedError("LeaseWaitExpired")<{
  readonly waitSec: number
  /** Who holds what the lease waits for, as an operator reads it (undefined: nobody visibly). */
  readonly holder: string | undefined
  /** How many of the host's leases were still ahead of it in the queue. */
  readonly ahead: number
}> {
  override get message(): string {
    const behind =
      this.ahead > 0 ? `; ${this.ahead} lease(s) of this host's queue were still ahead of it` : ""
    return `lease_wait_expired: the lease was not granted within --wait ${this.waitSec} s: the serving slot is held by ${this.holder ?? "nobody visible (Ray has not granted it yet)"}${behind}; nothing was run`
  }
}
