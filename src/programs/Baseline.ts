/**
 * The baseline program (SPEC §6): runs a benchmark command under a serving lease, attempt after
 * attempt, until it succeeds or a stop rule fires. The policy is pure and lives in the domain
 * (`classifyAttempt`, `applyAttempt`, the state helpers); this file is the loop around it.
 *
 * One run of a session:
 *
 * 1. Take the session lock (`<session>/.lock`, one run per session) and load the state.
 *    - No state: a new session. An attempt a crash left in flight is recorded as `interrupted`
 *      (not charged). A session the run itself stopped (`cancelled`, or `stopped` with
 *      `session_time_exhausted`) is reopened and resumes where it was, counters as they were.
 *    - A session that succeeded or was stopped by a stop rule is final: nothing runs, the report
 *      repeats its outcome (and the CLI its exit code). To run the baseline again, use a new
 *      session directory (or move the old `state.json` away). There is deliberately no `--force`:
 *      the stop rules exist to keep a broken setup from being retried blindly.
 * 2. Loop, saving the state (atomically, uninterruptibly) after every change:
 *    - open the attempt (an in-flight record is written BEFORE the command runs);
 *    - run the command under a lease through the AttemptRunner service (live: the lease program,
 *      a group with `--nodes`; AttemptRunner.layerTest scripts attempts in tests), with
 *      `HYPERLOOM_RESULT_FILE` (`<session>/attempts/<n>/result.json`, fresh per attempt),
 *      `HYPERLOOM_SESSION_DIR` and `HYPERLOOM_ATTEMPT` in its environment, each output line
 *      streamed through `onOutput` (default: stderr, prefixed `[attempt n] `);
 *    - turn what happened into an `AttemptOutcome`: the lease's typed `RayClusterInfeasible`, caught
 *      by its tag, becomes `LeaseInfeasible` (its message starts with the marker), the command
 *      outliving the attempt timeout (counted from the command's start, never from the wait for
 *      the slot) `TimedOut`, an exit `Exited` with the throughput read from the result file;
 *    - classify, apply the stop rules, save, log the attempt (number, class, streaks, what happens
 *      next and why);
 *    - on `run_enablement`: write the launch log to `<session>/attempts/<n>/launch.log`, run the
 *      enablement command (a shell command line, `/bin/sh -c`, see services/Enablement.ts) with
 *      `HYPERLOOM_LAUNCH_LOG` set, mark it finished, save, and revalidate (the next attempt).
 *
 * Every other lease failure (no Ray and none may be started, an unreachable cluster, no `ray`
 * executable, the bridge or the actor failing) is not the command's fault and no retry of the
 * command can help: the attempt is recorded as `interrupted` (not charged) with the error as its
 * text, the state is saved (still `running`, so the session resumes once the cluster is fixed) and
 * the run fails with that typed error.
 *
 * The run itself may stop an attempt; nothing is charged then and the lease is released:
 * - `deadlineSec` (the whole run, from its start): the attempt in flight ends as
 *   `session_time_exhausted`, or, between attempts or during the enablement command, the session
 *   stops with that reason;
 * - interruption (Ctrl-C): the attempt in flight ends as `orchestrator_cancelled`, the session is
 *   `cancelled`, and the state is written before the interruption completes.
 *
 * The runtime recorded for an attempt is the command's: the lease's time minus the time it waited
 * for the slot or GPUs held by another lease, so a fast argument error stays fast after a wait.
 */
import { Clock, Console, Data, Duration, Effect, Option } from "effect"
import type { RayClusterInfeasible } from "../domain/Errors.js"
import {
  AttemptOutcome,
  type AttemptResult,
  boundedErrorText,
  classifyAttempt,
  decidesClass,
  fromException,
  isTellingLine,
  MAX_ERROR_CHARS,
  MAX_EVIDENCE_LINES,
  rootCauseLine
} from "../domain/Failure.js"
import type { LeaseRequest } from "../domain/Feasibility.js"
import {
  CLIENT_LOG,
  ENVIRONMENT_FILE,
  environmentRecord,
  SERVE_STATUS_FILE,
  SERVER_LOG,
  type ServeStatus
} from "../domain/Serving.js"
import { OutputDigest, outputSignature } from "../domain/Signature.js"
import {
  beginAttempt,
  finishEnablement,
  inflightAttempt,
  initialState,
  isTerminal,
  recoverInterrupted,
  reopenStoppedByRun,
  type SessionState
} from "../domain/State.js"
import { applyAttempt, type Decision, STALL_LIMIT, stopByRun } from "../domain/StopRules.js"
import { keepTail } from "../domain/Text.js"
import { AttemptFiles, type AttemptFilesShape } from "../services/AttemptFiles.js"
import { Enablement, type EnablementShape } from "../services/Enablement.js"
import type { LeaseOutput } from "../services/LeaseBridge.js"
import { StateStore } from "../services/StateStore.js"
import {
  type AttemptError,
  AttemptRunner,
  type AttemptRunnerShape,
  type AttemptSpec
} from "./AttemptRunner.js"
import type { LeaseRunResult } from "./Lease.js"

