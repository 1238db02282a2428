/**
 * The host queue's history (docs/design.md#fair-queue): `history.jsonl` in the user's own
 * directory keeps the user's recent leases (when each ended, how long it held, its GPUs) for the
 * wait estimate.
 */
import * as fs from "node:fs"
import type { HistoryEntry } from "../../domain/Queue.js"
import { writeFileAtomicallySync } from "../AtomicWrite.js"

/** How many finished leases the history keeps (it is trimmed to this once it doubles). */
export const HISTORY_KEEP = 50

/** The history's entries (lines that do not parse are skipped; a missing file is none). */
export const readHistory = (file: string): ReadonlyArray<HistoryEntry> => {
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

/**
 * Appends a finished lease to the history; trims it to the last HISTORY_KEEP once it holds twice
 * as many (the caller holds the history's mutex).
 */
export const appendHistory = (file: string, entry: HistoryEntry): void =>
  appendTrimmed(
    file,
    entry,
    (h) => ({ ended_at: h.endedAt, held_sec: h.heldSec, gpus: h.gpus }),
    readHistory,
    HISTORY_KEEP
  )

/**
 * Appends one JSON line to a user's jsonl file (0600); once `read` finds more than twice `keep`
 * entries, rewrites it atomically with the last `keep` (the caller holds the file's mutex).
 */
export const appendTrimmed = <A>(
  file: string,
  entry: A,
  json: (a: A) => unknown,
  read: (file: string) => ReadonlyArray<A>,
  keep: number
): void => {
  const line = (a: A) => `${JSON.stringify(json(a))}\n`
  fs.appendFileSync(file, line(entry), { mode: 0o600 })
  const all = read(file)
  if (all.length > 2 * keep) writeFileAtomicallySync(file, all.slice(-keep).map(line).join(""), 0o600)
}
