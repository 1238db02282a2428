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
import type { ChildProcess } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as nodePath from "node:path"
import { Clock, Effect, Layer, Ref, type Scope } from "effect"
import { byArrival, type HistoryEntry, type QueueEntry } from "../domain/Queue.js"
import { redactText } from "../domain/Redact.js"
import type { SweepRecord } from "../domain/Sweep/HostEstimate.js"
import { appendHistory, readHistory } from "./HostQueue/History.js"
import { startKeeper } from "./HostQueue/Keeper.js"
import { euid, hostPlace, placeIn, type QueuePlace } from "./HostQueue/Place.js"
import { flockHolders, uidOf } from "./HostQueue/ProcLocks.js"
import { appendSweep, readSweeps } from "./HostQueue/Sweeps.js"
import { parseHolding, parseRecord, readBounded } from "./HostQueue/Ticket.js"
import {
  closeFd,
  flockOnce,
  holdLockFile,
  inodeKey,
  type LockHeld,
  LockUnavailable,
  userName
} from "./LockFile.js"
import { Settings } from "./Settings.js"

export { hostPlace, isSharedSticky, placeIn, type QueuePlace } from "./HostQueue/Place.js"

/** What a lease tells the queue about itself when it joins. */
export interface JoinInfo {
  /** What waiters are told it is (default: this process's hyperloom command line). */
  readonly command?: string | undefined
  readonly gpus: number
}

/** What a lease that names no command is told as: the hyperloom command line (Settings' `commandLine`). */
const commandText = (commandLine: ReadonlyArray<string>) =>
  redactText(`hyperloom ${commandLine.join(" ")}`)
    .trim()
    .slice(0, 300)

/** This process's place in the queue, for the scope it was joined in. */
export interface Ticket {
  readonly entry: QueueEntry
  /** Every live entry of the queue now, in arrival order (domain/Queue.ts `blockers` says who is ahead). */
  readonly look: Effect.Effect<ReadonlyArray<QueueEntry>, LockUnavailable>
  /** Marks that its command runs (it holds the slot from now). */
  readonly markHolding: (actorId: string) => Effect.Effect<void>
}

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

/** A temporary ticket of ours left this long unlocked is a dead join's, and removed. */
const TEMP_STALE_MS = 60_000

const errno = (e: unknown) => (e as NodeJS.ErrnoException).code ?? "error"

