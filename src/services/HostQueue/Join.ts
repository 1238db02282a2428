/**
 * Joining the host's queue and leaving it (docs/design.md#fair-queue): a ticket is made
 * O_CREAT|O_EXCL|O_NOFOLLOW 0600 under a temporary name, its record written, locked by a keeper,
 * then made 0644 and renamed into place, so a ticket that can be seen is always locked while its
 * lease lives. Leaving removes it, ends its keeper and records the lease if it held the slot.
 */
import type { ChildProcess } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import { Clock, Effect, type Scope } from "effect"
import type { QueueEntry } from "../../domain/Queue.js"
import { redactText } from "../../domain/Redact.js"
import { type LockHeld, LockUnavailable, userName } from "../LockFile.js"
import { startKeeper } from "./Keeper.js"
import { euid, type QueuePlace } from "./Place.js"
import { recordLease } from "./Records.js"
import { scanTickets } from "./Scan.js"
import { arrivalOf, ioFailure, leaseIdOf, recordLine, ticketPaths } from "./Ticket.js"

/** What a lease tells the queue about itself when it joins. */
export interface JoinInfo {
  /** What waiters are told it is (default: this process's hyperloom command line). */
  readonly command?: string | undefined
  readonly gpus: number
}

/** This process's place in the queue, for the scope it was joined in. */
export interface Ticket {
  readonly entry: QueueEntry
  /** Every live entry of the queue now, in arrival order (domain/Queue.ts `blockers` says who is ahead). */
  readonly look: Effect.Effect<ReadonlyArray<QueueEntry>, LockUnavailable>
  /** Marks that its command runs (it holds the slot from now). */
  readonly markHolding: (actorId: string) => Effect.Effect<void>
}

type Paths = ReturnType<typeof ticketPaths>

/** A ticket that is in place: its descriptor, its keeper, its stat, and since when it holds the slot. */
interface Taken {
  readonly fd: number
  readonly keeper: ChildProcess
  readonly st: fs.BigIntStats
  holdingSince: number | undefined
}

/** Removes the ticket (either name), ends its keeper and closes its descriptor; each step may have nothing to do. */
const removeTicket = (paths: Paths, fd: number | undefined, keeper: ChildProcess | undefined) =>
  Effect.sync(() => {
    for (const p of [paths.path, paths.temp]) {
      try {
        fs.unlinkSync(p)
      } catch {
        // not there
      }
    }
    if (keeper?.pid !== undefined) {
      try {
        process.kill(keeper.pid, "SIGKILL")
      } catch {
        // already gone
      }
    }
    if (fd !== undefined) {
      try {
        fs.closeSync(fd)
      } catch {
        // closed
      }
    }
  })

/** Writes the ticket under its temporary name, has it locked, then shows it (see the module's text). */
const placeTicket = (paths: Paths, record: string): Effect.Effect<Taken, LockUnavailable | LockHeld> =>
  Effect.gen(function* () {
    const fd = yield* Effect.try({
      try: () => {
        // Ours alone until it is locked (0600): nobody else can open it and take its lock first.
        const fd = fs.openSync(
          paths.temp,
          fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW,
          0o600
        )
        fs.writeSync(fd, record)
        return fd
      },
      catch: ioFailure(paths.temp)
    })
    const keeper = yield* startKeeper(fd, paths.temp).pipe(
      Effect.tapError(() => removeTicket(paths, fd, undefined))
    )
    // Locked before it can be seen: a visible ticket is always held while its lease lives.
    const st = yield* Effect.try({
      try: () => {
        fs.fchmodSync(fd, 0o644)
        fs.renameSync(paths.temp, paths.path)
        return fs.fstatSync(fd, { bigint: true })
      },
      catch: ioFailure(paths.path)
    }).pipe(Effect.tapError(() => removeTicket(paths, fd, keeper)))
    return { fd, keeper, st, holdingSince: undefined }
  })

/** The handle of a ticket in place: looking at the queue (failing once ours is lost), marking that it holds. */
const handle = (place: QueuePlace, host: string, mine: QueueEntry, path: string, taken: Taken): Ticket => ({
  entry: mine,
  look: Effect.flatMap(scanTickets(place, host, mine.leaseId), (entries) =>
    entries.some((e) => e.leaseId === mine.leaseId)
      ? Effect.succeed(entries)
      : Effect.fail(
          new LockUnavailable({
            path,
            detail: `this lease's place in the host's queue was lost (its lock keeper, pid ${taken.keeper.pid}, ended, or the ticket was removed)`
          })
        )
  ),
  markHolding: (actorId) =>
    Effect.flatMap(Clock.currentTimeMillis, (since) =>
      Effect.sync(() => {
        taken.holdingSince = since
        try {
          const line = Buffer.from(`${JSON.stringify({ since, actor_id: actorId })}\n`)
          fs.writeSync(taken.fd, line, 0, line.length, fs.fstatSync(taken.fd).size)
        } catch {
          // a full disk: the queue shows it waiting, which holds nobody back behind it for long
        }
      })
    )
})

/**
 * Joins the queue at `place` on `host` for the enclosing scope; `ownCommand` is what the lease is
 * told as when `info` names no command. Leaving (scope close, or death) frees the place.
 */
export const joinQueue = (
  place: QueuePlace,
  host: string,
  ownCommand: string,
  info: JoinInfo
): Effect.Effect<Ticket, LockUnavailable | LockHeld, Scope.Scope> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const joinedUs = Number((yield* Clock.currentTimeNanos) / 1000n)
    const uid = euid()
    const rand = crypto.randomBytes(4).toString("hex")
    const paths = ticketPaths(place, uid, process.pid, rand)
    const entry: QueueEntry = {
      ticket: 0,
      leaseId: leaseIdOf(host, uid, process.pid, rand),
      pid: process.pid,
      uid,
      user: userName(uid),
      // The ticket is world-readable (`hyperloom queue` shows it to every user): no secrets in it.
      command: info.command === undefined ? ownCommand : redactText(info.command).slice(0, 300),
      gpus: info.gpus,
      joinedAt: now
    }
    const taken = yield* Effect.acquireRelease(placeTicket(paths, recordLine(entry, joinedUs)), (t) =>
      Effect.gen(function* () {
        const ended = yield* Clock.currentTimeMillis
        yield* removeTicket(paths, t.fd, t.keeper)
        if (t.holdingSince !== undefined)
          yield* recordLease(place, ownCommand, {
            endedAt: ended,
            heldSec: (ended - t.holdingSince) / 1000,
            gpus: info.gpus
          })
      })
    )
    const mine: QueueEntry = {
      ...entry,
      ticket: Number(taken.st.ctimeNs / 1000n),
      arrival: arrivalOf(taken.st.ctimeNs, joinedUs, paths.name)
    }
    return handle(place, host, mine, paths.path, taken)
  })
