/**
 * The host's fair queue (SPEC §13 "Fair"): leases of this host that wait for the serving slot
 * are granted in arrival order, whatever order Ray would grant them in.
 *
 * A queue entry is a ticket file `<queue>/<ticket>.ticket` (its record, written before it
 * appears) on which its process holds a LockFile.ts lock (flock(2)) for as long as it is in the
 * queue: the kernel releases it when the process dies, whatever the signal, so a dead waiter or
 * holder is known at once by anyone (its lock is free) and its files are removed by whoever sees
 * it first. A ticket is made under a temporary name, locked, then renamed into place, so a ticket
 * that can be seen is always locked while its process lives. Tickets are numbered by one counter
 * under the queue's mutex (arrival order). `<ticket>.holding` marks an entry whose command runs.
 * The queue lives in the host's hyperloom directory (`/tmp/hyperloom-<uid>/queue`, 0700: only
 * the user can join, leave or write in it, so nobody else can squat it or lie through it).
 * `history.jsonl` keeps the recent leases' hold times for the estimate.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as nodePath from "node:path"
import { Clock, Effect, Layer, Ref, type Scope } from "effect"
import type { HistoryEntry, QueueEntry } from "../domain/Queue.js"
import {
  closeFd,
  flockOnce,
  heldInodes,
  holdLockFile,
  hostFile,
  inodeKey,
  type LockHeld,
  LockUnavailable,
  privateDir,
  userName
} from "./LockFile.js"

/** What a lease tells the queue about itself when it joins. */
export interface JoinInfo {
  /** What waiters are told it is (default: this process's hyperloom command line). */
  readonly command?: string | undefined
  readonly gpus: number
}

const ownCommand = () => `hyperloom ${process.argv.slice(2).join(" ")}`.trim().slice(0, 300)

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
  /** Where the queue lives (for messages). */
  readonly path: string
}

export interface HostQueueShape {
  /** Joins the queue for the enclosing scope; leaving (scope close, or death) frees the place. */
  readonly join: (info: JoinInfo) => Effect.Effect<Ticket, LockUnavailable | LockHeld, Scope.Scope>
  /** Every live entry and the recent history (dead entries are dropped as they are seen). */
  readonly view: Effect.Effect<QueueView, LockUnavailable>
}

/** How many finished leases the history keeps (it is trimmed to this once it doubles). */
const HISTORY_KEEP = 50

const pad = (n: number) => String(n).padStart(12, "0")

const errno = (e: unknown) => (e as NodeJS.ErrnoException).code ?? "error"

const parseEntry = (text: string): QueueEntry | undefined => {
  try {
    const j = JSON.parse(text) as Record<string, unknown>
    const num = (k: string) => (typeof j[k] === "number" ? (j[k] as number) : undefined)
    const ticket = num("ticket")
    const pid = num("pid")
    const uid = num("uid")
    const gpus = num("gpus")
    const joinedAt = num("joined_at")
    if (ticket === undefined || pid === undefined || uid === undefined || gpus === undefined) return undefined
    if (joinedAt === undefined || typeof j.lease_id !== "string" || typeof j.command !== "string")
      return undefined
    return {
      ticket,
      leaseId: j.lease_id,
      pid,
      uid,
      user: typeof j.user === "string" ? j.user : String(uid),
      command: j.command,
      gpus,
      joinedAt
    }
  } catch {
    return undefined
  }
}

const parseHolding = (text: string): QueueEntry["holding"] => {
  try {
    const j = JSON.parse(text) as Record<string, unknown>
    return typeof j.since === "number" ? { since: j.since, actorId: String(j.actor_id ?? "") } : undefined
  } catch {
    return undefined
  }
}

const readHistory = (file: string): ReadonlyArray<HistoryEntry> => {
  try {
    return fs
      .readFileSync(file, "utf8")
      .split("\n")
      .flatMap((line) => {
        try {
          const j = JSON.parse(line) as Record<string, unknown>
          return typeof j.ended_at === "number" && typeof j.held_sec === "number"
            ? [{ endedAt: j.ended_at, heldSec: j.held_sec, gpus: typeof j.gpus === "number" ? j.gpus : 0 }]
            : []
        } catch {
          return []
        }
      })
  } catch {
    return []
  }
}

