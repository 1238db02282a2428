/**
 * A sweep's client run, classified (docs/design.md#failure-classes): the facts the sweep runner
 * reported for one run, put to the one classifier of attempts (Failure.ts `classifyAttempt`), so a
 * run is judged as a baseline attempt is. Pure.
 */
import type { AttemptResult } from "../Failure.js"
import { AttemptOutcome, classifyAttempt } from "../Failure.js"
import type { Metrics, ResultFormat } from "../Results.js"

/** What the sweep runner says of one client run (programs/SweepEngine.ts `ClientOutcome` adds to it). */
export interface ClientRunReport {
  /** The client's exit code; null when it has none (killed at its timeout, or the runner ended). */
  readonly exitCode: number | null
  readonly timedOut: boolean
  /** The client's own runtime. */
  readonly runtimeSec: number
  /** The engine was gone after (or during) the run. */
  readonly engineDied: boolean
  readonly engineExitCode: number | null
  /** `--between` exited non-zero: the client did not run. */
  readonly betweenExitCode: number | null
}

/** What the runner said of one client run, and what its files held. */
export interface ClientRunFacts extends ClientRunReport {
  /** The run's bound (`--point-timeout`), when there is one. */
  readonly timeoutSec?: number | undefined
  /** The tail of client.log, its signature and its telling lines (Failure.ts `isTellingLine`). */
  readonly outputTail: string
  readonly outputSignature?: string | undefined
  readonly evidence: ReadonlyArray<string>
  /** The result file, as read (Results.ts); undefined when there was none to read. */
  readonly result?:
    | {
        readonly throughput?: unknown
        readonly format?: ResultFormat | undefined
        readonly invalid?: string | undefined
        readonly metrics?: Metrics | undefined
      }
    | undefined
}

/**
 * The class of one client run. `--between` failing is the run's failure (`subprocess_nonzero`);
 * an engine that died under the client decides the class whatever the client did (Failure.ts's
 * server-exit branch); a client without an exit code whose engine lives timed out; else the
 * client's exit and result decide, as for a baseline attempt (completed = 0 is never a measurement).
 */
export const classifyClientRun = (facts: ClientRunFacts): AttemptResult => {
  if (facts.betweenExitCode !== null) {
    return {
      errorClass: "subprocess_nonzero",
      exitCode: facts.betweenExitCode,
      runtimeSec: facts.runtimeSec,
      error: `--between exited with code ${facts.betweenExitCode}; the client did not run`,
      launchLog: "",
      throughput: null
    }
  }
  if (!facts.engineDied && (facts.timedOut || facts.exitCode === null)) {
    return classifyAttempt(
      AttemptOutcome.TimedOut({
        runtimeSec: facts.runtimeSec,
        timeoutSec: facts.timeoutSec ?? facts.runtimeSec,
        outputTail: facts.outputTail,
        outputSignature: facts.outputSignature
      })
    )
  }
  return classifyAttempt(
    AttemptOutcome.Exited({
      exitCode: facts.exitCode ?? 1,
      runtimeSec: facts.runtimeSec,
      outputTail: facts.outputTail,
      outputSignature: facts.outputSignature,
      evidence: facts.evidence,
      throughput: facts.result?.throughput,
      resultFormat: facts.result?.format,
      invalidMetric: facts.result?.invalid,
      metrics: facts.result?.metrics,
      serverExitCode: facts.engineDied ? facts.engineExitCode : undefined
    })
  )
}
