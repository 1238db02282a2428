/**
 * How the CLI ends on a signal (issue 13 item 6). NodeRuntime interrupts the program on the first
 * SIGINT or SIGTERM (finalizers run: a lease stops its command and is released) and then lets the
 * next one kill the process at once, which left a held lease behind a gone CLI; SIGHUP (the
 * terminal closed) killed it at once without any release or state update. Here:
 *
 * - SIGHUP is handled as SIGTERM: the program is interrupted, exit 129 (128 + SIGHUP) instead of 130.
 * - Any later SIGINT/SIGTERM/SIGHUP while a lease is held or being released says so once on
 *   stderr and is otherwise ignored: the release is bounded (the bridge is killed past its
 *   timeout, and its keeper stops the command), so hyperloom always ends, with the lease free.
 *   With no lease held, a second signal ends the CLI at once, as before.
 */
import { bridgesHeld } from "../services/BridgeProcess.js"
import { EXIT } from "./Exit.js"

const EXIT_HANGUP = EXIT.hangup
const EXIT_CANCELLED = EXIT.cancelled

let first: NodeJS.Signals | undefined
let noted = false
let watching = false

/** The first signal that cancelled this run, if any. */
export const cancellingSignal = (): NodeJS.Signals | undefined => first

/** The exit code of a cancelled run: 129 when the terminal closed (SIGHUP), else `code`. */
export const exitCodeAfterSignals = (code: number): number =>
  code === EXIT_CANCELLED && first === "SIGHUP" ? EXIT_HANGUP : code

let handing = false

const onSignal = (signal: NodeJS.Signals) => {
  if (handing) return
  if (first === undefined) {
    first = signal
    // NodeRuntime interrupts on SIGINT/SIGTERM itself; SIGHUP is handed to it as SIGTERM.
    if (signal === "SIGHUP") {
      handing = true
      process.emit("SIGTERM", "SIGTERM")
      handing = false
    }
    return
  }
  if (bridgesHeld() === 0) process.exit(exitCodeAfterSignals(EXIT_CANCELLED))
  if (!noted) {
    noted = true
    process.stderr.write(
      "hyperloom: still releasing the lease (stopping the command, then freeing the slot and its GPUs); hyperloom exits as soon as it is free\n"
    )
  }
}

/** Installs the handlers (call once, before the program runs). */
export const watchSignals = () => {
  if (watching) return
  watching = true
  for (const s of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(s, onSignal)
}
