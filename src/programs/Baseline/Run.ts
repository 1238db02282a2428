/**
 * One run of a baseline session: its options and services, the newest state and the session
 * deadline. The state is saved (atomically, uninterruptibly) after every change and kept in a Ref
 * so the cancel handler sees what was last saved.
 */
import { Clock, Duration, Effect, Ref } from "effect"
import type { LeaseRequest } from "../../domain/Feasibility.js"
import type { OutputDigest } from "../../domain/Signature.js"
import type { SessionState } from "../../domain/State.js"
import { stopByRun } from "../../domain/StopRules.js"
import type { AttemptFilesShape } from "../../services/AttemptFiles.js"
import type { EnablementShape } from "../../services/Enablement.js"
import type { StateStore } from "../../services/StateStore.js"
import type { AttemptRunnerShape } from "../AttemptRunner.js"
import type { ServingOptions } from "./Serving.js"

export interface BaselineOptions {
  /** The session directory (absolute: the command and the enablement get paths inside it). */
  readonly sessionDir: string
  readonly request: LeaseRequest
  /** The baseline command. */
  readonly argv: ReadonlyArray<string>
  /**
   * Bounds each attempt's command, from its start: waiting for a slot held by another lease is
   * never charged. Past it the attempt is a `timeout`. The wait is bounded by the session
   * deadline and interruption only.
   */
  readonly attemptTimeoutSec?: number | undefined
  /**
   * Bounds each attempt's wait for its lease (`--wait`, docs/design.md#fair-queue): past it the run
   * fails, naming the holder.
   */
  readonly waitSec?: number | undefined
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
   * A serving benchmark: each attempt runs the serving runner as the leased command; it starts
   * `server` (`sh -c`, own process group), waits for its `readiness` check, runs `argv` as the client, and
   * stops the server before it exits (so before the lease is released).
   */
  readonly serving?: ServingOptions | undefined
  /** hyperloom's version, for the session's environment record. */
  readonly version?: string | undefined
}

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

/**
 * An attempt's output so far: one tail per stream (the displayed error text), and the digest of
 * every line of both streams (the signature the same-failure rule compares).
 */
export interface AttemptOutput {
  readonly startedMs: number
  stdout: string
  stderr: string
  readonly digest: OutputDigest
  /** The telling lines (`isTellingLine`) of the whole output, the first MAX_EVIDENCE_LINES. */
  readonly evidence: Array<string>
}

/** One run of a session: its options and services, and the two things that change as it goes. */
export interface Run {
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
  readonly state: Ref.Ref<SessionState>
  /** The attempt in flight, for the cancel handler. */
  readonly inFlight: Ref.Ref<AttemptOutput | undefined>
}

export const now = Clock.currentTimeMillis

export const iso = (millis: number) => new Date(millis).toISOString()

/** The run's newest state. */
export const current = (run: Run) => Ref.get(run.state)

/** Saves the state (uninterruptibly) and makes it the run's newest. */
export const save = (run: Run, next: SessionState) =>
  Effect.uninterruptible(Effect.zipRight(Ref.set(run.state, next), run.store.save(run.dir, next)))

export const remainingMs = (run: Run) =>
  Effect.map(now, (t) => (run.deadlineAt === undefined ? Number.POSITIVE_INFINITY : run.deadlineAt - t))

/** Bounds an effect by the session deadline: None when the deadline passed first. */
export const withinDeadline = <A, E, R>(run: Run, effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(remainingMs(run), (ms) =>
    Number.isFinite(ms)
      ? Effect.timeoutOption(effect, Duration.millis(Math.max(0, ms)))
      : Effect.asSome(effect)
  )

/** The deadline passed `during` something: the session stops, not charged; returns why. */
export const stopForDeadline = (run: Run, during: string) =>
  Effect.gen(function* () {
    yield* save(run, stopByRun(yield* current(run), "session_time_exhausted", iso(yield* now)))
    return `the session deadline (${run.options.deadlineSec} s) passed ${during}; not charged`
  })
