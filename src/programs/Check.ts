/**
 * `hyperloom check --session DIR` (docs/trust.md#is-the-number-valid): a session's validity judged
 * again from what it recorded — after a change of thresholds or a newer hyperloom — running
 * nothing and writing nothing. A sweep: every measured run's checks again against its engine start's
 * reported configuration and the settings the sweep ran with, its points and best following; a
 * baseline: every measured attempt's. Said per run: the verdict recorded and the verdict now.
 * An MCP server calls it as it is.
 */
import { Effect, Option } from "effect"
import { SessionNotFound } from "../domain/Errors.js"
import type { EngineConfig, Observations } from "../domain/Observations.js"
import type { AttemptRecord } from "../domain/State.js"
import { type Rejudged, rejudgeSweep, sessionValidity } from "../domain/Sweep/Validity.js"
import { experimentOf, finishPoint, withSummary } from "../domain/Sweep.js"
import {
  DEFAULT_MAX_FAILED,
  judgeRun,
  notCheckedOnce,
  type RunValidity,
  renderTally,
  sessionClockMedian,
  tally
} from "../domain/Validity.js"
import { StateStore } from "../services/StateStore.js"
import { SweepStore } from "../services/SweepStore.js"

export interface CheckedRun {
  /** Where it is: `#1 c=64 repeat 2` in a sweep, `attempt 3` in a baseline. */
  readonly run: string
  readonly dir: string | null
  /** The verdict it recorded (null: measured before validity was judged). */
  readonly recorded: RunValidity["verdict"] | null
  readonly now: RunValidity
  readonly agrees: boolean
}

export interface CheckReport {
  readonly session: string
  readonly kind: "sweep" | "baseline"
  readonly runs: ReadonlyArray<CheckedRun>
  /** Every run's verdict now is the one it recorded. */
  readonly agrees: boolean
  /** "7 of 9 runs valid (1 suspect, 1 invalid)", over the verdicts now. */
  readonly line: string
  readonly not_checked: ReadonlyArray<string>
  /** A sweep's best (combination and load) as recorded and as re-judged; null for a baseline. */
  readonly best: { readonly recorded: string | null; readonly now: string | null } | null
}

const sweepRun = (r: Rejudged): CheckedRun => ({
  run: `#${r.combination} ${r.load} repeat ${r.repeat}${r.try > 1 ? ` (try ${r.try})` : ""}`,
  dir: r.dir,
  recorded: r.recorded,
  now: r.now,
  agrees: r.recorded === null || r.recorded === r.now.verdict
})

/** What a baseline attempt recorded of the node's samplers, where it did (absent in older records). */
type Sampled = AttemptRecord & {
  readonly observations?: Observations | null | undefined
  readonly engine_config?: EngineConfig | null | undefined
}

const measured = (a: AttemptRecord) =>
  a.metrics !== null &&
  (a.error_class === null || (a.error_class === "invalid_measurement" && a.validity !== undefined))

const baselineRun = (a: Sampled, clock: number | null): CheckedRun => {
  // a failed check measured nothing: its verdict stands as recorded
  const now =
    a.validity?.findings.some((f) => f.check === "check_failed") === true
      ? a.validity
      : judgeRun(
          {
            metrics: a.metrics,
            client: a.client,
            observations: a.observations,
            engineConfig: a.engine_config,
            params: {},
            asked: {}
          },
          { maxFailed: a.max_failed ?? DEFAULT_MAX_FAILED, slos: [], sessionClockMedian: clock }
        )
  const recorded = a.validity?.verdict ?? null
  return {
    run: `attempt ${a.number}`,
    dir: null,
    recorded,
    now,
    agrees: recorded === null || recorded === now.verdict
  }
}

const bestOf = (s: { readonly best: { readonly combination: number; readonly load: string } | null }) =>
  s.best === null ? null : `#${s.best.combination} at ${s.best.load}`

export const checkSession = Effect.fn("Check.session")(function* (sessionDir: string) {
  const sweep = yield* Effect.flatMap(SweepStore, (store) => store.load(sessionDir))
  if (Option.isSome(sweep)) {
    const doc = sweep.value
    const { doc: now, runs } = rejudgeSweep(doc, experimentOf(doc.experiment).slos, finishPoint, withSummary)
    const checked = runs.map(sweepRun)
    const v = sessionValidity(now)
    return {
      session: sessionDir,
      kind: "sweep",
      runs: checked,
      agrees: checked.every((r) => r.agrees),
      line: v.line,
      not_checked: v.not_checked,
      best: { recorded: bestOf(doc.summary), now: bestOf(now.summary) }
    } satisfies CheckReport
  }
  const state = yield* Effect.flatMap(StateStore, (store) => store.load(sessionDir))
  if (Option.isNone(state)) return yield* new SessionNotFound({ sessionDir })
  const attempts = state.value.baseline_attempts.filter(measured) as ReadonlyArray<Sampled>
  const clock = sessionClockMedian(attempts.map((a) => a.observations))
  const checked = attempts.map((a) => baselineRun(a, clock))
  const verdicts = checked.map((r) => r.now)
  return {
    session: sessionDir,
    kind: "baseline",
    runs: checked,
    agrees: checked.every((r) => r.agrees),
    line: renderTally(tally(verdicts)),
    not_checked: notCheckedOnce(verdicts),
    best: null
  } satisfies CheckReport
})
