/**
 * The baseline program: runs a benchmark command under a serving lease, attempt after attempt,
 * until it succeeds or a stop rule fires. The policy is pure and lives in the domain
 * (`classifyAttempt`, `applyAttempt`, the state helpers); this file is the loop around it, and
 * `Baseline/` holds its parts: the run record and deadline (`Run`), one attempt (`Attempt`), the
 * serving outcome and environment record (`Serving`), the enablement lane (`Enablement`).
 *
 * A session that succeeded or was stopped by a stop rule is final: nothing runs and the report
 * repeats its outcome. There is deliberately no `--force`: the stop rules exist to keep a broken
 * setup from being retried blindly. A session the run itself stopped (`cancelled`, or past its
 * deadline) is reopened where it was, counters as they were, since nothing was charged for that.
 *
 * A lease failure other than the infeasible cluster (no Ray, an unreachable cluster, the bridge)
 * is not the command's fault and no retry can help: the attempt is recorded as `interrupted` (not
 * charged), the state stays `running` so the session resumes once the cluster is fixed, and the
 * run fails with that typed error.
 *
 * The runtime recorded for an attempt is the command's: the lease's time minus the time it waited
 * for the slot or GPUs held by another lease, so a fast argument error stays fast after a wait.
 */
import { Console, Effect, Option, Ref } from "effect"
import { joinTails } from "../domain/Attempt.js"
import { AttemptOutcome, classifyAttempt } from "../domain/Failure.js"
import { baselineSpec, checkSessionSpec } from "../domain/SessionSpec.js"
import {
  inflightAttempt,
  initialState,
  isTerminal,
  recoverInterrupted,
  reopenStoppedByRun,
  type SessionState
} from "../domain/State.js"
import { applyAttempt, stopByRun } from "../domain/StopRules.js"
import { formatThroughput } from "../domain/Text.js"
import { AttemptFiles } from "../services/AttemptFiles.js"
import { Enablement } from "../services/Enablement.js"
import { StateStore } from "../services/StateStore.js"
import { AttemptRunner } from "./AttemptRunner.js"
import { runAttempt } from "./Baseline/Attempt.js"
import { resumeEnablement, runEnablement } from "./Baseline/Enablement.js"
import {
  type AttemptOutput,
  type BaselineOptions,
  type BaselineReport,
  current,
  iso,
  now,
  type Run,
  remainingMs,
  save,
  stopForDeadline
} from "./Baseline/Run.js"
import { refuseSweepSession } from "./SessionKind.js"

export { attemptPaths, describeAttempt, errorHead } from "../domain/Attempt.js"
export type { BaselineOptions, BaselineReport } from "./Baseline/Run.js"
export { type ServingOptions, servingCommand } from "./Baseline/Serving.js"

/**
 * Loads the session: a new one is saved as it starts; an attempt a crash left in flight is
 * recorded as interrupted; a session the run itself stopped is reopened. Returns why nothing
 * runs when the session had already ended (succeeded, or stopped by a stop rule), else undefined.
 */
const resume = Effect.fn("Baseline.resume")(function* (run: Run, isNew: boolean, runStart: number) {
  const loaded = yield* current(run)
  if (isNew) {
    yield* save(run, loaded)
    yield* Effect.logInfo(`new baseline session ${run.dir}`)
    return undefined
  }
  const recovered = recoverInterrupted(loaded, iso(runStart))
  for (const a of recovered.baseline_attempts) {
    if (a.error_class === "interrupted" && loaded.baseline_attempts[a.number - 1]?.ended_at === null) {
      yield* Effect.logInfo(
        `attempt ${a.number} was left in flight by an earlier run; recorded as interrupted (not charged)`
      )
    }
  }
  const reopened = reopenStoppedByRun(recovered)
  if (reopened !== recovered) {
    yield* Effect.logInfo(
      `resuming the session (it was ${recovered.stop_reason ?? recovered.status}; nothing was charged for that)`
    )
  }
  if (reopened !== loaded) yield* save(run, reopened)
  if (isTerminal(reopened)) {
    const why =
      reopened.status === "succeeded"
        ? `the session already succeeded (throughput ${formatThroughput(reopened.baseline_tput)}); nothing to run (use a new --session directory to run the baseline again)`
        : `the session already stopped (${reopened.stop_reason}); nothing to run (use a new --session directory to run the baseline again)`
    yield* Effect.logInfo(why)
    return why
  }
  yield* Effect.logInfo(
    `resuming session ${run.dir} at attempt ${reopened.baseline_attempts.length + 1} (streaks: failure ${reopened.baseline_failure_streak}, arg-error ${reopened.baseline_arg_error_streak}, total failures ${reopened.baseline_total_failures})`
  )
  if (reopened.enablement.attempts > 0 && !run.enablementAvailable) {
    yield* Effect.logInfo(
      "the enablement lane was engaged but no --enablement-cmd was given: its counters stand, rule 3 applies again"
    )
  }
  return undefined
})