export interface BaselineOptions {
  /** The session directory (absolute: the command and the enablement get paths inside it). */
  readonly sessionDir: string
  readonly request: LeaseRequest
  /** The baseline command. */
  readonly argv: ReadonlyArray<string>
  /**
   * Bounds each attempt's command, from its start (SPEC §9: waiting for a slot held by another
   * lease is never charged); past it the attempt is a `timeout`. The wait is bounded by the
   * session deadline and interruption only.
   */
  readonly attemptTimeoutSec?: number | undefined
  /** Bounds the whole run, from its start; past it the run stops as `session_time_exhausted`. */
  readonly deadlineSec?: number | undefined
  /** The enablement command line (run with `/bin/sh -c`); enables the enablement lane. */
  readonly enablementCmd?: string | undefined
  /** The environment of the command and the enablement command (the HYPERLOOM_* variables are added). */
  readonly env: Readonly<Record<string, string | undefined>>
  readonly cwd: string
  /** Each output line of the command and of the enablement command, prefixed (default: stderr). */
  readonly onOutput?: ((line: string) => Effect.Effect<void>) | undefined
  /**
   * A serving benchmark (SPEC §10): each attempt runs the serving runner as the leased command; it
   * starts `server` (`sh -c`, own process group), waits for `readyPath`, runs `argv` as the client,
   * and stops the server before it exits (so before the lease is released).
   */
  readonly serving?: ServingOptions | undefined
  /** hyperloom's version, for the session's environment record. */
  readonly version?: string | undefined
}

export interface ServingOptions {
  /** The server command line (one string, run with `sh -c`). */
  readonly server: string
  readonly readyPath: string
  readonly readyTimeoutSec: number
  /** How the runner is started: the lease's Python and `python/hyperloom_serve.py`. */
  readonly runner: ReadonlyArray<string>
  /** Grace between TERM and KILL when the server is stopped (default: the runner's, 1.5 s). */
  readonly stopGraceSec?: number | undefined
  /** Seconds between progress lines while the server loads (default 5). */
  readonly progressEverySec?: number | undefined
}

/** The leased command of a serving attempt: the runner with the server, the client after `--`. */
export const servingArgv = (
  serving: ServingOptions,
  attemptDir: string,
  cwd: string,
  client: ReadonlyArray<string>
) => [
  ...serving.runner,
  "--server",
  serving.server,
  "--ready-path",
  serving.readyPath,
  "--ready-timeout",
  String(serving.readyTimeoutSec),
  ...(serving.stopGraceSec !== undefined ? ["--stop-grace", String(serving.stopGraceSec)] : []),
  ...(serving.progressEverySec !== undefined ? ["--progress-every", String(serving.progressEverySec)] : []),
  "--dir",
  attemptDir,
  "--cwd",
  cwd,
  "--",
  ...client
]

export interface BaselineReport {
  readonly sessionDir: string
  /** The final state, as saved. */
  readonly state: SessionState
  /** Why the run ended: the deciding rule's explanation, or why nothing ran. */
  readonly why: string
  /** Attempts this run started. */
  readonly attemptsRun: number
  /** The session had already ended before this run; nothing ran. */
  readonly alreadyEnded: boolean
}

