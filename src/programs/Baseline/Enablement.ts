/**
 * The enablement lane of a baseline run: the enablement command for the pending launch log, and
 * a pending run a resumed session inherited.
 */
import { Effect, Option } from "effect"
import { fmtSec } from "../../domain/Attempt.js"
import { finishEnablement } from "../../domain/State.js"
import { current, type Run, save, stopForDeadline, withinDeadline } from "./Run.js"

/**
 * Runs the enablement command for the pending launch log. Returns why the run ended when the
 * deadline passed meanwhile, else undefined (the loop revalidates).
 */
export const runEnablement = Effect.fn("Baseline.runEnablement")(function* (
  run: Run,
  attempt: number,
  launchLog: string
) {
  const { options } = run
  const round = (yield* current(run)).enablement.attempts
  yield* Effect.logInfo(
    `enablement ${round}: running \`${options.enablementCmd}\` with HYPERLOOM_LAUNCH_LOG=${launchLog}`
  )
  const outcome = yield* withinDeadline(
    run,
    run.enablement.run({
      command: options.enablementCmd ?? "",
      env: {
        ...options.env,
        HYPERLOOM_LAUNCH_LOG: launchLog,
        HYPERLOOM_SESSION_DIR: run.dir,
        HYPERLOOM_ATTEMPT: String(attempt)
      },
      cwd: options.cwd,
      onOutput: (line) => run.print(`[enablement ${round}] ${line}`)
    })
  )
  if (Option.isNone(outcome)) return yield* stopForDeadline(run, "while the enablement command ran")
  const r = outcome.value
  yield* Effect.logInfo(
    r.exitCode === null
      ? `enablement ${round}: could not run: ${r.startError ?? "unknown reason"}; revalidating anyway`
      : `enablement ${round}: exited with code ${r.exitCode} after ${fmtSec(r.elapsedSec)}; revalidating the baseline`
  )
  yield* save(run, finishEnablement(yield* current(run)))
  return undefined
})

/** An enablement run decided but not finished (a resumed session); why the run ended, if it did. */
export const resumeEnablement = Effect.fn("Baseline.resumeEnablement")(function* (run: Run) {
  const state = yield* current(run)
  const logPath = state.enablement.launch_log_path
  if (run.enablementAvailable && logPath !== null) {
    const last = state.baseline_attempts[state.baseline_attempts.length - 1]
    return yield* runEnablement(run, last?.number ?? 0, logPath)
  }
  yield* Effect.logInfo("an enablement run was pending, but no --enablement-cmd was given: skipping it")
  yield* save(run, finishEnablement(state))
  return undefined
})
