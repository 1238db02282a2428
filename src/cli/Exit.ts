import * as ValidationError from "@effect/cli/ValidationError"
import { Data } from "effect"
import type { SessionSpecMismatch } from "../domain/SessionSpec.js"
import type { AttemptError } from "../programs/AttemptRunner.js"
import type { ExperimentChanged } from "../programs/Sweep.js"
import type { SessionLocked, StateCorrupt, StateFromFuture, StateIoFailed } from "../services/StateStore.js"
import type { SessionNotFound } from "./commands/state.js"

/**
 * The CLI's exit codes (stable; listed in `--help` and the README). Every error tag maps to one
 * code in `exitCodeFor`; nothing else decides an exit code.
 */
export const EXIT = {
  ok: 0,
  internal: 1,
  usage: 2,
  rayNotFound: 3,
  clusterUnreachable: 4,
  rayCommandFailed: 5,
  ensureRefused: 6,
  infeasible: 7,
  state: 8,
  lease: 9,
  baselineFailed: 10,
  baselineArgError: 11,
  enablementStalled: 12,
  sessionTimeExhausted: 13,
  sweepNoFeasiblePoint: 14,
  waitExpired: 15,
  leaseTimeout: 124,
  leaseFailed: 125,
  commandNotExecutable: 126,
  commandNotFound: 127,
  cancelled: 130
} as const

export const EXIT_CODES_HELP = `Exit codes:
  0    success (lease run: the command's own exit code)
  1    internal error (a bug: please report it)
  2    bad usage: an unknown or invalid option, a missing \`-- CMD\`, an invalid RAY_ADDRESS or
       HYPERLOOM_* setting, a baseline session run with other arguments (nothing runs)
  3    no ray executable found (pip install -U "ray==2.58.0", then put ray on PATH or set HYPERLOOM_RAY)
  4    no Ray cluster found or its GCS does not answer (or several clusters and no RAY_ADDRESS)
  5    a ray command failed or did not finish in time
  6    ensure refused to start a head (explicit address, multi-node run, foreign Ray daemons),
       or another hyperloom process kept the host's Ray lock for 5 minutes, or the host's
       hyperloom directory (/tmp/hyperloom-<uid>) belongs to another user
  7    ray_cluster_infeasible: the cluster cannot grant the lease (repair refused or not possible)
  8    session state unusable: corrupt, not a regular file, from a newer hyperloom, or locked
       by another run
  9    the lease could not be held (bridge or actor failure)
  10   baseline stopped: baseline_failed
  11   baseline stopped: baseline_arg_error
  12   baseline stopped: enablement_stalled
  13   baseline stopped: session_time_exhausted (--deadline)
  14   sweep run: sweep_no_feasible_point (no point met every SLO)
  15   lease_wait_expired: the lease was not granted within --wait S (the holder is named; nothing ran)
  74   stdout could not be written (--json > /dev/full); one line on stderr
  124  lease run: the command exceeded --timeout
  125  lease run: hyperloom itself failed (codes 3-9 and 15 above); the precise code is in the error line
       and in --json's "exit_code"
  126  lease run: CMD is not executable
  127  lease run: CMD was not found
  130  cancelled (Ctrl-C / SIGTERM)
  141  stdout's reader went away (EPIPE, e.g. \`| head -1\`); lease run stops CMD and releases first`

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

/** One exit code per error tag: exhaustive (a missing or unknown tag is a type error). */
const byTag: { readonly [K in Exclude<Failure["_tag"], "ExitWith">]: number } = {
  UsageError: EXIT.usage,
  ExperimentChanged: EXIT.usage,
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
  LeaseBridgeStartFailed: EXIT.lease,
  LeaseBridgeProtocolError: EXIT.lease,
  LeaseRayInitFailed: EXIT.lease,
  LeaseActorFailed: EXIT.lease,
  LeaseWaitExpired: EXIT.waitExpired
}

/** The exit code of a failure; @effect/cli's usage errors (InvalidValue, MissingValue, …) exit 2. */
export const exitCodeFor = (error: Failure | ValidationError.ValidationError): number =>
  ValidationError.isValidationError(error)
    ? EXIT.usage
    : error._tag === "ExitWith"
      ? error.code
      : byTag[error._tag]

/**
 * The exit code of `baseline run` from the session's outcome: succeeded 0, each stop reason its
 * own code, cancelled 130. (`state show` exits 0 whenever it could show the state.)
 */
export const exitCodeForSession = (state: {
  readonly status: string
  readonly stop_reason: string | null
}): number => {
  if (state.status === "cancelled") return EXIT.cancelled
  if (state.status !== "stopped") return EXIT.ok
  switch (state.stop_reason) {
    case "baseline_failed":
      return EXIT.baselineFailed
    case "baseline_arg_error":
      return EXIT.baselineArgError
    case "enablement_stalled":
      return EXIT.enablementStalled
    case "session_time_exhausted":
      return EXIT.sessionTimeExhausted
    case "orchestrator_cancelled":
      return EXIT.cancelled
    default:
      return EXIT.internal
  }
}
