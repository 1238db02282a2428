/**
 * Who holds a flock(2) lock, from /proc: the host queue's tickets are alive while a process of
 * their owner holds their lock (docs/design.md#fair-queue).
 */
import * as fs from "node:fs"

/** The flock(2) holders /proc/locks shows, per `major:minor:inode`: pid and whether exclusive. */
export const flockHolders = (): ReadonlyMap<string, ReadonlyArray<{ pid: number; exclusive: boolean }>> => {
  const held = new Map<string, Array<{ pid: number; exclusive: boolean }>>()
  try {
    for (const line of fs.readFileSync("/proc/locks", "utf8").split("\n")) {
      // "1: FLOCK  ADVISORY  WRITE 123 fe:00:456 0 EOF"; "1: -> FLOCK …" lines are blocked waiters.
      const f = line.trim().split(/\s+/)
      if (f[1] !== "FLOCK") continue
      const id = f[5]?.split(":")
      const pid = Number(f[4])
      if (id?.length !== 3 || !Number.isInteger(pid)) continue
      const key = `${Number.parseInt(id[0]!, 16)}:${Number.parseInt(id[1]!, 16)}:${id[2]}`
      held.set(key, [...(held.get(key) ?? []), { pid, exclusive: f[3] === "WRITE" }])
    }
  } catch {
    // no /proc/locks: every question is asked with a try of the lock instead
  }
  return held
}

/** The real uid of a live process (/proc/<pid>/status), undefined when it is gone. */
export const uidOf = (pid: number): number | undefined => {
  try {
    const m = /^Uid:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))
    return m === null ? undefined : Number(m[1])
  } catch {
    return undefined
  }
}
