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
import { Clock, Console, Duration, Effect, Either, Option } from "effect"
import {
  AttemptOutcome,
  type AttemptResult,
  boundedErrorText,
  classifyAttempt,
  isTellingLine,
  MAX_ERROR_CHARS,
  MAX_EVIDENCE_LINES
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
import { AttemptFiles } from "../services/AttemptFiles.js"
import { Enablement } from "../services/Enablement.js"
import type { LeaseOutput } from "../services/LeaseBridge.js"
import { StateStore } from "../services/StateStore.js"
import { AttemptRunner, type AttemptSpec } from "./AttemptRunner.js"
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
 * The telling line of an attempt's error text, shortened: the marker line when there is one; the
 * classifier's description for the classes that have one (timeout, no report, …); otherwise the
 * last line that reads like an error (stdout and stderr arrive interleaved, so the error is not
 * always the last line), else the last line.
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
      : ([...lines].reverse().find((l) => ERRORISH.test(l)) ?? lines[lines.length - 1]))
  const text = (line ?? "").replace(/^…/, "")
  return text.length > max ? `${text.slice(0, max - 1)}…` : text
}

const runScoped = Effect.fn("Baseline.run")(function* (options: BaselineOptions) {
  const store = yield* StateStore
  const files = yield* AttemptFiles
  const enablement = yield* Enablement
  const runner = yield* AttemptRunner
  const dir = options.sessionDir
  const enablementAvailable = options.enablementCmd !== undefined && options.enablementCmd.trim() !== ""
  const print = options.onOutput ?? ((line: string) => Console.error(line))
  const now = Clock.currentTimeMillis

  yield* store.lock(dir)
  const loaded = yield* store.load(dir)
  const runStart = yield* now
  const deadlineAt = options.deadlineSec !== undefined ? runStart + options.deadlineSec * 1000 : undefined

  // The state of the run, always the newest: saved after every change, read by the cancel handler.
  let current: SessionState = Option.getOrElse(loaded, initialState)
  const save = (next: SessionState) =>
    Effect.uninterruptible(
      Effect.suspend(() => {
        current = next
        return store.save(dir, next)
      })
    )

  // Resume.
  if (Option.isSome(loaded)) {
    const recovered = recoverInterrupted(current, iso(runStart))
    for (const a of recovered.baseline_attempts) {
      if (a.error_class === "interrupted" && current.baseline_attempts[a.number - 1]?.ended_at === null) {
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
    if (isTerminal(reopened)) {
      if (reopened !== current) yield* save(reopened)
      const why =
        reopened.status === "succeeded"
          ? `the session already succeeded (throughput ${reopened.baseline_tput}); nothing to run (use a new --session directory to run the baseline again)`
          : `the session already stopped (${reopened.stop_reason}); nothing to run (use a new --session directory to run the baseline again)`
      yield* Effect.logInfo(why)
      return {
        sessionDir: dir,
        state: current,
        why,
        attemptsRun: 0,
        alreadyEnded: true
      } satisfies BaselineReport
    }
    if (reopened !== current) yield* save(reopened)
    yield* Effect.logInfo(
      `resuming session ${dir} at attempt ${reopened.baseline_attempts.length + 1} (streaks: failure ${reopened.baseline_failure_streak}, arg-error ${reopened.baseline_arg_error_streak}, total failures ${reopened.baseline_total_failures})`
    )
    if (reopened.enablement.attempts > 0 && !enablementAvailable) {
      yield* Effect.logInfo(
        "the enablement lane was engaged but no --enablement-cmd was given: its counters stand, rule 3 applies again"
      )
    }
  } else {
    yield* save(current)
    yield* Effect.logInfo(`new baseline session ${dir}`)
  }

  let why = ""
  let attemptsRun = 0
  // The attempt in flight, for the cancel handler.
  let running: AttemptOutput | undefined

  const remainingMs = Effect.map(now, (t) =>
    deadlineAt === undefined ? Number.POSITIVE_INFINITY : deadlineAt - t
  )

  /** Bounds an effect by the session deadline: None when the deadline passed first. */
  const withinDeadline = <A, E2, R2>(effect: Effect.Effect<A, E2, R2>) =>
    Effect.flatMap(remainingMs, (ms) =>
      Number.isFinite(ms)
        ? Effect.timeoutOption(effect, Duration.millis(Math.max(0, ms)))
        : Effect.asSome(effect)
    )

  const stopForDeadline = (during: string) =>
    Effect.gen(function* () {
      why = `the session deadline (${options.deadlineSec} s) passed ${during}; not charged`
      yield* save(stopByRun(current, "session_time_exhausted", iso(yield* now)))
    })

  /** Runs the enablement command for the pending launch log; false when the deadline passed. */
  const runEnablement = (attempt: number, launchLog: string) =>
    Effect.gen(function* () {
      const round = current.enablement.attempts
      yield* Effect.logInfo(
        `enablement ${round}: running \`${options.enablementCmd}\` with HYPERLOOM_LAUNCH_LOG=${launchLog}`
      )
      const outcome = yield* withinDeadline(
        enablement.run({
          command: options.enablementCmd ?? "",
          env: {
            ...options.env,
            HYPERLOOM_LAUNCH_LOG: launchLog,
            HYPERLOOM_SESSION_DIR: dir,
            HYPERLOOM_ATTEMPT: String(attempt)
          },
          cwd: options.cwd,
          onOutput: (line) => print(`[enablement ${round}] ${line}`)
        })
      )
      if (Option.isNone(outcome)) {
        yield* stopForDeadline(`while the enablement command ran`)
        return false
      }
      const r = outcome.value
      yield* Effect.logInfo(
        r.exitCode === null
          ? `enablement ${round}: could not run: ${r.startError ?? "unknown reason"}; revalidating anyway`
          : `enablement ${round}: exited with code ${r.exitCode} after ${fmtSec(r.elapsedSec)}; revalidating the baseline`
      )
      yield* save(finishEnablement(current))
      return true
    })

  /**
   * A serving attempt's outcome from the runner's `serve.json` and the whole logs (SPEC §10): a
   * server that never got ready is judged on server.log; a client that ran on client.log (plus
   * server.log's telling lines: a server dying under load explains a failing client). The signature
   * digests both logs whole. undefined when the runner did not get as far as an outcome.
   */
  const servingOutcome = (status: ServeStatus, r: LeaseRunResult, paths: ReturnType<typeof attemptPaths>) =>
    Effect.gen(function* () {
      if (status.outcome === null || status.outcome === "stopped") return undefined
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
        hyperloomVersion: options.version ?? "unknown",
        requestedGpus: options.request.gpus,
        nodeId: r.started?.nodeId,
        status,
        serverArgv: ["sh", "-c", serving.server],
        clientArgv: options.argv
      })
      yield* files
        .writeJson(`${dir.replace(/\/+$/, "")}/${ENVIRONMENT_FILE}`, record)
        .pipe(Effect.catchAll((e) => Effect.logWarning(`cannot write the environment record: ${e.message}`)))
    })

  const loop = Effect.gen(function* () {
    while (current.status === "running") {
      // An enablement run decided but not finished (a resumed session).
      if (current.enablement.inflight) {
        const logPath = current.enablement.launch_log_path
        if (enablementAvailable && logPath !== null) {
          const last = current.baseline_attempts[current.baseline_attempts.length - 1]
          if (!(yield* runEnablement(last?.number ?? 0, logPath))) break
        } else {
          yield* Effect.logInfo(
            "an enablement run was pending, but no --enablement-cmd was given: skipping it"
          )
          yield* save(finishEnablement(current))
        }
        continue
      }
      if ((yield* remainingMs) <= 0) {
        yield* stopForDeadline("before the next attempt")
        break
      }

      // Open the attempt: the in-flight record is on disk before the command runs.
      const startedMs = yield* now
      yield* save(beginAttempt(current, iso(startedMs)))
      const n = current.baseline_attempts.length
      attemptsRun++
      const paths = attemptPaths(dir, n)
      yield* files.prepare(paths.dir, paths.resultFile)
      const attempt: AttemptOutput = {
        startedMs,
        stdout: "",
        stderr: "",
        digest: new OutputDigest(),
        evidence: []
      }
      running = attempt
      const serving = options.serving
      yield* Effect.logInfo(
        serving !== undefined
          ? `attempt ${n}: serving benchmark under a lease (${describeRequest(options.request)}): server \`${serving.server}\`, ready at ${serving.readyPath} within ${serving.readyTimeoutSec} s, then client \`${options.argv.join(" ")}\`` +
              (options.attemptTimeoutSec !== undefined
                ? `, attempt timeout ${options.attemptTimeoutSec} s`
                : "")
          : `attempt ${n}: running \`${options.argv.join(" ")}\` under a lease (${describeRequest(options.request)})` +
              (options.attemptTimeoutSec !== undefined
                ? `, attempt timeout ${options.attemptTimeoutSec} s`
                : "")
      )
      const onOutput = (o: LeaseOutput) =>
        Effect.zipRight(
          Effect.sync(() => {
            const kept = `${attempt[o.stream]}${o.line}\n`
            attempt[o.stream] = kept.length > TAIL_CHARS ? kept.slice(-TAIL_CHARS) : kept
            attempt.digest.add(o.stream, o.line)
            keepEvidence(attempt.evidence, o.line)
          }),
          print(`[attempt ${n}] ${o.line}`)
        )
      const spec: AttemptSpec = {
        request: options.request,
        argv:
          serving !== undefined ? servingArgv(serving, paths.dir, options.cwd, options.argv) : options.argv,
        server: serving?.server,
        env: {
          ...options.env,
          HYPERLOOM_RESULT_FILE: paths.resultFile,
          HYPERLOOM_SESSION_DIR: dir,
          HYPERLOOM_ATTEMPT: String(n)
        },
        cwd: options.cwd,
        timeoutSec: options.attemptTimeoutSec,
        onOutput
      }
      // The infeasible cluster is an outcome of the attempt, caught by its tag; any other lease
      // failure stays in the error channel.
      const leased = runner.run(spec).pipe(
        Effect.map((result) => ({ _tag: "Ran" as const, result })),
        Effect.catchTag("RayClusterInfeasible", (error) =>
          Effect.succeed({ _tag: "Infeasible" as const, error })
        )
      )
      const ran = yield* withinDeadline(Effect.either(leased))
      const endedMs = yield* now
      const streamed = (r?: LeaseRunResult) =>
        attempt.stdout.trim() !== "" || attempt.stderr.trim() !== "" || r === undefined
      const outputTail = (r?: LeaseRunResult) =>
        streamed(r) ? joinTails(attempt.stdout, attempt.stderr) : joinTails(r!.stdoutTail, r!.stderrTail)
      // The whole output's signature; a runner that streamed nothing leaves only its tails to digest.
      const signatureOf = (r?: LeaseRunResult) =>
        streamed(r)
          ? attempt.digest.signature()
          : outputSignature({ stdout: r!.stdoutTail, stderr: r!.stderrTail })

      let result: AttemptResult
      if (Option.isNone(ran)) {
        result = classifyAttempt(
          AttemptOutcome.StoppedByRun({
            cause: "deadline",
            runtimeSec: (endedMs - startedMs) / 1000,
            outputTail: outputTail()
          })
        )
      } else if (Either.isLeft(ran.value)) {
        // Not the command's failure: record it uncharged, keep the session resumable, end the run.
        const error = ran.value.left
        const message = error.message
        const applied = applyAttempt(
          current,
          {
            errorClass: "interrupted",
            exitCode: null,
            runtimeSec: (endedMs - startedMs) / 1000,
            error: boundedErrorText(outputTail(), `attempt not run to its end: the lease failed: ${message}`),
            launchLog: "",
            throughput: null
          },
          { now: iso(endedMs), enablementAvailable }
        )
        yield* save(applied.state)
        running = undefined
        yield* Effect.logInfo(
          `attempt ${n}: the lease failed (${error._tag}); recorded as interrupted, not charged; the session can be resumed once the cluster is fixed`
        )
        return yield* Effect.fail(error)
      } else if (ran.value.right._tag === "Infeasible") {
        result = classifyAttempt(AttemptOutcome.LeaseInfeasible({ message: ran.value.right.error.message }))
      } else {
        const r = ran.value.right.result
        // The command's own runtime: `fast_exit_arg_error` is about how fast the command died,
        // not how long ensure and the bridge took before it started.
        const runtimeSec = r.commandSec
        if (r.timedOut || r.exitCode === null) {
          result = classifyAttempt(
            AttemptOutcome.TimedOut({
              runtimeSec,
              timeoutSec: options.attemptTimeoutSec ?? runtimeSec,
              outputTail: outputTail(r),
              outputSignature: signatureOf(r)
            })
          )
        } else {
          const status = serving !== undefined ? yield* files.readServeStatus(paths.serveStatus) : undefined
          if (serving !== undefined) {
            yield* recordEnvironment(n, status, r, serving)
          }
          const servingResult =
            serving !== undefined && status !== undefined
              ? yield* servingOutcome(status, r, paths)
              : undefined
          if (servingResult !== undefined) {
            result = servingResult
          } else {
            const parsed = yield* files.readResult(paths.resultFile)
            result = classifyAttempt(
              AttemptOutcome.Exited({
                exitCode: r.exitCode,
                runtimeSec,
                outputTail: outputTail(r),
                outputSignature: signatureOf(r),
                evidence: attempt.evidence,
                throughput: parsed?.throughput,
                resultFormat: parsed?.format,
                metrics: parsed?.metrics
              })
            )
          }
        }
      }

      const applied = applyAttempt(current, result, {
        now: iso(endedMs),
        enablementAvailable,
        launchLogPath: paths.launchLog
      })
      const decision = applied.decision
      // The launch log is on disk before the state that points the enablement run at it.
      if (decision._tag === "run_enablement") yield* files.writeLaunchLog(paths.launchLog, decision.launchLog)
      yield* save(applied.state)
      running = undefined
      yield* Effect.logInfo(describeAttempt(applied.state, decision))
      if (result.errorClass !== null && result.error !== null) {
        const head = errorHead(result.error, result.errorClass)
        if (head !== "") yield* Effect.logInfo(`attempt ${n}: ${head}`)
      }

      if (decision._tag === "stop" || decision._tag === "succeeded") {
        why = decision.why
        break
      }
      if (decision._tag === "run_enablement" && !(yield* runEnablement(n, paths.launchLog))) break
    }
  })

  const onCancel = Effect.gen(function* () {
    const endedMs = yield* now
    const open = inflightAttempt(current)
    let next: SessionState
    if (open !== undefined) {
      const startedMs = running?.startedMs ?? Date.parse(open.started_at)
      const applied = applyAttempt(
        current,
        classifyAttempt(
          AttemptOutcome.StoppedByRun({
            cause: "cancel",
            runtimeSec: Math.max(0, (endedMs - startedMs) / 1000),
            outputTail: running === undefined ? "" : joinTails(running.stdout, running.stderr)
          })
        ),
        { now: iso(endedMs), enablementAvailable }
      )
      next = applied.state
      why = applied.decision.why
    } else {
      next = stopByRun(current, "orchestrator_cancelled", iso(endedMs))
      why = "the run was cancelled between attempts; not charged"
    }
    yield* save(next).pipe(
      Effect.catchAll((e) => Effect.logError(`cannot write the state of the cancelled run: ${e.message}`))
    )
    yield* Effect.logInfo(`baseline cancelled: ${why}; state saved in ${dir}`)
  })

  yield* loop.pipe(Effect.onInterrupt(() => onCancel))

  const final = current
  if (why === "") why = `the session ended as ${final.stop_reason ?? final.status}`
  yield* Effect.logInfo(
    final.status === "succeeded"
      ? `baseline succeeded: throughput ${final.baseline_tput} (${why})`
      : `baseline ${final.status}: ${final.stop_reason ?? "no reason"} (${why})`
  )
  return { sessionDir: dir, state: final, why, attemptsRun, alreadyEnded: false } satisfies BaselineReport
})

/**
 * Runs a baseline session (see the header): holds the session lock for the run and returns the
 * final state with why the run ended.
 */
export const runBaseline = (options: BaselineOptions) => Effect.scoped(runScoped(options))
