/**
 * The user's recent sweeps (docs/trust.md, docs/design.md#time-to-the-answer `--dry-run`): `sweeps.jsonl` in the user's
 * own directory (beside the host queue's `history.jsonl`) keeps, per sweep run that measured
 * something, when it ended, its session folder, its median engine start and client run with the
 * counts they rest on, and its engine (the server command's program and model); `--dry-run`
 * estimates from the sweeps of the same engine when nothing better is given.
 */
import * as fs from "node:fs"
import type { SweepRecord } from "../../domain/Sweep/HostEstimate.js"
import { appendTrimmed } from "./History.js"

/** How many sweep runs the file keeps (trimmed to this once it doubles). */
export const SWEEPS_KEEP = 20

const num = (x: unknown): x is number => typeof x === "number" && Number.isFinite(x)
const sec = (x: unknown): number | null | undefined => (x === null ? null : num(x) && x > 0 ? x : undefined)

/** The file's records (lines that do not parse are skipped; a missing or unreadable file is none). */
export const readSweeps = (file: string): ReadonlyArray<SweepRecord> => {
  let text: string
  try {
    text = fs.readFileSync(file, "utf8")
  } catch {
    return []
  }
  return text.split("\n").flatMap((line) => {
    try {
      const j = JSON.parse(line) as Record<string, unknown>
      const start = sec(j.start_sec)
      const run = sec(j.run_sec)
      if (
        !num(j.ended_at) ||
        typeof j.session !== "string" ||
        start === undefined ||
        run === undefined ||
        !num(j.engine_starts) ||
        !num(j.client_runs)
      )
        return []
      // the engine: absent in lines written before it was kept
      const engine =
        typeof j.engine_program === "string" &&
        (j.engine_model === null || typeof j.engine_model === "string")
          ? { engine: { program: j.engine_program, model: j.engine_model } }
          : {}
      return [
        {
          endedAt: j.ended_at,
          session: j.session,
          startSec: start,
          runSec: run,
          engineStarts: j.engine_starts,
          clientRuns: j.client_runs,
          ...engine
        }
      ]
    } catch {
      return []
    }
  })
}

/** Appends a sweep run's record; trims the file to the last SWEEPS_KEEP now and then (mutex held). */
export const appendSweep = (file: string, r: SweepRecord): void =>
  appendTrimmed(
    file,
    r,
    (s) => ({
      ended_at: s.endedAt,
      session: s.session,
      start_sec: s.startSec,
      run_sec: s.runSec,
      engine_starts: s.engineStarts,
      client_runs: s.clientRuns,
      ...(s.engine === undefined ? {} : { engine_program: s.engine.program, engine_model: s.engine.model })
    }),
    readSweeps,
    SWEEPS_KEEP
  )
