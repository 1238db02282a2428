/**
 * The host's fair queue (docs/design.md#fair-queue): leases of this host that wait for the serving slot
 * are granted in arrival order, whatever order Ray would grant them in, across the host's users.
 *
 * A queue entry is a ticket file in a directory every user can write and nobody can tamper with
 * others' names in: `/tmp` itself, checked to be root's, sticky and not a symlink (`sharedPlace`;
 * else the user's own `/tmp/hyperloom-<uid>/queue`, 0700, with one warning line). A ticket is
 * `.hyperloom-queue.<uid>.<pid>.<random>`: made O_CREAT|O_EXCL|O_NOFOLLOW 0600 under a temporary
 * name, its record (lease id, pid, user, command, GPUs, when it joined) written, locked, then made
 * 0644 and renamed into place, so a ticket that can be seen is always locked while its lease
 * lives; the sticky bit lets only its owner remove or rename it. The lock is an exclusive
 * flock(2) held by a keeper process of the lease's own (`flock -F … cat`: flock(1) execs `cat`,
 * which reads the lease's pipe and so ends when the lease ends, however it ends), so /proc/locks
 * names a live holder whose uid can be checked. A ticket counts only when it is a regular file
 * (never a symlink), owned by the uid its name says, its record parses and names the same lease,
 * and its lock is held by a process of its owner (a foreign user who keeps a dead ticket locked,
 * which flock allows on a read-only descriptor, does not keep it alive). Arrival order is the
 * ticket's ctime (set by the kernel at the rename; nobody can set it earlier), then its record's
 * join time within one clock tick, then its name: never a number a user writes. A holder appends
 * a second line (`{"since","actor_id"}`) to its ticket when its command runs.
 * `history.jsonl` (in the user's own directory) keeps the user's recent leases for the estimate.
 */
import * as os from "node:os"
import * as nodePath from "node:path"
import { Clock, Effect, Layer, Ref, type Scope } from "effect"
import type { HistoryEntry, QueueEntry } from "../domain/Queue.js"
import { redactText } from "../domain/Redact.js"
import type { SweepRecord } from "../domain/Sweep/HostEstimate.js"
import { type JoinInfo, joinQueue, type Ticket } from "./HostQueue/Join.js"
import { hostPlace, placeIn, type QueuePlace } from "./HostQueue/Place.js"
import { leaseHistory, recentSweepsIn, recordSweepIn } from "./HostQueue/Records.js"
import { scanTickets } from "./HostQueue/Scan.js"
import type { LockHeld, LockUnavailable } from "./LockFile.js"
import { Settings } from "./Settings.js"

export type { JoinInfo, Ticket } from "./HostQueue/Join.js"
export { hostPlace, isSharedSticky, placeIn, type QueuePlace } from "./HostQueue/Place.js"

/** What a lease that names no command is told as: the hyperloom command line (Settings' `commandLine`). */
const commandText = (commandLine: ReadonlyArray<string>) =>
  redactText(`hyperloom ${commandLine.join(" ")}`)
    .trim()
    .slice(0, 300)

export interface QueueView {
  /** Every live entry, in arrival order. */
  readonly entries: ReadonlyArray<QueueEntry>
  readonly history: ReadonlyArray<HistoryEntry>
  /** Where the queue lives (for messages): its tickets' path pattern. */
  readonly path: string
  /** Whether every user of the host meets in it (false: this user's own queue, the fallback). */
  readonly shared: boolean
}

export interface HostQueueShape {
  /** Joins the queue for the enclosing scope; leaving (scope close, or death) frees the place. */
  readonly join: (info: JoinInfo) => Effect.Effect<Ticket, LockUnavailable | LockHeld, Scope.Scope>
  /** Every live entry and the recent history (dead entries are dropped as they are seen). */
  readonly view: Effect.Effect<QueueView, LockUnavailable>
  /** Appends a sweep run's end to the user's recent sweeps (`sweeps.jsonl`); never fails. */
  readonly recordSweep: (record: SweepRecord) => Effect.Effect<void>
  /** The user's recent sweeps on this host (a missing or corrupt file is none); never fails. */
  readonly recentSweeps: Effect.Effect<ReadonlyArray<SweepRecord>>
}

