/**
 * One baseline attempt: opened (its in-flight record on disk before the command runs), run under
 * a lease bounded by the session deadline, turned into an outcome and classified, and recorded
 * with the stop rules' decision.
 */
import { Data, Effect, Option, Ref } from "effect"
import {
  type AttemptPaths,
  attemptPaths,
  describeAttempt,
  describeRequest,
  errorHead,
  joinTails,
  keepEvidence
} from "../../domain/Attempt.js"
import type { RayClusterInfeasible } from "../../domain/Errors.js"
import {
  AttemptOutcome,
  type AttemptResult,
  boundedErrorText,
  classifyAttempt
} from "../../domain/Failure.js"
import { LeasedCommand } from "../../domain/Serving.js"
import { OutputDigest, outputSignature } from "../../domain/Signature.js"
import { beginAttempt } from "../../domain/State.js"
import { applyAttempt } from "../../domain/StopRules.js"
import { keepTail } from "../../domain/Text.js"
import type { LeaseOutput } from "../../services/LeaseBridge.js"
import type { AttemptError, AttemptSpec } from "../AttemptRunner.js"
import type { LeaseRunResult } from "../Lease.js"
import { resultFacts } from "../ResultFacts.js"
import { type AttemptOutput, current, iso, now, type Run, save, withinDeadline } from "./Run.js"
import { recordEnvironment, servingCommand, servingOutcome } from "./Serving.js"

/** An attempt opened by this run: its number, its files and its output so far. */
export interface OpenAttempt {
  readonly n: number
  readonly paths: AttemptPaths
  readonly output: AttemptOutput
}

/** Output kept per attempt for its error text (the classifier keeps at most 2000 characters of it). */
const TAIL_CHARS = 64 * 1024

/** How the lease around an attempt ended, short of a failure that ends the run. */
type Leased = Data.TaggedEnum<{
  /** The command ran (to its end or past its timeout). */
  Ran: { readonly result: LeaseRunResult }
  /** The cluster cannot serve the request: the marker, never the command's fault. */
  Infeasible: { readonly error: RayClusterInfeasible }
  /** The session deadline passed while the lease was held (or awaited). */
  DeadlinePassed: {}
}>
const Leased = Data.taggedEnum<Leased>()

/** Opens the next attempt: the in-flight record is on disk before the command runs. */
export const openAttempt = Effect.fn("Baseline.openAttempt")(function* (run: Run) {
  const startedMs = yield* now
  const begun = beginAttempt(yield* current(run), iso(startedMs))
  yield* save(run, begun)
  const n = begun.baseline_attempts.length
  const paths = attemptPaths(run.dir, n)
  yield* run.files.prepare(paths.dir, paths.resultFile)
  const output: AttemptOutput = {
    startedMs,
    stdout: "",
    stderr: "",
    digest: new OutputDigest(),
    evidence: []
  }
  yield* Ref.set(run.inFlight, output)
  const { options } = run
  const timeout =
    options.attemptTimeoutSec !== undefined ? `, attempt timeout ${options.attemptTimeoutSec} s` : ""
  yield* Effect.logInfo(
    options.serving !== undefined
      ? `attempt ${n}: serving benchmark under a lease (${describeRequest(options.request)}): server \`${options.serving.server}\`, ready at ${options.serving.readiness.path} within ${options.serving.readiness.timeoutSec} s, then client \`${options.argv.join(" ")}\`${timeout}`
      : `attempt ${n}: running \`${options.argv.join(" ")}\` under a lease (${describeRequest(options.request)})${timeout}`
  )
  return { n, paths, output } satisfies OpenAttempt
})

