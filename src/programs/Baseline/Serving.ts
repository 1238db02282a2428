/**
 * A serving attempt's side of the baseline: the serving runner's command, its outcome read from
 * `serve.json` and the whole logs, and the session's environment record.
 */
import { Effect } from "effect"
import type { AttemptPaths } from "../../domain/Attempt.js"
import { AttemptOutcome, type AttemptResult, classifyAttempt, MAX_ERROR_CHARS } from "../../domain/Failure.js"
import type { ClientCounts } from "../../domain/Results.js"
import {
  type CheckRun,
  ENVIRONMENT_FILE,
  environmentRecord,
  LeasedCommand,
  type Readiness,
  type ServeStatus,
  serverArgv
} from "../../domain/Serving.js"
import {
  checkFailed,
  DEFAULT_MAX_FAILED,
  judgeRun,
  renderFinding,
  sessionClockMedian
} from "../../domain/Validity.js"
import type { AttemptFilesShape } from "../../services/AttemptFiles.js"
import { readEvidence } from "../Evidence.js"
import type { LeaseRunResult } from "../Lease.js"
import { resultFacts } from "../ResultFacts.js"

export interface ServingOptions {
  /** The server command line (one string, run with `sh -c`). */
  readonly server: string
  readonly readiness: Readiness
  /** Grace between TERM and KILL when the server is stopped (default `RUNNER_DEFAULTS`). */
  readonly stopGraceSec?: number | undefined
  /** Seconds between progress lines while the server loads (default `RUNNER_DEFAULTS`). */
  readonly progressEverySec?: number | undefined
  /** `--check`: once after readiness, before the client; non-zero: nothing measured (docs/trust.md#is-the-number-valid). */
  readonly check?: string | undefined
  /** `--warmup`: requests after readiness, discarded (default `RUNNER_DEFAULTS.warmup`). */
  readonly warmup?: number | undefined
  /** `--max-failed`: the share of failed requests above which a run is invalid (default 1 %). */
  readonly maxFailed?: number | undefined
}

/** A serving attempt's leased command: the server, its readiness check, the client; files in the attempt's folder. */
export const servingCommand = (serving: ServingOptions, attemptDir: string, client: ReadonlyArray<string>) =>
  LeasedCommand.Serving({
    server: serving.server,
    readiness: serving.readiness,
    client,
    dir: attemptDir,
    stopGraceSec: serving.stopGraceSec,
    progressEverySec: serving.progressEverySec,
    check: serving.check,
    warmup: serving.warmup
  })

/**
 * A serving attempt's outcome from the runner's `serve.json` and the whole logs: a server that
 * never got ready is judged on server.log; a client that ran on client.log (plus server.log's
 * telling lines: a server dying under load explains a failing client). The signature digests both
 * logs whole. undefined when the runner did not get as far as an outcome.
 */
export const servingOutcome = Effect.fn("Baseline.servingOutcome")(function* (
  files: AttemptFilesShape,
  status: ServeStatus,
  r: LeaseRunResult,
  paths: AttemptPaths,
  readiness: Readiness,
  maxFailed: number = DEFAULT_MAX_FAILED,
  /** The client's argv: the dataset it names (ResultFacts.ts). */
  clientArgv: ReadonlyArray<string> = []
) {
  if (status.outcome === null || status.outcome === "stopped") return undefined
  if (status.outcome === "check_failed" && status.check != null) return checkFailedResult(status.check, r)
  const read = yield* readEvidence(files, [
    { file: paths.serverLog, channel: "server" },
    { file: paths.clientLog, channel: "client" }
  ])
  const [serverTail = "", clientTail = ""] = read.tails
  const evidence = read.evidence
  if (status.outcome !== "client_exited") {
    const timedOut = status.outcome === "ready_timeout"
    return classifyAttempt(
      AttemptOutcome.ServerNotReady({
        exitCode: timedOut ? null : (status.server.exit_code ?? r.exitCode),
        runtimeSec: status.server.runtime_sec ?? r.commandSec,
        outputTail: serverTail,
        readyTimeoutSec: timedOut ? readiness.timeoutSec : undefined,
        outputSignature: read.signature,
        evidence
      })
    )
  }
  const exitCode = status.client?.exit_code ?? r.exitCode ?? 1
  // the engine exited on its own while the client ran: that fact, not the client's words, classifies
  const serverExitCode =
    status.server.stopped_with === null && status.server.exit_code !== null
      ? status.server.exit_code
      : undefined
  const serverDied =
    serverExitCode !== undefined
      ? `\nthe server exited with code ${status.server.exit_code} while the client ran; server.log ends:\n${serverTail.slice(-MAX_ERROR_CHARS / 2)}`
      : ""
  const parsed = yield* files.readResult(paths.resultFile)
  const classified = classifyAttempt(
    AttemptOutcome.Exited({
      exitCode,
      // a failed client is judged on its own runtime (an argument error is fast), not the server's load
      runtimeSec: exitCode !== 0 ? (status.client?.runtime_sec ?? r.commandSec) : r.commandSec,
      outputTail: `${clientTail}${serverDied}`,
      outputSignature: read.signature,
      evidence,
      throughput: parsed?.throughput,
      resultFormat: parsed?.format,
      invalidMetric: parsed?.invalid,
      metrics: parsed?.metrics,
      serverExitCode
    })
  )
  const facts = yield* resultFacts(files, parsed, clientArgv)
  return { ...judged(classified, status, parsed?.client, maxFailed), ...facts }
})