const io = (path: string) => (e: unknown) =>
  new LockUnavailable({ path, detail: `${errno(e)}: ${String(e)}` })

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** The live queue at `placeOf` (see the module's text). */
export const makeFileQueue = (
  placeOf: Effect.Effect<QueuePlace, LockUnavailable>,
  commandLine: ReadonlyArray<string> = []
): HostQueueShape => {
  const ownCommand = commandText(commandLine)
  const host = os.hostname()

  /** Whether the ticket behind `fd` is locked by a process of `owner`; a dead one of ours is removed. */
  const alive = (
    fd: number,
    path: string,
    key: string,
    owner: number,
    held: ReturnType<typeof flockHolders>
  ): Effect.Effect<boolean, LockUnavailable> =>
    Effect.gen(function* () {
      const holders = held.get(key)
      let live: boolean
      if (holders !== undefined && holders.length > 0) {
        // The kernel names who holds it: only an exclusive lock of a process of the owner counts.
        live = holders.some((h) => h.exclusive && uidOf(h.pid) === owner)
      } else {
        // Not listed (a holder in another PID namespace is hidden there, or it is free): ask the lock.
        live = !(yield* flockOnce(fd, path))
      }
      if (!live && (owner === euid() || euid() === 0)) {
        try {
          fs.unlinkSync(path)
        } catch {
          // already removed by another waiter
        }
      }
      return live
    })

  /** The live entries; `own` is this process's ticket (its lock is ours: never tried, a flock(1) spawn each look). */
  const scan = (place: QueuePlace, own?: string) =>
    Effect.gen(function* () {
      const held = flockHolders()
      let names: Array<string>
      try {
        names = fs.readdirSync(place.tickets)
      } catch (e) {
        return yield* Effect.fail(io(place.tickets)(e))
      }
      const ticketRe = new RegExp(`^${escapeRe(place.prefix)}(\\d+)\\.(\\d+)\\.([0-9a-f]{8})$`)
      const tempRe = new RegExp(`^${escapeRe(place.prefix)}new\\.(\\d+)\\.`)
      const now = Date.now()
      const entries: Array<QueueEntry> = []
      for (const name of names) {
        const path = nodePath.join(place.tickets, name)
        const temp = tempRe.exec(name)
        if (temp !== null) {
          // A join that died before its ticket appeared: ours, unlocked and old.
          if (Number(temp[1]) === euid()) {
            try {
              const st = fs.lstatSync(path)
              if (st.isFile() && now - st.ctimeMs > TEMP_STALE_MS && !held.has(inodeKey(st)))
                fs.unlinkSync(path)
            } catch {
              // gone
            }
          }
          continue
        }
        const m = ticketRe.exec(name)
        if (m === null) continue
        const owner = Number(m[1])
        const pid = Number(m[2])
        const leaseId = `${host}-${owner}-${pid}-${m[3]}`
        let fd: number
        try {
          // Never a symlink, never blocking on a FIFO; what it is is asked of the open descriptor.
          fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
        } catch {
          continue
        }
        const counted = yield* Effect.gen(function* () {
          const st = fs.fstatSync(fd, { bigint: true })
          if (!st.isFile() || Number(st.uid) !== owner) return undefined
          const text = readBounded(fd)
          if (text === undefined) return undefined
          const lines = text.split("\n")
          const record = parseRecord(lines[0] ?? "", { uid: owner, pid, leaseId })
          if (record === undefined) return undefined
          if (leaseId !== own && !(yield* alive(fd, path, inodeKey(fs.fstatSync(fd)), owner, held)))
            return undefined
          const holding = parseHolding(lines[1])
          const { joinedUs, ...entry } = record
          return {
            ...entry,
            ticket: Number(st.ctimeNs / 1000n),
            arrival: `${String(st.ctimeNs).padStart(20, "0")}.${String(joinedUs).padStart(17, "0")}.${name}`,
            ...(holding !== undefined ? { holding } : {})
          } satisfies QueueEntry
        }).pipe(
          Effect.catchAllDefect(() => Effect.succeed(undefined)),
          Effect.ensuring(closeFd(fd))
        )
        if (counted !== undefined) entries.push(counted)
      }
      return entries.sort(byArrival)
    })

  const historyFile = (place: QueuePlace) => nodePath.join(place.own, "history.jsonl")
  const mutex = (place: QueuePlace) =>
    holdLockFile(nodePath.join(place.own, ".mutex"), {
      waitMs: 30_000,
      label: `the host queue's history mutex (${place.own})`,
      what: ownCommand
    })

  const join = (info: JoinInfo) =>
    Effect.gen(function* () {
      const place = yield* placeOf
      const now = yield* Clock.currentTimeMillis
      const joinedUs = Number((yield* Clock.currentTimeNanos) / 1000n)
      const uid = euid()
      const rand = crypto.randomBytes(4).toString("hex")
      const name = `${place.prefix}${uid}.${process.pid}.${rand}`
      const path = nodePath.join(place.tickets, name)
      const temp = nodePath.join(place.tickets, `${place.prefix}new.${uid}.${process.pid}.${rand}`)
      const entry: QueueEntry = {
        ticket: 0,
        leaseId: `${host}-${uid}-${process.pid}-${rand}`,
        pid: process.pid,
        uid,
        user: userName(uid),
        // The ticket is world-readable (`hyperloom queue` shows it to every user): no secrets in it.
        command: info.command === undefined ? ownCommand : redactText(info.command).slice(0, 300),
        gpus: info.gpus,
        joinedAt: now
      }
      const record = `${JSON.stringify({
        lease_id: entry.leaseId,
        pid: entry.pid,
        uid,
        user: entry.user,
        command: entry.command,
        gpus: entry.gpus,
        joined_at: now,
        joined_us: joinedUs
      })}\n`
      const removeAll = (fd: number | undefined, keeper: ChildProcess | undefined) =>
        Effect.sync(() => {
          for (const p of [path, temp]) {
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
      const taken = yield* Effect.acquireRelease(
        Effect.gen(function* () {
          const fd = yield* Effect.try({
            try: () => {
              // Ours alone until it is locked (0600): nobody else can open it and take its lock first.
              const fd = fs.openSync(
                temp,
                fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW,
                0o600
              )
              fs.writeSync(fd, record)
              return fd
            },
            catch: io(temp)
          })
          const keeper = yield* startKeeper(fd, temp).pipe(Effect.tapError(() => removeAll(fd, undefined)))
          // Locked before it can be seen: a visible ticket is always held while its lease lives.
          const st = yield* Effect.try({
            try: () => {
              fs.fchmodSync(fd, 0o644)
              fs.renameSync(temp, path)
              return fs.fstatSync(fd, { bigint: true })
            },
            catch: io(path)
          }).pipe(Effect.tapError(() => removeAll(fd, keeper)))
          return { fd, keeper, st, holdingSince: undefined as number | undefined }
        }),
        (t) =>
          Effect.gen(function* () {
            const ended = yield* Clock.currentTimeMillis
            yield* removeAll(t.fd, t.keeper)
            if (t.holdingSince !== undefined)
              yield* recordLease(place, ended, (ended - t.holdingSince) / 1000, info.gpus)
          })
      )
      const mine: QueueEntry = {
        ...entry,
        ticket: Number(taken.st.ctimeNs / 1000n),
        arrival: `${String(taken.st.ctimeNs).padStart(20, "0")}.${String(joinedUs).padStart(17, "0")}.${name}`
      }
      const ticket: Ticket = {
        entry: mine,
        look: Effect.flatMap(scan(place, mine.leaseId), (entries) =>
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
      }
      return ticket
    })

  /** Appends a finished lease to the history; trims it to the last HISTORY_KEEP now and then. */
  const recordLease = (place: QueuePlace, endedAt: number, heldSec: number, gpus: number) =>
    Effect.scoped(
      Effect.gen(function* () {
        yield* mutex(place)
        appendHistory(historyFile(place), { endedAt, heldSec, gpus })
      })
    ).pipe(Effect.catchAll(() => Effect.void))

  const view = Effect.gen(function* () {
    const place = yield* placeOf
    const entries = yield* scan(place)
    return {
      entries,
      history: readHistory(historyFile(place)),
      path: nodePath.join(place.tickets, `${place.prefix}*`),
      shared: place.shared
    }
  })

  const sweepsFile = (place: QueuePlace) => nodePath.join(place.own, "sweeps.jsonl")
  const recordSweep = (record: SweepRecord) =>
    Effect.scoped(
      Effect.gen(function* () {
        const place = yield* placeOf
        yield* mutex(place)
        appendSweep(sweepsFile(place), record)
      })
    ).pipe(Effect.catchAllCause(() => Effect.void))
  const recentSweeps = Effect.map(placeOf, (place) => readSweeps(sweepsFile(place))).pipe(
    Effect.orElseSucceed((): ReadonlyArray<SweepRecord> => [])
  )

  return { join, view, recordSweep, recentSweeps }
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