/** The attempt's lease: its command, environment and output lines (kept, digested and printed). */
const attemptSpec = (run: Run, { n, paths, output }: OpenAttempt): AttemptSpec => {
  const { options } = run
  const serving = options.serving
  return {
    request: options.request,
    command:
      serving !== undefined
        ? servingCommand(serving, paths.dir, options.argv)
        : LeasedCommand.Argv({ argv: options.argv }),
    env: {
      ...options.env,
      HYPERLOOM_RESULT_FILE: paths.resultFile,
      // the result file's folder: AIPerf's --output-artifact-dir (docs/clients.md#where-the-result-is)
      HYPERLOOM_ATTEMPT_DIR: paths.dir,
      HYPERLOOM_SESSION_DIR: run.dir,
      HYPERLOOM_ATTEMPT: String(n)
    },
    cwd: options.cwd,
    timeoutSec: options.attemptTimeoutSec,
    waitSec: options.waitSec,
    onOutput: (o: LeaseOutput) =>
      Effect.zipRight(
        Effect.sync(() => {
          output[o.stream] = keepTail(`${output[o.stream]}${o.line}\n`, TAIL_CHARS)
          output.digest.add(o.stream, o.line)
          keepEvidence(output.evidence, o.line)
        }),
        run.print(`[attempt ${n}] ${o.line}`)
      )
  }
}

/**
 * Runs the attempt under a lease, bounded by the session deadline. The infeasible cluster is an
 * outcome (caught by its tag); any other lease failure is not the command's and no retry of the
 * command can help: the attempt is recorded as interrupted (not charged), the session stays
 * resumable, and the run fails with that error.
 */
const leaseAttempt = (run: Run, attempt: OpenAttempt) =>
  withinDeadline(
    run,
    run.runner.run(attemptSpec(run, attempt)).pipe(
      Effect.map((result) => Leased.Ran({ result })),
      Effect.catchTag("RayClusterInfeasible", (error) => Effect.succeed(Leased.Infeasible({ error })))
    )
  ).pipe(
    Effect.map(Option.getOrElse(() => Leased.DeadlinePassed())),
    Effect.tapError((error) => recordLeaseFailure(run, attempt, error))
  )

const recordLeaseFailure = Effect.fn("Baseline.recordLeaseFailure")(function* (
  run: Run,
  attempt: OpenAttempt,
  error: Exclude<AttemptError, RayClusterInfeasible>
) {
  const endedMs = yield* now
  const applied = applyAttempt(
    yield* current(run),
    {
      errorClass: "interrupted",
      exitCode: null,
      runtimeSec: (endedMs - attempt.output.startedMs) / 1000,
      error: boundedErrorText(
        outputTail(attempt.output),
        `attempt not run to its end: the lease failed: ${error.message}`
      ),
      launchLog: "",
      throughput: null
    },
    { now: iso(endedMs), enablementAvailable: run.enablementAvailable }
  )
  yield* save(run, applied.state)
  yield* Ref.set(run.inFlight, undefined)
  yield* Effect.logInfo(
    `attempt ${attempt.n}: the lease failed (${error._tag}); recorded as interrupted, not charged; the session can be resumed once the cluster is fixed`
  )
})

/** The attempt's error text: what streamed, or the runner's tails when nothing did. */
const outputTail = (output: AttemptOutput, r?: LeaseRunResult) =>
  r === undefined || streamed(output)
    ? joinTails(output.stdout, output.stderr)
    : joinTails(r.stdoutTail, r.stderrTail)

const streamed = (output: AttemptOutput) => output.stdout.trim() !== "" || output.stderr.trim() !== ""

/** The whole output's signature; a runner that streamed nothing leaves only its tails to digest. */
const signatureOf = (output: AttemptOutput, r: LeaseRunResult) =>
  streamed(output)
    ? output.digest.signature()
    : outputSignature({ stdout: r.stdoutTail, stderr: r.stderrTail })

/** What the attempt's lease ended with, classified. */
const outcomeOf = (run: Run, attempt: OpenAttempt, leased: Leased, endedMs: number) => {
  switch (leased._tag) {
    case "DeadlinePassed":
      return Effect.succeed(
        classifyAttempt(
          AttemptOutcome.StoppedByRun({
            cause: "deadline",
            runtimeSec: (endedMs - attempt.output.startedMs) / 1000,
            outputTail: outputTail(attempt.output)
          })
        )
      )
    case "Infeasible":
      return Effect.succeed(
        classifyAttempt(AttemptOutcome.LeaseInfeasible({ message: leased.error.message }))
      )
    case "Ran":
      return ranOutcome(run, attempt, leased.result)
  }
}