/** Attempt after attempt until a stop rule, success or the deadline ends the session; returns why it ended. */
const attempts = (run: Run) =>
  Effect.gen(function* () {
    while (true) {
      const state = yield* current(run)
      if (state.status !== "running") return `the session ended as ${state.stop_reason ?? state.status}`
      if (state.enablement.inflight) {
        const ended = yield* resumeEnablement(run)
        if (ended !== undefined) return ended
        continue
      }
      if ((yield* remainingMs(run)) <= 0) return yield* stopForDeadline(run, "before the next attempt")

      const { attempt, decision } = yield* runAttempt(run)
      if (decision._tag === "stop" || decision._tag === "succeeded") return decision.why
      if (decision._tag === "run_enablement") {
        const ended = yield* runEnablement(run, attempt.n, attempt.paths.launchLog)
        if (ended !== undefined) return ended
      }
    }
  })

/** Ctrl-C: the attempt in flight ends as orchestrator_cancelled (not charged), the session as cancelled. */
const cancel = (run: Run) =>
  Effect.gen(function* () {
    const endedMs = yield* now
    const state = yield* current(run)
    const running = yield* Ref.get(run.inFlight)
    const open = inflightAttempt(state)
    let next: SessionState
    let why: string
    if (open !== undefined) {
      const startedMs = running?.startedMs ?? Date.parse(open.started_at)
      const applied = applyAttempt(
        state,
        classifyAttempt(
          AttemptOutcome.StoppedByRun({
            cause: "cancel",
            runtimeSec: Math.max(0, (endedMs - startedMs) / 1000),
            outputTail: running === undefined ? "" : joinTails(running.stdout, running.stderr)
          })
        ),
        { now: iso(endedMs), enablementAvailable: run.enablementAvailable }
      )
      next = applied.state
      why = applied.decision.why
    } else {
      next = stopByRun(state, "orchestrator_cancelled", iso(endedMs))
      why = "the run was cancelled between attempts; not charged"
    }
    yield* save(run, next).pipe(
      Effect.catchAll((e) => Effect.logError(`cannot write the state of the cancelled run: ${e.message}`))
    )
    yield* Effect.logInfo(`baseline cancelled: ${why}; state saved in ${run.dir}`)
  })

const runScoped = Effect.fn("Baseline.run")(function* (options: BaselineOptions) {
  const store = yield* StateStore
  const dir = options.sessionDir
  yield* store.lock(dir)
  yield* refuseSweepSession(dir)
  const spec = baselineSpec(options)
  const loaded = yield* Effect.flatMap(store.load(dir), (state) =>
    Option.isNone(state)
      ? Effect.succeed(state)
      : Effect.map(checkSessionSpec(dir, state.value, spec), Option.some)
  )
  const runStart = yield* now
  const run: Run = {
    options,
    dir,
    store,
    files: yield* AttemptFiles,
    enablement: yield* Enablement,
    runner: yield* AttemptRunner,
    print: options.onOutput ?? ((line: string) => Console.error(line)),
    enablementAvailable: options.enablementCmd !== undefined && options.enablementCmd.trim() !== "",
    deadlineAt: options.deadlineSec !== undefined ? runStart + options.deadlineSec * 1000 : undefined,
    state: yield* Ref.make(Option.getOrElse(loaded, () => ({ ...initialState(), baseline_spec: spec }))),
    inFlight: yield* Ref.make<AttemptOutput | undefined>(undefined)
  }

  const ended = yield* resume(run, Option.isNone(loaded), runStart)
  if (ended !== undefined) {
    return {
      sessionDir: dir,
      state: yield* current(run),
      why: ended,
      attemptsRun: 0,
      alreadyEnded: true
    } satisfies BaselineReport
  }

  const before = (yield* current(run)).baseline_attempts.length
  const why = yield* attempts(run).pipe(Effect.onInterrupt(() => cancel(run)))

  const final = yield* current(run)
  yield* Effect.logInfo(
    final.status === "succeeded"
      ? `baseline succeeded: throughput ${formatThroughput(final.baseline_tput)} (${why})`
      : `baseline ${final.status}: ${final.stop_reason ?? "no reason"} (${why})`
  )
  return {
    sessionDir: dir,
    state: final,
    why,
    attemptsRun: final.baseline_attempts.length - before,
    alreadyEnded: false
  } satisfies BaselineReport
})

/**
 * Runs a baseline session: holds the session lock for the run and returns the final state with
 * why the run ended. Each attempt runs through the AttemptRunner service.
 */
export const runBaseline = (options: BaselineOptions) => Effect.scoped(runScoped(options))