/** Where an attempt's files live. */
export const attemptPaths = (sessionDir: string, n: number) => {
  const dir = `${sessionDir.replace(/\/+$/, "") || "/"}/attempts/${n}`.replace(/^\/\//, "/")
  return {
    dir,
    resultFile: `${dir}/result.json`,
    launchLog: `${dir}/launch.log`,
    serverLog: `${dir}/${SERVER_LOG}`,
    clientLog: `${dir}/${CLIENT_LOG}`,
    serveStatus: `${dir}/${SERVE_STATUS_FILE}`
  }
}

/** Output kept per attempt for its error text (the classifier keeps at most 2000 characters of it). */
const TAIL_CHARS = 64 * 1024

/**
 * An attempt's output so far: one tail per stream (the displayed error text), and the digest of
 * every line of both streams (the signature the same-failure rule compares, SPEC §6 rule 4).
 */
interface AttemptOutput {
  readonly startedMs: number
  stdout: string
  stderr: string
  readonly digest: OutputDigest
  /** The telling lines (`isTellingLine`) of the whole output, the first MAX_EVIDENCE_LINES. */
  readonly evidence: Array<string>
}

const keepEvidence = (evidence: Array<string>, line: string) => {
  if (evidence.length < MAX_EVIDENCE_LINES && isTellingLine(line)) evidence.push(line.trim().slice(0, 1000))
}

/**
 * The attempt's output as its error text: stdout's tail, then stderr's. Never interleaved by
 * arrival: the two pipes race, and the same failure must read the same every time (its folded
 * signature decides the same-failure stop). stderr last, so the error tail ends with it.
 */
const joinTails = (stdout: string, stderr: string): string =>
  [stdout, stderr].filter((t) => t.trim() !== "").join("\n")

const iso = (millis: number) => new Date(millis).toISOString()

const fmtSec = (s: number) => (s < 10 ? `${s.toFixed(1)} s` : `${Math.round(s)} s`)

const describeRequest = (r: LeaseRequest) => `${r.gpus} GPU(s)${r.servingSlot ? " + serving_slot" : ""}`

/** One line summing up an attempt: number, class, exit code, runtime, the streaks, what comes next and why. */
export const describeAttempt = (state: SessionState, decision: Decision): string => {
  const a = state.baseline_attempts[state.baseline_attempts.length - 1]
  const what =
    a === undefined
      ? "no attempt"
      : `attempt ${a.number}: ${a.error_class ?? `succeeded, throughput ${a.throughput}`}` +
        `${a.exit_code !== null ? `, exit ${a.exit_code}` : ""}${a.runtime_sec !== null ? `, ${fmtSec(a.runtime_sec)}` : ""}`
  const e = state.enablement
  const streaks =
    `streaks: failure ${state.baseline_failure_streak}, arg-error ${state.baseline_arg_error_streak}, ` +
    `total failures ${state.baseline_total_failures}` +
    (e.attempts > 0 ? `, enablement runs ${e.attempts}, stall ${e.stall_streak}/${STALL_LIMIT}` : "")
  const next =
    decision._tag === "retry"
      ? "next: retry"
      : decision._tag === "run_enablement"
        ? "next: enablement command, then revalidation"
        : decision._tag === "stop"
          ? `next: stop (${decision.reason})`
          : "next: done (succeeded)"
  return `${what}; ${streaks}; ${next}: ${decision.why}`
}

const ERRORISH =
  /error|exception|fatal|traceback|failed|not found|killed|out of memory|missing|ray_cluster_infeasible/i
const HEADER_CLASSES = new Set([
  "timeout",
  "no_report",
  "invalid_measurement",
  "session_time_exhausted",
  "orchestrator_cancelled",
  "interrupted"
])

/**
 * The line that decided a `kv_cache_oom` or `fast_exit_arg_error` class (`decidesClass`), the
 * root cause first (`rootCauseLine`), from the exception's name on: a log prefix such as
 * `(EngineCore_DP0 pid=N) ERROR … [core.py:586]` or `root cause:` would take the room the message
 * needs. Undefined for other classes or when no line matches.
 */
const decidingLine = (lines: ReadonlyArray<string>, errorClass: string | null): string | undefined => {
  const line = rootCauseLine(lines.filter((l) => decidesClass(l, errorClass)))
  return line === undefined ? undefined : fromException(line)
}

/**
 * The telling line of an attempt's error text, shortened: the marker line when there is one; the
 * classifier's description for the classes that have one (timeout, no report, …); the line that
 * decided the class for `kv_cache_oom` and `fast_exit_arg_error` (not vLLM's generic "Engine
 * core initialization failed. See root cause above" trailer); otherwise the last line that reads
 * like an error (stdout and stderr arrive interleaved, so the error is not always the last line),
 * else the last line.
 */
export const errorHead = (error: string | null, errorClass: string | null, max = 160): string => {
  if (error === null) return ""
  const lines = error
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && l !== "…")
  const marked = lines.find((l) => l.toLowerCase().includes("ray_cluster_infeasible"))
  const line =
    marked ??
    (errorClass !== null && HEADER_CLASSES.has(errorClass)
      ? lines[0]
      : (decidingLine(lines, errorClass) ??
        [...lines].reverse().find((l) => ERRORISH.test(l)) ??
        lines[lines.length - 1]))
  const text = (line ?? "").replace(/^…/, "")
  return text.length > max ? `${text.slice(0, max - 1)}…` : text
}

