/**
 * A host queue ticket's contents (docs/design.md#fair-queue): its first line the record of the
 * lease that joined (parsed only when it names the lease the ticket's name says), a second line
 * once its command runs (`{"since","actor_id"}`), read up to RECORD_MAX_BYTES.
 */
import * as fs from "node:fs"
import type { QueueEntry } from "../../domain/Queue.js"
import { redactText } from "../../domain/Redact.js"
import { userName } from "../LockFile.js"

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