/**
 * `--check` exited non-zero: nothing was measured; the attempt is an `invalid_measurement` whose
 * finding quotes the check's last line (its output kept in check.log).
 */
const checkFailedResult = (check: CheckRun, r: LeaseRunResult): AttemptResult => {
  const finding = checkFailed(check.exit_code, check.last_line)
  return {
    errorClass: "invalid_measurement",
    exitCode: r.exitCode,
    runtimeSec: r.commandSec,
    error: `invalid_measurement: ${renderFinding(finding)}; its output is in ${check.log}`,
    launchLog: check.last_line,
    throughput: null,
    validity: { verdict: "invalid", findings: [finding] },
    check
  }
}

/**
 * A measured attempt judged (docs/trust.md#is-the-number-valid): its verdict, the client's counts,
 * the check and warm-up kept with it; an invalid one is no success (`invalid_measurement`, the
 * findings its error): kept, never the baseline's throughput.
 */
const judged = (
  result: AttemptResult,
  status: ServeStatus,
  client: ClientCounts | undefined,
  maxFailed: number
): AttemptResult => {
  const kept = {
    ...result,
    client,
    check: status.check,
    warmup: status.warmup,
    observations: status.observations,
    engineConfig: status.engine_config
  }
  if (result.errorClass !== null) return kept
  const validity = judgeRun(
    {
      metrics: result.metrics,
      client,
      observations: status.observations,
      engineConfig: status.engine_config,
      params: {},
      asked: {}
    },
    { maxFailed, slos: [], sessionClockMedian: sessionClockMedian([status.observations]) }
  )
  if (validity.verdict !== "invalid") return { ...kept, validity, maxFailed }
  return {
    ...kept,
    validity,
    maxFailed,
    errorClass: "invalid_measurement",
    error: `invalid_measurement: ${validity.findings
      .filter((f) => f.severity === "invalid")
      .map(renderFinding)
      .join("; ")}`
  }
}

/** The session's environment record, rewritten by every serving attempt that reached the node. */
export const recordEnvironment = Effect.fn("Baseline.recordEnvironment")(function* (
  files: AttemptFilesShape,
  input: {
    readonly sessionDir: string
    readonly now: string
    readonly attempt: number
    readonly version: string | undefined
    readonly requestedGpus: number
    readonly server: string
    readonly clientArgv: ReadonlyArray<string>
    readonly status: ServeStatus | undefined
    readonly result: LeaseRunResult
  }
) {
  if (input.status === undefined && input.result.started === null) return
  const record = environmentRecord({
    now: input.now,
    attempt: input.attempt,
    hyperloomVersion: input.version ?? "unknown",
    requestedGpus: input.requestedGpus,
    nodeId: input.result.started?.nodeId,
    status: input.status,
    serverArgv: serverArgv(input),
    clientArgv: input.clientArgv
  })
  yield* files
    .writeJson(`${input.sessionDir.replace(/\/+$/, "")}/${ENVIRONMENT_FILE}`, record)
    .pipe(Effect.catchAll((e) => Effect.logWarning(`cannot write the environment record: ${e.message}`)))
})