// ---------------------------------------------------------------------------------------------
// One run of a session

/** One run of a session: its options and services, and what changes as it goes. */
interface Run {
  readonly options: BaselineOptions
  readonly dir: string
  readonly store: StateStore
  readonly files: AttemptFilesShape
  readonly enablement: EnablementShape
  readonly runner: AttemptRunnerShape
  readonly print: (line: string) => Effect.Effect<void>
  readonly enablementAvailable: boolean
  /** When the session deadline passes (epoch ms), if there is one. */
  readonly deadlineAt: number | undefined
  /** The newest state: saved after every change, read by the cancel handler. */
  current: SessionState
  /** Why the run ended, once it did. */
  why: string
  attemptsRun: number
  /** The attempt in flight, for the cancel handler. */
  running: AttemptOutput | undefined
}

const now = Clock.currentTimeMillis

/** Saves the state (uninterruptibly) and makes it the run's newest. */
const save = (run: Run, next: SessionState) =>
  Effect.uninterruptible(
    Effect.suspend(() => {
      run.current = next
      return run.store.save(run.dir, next)
    })
  )

const remainingMs = (run: Run) =>
  Effect.map(now, (t) => (run.deadlineAt === undefined ? Number.POSITIVE_INFINITY : run.deadlineAt - t))