/** Writes `body` to `path` atomically (a temporary file in the same directory, then rename). */
const writeAtomic = (path: string, body: string) => {
  const temp = `${path}.${process.pid}.tmp`
  fs.writeFileSync(temp, body, { mode: 0o600 })
  fs.renameSync(temp, path)
}

const io = (path: string) => (e: unknown) =>
  new LockUnavailable({ path, detail: `${errno(e)}: ${String(e)}` })

/** The live queue in `dir` (made 0700 if missing; refused if another user made it). */
export const makeFileQueue = (dirOf: Effect.Effect<string, LockUnavailable>): HostQueueShape => {
  const ready = Effect.flatMap(dirOf, privateDir)
  const host = os.hostname()

  /** Whether the ticket at `path` is still held by its process; removes it (and its mark) when not. */
  const alive = (path: string, held: ReadonlySet<string>) =>
    Effect.gen(function* () {
      let st: fs.Stats
      try {
        st = fs.statSync(path)
      } catch {
        return false
      }
      if (held.has(inodeKey(st))) return true
      // Not listed (a holder in another PID namespace is hidden there, or it is dead): ask the lock.
      let fd: number
      try {
        fd = fs.openSync(path, fs.constants.O_RDWR | fs.constants.O_NOFOLLOW)
      } catch {
        return false
      }
      const free = yield* flockOnce(fd, path).pipe(Effect.tapError(() => closeFd(fd)))
      if (free) {
        // Dead: its process is gone, whatever the signal. Remove it while holding its lock.
        for (const p of [path, path.replace(/\.ticket$/, ".holding")]) {
          try {
            fs.unlinkSync(p)
          } catch {
            // already removed by another waiter
          }
        }
      }
      yield* closeFd(fd)
      return !free
    })

  const scan = (dir: string) =>
    Effect.gen(function* () {
      const held = heldInodes()
      let names: Array<string>
      try {
        names = fs.readdirSync(dir).filter((n) => n.endsWith(".ticket"))
      } catch (e) {
        return yield* Effect.fail(io(dir)(e))
      }
      const entries: Array<QueueEntry> = []
      for (const name of names.sort()) {
        const path = nodePath.join(dir, name)
        let text: string
        try {
          text = fs.readFileSync(path, "utf8")
        } catch {
          continue
        }
        const entry = parseEntry(text)
        if (entry === undefined) continue
        if (!(yield* alive(path, held))) continue
        let holding: QueueEntry["holding"]
        try {
          holding = parseHolding(fs.readFileSync(path.replace(/\.ticket$/, ".holding"), "utf8"))
        } catch {
          holding = undefined
        }
        entries.push(holding === undefined ? entry : { ...entry, holding })
      }
      return entries
    })

  const historyFile = (dir: string) => nodePath.join(dir, "history.jsonl")
  const mutex = (dir: string) =>
    holdLockFile(nodePath.join(dir, ".mutex"), { waitMs: 30_000, label: `the host queue's mutex (${dir})` })

  const join = (info: JoinInfo) =>
    Effect.gen(function* () {
      const dir = yield* ready
      const now = yield* Clock.currentTimeMillis
      const taken = yield* Effect.acquireRelease(
        Effect.scoped(
          Effect.gen(function* () {
            yield* mutex(dir)
            return yield* Effect.try({
              try: () => {
                const seqFile = nodePath.join(dir, "seq")
                let last = 0
                try {
                  last = Number.parseInt(fs.readFileSync(seqFile, "utf8"), 10) || 0
                } catch {
                  // the first ticket on this host
                }
                const ticket = last + 1
                writeAtomic(seqFile, String(ticket))
                const uid = process.geteuid?.() ?? 0
                const entry: QueueEntry = {
                  ticket,
                  leaseId: `${host}-${ticket}`,
                  pid: process.pid,
                  uid,
                  user: userName(uid),
                  command: info.command ?? ownCommand(),
                  gpus: info.gpus,
                  joinedAt: now
                }
                const path = nodePath.join(dir, `${pad(ticket)}.ticket`)
                const temp = nodePath.join(dir, `.new-${pad(ticket)}-${process.pid}`)
                const fd = fs.openSync(temp, "wx", 0o600)
                fs.writeSync(
                  fd,
                  `${JSON.stringify({
                    ticket,
                    lease_id: entry.leaseId,
                    pid: entry.pid,
                    uid,
                    user: entry.user,
                    command: entry.command,
                    gpus: entry.gpus,
                    joined_at: now
                  })}\n`
                )
                return { entry, path, temp, fd }
              },
              catch: io(dir)
            })
          })
        ).pipe(
          // Locked before it can be seen: a visible ticket is always held while its process lives.
          Effect.tap((t) =>
            Effect.flatMap(flockOnce(t.fd, t.temp), (ok) =>
              ok
                ? Effect.try({ try: () => fs.renameSync(t.temp, t.path), catch: io(t.path) })
                : Effect.fail(
                    new LockUnavailable({ path: t.temp, detail: "a new ticket was locked by someone else" })
                  )
            ).pipe(Effect.tapError(() => closeFd(t.fd)))
          ),
          Effect.map((t) => ({ ...t, holdingSince: undefined as number | undefined }))
        ),
        (t) =>
          Effect.gen(function* () {
            const ended = yield* Clock.currentTimeMillis
            for (const p of [t.path.replace(/\.ticket$/, ".holding"), t.path, t.temp]) {
              try {
                fs.unlinkSync(p)
              } catch {
                // not there
              }
            }
            yield* closeFd(t.fd)
            if (t.holdingSince !== undefined)
              yield* recordLease(dir, ended, (ended - t.holdingSince) / 1000, info.gpus)
          })
      )
      const ticket: Ticket = {
        entry: taken.entry,
        look: scan(dir),
        markHolding: (actorId) =>
          Effect.flatMap(Clock.currentTimeMillis, (since) =>
            Effect.sync(() => {
              taken.holdingSince = since
              try {
                writeAtomic(
                  taken.path.replace(/\.ticket$/, ".holding"),
                  `${JSON.stringify({ since, actor_id: actorId })}\n`
                )
              } catch {
                // a full disk: the queue shows it waiting, which holds nobody back (it is not ahead)
              }
            })
          )
      }
      return ticket
    })

  /** Appends a finished lease to the history; trims it to the last HISTORY_KEEP now and then. */
  const recordLease = (dir: string, endedAt: number, heldSec: number, gpus: number) =>
    Effect.scoped(
      Effect.gen(function* () {
        yield* mutex(dir)
        const file = historyFile(dir)
        fs.appendFileSync(file, `${JSON.stringify({ ended_at: endedAt, held_sec: heldSec, gpus })}\n`, {
          mode: 0o600
        })
        const all = readHistory(file)
        if (all.length > 2 * HISTORY_KEEP) {
          writeAtomic(
            file,
            all
              .slice(-HISTORY_KEEP)
              .map((h) => `${JSON.stringify({ ended_at: h.endedAt, held_sec: h.heldSec, gpus: h.gpus })}\n`)
              .join("")
          )
        }
      })
    ).pipe(Effect.catchAll(() => Effect.void))

  const view = Effect.gen(function* () {
    const dir = yield* ready
    const entries = yield* scan(dir)
    return { entries, history: readHistory(historyFile(dir)), path: dir }
  })

  return { join, view }
}

export class HostQueue extends Effect.Service<HostQueue>()("hyperloom/services/HostQueue", {
  succeed: makeFileQueue(hostFile("queue")) as HostQueueShape
}) {}

/** The live layer: the host's queue in `/tmp/hyperloom-<uid>/queue`. */
export const layer: Layer.Layer<HostQueue> = HostQueue.Default

/** The live queue in a directory of the test's own (`<base>/hyperloom-<uid>/queue`). */
export const layerIn = (dir: string): Layer.Layer<HostQueue> =>
  Layer.succeed(HostQueue, HostQueue.make(makeFileQueue(Effect.succeed(dir))))

/**
 * An in-memory queue with the live one's order (fresh per build): entries join with the next
 * ticket and leave with their scope; `history` seeds the recent leases.
 */
export const layerTest = (history: ReadonlyArray<HistoryEntry> = []): Layer.Layer<HostQueue> =>
  Layer.effect(
    HostQueue,
    Effect.gen(function* () {
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
        path: "(in memory)"
      }))
      return HostQueue.make({ join, view })
    })
  )
