/**
 * Faults injected into real repairs, shared by test/ray/repair-faults.test.ts and
 * bench/repair-faults.mjs (through the bundled CLI): SIGKILL of the repairing process at a named
 * step, and two `hyperloom ray ensure` racing on one slot-less head with the moments each one is
 * between its final guard check and the restarted head (timed as its log lines arrive).
 */
import { spawn } from "node:child_process"
import { cleanEnv, cliPath } from "./cli.js"
import { projectRoot } from "./ray.js"

export type Step = "before_stop" | "before_start" | "before_slot"

/** Logged right after the final guard check, right before `ray stop --force`. */
export const REPAIR_LOG = "Ray head has no serving_slot resource; restarting the local head with it"
/** Logged once the restarted head shows the slot (`Ray head restarted at <address> with serving_slot`). */
export const RESTARTED_LOG = "Ray head restarted at"

export interface Run {
  readonly pid: number
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stderr: string
  /** When (ms since the epoch) each stderr line arrived. */
  readonly lines: ReadonlyArray<{ readonly at: number; readonly text: string }>
}

const startEnsure = (env: Record<string, string>, onLine?: (text: string, kill: () => void) => void) =>
  new Promise<Run>((resolve) => {
    const child = spawn(process.execPath, [cliPath, "ray", "ensure", "--json"], {
      env: cleanEnv(env),
      cwd: projectRoot,
      stdio: ["ignore", "pipe", "pipe"]
    })
    const lines: Array<{ at: number; text: string }> = []
    let stderr = ""
    let partial = ""
    child.stdout.resume()
    child.stderr.setEncoding("utf8")
    child.stderr.on("data", (d: string) => {
      stderr += d
      partial += d
      let nl = partial.indexOf("\n")
      while (nl >= 0) {
        const text = partial.slice(0, nl)
        partial = partial.slice(nl + 1)
        lines.push({ at: Date.now(), text })
        onLine?.(text, () => child.kill("SIGKILL"))
        nl = partial.indexOf("\n")
      }
    })
    const timer = setTimeout(() => child.kill("SIGKILL"), 180_000)
    child.on("exit", (code, signal) => {
      clearTimeout(timer)
      resolve({ pid: child.pid!, code, signal, stderr, lines })
    })
  })

/** Runs `hyperloom ray ensure` paused at `step` and SIGKILLs it there. */
export const killRepairAt = (step: Step, env: Record<string, string>): Promise<Run> =>
  startEnsure({ ...env, HYPERLOOM_TEST_REPAIR_PAUSE: step }, (text, kill) => {
    if (text.includes(`repair paused at ${step}`)) kill()
  })

/** The [start, end] of a run's repair window: its final guard check to its restarted head. */
const windows = (run: Run): Array<readonly [number, number]> => {
  const out: Array<readonly [number, number]> = []
  let start: number | undefined
  for (const l of run.lines) {
    if (l.text.includes(REPAIR_LOG)) start = l.at
    else if (start !== undefined && l.text.includes(RESTARTED_LOG)) {
      out.push([start, l.at])
      start = undefined
    }
  }
  // A window that never closed (the process died inside it) lasts until the run ended.
  if (start !== undefined) out.push([start, Number.POSITIVE_INFINITY])
  return out
}

export interface Race {
  readonly runs: ReadonlyArray<Run>
  /** Repairs started (final guard checks passed) across both runs. */
  readonly repairs: number
  /** Pairs of repair windows of different runs that overlap in time. */
  readonly overlaps: number
}

/** Two `hyperloom ray ensure` started together on the same host. */
export const raceEnsures = async (env: Record<string, string>): Promise<Race> => {
  const runs = await Promise.all([startEnsure(env), startEnsure(env)])
  const all = runs.map(windows)
  let overlaps = 0
  for (const a of all[0]!) for (const b of all[1]!) if (a[0] < b[1] && b[0] < a[1]) overlaps += 1
  return { runs, repairs: all[0]!.length + all[1]!.length, overlaps }
}