/** Bounds an effect by the session deadline: None when the deadline passed first. */
const withinDeadline = <A, E, R>(run: Run, effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(remainingMs(run), (ms) =>
    Number.isFinite(ms)
      ? Effect.timeoutOption(effect, Duration.millis(Math.max(0, ms)))
      : Effect.asSome(effect)
  )

const stopForDeadline = (run: Run, during: string) =>
  Effect.gen(function* () {
    run.why = `the session deadline (${run.options.deadlineSec} s) passed ${during}; not charged`
    yield* save(run, stopByRun(run.current, "session_time_exhausted", iso(yield* now)))
  })

// ---------------------------------------------------------------------------------------------
// Resume

/**
 * Loads the session: a new one is saved as it starts; an attempt a crash left in flight is
 * recorded as interrupted; a session the run itself stopped is reopened. Returns why nothing
 * runs when the session had already ended (succeeded, or stopped by a stop rule), else undefined.
 */
const resume = (run: Run, loaded: Option.Option<SessionState>, runStart: number) =>
  Effect.gen(function* () {
    const dir = run.dir
    if (Option.isNone(loaded)) {
      yield* save(run, run.current)
      yield* Effect.logInfo(`new baseline session ${dir}`)
      return undefined
    }
    const recovered = recoverInterrupted(run.current, iso(runStart))
    for (const a of recovered.baseline_attempts) {
      if (a.error_class === "interrupted" && run.current.baseline_attempts[a.number - 1]?.ended_at === null) {
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
    if (reopened !== run.current) yield* save(run, reopened)
    if (isTerminal(reopened)) {
      const why =
        reopened.status === "succeeded"
          ? `the session already succeeded (throughput ${reopened.baseline_tput}); nothing to run (use a new --session directory to run the baseline again)`
          : `the session already stopped (${reopened.stop_reason}); nothing to run (use a new --session directory to run the baseline again)`
      yield* Effect.logInfo(why)
      return why
    }
    yield* Effect.logInfo(
      `resuming session ${dir} at attempt ${reopened.baseline_attempts.length + 1} (streaks: failure ${reopened.baseline_failure_streak}, arg-error ${reopened.baseline_arg_error_streak}, total failures ${reopened.baseline_total_failures})`
    )
    if (reopened.enablement.attempts > 0 && !run.enablementAvailable) {
      yield* Effect.logInfo(
        "the enablement lane was engaged but no --enablement-cmd was given: its counters stand, rule 3 applies again"
      )
    }
    return undefined
  })

// ---------------------------------------------------------------------------------------------
// One attempt

/** An attempt opened by this run: its number, its files and its output so far. */
interface OpenAttempt {
  readonly n: number
  readonly paths: ReturnType<typeof attemptPaths>
  readonly output: AttemptOutput
}

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
const openAttempt = (run: Run) =>
  Effect.gen(function* () {
    const startedMs = yield* now
    yield* save(run, beginAttempt(run.current, iso(startedMs)))
    const n = run.current.baseline_attempts.length
    run.attemptsRun++
    const paths = attemptPaths(run.dir, n)
    yield* run.files.prepare(paths.dir, paths.resultFile)
    const output: AttemptOutput = {
      startedMs,
      stdout: "",
      stderr: "",
      digest: new OutputDigest(),
      evidence: []
    }
    run.running = output
    const { options } = run
    const timeout =
      options.attemptTimeoutSec !== undefined ? `, attempt timeout ${options.attemptTimeoutSec} s` : ""
    yield* Effect.logInfo(
      options.serving !== undefined
        ? `attempt ${n}: serving benchmark under a lease (${describeRequest(options.request)}): server \`${options.serving.server}\`, ready at ${options.serving.readyPath} within ${options.serving.readyTimeoutSec} s, then client \`${options.argv.join(" ")}\`${timeout}`
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
    argv: serving !== undefined ? servingArgv(serving, paths.dir, options.cwd, options.argv) : options.argv,
    server: serving?.server,
    env: {
      ...options.env,
      HYPERLOOM_RESULT_FILE: paths.resultFile,
      HYPERLOOM_SESSION_DIR: run.dir,
      HYPERLOOM_ATTEMPT: String(n)
    },
    cwd: options.cwd,
    timeoutSec: options.attemptTimeoutSec,
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

const recordLeaseFailure = (
  run: Run,
  attempt: OpenAttempt,
  error: Exclude<AttemptError, RayClusterInfeasible>
) =>
  Effect.gen(function* () {
    const endedMs = yield* now
    const applied = applyAttempt(
      run.current,
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
    run.running = undefined
    yield* Effect.logInfo(
      `attempt ${attempt.n}: the lease failed (${error._tag}); recorded as interrupted, not charged; the session can be resumed once the cluster is fixed`
    )
  })

// ---------------------------------------------------------------------------------------------
// Outcome

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

/** What the attempt's lease ended with, classified (SPEC §6). */
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
const ranOutcome = (run: Run, { n, paths, output }: OpenAttempt, r: LeaseRunResult) =>
  Effect.gen(function* () {
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
      yield* recordEnvironment(run, n, status, r, options.serving)
      const served = status !== undefined ? yield* servingOutcome(run, status, r, paths) : undefined
      if (served !== undefined) return served
    }
    const parsed = yield* files.readResult(paths.resultFile)
    return classifyAttempt(
      AttemptOutcome.Exited({
        exitCode: r.exitCode,
        runtimeSec,
        outputTail: outputTail(output, r),
        outputSignature: signatureOf(output, r),
        evidence: output.evidence,
        throughput: parsed?.throughput,
        resultFormat: parsed?.format,
        metrics: parsed?.metrics
      })
    )
  })

/**
 * A serving attempt's outcome from the runner's `serve.json` and the whole logs (SPEC §10): a
 * server that never got ready is judged on server.log; a client that ran on client.log (plus
 * server.log's telling lines: a server dying under load explains a failing client). The signature
 * digests both logs whole. undefined when the runner did not get as far as an outcome.
 */
const servingOutcome = (
  run: Run,
  status: ServeStatus,
  r: LeaseRunResult,
  paths: ReturnType<typeof attemptPaths>
) =>
  Effect.gen(function* () {
    if (status.outcome === null || status.outcome === "stopped") return undefined
    const { files, options } = run
    const digest = new OutputDigest()
    const evidence: Array<string> = []
    const scan = (file: string, channel: string) =>
      files.scanLog(
        file,
        (line) => {
          digest.add(channel, line)
          keepEvidence(evidence, line)
        },
        MAX_ERROR_CHARS * 4
      )
    const serverTail = (yield* scan(paths.serverLog, "server")) ?? ""
    const clientTail = (yield* scan(paths.clientLog, "client")) ?? ""
    if (status.outcome !== "client_exited") {
      const timedOut = status.outcome === "ready_timeout"
      return classifyAttempt(
        AttemptOutcome.ServerNotReady({
          exitCode: timedOut ? null : (status.server.exit_code ?? r.exitCode),
          runtimeSec: status.server.runtime_sec ?? r.commandSec,
          outputTail: serverTail,
          readyTimeoutSec: timedOut ? (options.serving?.readyTimeoutSec ?? 0) : undefined,
          outputSignature: digest.signature(),
          evidence
        })
      )
    }
    const exitCode = status.client?.exit_code ?? r.exitCode ?? 1
    const serverDied =
      status.server.stopped_with === null && status.server.exit_code !== null
        ? `\nthe server exited with code ${status.server.exit_code} while the client ran; server.log ends:\n${serverTail.slice(-MAX_ERROR_CHARS / 2)}`
        : ""
    const parsed = yield* files.readResult(paths.resultFile)
    return classifyAttempt(
      AttemptOutcome.Exited({
        exitCode,
        // a failed client is judged on its own runtime (an argument error is fast), not the server's load
        runtimeSec: exitCode !== 0 ? (status.client?.runtime_sec ?? r.commandSec) : r.commandSec,
        outputTail: `${clientTail}${serverDied}`,
        outputSignature: digest.signature(),
        evidence,
        throughput: parsed?.throughput,
        resultFormat: parsed?.format,
        metrics: parsed?.metrics
      })
    )
  })

/** The session's environment record, rewritten by every serving attempt that reached the node. */
const recordEnvironment = (
  run: Run,
  attempt: number,
  status: ServeStatus | undefined,
  r: LeaseRunResult,
  serving: ServingOptions
) =>
  Effect.gen(function* () {
    if (status === undefined && r.started === null) return
    const record = environmentRecord({
      now: iso(yield* now),
      attempt,
      hyperloomVersion: run.options.version ?? "unknown",
      requestedGpus: run.options.request.gpus,
      nodeId: r.started?.nodeId,
      status,
      serverArgv: ["sh", "-c", serving.server],
      clientArgv: run.options.argv
    })
    yield* run.files
      .writeJson(`${run.dir.replace(/\/+$/, "")}/${ENVIRONMENT_FILE}`, record)
      .pipe(Effect.catchAll((e) => Effect.logWarning(`cannot write the environment record: ${e.message}`)))
  })

/**
 * Applies the stop rules to the attempt's result, saves the state (the launch log first, when
 * the enablement lane takes it) and logs the attempt; returns the decision.
 */
const recordAttempt = (run: Run, { n, paths }: OpenAttempt, result: AttemptResult, endedMs: number) =>
  Effect.gen(function* () {
    const applied = applyAttempt(run.current, result, {
      now: iso(endedMs),
      enablementAvailable: run.enablementAvailable,
      launchLogPath: paths.launchLog
    })
    const decision = applied.decision
    // The launch log is on disk before the state that points the enablement run at it.
    if (decision._tag === "run_enablement")
      yield* run.files.writeLaunchLog(paths.launchLog, decision.launchLog)
    yield* save(run, applied.state)
    run.running = undefined
    yield* Effect.logInfo(describeAttempt(applied.state, decision))
    if (result.errorClass !== null && result.error !== null) {
      const head = errorHead(result.error, result.errorClass)
      if (head !== "") yield* Effect.logInfo(`attempt ${n}: ${head}`)
    }
    return decision
  })

// ---------------------------------------------------------------------------------------------
// Enablement

/** Runs the enablement command for the pending launch log; false when the deadline passed. */
const runEnablement = (run: Run, attempt: number, launchLog: string) =>
  Effect.gen(function* () {
    const { options } = run
    const round = run.current.enablement.attempts
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
    if (Option.isNone(outcome)) {
      yield* stopForDeadline(run, "while the enablement command ran")
      return false
    }
    const r = outcome.value
    yield* Effect.logInfo(
      r.exitCode === null
        ? `enablement ${round}: could not run: ${r.startError ?? "unknown reason"}; revalidating anyway`
        : `enablement ${round}: exited with code ${r.exitCode} after ${fmtSec(r.elapsedSec)}; revalidating the baseline`
    )
    yield* save(run, finishEnablement(run.current))
    return true
  })

/** An enablement run decided but not finished (a resumed session); false when the deadline passed. */
const resumeEnablement = (run: Run) =>
  Effect.gen(function* () {
    const logPath = run.current.enablement.launch_log_path
    if (run.enablementAvailable && logPath !== null) {
      const last = run.current.baseline_attempts[run.current.baseline_attempts.length - 1]
      return yield* runEnablement(run, last?.number ?? 0, logPath)
    }
    yield* Effect.logInfo("an enablement run was pending, but no --enablement-cmd was given: skipping it")
    yield* save(run, finishEnablement(run.current))
    return true
  })

// ---------------------------------------------------------------------------------------------
// The loop

/** Attempt after attempt until a stop rule, success or the deadline ends the session. */
const attempts = (run: Run) =>
  Effect.gen(function* () {
    while (run.current.status === "running") {
      if (run.current.enablement.inflight) {
        if (!(yield* resumeEnablement(run))) return
        continue
      }
      if ((yield* remainingMs(run)) <= 0) return yield* stopForDeadline(run, "before the next attempt")

      const attempt = yield* openAttempt(run)
      const leased = yield* leaseAttempt(run, attempt)
      const endedMs = yield* now
      const result = yield* outcomeOf(run, attempt, leased, endedMs)
      const decision = yield* recordAttempt(run, attempt, result, endedMs)

      if (decision._tag === "stop" || decision._tag === "succeeded") {
        run.why = decision.why
        return
      }
      if (
        decision._tag === "run_enablement" &&
        !(yield* runEnablement(run, attempt.n, attempt.paths.launchLog))
      ) {
        return
      }
    }
  })

/** Ctrl-C: the attempt in flight ends as orchestrator_cancelled (not charged), the session as cancelled. */
const cancel = (run: Run) =>
  Effect.gen(function* () {
    const endedMs = yield* now
    const open = inflightAttempt(run.current)
    let next: SessionState
    if (open !== undefined) {
      const startedMs = run.running?.startedMs ?? Date.parse(open.started_at)
      const applied = applyAttempt(
        run.current,
        classifyAttempt(
          AttemptOutcome.StoppedByRun({
            cause: "cancel",
            runtimeSec: Math.max(0, (endedMs - startedMs) / 1000),
            outputTail: run.running === undefined ? "" : joinTails(run.running.stdout, run.running.stderr)
          })
        ),
        { now: iso(endedMs), enablementAvailable: run.enablementAvailable }
      )
      next = applied.state
      run.why = applied.decision.why
    } else {
      next = stopByRun(run.current, "orchestrator_cancelled", iso(endedMs))
      run.why = "the run was cancelled between attempts; not charged"
    }
    yield* save(run, next).pipe(
      Effect.catchAll((e) => Effect.logError(`cannot write the state of the cancelled run: ${e.message}`))
    )
    yield* Effect.logInfo(`baseline cancelled: ${run.why}; state saved in ${run.dir}`)
  })

const runScoped = Effect.fn("Baseline.run")(function* (options: BaselineOptions) {
  const store = yield* StateStore
  const dir = options.sessionDir
  yield* store.lock(dir)
  const loaded = yield* store.load(dir)
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
    current: Option.getOrElse(loaded, initialState),
    why: "",
    attemptsRun: 0,
    running: undefined
  }

  const ended = yield* resume(run, loaded, runStart)
  if (ended !== undefined) {
    return {
      sessionDir: dir,
      state: run.current,
      why: ended,
      attemptsRun: 0,
      alreadyEnded: true
    } satisfies BaselineReport
  }

  yield* attempts(run).pipe(Effect.onInterrupt(() => cancel(run)))

  const final = run.current
  const why = run.why !== "" ? run.why : `the session ended as ${final.stop_reason ?? final.status}`
  yield* Effect.logInfo(
    final.status === "succeeded"
      ? `baseline succeeded: throughput ${final.baseline_tput} (${why})`
      : `baseline ${final.status}: ${final.stop_reason ?? "no reason"} (${why})`
  )
  return {
    sessionDir: dir,
    state: final,
    why,
    attemptsRun: run.attemptsRun,
    alreadyEnded: false
  } satisfies BaselineReport
})

/**
 * Runs a baseline session (see the header): holds the session lock for the run and returns the
 * final state with why the run ended. Each attempt runs through the AttemptRunner service.
 */
export const runBaseline = (options: BaselineOptions) => Effect.scoped(runScoped(options))
