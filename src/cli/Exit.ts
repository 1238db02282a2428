import * as ValidationError from "@effect/cli/ValidationError"
import { Data } from "effect"
import type { SessionNotFound } from "../domain/Errors.js"
import type { SessionSpecMismatch } from "../domain/SessionSpec.js"
import type { SessionState, StopReason } from "../domain/State.js"
import { noEngineReady } from "../domain/Sweep/NoEngine.js"
import type { SweepDoc } from "../domain/Sweep.js"
import type { AttemptError } from "../programs/AttemptRunner.js"
import type { SessionHoldsOther } from "../programs/SessionKind.js"
import type { ExperimentChanged, HardwareClassAbsent, SessionVanished } from "../programs/Sweep.js"
import type { SessionLocked, StateCorrupt, StateFromFuture, StateIoFailed } from "../services/StateStore.js"

/**
 * The CLI's exit codes (stable; listed in `--help` and the README), one row each: its name, its
 * code and what it means. `EXIT` and the help text are both read off this table; every error tag
 * maps to one code in `exitCodeFor`, every stop reason in `exitCodeForSession`.
 */
const TABLE = [
  ["ok", 0, "success (lease run: the command's own exit code)"],
  ["internal", 1, "internal error (a bug: please report it)"],
  [
    "usage",
    2,
    "bad usage: an unknown or invalid option, a missing `-- CMD`, an invalid RAY_ADDRESS or HYPERLOOM_* setting, a baseline session run with other arguments, a session folder that holds the other experiment (a sweep's for baseline run, a baseline's for sweep run) (nothing runs)"
  ],
  [
    "rayNotFound",
    3,
    'no ray executable found (pip install -U "ray==2.58.0", then put ray on PATH or set HYPERLOOM_RAY)'
  ],
  [
    "clusterUnreachable",
    4,
    "no Ray cluster found or its GCS does not answer (or several clusters and no RAY_ADDRESS)"
  ],
  ["rayCommandFailed", 5, "a ray command failed or did not finish in time"],
  [
    "ensureRefused",
    6,
    "ensure refused to start a head (explicit address, multi-node run, foreign Ray daemons), or another hyperloom process kept the host's Ray lock for 5 minutes, or the host's hyperloom directory (/tmp/hyperloom-<uid>) belongs to another user"
  ],
  [
    "infeasible",
    7,
    "ray_cluster_infeasible: the cluster cannot grant the lease (repair refused or not possible)"
  ],
  [
    "state",
    8,
    "session state missing (no session in that directory, or its folder vanished while a sweep ran) or unusable: corrupt, not a regular file, from a newer hyperloom, or locked by another run"
  ],
  ["lease", 9, "the lease could not be held (bridge or actor failure)"],
  ["baselineFailed", 10, "baseline stopped: baseline_failed"],
  ["baselineArgError", 11, "baseline stopped: baseline_arg_error"],
  ["enablementStalled", 12, "baseline stopped: enablement_stalled"],
  ["sessionTimeExhausted", 13, "baseline stopped: session_time_exhausted (--deadline)"],
  ["sweepNoFeasiblePoint", 14, "sweep run: sweep_no_feasible_point (no point met every SLO)"],
  [
    "waitExpired",
    15,
    "lease_wait_expired: the lease was not granted within --wait S (the holder is named; nothing ran)"
  ],
  [
    "gpuBusy",
    16,
    "gpu_busy: processes outside the lease held its GPUs for --gpu-clean-timeout S (each is named, none is killed; nothing ran)"
  ],
  [
    "sweepNoEngineReady",
    17,
    "sweep run: sweep_no_engine_ready (no combination's engine ever became ready: each one's note quotes the engine's own line and its server.log)"
  ],
  [
    "compareRegression",
    18,
    "compare --fail-on: a metric regressed past its threshold with 95 % confidence (with one run per point on a side: on the raw change), or no point both sessions measured ok could be judged"
  ],
  ["stdoutFailed", 74, "stdout could not be written (--json > /dev/full); one line on stderr"],
  ["leaseTimeout", 124, "lease run: the command exceeded --timeout"],
  [
    "leaseFailed",
    125,
    'lease run: hyperloom itself failed (codes 3-9, 15 and 16 above); the precise code is in the error line and in --json\'s "exit_code"'
  ],
  ["commandNotExecutable", 126, "lease run: CMD is not executable"],
  ["commandNotFound", 127, "lease run: CMD was not found"],
  ["hangup", 129, "cancelled by SIGHUP (the terminal closed): as Ctrl-C"],
  ["cancelled", 130, "cancelled (Ctrl-C / SIGTERM); a second Ctrl-C never leaves a lease held behind"],
  [
    "stdoutClosed",
    141,
    "stdout's reader went away (EPIPE, e.g. `| head -1`); lease run stops CMD and releases first"
  ]
] as const

type Row = (typeof TABLE)[number]

export const EXIT = Object.fromEntries(TABLE.map(([name, code]) => [name, code])) as {
  readonly [R in Row as R[0]]: R[1]
}

/**
 * The exit codes as `--help` lists them: one line per code, which the help's presentation wraps
 * to the terminal's width under the code's text.
 */
