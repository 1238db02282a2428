/**
 * Who is in the host's queue (docs/design.md#fair-queue): the tickets that count, in arrival
 * order. A ticket counts only when it is a regular file (never a symlink) owned by the uid its
 * name says, its record parses and names the same lease, and its lock is held by a process of its
 * owner. Dead tickets of ours, and temporary ones a dead join left, are removed as they are seen.
 */
import * as fs from "node:fs"
import * as nodePath from "node:path"
import { Effect } from "effect"
import { byArrival, type QueueEntry } from "../../domain/Queue.js"
import { closeFd, flockOnce, inodeKey, type LockUnavailable } from "../LockFile.js"
import { euid, type QueuePlace } from "./Place.js"
import { flockHolders, uidOf } from "./ProcLocks.js"
import {
  arrivalOf,
  ioFailure,
  leaseIdOf,
  namePatterns,
  parseHolding,
  parseRecord,
  readBounded
} from "./Ticket.js"

/** A temporary ticket of ours left this long unlocked is a dead join's, and removed. */
const TEMP_STALE_MS = 60_000

type Held = ReturnType<typeof flockHolders>

/** Whether the ticket behind `fd` is locked by a process of `owner`; a dead one of ours is removed. */
const alive = (
  fd: number,
  path: string,
  key: string,
  owner: number,
  held: Held
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

/** Removes a temporary ticket of ours a dead join left (unlocked and older than TEMP_STALE_MS). */
const dropStaleTemp = (path: string, uid: number, held: Held, now: number) => {
  if (uid !== euid()) return
  try {
    const st = fs.lstatSync(path)
    if (st.isFile() && now - st.ctimeMs > TEMP_STALE_MS && !held.has(inodeKey(st))) fs.unlinkSync(path)
  } catch {
    // gone
  }
}

/** The ticket `name` as an entry when it counts; `own` is this process's lease (its lock is ours: never tried). */
const countTicket = (
  place: QueuePlace,
  name: string,
  id: { owner: number; pid: number; leaseId: string },
  held: Held,
  own: string | undefined
): Effect.Effect<QueueEntry | undefined, LockUnavailable> => {
  const path = nodePath.join(place.tickets, name)
  let fd: number
  try {
    // Never a symlink, never blocking on a FIFO; what it is is asked of the open descriptor.
    fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
  } catch {
    return Effect.succeed(undefined)
  }
  return Effect.gen(function* () {
    const st = fs.fstatSync(fd, { bigint: true })
    if (!st.isFile() || Number(st.uid) !== id.owner) return undefined
    const text = readBounded(fd)
    if (text === undefined) return undefined
    const lines = text.split("\n")
    const record = parseRecord(lines[0] ?? "", { uid: id.owner, pid: id.pid, leaseId: id.leaseId })
    if (record === undefined) return undefined
    if (id.leaseId !== own && !(yield* alive(fd, path, inodeKey(fs.fstatSync(fd)), id.owner, held)))
      return undefined
    const holding = parseHolding(lines[1])
    const { joinedUs, ...entry } = record
    return {
      ...entry,
      ticket: Number(st.ctimeNs / 1000n),
      arrival: arrivalOf(st.ctimeNs, joinedUs, name),
      ...(holding !== undefined ? { holding } : {})
    } satisfies QueueEntry
  }).pipe(
    Effect.catchAllDefect(() => Effect.succeed(undefined)),
    Effect.ensuring(closeFd(fd))
  )
}

/** The live entries of the queue at `place` on `host`, in arrival order; `own` is this process's lease. */
export const scanTickets = (place: QueuePlace, host: string, own?: string) =>
  Effect.gen(function* () {
    const held = flockHolders()
    const names = yield* Effect.try({
      try: () => fs.readdirSync(place.tickets),
      catch: ioFailure(place.tickets)
    })
    const patterns = namePatterns(place.prefix)
    const now = Date.now()
    const entries: Array<QueueEntry> = []
    for (const name of names) {
      const temp = patterns.temp.exec(name)
      if (temp !== null) {
        // A join that died before its ticket appeared.
        dropStaleTemp(nodePath.join(place.tickets, name), Number(temp[1]), held, now)
        continue
      }
      const m = patterns.ticket.exec(name)
      if (m === null) continue
      const owner = Number(m[1])
      const pid = Number(m[2])
      const id = { owner, pid, leaseId: leaseIdOf(host, owner, pid, m[3] ?? "") }
      const counted = yield* countTicket(place, name, id, held, own)
      if (counted !== undefined) entries.push(counted)
    }
    return entries.sort(byArrival)
  })
