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
export const appendHistory = (file: string, entry: HistoryEntry): void => {
  const line = (h: HistoryEntry) =>
    `${JSON.stringify({ ended_at: h.endedAt, held_sec: h.heldSec, gpus: h.gpus })}\n`
  fs.appendFileSync(file, line(entry), { mode: 0o600 })
  const all = readHistory(file)
  if (all.length > 2 * HISTORY_KEEP)
    writeFileAtomicallySync(file, all.slice(-HISTORY_KEEP).map(line).join(""), 0o600)
}