/**
 * The live queue at `placeOf` (see the module's text): joining and leaving are HostQueue/Join.ts,
 * who is in it HostQueue/Scan.ts, the user's records HostQueue/Records.ts.
 */
export const makeFileQueue = (
  placeOf: Effect.Effect<QueuePlace, LockUnavailable>,
  commandLine: ReadonlyArray<string> = []
): HostQueueShape => {
  const ownCommand = commandText(commandLine)
  const host = os.hostname()
  return {
    join: (info) => Effect.flatMap(placeOf, (place) => joinQueue(place, host, ownCommand, info)),
    view: Effect.gen(function* () {
      const place = yield* placeOf
      const entries = yield* scanTickets(place, host)
      return {
        entries,
        history: leaseHistory(place),
        path: nodePath.join(place.tickets, `${place.prefix}*`),
        shared: place.shared
      }
    }),
    recordSweep: (record) => recordSweepIn(placeOf, ownCommand, record),
    recentSweeps: recentSweepsIn(placeOf)
  }
}

export class HostQueue extends Effect.Service<HostQueue>()("hyperloom/services/HostQueue", {
  effect: Effect.map(
    Settings,
    (settings) => makeFileQueue(hostPlace(), settings.commandLine) as HostQueueShape
  )
}) {}

/** The live layer: the host's queue in `/tmp` (shared by the host's users; see `hostPlace`). */
export const layer: Layer.Layer<HostQueue, never, Settings> = HostQueue.Default

/** The live queue in a directory of the test's own (`placeIn`). */
export const layerIn = (dir: string): Layer.Layer<HostQueue, never, Settings> =>
  Layer.effect(
    HostQueue,
    Effect.map(Settings, (settings) => HostQueue.make(makeFileQueue(placeIn(dir), settings.commandLine)))
  )

/**
 * An in-memory queue with the live one's order (fresh per build): entries join with the next
 * ticket and leave with their scope; `history` seeds the recent leases.
 */
export const layerTest = (
  history: ReadonlyArray<HistoryEntry> = [],
  sweeps: ReadonlyArray<SweepRecord> = []
): Layer.Layer<HostQueue> =>
  Layer.effect(
    HostQueue,
    Effect.gen(function* () {
      const recent = yield* Ref.make<ReadonlyArray<SweepRecord>>(sweeps)
      const entries = yield* Ref.make<ReadonlyArray<QueueEntry>>([])
      const past = yield* Ref.make<ReadonlyArray<HistoryEntry>>(history)
      let next = 0
      const join = (info: JoinInfo) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const ticket = ++next
          const entry: QueueEntry = {
            ticket,
            leaseId: `test-${ticket}`,
            pid: process.pid,
            uid: 0,
            user: "test",
            command: info.command ?? "test lease",
            gpus: info.gpus,
            joinedAt: now
          }
          yield* Effect.acquireRelease(
            Ref.update(entries, (es) => [...es, entry]),
            () =>
              Effect.gen(function* () {
                const ended = yield* Clock.currentTimeMillis
                const mine = (yield* Ref.get(entries)).find((e) => e.ticket === ticket)
                if (mine?.holding !== undefined) {
                  const since = mine.holding.since
                  yield* Ref.update(past, (h) => [
                    ...h,
                    { endedAt: ended, heldSec: (ended - since) / 1000, gpus: info.gpus }
                  ])
                }
                yield* Ref.update(entries, (es) => es.filter((e) => e.ticket !== ticket))
              })
          )
          return {
            entry,
            look: Ref.get(entries),
            markHolding: (actorId: string) =>
              Effect.flatMap(Clock.currentTimeMillis, (since) =>
                Ref.update(entries, (es) =>
                  es.map((e) => (e.ticket === ticket ? { ...e, holding: { since, actorId } } : e))
                )
              )
          } satisfies Ticket
        })
      const view = Effect.map(Effect.zip(Ref.get(entries), Ref.get(past)), ([es, h]) => ({
        entries: es,
        history: h,
        path: "(in memory)",
        shared: true
      }))
      return HostQueue.make({
        join,
        view,
        recordSweep: (r: SweepRecord) => Ref.update(recent, (rs) => [...rs, r]),
        recentSweeps: Ref.get(recent)
      })
    })
  )
