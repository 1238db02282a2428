/**
 * The sweep program's contract (docs/design.md#sweeps): what `runSweep` is given, what it reports,
 * and its own errors. programs/Sweep.ts re-exports every name; the rooms under programs/Sweep/
 * import them from here.
 */
import { Data, Duration, type Effect } from "effect"
import type { LeaseRequest } from "../../domain/Feasibility.js"
import type { Readiness } from "../../domain/Serving.js"
import {
  type Difference,
  type Experiment,
  renderDifferences,
  type Strategy,
  type SweepDoc
} from "../../domain/Sweep.js"

export interface SweepOptions {
  readonly sessionDir: string
  readonly experiment: Experiment
  readonly request: LeaseRequest
  /** A shell command line run before each client run (e.g. a prefix-cache reset). */
  readonly between?: string | undefined
  /** Bounds each client run, from its start; past it the run fails as a timeout. */
  readonly pointTimeoutSec?: number | undefined
  readonly readiness: Readiness
  /**
   * Bounds each combination's wait for its lease (`--wait`, docs/design.md#fair-queue): past it the
   * sweep stops, naming the holder.
   */
  readonly waitSec?: number | undefined
  /** Bounds the whole run; past it the sweep stops (resumable) as session_time_exhausted. */
  readonly deadlineSec?: number | undefined
  readonly env: Readonly<Record<string, string | undefined>>
  readonly cwd: string
  /** hyperloom's version, for the session's environment record. */
  readonly version?: string | undefined
  /**
   * Combinations at once (`--parallel`, docs/design.md#sweeps-at-cluster-scale; default 1), each
   * under its own lease.
   */
  readonly parallel?: number | undefined
  /**
   * Where the status line goes (docs/design.md#sweeps-at-cluster-scale): `redraw` is called at
   * every change (a terminal redraws it in place); without it, the line is logged every
   * `STATUS_EVERY`.
   */
  readonly redrawStatus?: ((line: string) => Effect.Effect<void>) | undefined
  /**
   * `--strategy` (docs/design.md#time-to-the-answer): `grid` (default) runs every combination;
   * `adaptive` searches.
   */
  readonly strategy?: Strategy | undefined
  /**
   * `--hardware-class` (docs/design.md#sweeps-at-cluster-scale): the class to run on among those
   * present (`L4`, `2xL4`, `cpu`…); absent: the class with the most nodes that could serve.
   */
  readonly hardwareClass?: string | undefined
  /**
   * `--check`, `--warmup` and `--max-failed` (docs/trust.md#is-the-number-valid): the check and the
   * warm-up once per engine start after readiness, the failed-request share above which a run is
   * invalid.
   */
  readonly check?: string | undefined
  readonly warmup?: number | undefined
  readonly maxFailed?: number | undefined
}

/** How often the status line is logged when it is not redrawn on a terminal. */
export const STATUS_EVERY = Duration.seconds(30)

/** The same session was given a different experiment (exit 2). */
export class ExperimentChanged extends Data.TaggedError("ExperimentChanged")<{
  readonly sessionDir: string
  readonly differences: ReadonlyArray<Difference>
}> {
  override get message(): string {
    return `session ${this.sessionDir} holds a different sweep: ${renderDifferences(this.differences)}; two experiments never mix: use a new --session directory (or run the recorded one again)`
  }
}

/**
 * The session folder (its sweep.json) vanished while the sweep ran (issue 27 item 5): someone
 * deleted it. The sweep stops (exit 8) without recreating it, and nothing is blamed on the engine.
 */
/** `--hardware-class` names no class of the nodes that could serve (exit 2): what is there is said. */
export class HardwareClassAbsent extends Data.TaggedError("HardwareClassAbsent")<{
  readonly statement: string
}> {
  override get message(): string {
    return this.statement
  }
}

export class SessionVanished extends Data.TaggedError("SessionVanished")<{ readonly sessionDir: string }> {
  override get message(): string {
    return `the session folder ${this.sessionDir} vanished while the sweep ran (its sweep.json is gone): the sweep stopped; nothing was recreated, and the run in flight is not counted against its engine (hyperloom's own files went away, not the engine)`
  }
}

export interface SweepReport {
  readonly sessionDir: string
  readonly doc: SweepDoc
  /** Engine starts (leases) this run made. */
  readonly engineStarts: number
  /** Client runs this run made. */
  readonly clientRuns: number
  /** Nothing ran: the sweep had finished before. */
  readonly alreadyDone: boolean
}