export const EXIT_CODES_HELP = [
  "Exit codes:",
  ...TABLE.map(([, code, what]) => `  ${String(code).padEnd(5)}${what}`)
].join("\n")

/** Ends the command with a given exit code after its output was written (not an error). */
export class ExitWith extends Data.TaggedError("ExitWith")<{ readonly code: number }> {}

/** A usage error found after @effect/cli parsed the command line (e.g. an option before `--` it did not know). */
export class UsageError extends Data.TaggedError("UsageError")<{ readonly detail: string }> {
  override get message(): string {
    return this.detail
  }
}

/**
 * Every error a command can end with (besides @effect/cli's own ValidationError). main.ts
 * requires the whole CLI's error channel to be a subtype, so a program that gains an error type
 * fails the typecheck until it is listed here and given its exit code below.
 */
export type Failure =
  | ExitWith
  | UsageError
  | SessionSpecMismatch
  | SessionNotFound
  // Everything a lease can fail with: settings, addresses, `ray`, the cluster, the lock, the bridge.
  | AttemptError
  | StateCorrupt
  | StateFromFuture
  | SessionLocked
  | StateIoFailed
  | ExperimentChanged
  | HardwareClassAbsent
  | SessionHoldsOther
  | SessionVanished

/** One exit code per error tag: exhaustive (a missing or unknown tag is a type error). */
const byTag: { readonly [K in Exclude<Failure["_tag"], "ExitWith">]: number } = {
  UsageError: EXIT.usage,
  ExperimentChanged: EXIT.usage,
  HardwareClassAbsent: EXIT.usage,
  SessionHoldsOther: EXIT.usage,
  SessionSpecMismatch: EXIT.usage,
  InvalidSetting: EXIT.usage,
  InvalidAddress: EXIT.usage,
  RayNotFound: EXIT.rayNotFound,
  NoClusterFound: EXIT.clusterUnreachable,
  ClusterUnreachable: EXIT.clusterUnreachable,
  MultipleClusters: EXIT.clusterUnreachable,
  RayCommandFailed: EXIT.rayCommandFailed,
  RayCommandTimeout: EXIT.rayCommandFailed,
  EnsureRefused: EXIT.ensureRefused,
  LockHeld: EXIT.ensureRefused,
  LockUnavailable: EXIT.ensureRefused,
  RayClusterInfeasible: EXIT.infeasible,
  StateCorrupt: EXIT.state,
  StateFromFuture: EXIT.state,
  SessionLocked: EXIT.state,
  StateIoFailed: EXIT.state,
  SessionNotFound: EXIT.state,
  SessionVanished: EXIT.state,
  LeaseBridgeStartFailed: EXIT.lease,
  LeaseBridgeProtocolError: EXIT.lease,
  LeaseRayInitFailed: EXIT.lease,
  LeaseActorFailed: EXIT.lease,
  LeaseWaitExpired: EXIT.waitExpired,
  GpuBusy: EXIT.gpuBusy
}

/** The exit code of a failure; @effect/cli's usage errors (InvalidValue, MissingValue, …) exit 2. */
export const exitCodeFor = (error: Failure | ValidationError.ValidationError): number =>
  ValidationError.isValidationError(error)
    ? EXIT.usage
    : error._tag === "ExitWith"
      ? error.code
      : byTag[error._tag]

/** Each stop reason's exit code: exhaustive (a new stop reason fails the typecheck until it has one). */
const byStopReason: { readonly [K in StopReason]: number } = {
  baseline_failed: EXIT.baselineFailed,
  baseline_arg_error: EXIT.baselineArgError,
  enablement_stalled: EXIT.enablementStalled,
  session_time_exhausted: EXIT.sessionTimeExhausted,
  orchestrator_cancelled: EXIT.cancelled
}

/**
 * The exit code of `baseline run` from the session's outcome: succeeded 0, each stop reason its
 * own code, cancelled 130. (`state show` exits 0 whenever it could show the state.) A stopped
 * session without a reason cannot be written by hyperloom: it is internal.
 */
export const exitCodeForSession = (state: Pick<SessionState, "status" | "stop_reason">): number =>
  state.status === "cancelled"
    ? EXIT.cancelled
    : state.status !== "stopped"
      ? EXIT.ok
      : state.stop_reason === null
        ? EXIT.internal
        : byStopReason[state.stop_reason]

/**
 * The exit code of `sweep run` from its document: 0 with a best (or a tie), sweep_no_engine_ready
 * when no engine ever became ready, sweep_no_feasible_point when no point met every SLO, the
 * infeasible cluster's, the deadline's, cancelled's (a lease failure, e.g. --wait's, is the error's
 * own code).
 */
export const exitCodeForSweep = (doc: SweepDoc): number => {
  if (doc.status === "cancelled") return EXIT.cancelled
  if (doc.stop_reason === "ray_cluster_infeasible") return EXIT.infeasible
  if (doc.stop_reason === "session_time_exhausted") return EXIT.sessionTimeExhausted
  if (doc.summary.best !== null) return EXIT.ok
  // not the SLO's fault: no engine ever served (each combination's note quotes the engine's line)
  if (noEngineReady(doc)) return EXIT.sweepNoEngineReady
  return EXIT.sweepNoFeasiblePoint
}