/** A command that ran: timed out, a serving attempt's outcome, or an exit with its result file. */
const ranOutcome = Effect.fn("Baseline.ranOutcome")(function* (
  run: Run,
  { n, paths, output }: OpenAttempt,
  r: LeaseRunResult
) {
  const { options, files } = run
  // The command's own runtime: `fast_exit_arg_error` is about how fast the command died,
  // not how long ensure and the bridge took before it started.
  const runtimeSec = r.commandSec
  if (r.timedOut || r.exitCode === null) {
    return classifyAttempt(
      AttemptOutcome.TimedOut({
        runtimeSec,
        timeoutSec: options.attemptTimeoutSec ?? runtimeSec,
        outputTail: outputTail(output, r),
        outputSignature: signatureOf(output, r)
      })
    )
  }
  if (options.serving !== undefined) {
    const status = yield* files.readServeStatus(paths.serveStatus)
    yield* recordEnvironment(files, {
      sessionDir: run.dir,
      now: iso(yield* now),
      attempt: n,
      version: options.version,
      requestedGpus: options.request.gpus,
      server: options.serving.server,
      clientArgv: options.argv,
      status,
      result: r
    })
    const served =
      status !== undefined
        ? yield* servingOutcome(
            files,
            status,
            r,
            paths,
            options.serving.readiness,
            options.serving.maxFailed,
            options.argv
          )
        : undefined
    if (served !== undefined) return served
  }
  const parsed = yield* files.readResult(paths.resultFile)
  const classified = classifyAttempt(
    AttemptOutcome.Exited({
      exitCode: r.exitCode,
      runtimeSec,
      outputTail: outputTail(output, r),
      outputSignature: signatureOf(output, r),
      evidence: output.evidence,
      throughput: parsed?.throughput,
      resultFormat: parsed?.format,
      invalidMetric: parsed?.invalid,
      metrics: parsed?.metrics
    })
  )
  return { ...classified, ...(yield* resultFacts(files, parsed, options.argv)) }
})

/**
 * Applies the stop rules to the attempt's result, saves the state (the launch log first, when
 * the enablement lane takes it) and logs the attempt; returns the decision.
 */
const recordAttempt = Effect.fn("Baseline.recordAttempt")(function* (
  run: Run,
  { n, paths }: OpenAttempt,
  result: AttemptResult,
  endedMs: number
) {
  const applied = applyAttempt(yield* current(run), result, {
    now: iso(endedMs),
    enablementAvailable: run.enablementAvailable,
    launchLogPath: paths.launchLog
  })
  const decision = applied.decision
  // The launch log is on disk before the state that points the enablement run at it.
  if (decision._tag === "run_enablement") yield* run.files.writeLaunchLog(paths.launchLog, decision.launchLog)
  yield* save(run, applied.state)
  yield* Ref.set(run.inFlight, undefined)
  yield* Effect.logInfo(describeAttempt(applied.state, decision))
  if (result.errorClass !== null && result.error !== null) {
    const head = errorHead(result.error, result.errorClass)
    if (head !== "") yield* Effect.logInfo(`attempt ${n}: ${head}`)
  }
  return decision
})

/**
 * One attempt, from its opening to its recorded decision. Fails only with a lease failure that is
 * not the command's (the attempt is then recorded as interrupted, not charged).
 */
export const runAttempt = Effect.fn("Baseline.runAttempt")(function* (run: Run) {
  const attempt = yield* openAttempt(run)
  const leased = yield* leaseAttempt(run, attempt)
  const endedMs = yield* now
  const result = yield* outcomeOf(run, attempt, leased, endedMs)
  const decision = yield* recordAttempt(run, attempt, result, endedMs)
  return { attempt, decision }
})
