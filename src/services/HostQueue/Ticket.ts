/**
 * A host queue ticket's format (docs/design.md#fair-queue): its name
 * (`<prefix><uid>.<pid>.<random>`, made under `<prefix>new.<uid>.<pid>.<random>`), its place in
 * the order (`arrivalOf`), and its contents: its first line the record of the lease that joined
 * (parsed only when it names the lease the ticket's name says), a second line once its command
 * runs (`{"since","actor_id"}`), read up to RECORD_MAX_BYTES.
 */
import * as fs from "node:fs"
import * as nodePath from "node:path"
import type { QueueEntry } from "../../domain/Queue.js"
import { redactText } from "../../domain/Redact.js"
import { LockUnavailable, userName } from "../LockFile.js"
import type { QueuePlace } from "./Place.js"

/** A failed file operation on the queue at `path`, as the queue's error. */
export const ioFailure = (path: string) => (e: unknown) =>
  new LockUnavailable({ path, detail: `${(e as NodeJS.ErrnoException).code ?? "error"}: ${String(e)}` })

/** A lease's id: its host, and the uid, pid and random part its ticket's name holds. */
export const leaseIdOf = (host: string, uid: number, pid: number, rand: string) =>
  `${host}-${uid}-${pid}-${rand}`

/** The paths of a ticket: where it is seen (`path`, its `name`) and where it is made (`temp`). */
export const ticketPaths = (place: QueuePlace, uid: number, pid: number, rand: string) => {
  const name = `${place.prefix}${uid}.${pid}.${rand}`
  return {
    name,
    path: nodePath.join(place.tickets, name),
    temp: nodePath.join(place.tickets, `${place.prefix}new.${uid}.${pid}.${rand}`)
  }
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** A ticket's name (uid, pid, random part) and a temporary one's (uid), for names starting with `prefix`. */
export const namePatterns = (prefix: string) => ({
  ticket: new RegExp(`^${escapeRe(prefix)}(\\d+)\\.(\\d+)\\.([0-9a-f]{8})$`),
  temp: new RegExp(`^${escapeRe(prefix)}new\\.(\\d+)\\.`)
})

/**
 * A ticket's place in the order: its ctime (set by the kernel at the rename), then its record's
 * join time, then its name — as one string that sorts as they do.
 */
export const arrivalOf = (ctimeNs: bigint, joinedUs: number, name: string) =>
  `${String(ctimeNs).padStart(20, "0")}.${String(joinedUs).padStart(17, "0")}.${name}`

/** A ticket's record, as its first line. */
export const recordLine = (entry: Omit<QueueEntry, "ticket" | "arrival">, joinedUs: number) =>
  `${JSON.stringify({
    lease_id: entry.leaseId,
    pid: entry.pid,
    uid: entry.uid,
    user: entry.user,
    command: entry.command,
    gpus: entry.gpus,
    joined_at: entry.joinedAt,
    joined_us: joinedUs
  })}\n`

/** A ticket's record is read up to this many bytes (a larger one does not count). */
export const RECORD_MAX_BYTES = 64 * 1024

/** The first line of a ticket as its record, when it names the lease its name says. */
export const parseRecord = (
  line: string,
  want: { uid: number; pid: number; leaseId: string }
): (Omit<QueueEntry, "ticket" | "arrival"> & { joinedUs: number }) | undefined => {
  try {
    const j = JSON.parse(line) as Record<string, unknown>
    const num = (k: string) =>
      typeof j[k] === "number" && Number.isFinite(j[k]) ? (j[k] as number) : undefined
    const [pid, uid, gpus, joinedAt, joinedUs] = ["pid", "uid", "gpus", "joined_at", "joined_us"].map(num)
    if (pid !== want.pid || uid !== want.uid || j.lease_id !== want.leaseId) return undefined
    if (gpus === undefined || joinedAt === undefined || joinedUs === undefined) return undefined
    if (typeof j.command !== "string") return undefined
    return {
      leaseId: want.leaseId,
      pid,
      uid,
      user: userName(uid),
      command: redactText(j.command).slice(0, 300),
      gpus,
      joinedAt,
      joinedUs
    }
  } catch {
    return undefined
  }
}

export const parseHolding = (line: string | undefined): QueueEntry["holding"] => {
  try {
    const j = JSON.parse(line ?? "") as Record<string, unknown>
    return typeof j.since === "number" ? { since: j.since, actorId: String(j.actor_id ?? "") } : undefined
  } catch {
    return undefined
  }
}

/** Up to RECORD_MAX_BYTES of the regular file behind `fd` (undefined when larger). */
export const readBounded = (fd: number): string | undefined => {
  const buf = Buffer.alloc(RECORD_MAX_BYTES + 1)
  let got = 0
  for (;;) {
    const n = fs.readSync(fd, buf, got, buf.length - got, got)
    if (n === 0) break
    got += n
    if (got > RECORD_MAX_BYTES) return undefined
  }
  return buf.subarray(0, got).toString("utf8")
}
