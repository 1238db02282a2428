/**
 * The sweep program (docs/design.md#sweeps): the best serving configuration under an SLO. The
 * policy is pure (domain/Sweep.ts and domain/Sweep/); the program is in rooms, against service
 * tags only: this file (the session: resume, growth, the scoped run, its stop), Sweep/State.ts
 * (the one state: the document in a SynchronizedRef, the counters), Sweep/Schedule.ts (grid and
 * adaptive behind one signature, and the driver), Sweep/Combination.ts (a combination's engine
 * life), Sweep/Points.ts (points and repeats), Sweep/Engine.ts (the engine service).
 *
 * One run of a session:
 * 1. Take the session lock, load `sweep.json`. A session of another experiment is refused
 *    (`ExperimentChanged`, naming each difference: two experiments never mix); runs and engine
 *    starts a dead process left open are marked interrupted (their points run again; no finished
 *    point ever does); a sweep that did not finish is reopened; a finished one is shown as it is.
 * 2. For each combination not finished, in order: one lease and one engine start (SweepEngine):
 *    - before ready, `kv_cache_oom` / `fast_exit_arg_error` make it `infeasible` (no retry: they are
 *      deterministic), any other class is retried once (then `failed`); `ray_cluster_infeasible`
 *      stops the whole sweep; any other lease failure ends the run (the sweep stays resumable);
 *    - ready: its points in ascending load (grid), in rounds of one run each until every point has
 *      `--repeats` runs (docs/design.md#trusted-answers: interleaved), or as the search picks them, each point's runs in
 *      a row; `--between` before each client run; a failed client run is retried once; an engine
 *      that dies during a point fails it and ends the combination (the rest `not_run`);
 *    - the document (with its summary and the best) and summary.csv are saved after every run.
 * 3. The best (or the tie) decides the outcome. `--deadline` stops the run (resumable); Ctrl-C
 *    saves the sweep as cancelled after the engine is stopped and its lease released.
 */

import { Clock, Duration, Effect, Option, Schedule } from "effect"
import { redactExperiment } from "../domain/Redact.js"
import { RUNNER_DEFAULTS } from "../domain/Serving.js"
import { decideClass, leftAloneOf, renderDecision } from "../domain/Sweep/ClassChoice.js"
import {
  completeGrid,
  experimentDiff,
  experimentOf,
  growLoads,
  growRepeats,
  growRepeatsLine,
  growthOf,
  inFlight,
  initialSweep,
  isFinalCombination,
  recoverInterrupted,
  reopen,
  sameClass,
  setSweepStatus
} from "../domain/Sweep.js"
import { DEFAULT_MAX_FAILED } from "../domain/Validity.js"
import { AttemptFiles } from "../services/AttemptFiles.js"
import { StateStore } from "../services/StateStore.js"
import { SweepStore } from "../services/SweepStore.js"
import type { AttemptError } from "./AttemptRunner.js"
import { refuseBaselineSession, type SessionHoldsOther } from "./SessionKind.js"
import { SweepEngine } from "./Sweep/Engine.js"
import {
  ExperimentChanged,
  HardwareClassAbsent,
  SessionVanished,
  STATUS_EVERY,
  type SweepOptions,
  type SweepReport
} from "./Sweep/Options.js"
import { nowIso } from "./Sweep/Points.js"
import { runCombinations } from "./Sweep/Schedule.js"
import { makeState, type SweepState } from "./Sweep/State.js"

export {
  ExperimentChanged,
  HardwareClassAbsent,
  SessionVanished,
  STATUS_EVERY,
  type SweepOptions,
  type SweepReport
}

const iso = (ms: number) => new Date(ms).toISOString()

/** Stopped by the run (deadline, Ctrl-C): whatever was in flight is marked interrupted. */
const stopByRun = (state: SweepState, status: "stopped" | "cancelled", why: string) =>
  Effect.gen(function* () {
    const now = yield* nowIso
    const reason = status === "cancelled" ? "orchestrator_cancelled" : "session_time_exhausted"
    yield* state
      .update((d) => setSweepStatus(recoverInterrupted(d, now), status, reason, why, now))
      .pipe(Effect.catchAll((e) => Effect.logError(`cannot write the sweep's state: ${e.message}`)))
    yield* Effect.logInfo(
      `sweep ${status}: ${why}; ${state.dir}/sweep.json saved; the same command resumes it`
    )
  })

/**
 * The hardware class before the first lease (docs/design.md#sweeps-at-cluster-scale, issue 33 item
 * 3): from what the nodes that could serve tell now (domain/Sweep/ClassChoice.ts), the class with
 * the most of them (a resumed sweep's own; `--hardware-class` another); the other classes' nodes
 * are left alone from the first lease on (every lease avoids them), named once. Nothing read (no
 * cluster, no node that could serve): the first node granted decides, as before.
 */
const decideHardwareClass = (state: SweepState) =>
  Effect.gen(function* () {
    const doc = yield* state.doc
    const known = [
      ...doc.combinations.flatMap((c) =>
        c.engine_starts.flatMap((s) => (s.node === undefined ? [] : [s.node]))
      ),
      ...(doc.left_alone ?? [])
    ]
    const nodes = yield* state.engine.servingNodes(state.options.request.gpus, known)
    if (nodes === undefined) return
    const d = decideClass(nodes, { kept: doc.hardware_class, chosen: state.options.hardwareClass })
    if (d._tag === "unknown") return yield* new HardwareClassAbsent({ statement: renderDecision(d) })
    if (d._tag === "undecided") return
    const leave = leftAloneOf(d)
    const before = doc.left_alone ?? []
    const fresh = leave.filter((n) => !before.some((b) => b.node_id === n.node_id))
    if (doc.hardware_class !== undefined && sameClass(doc.hardware_class, d.cls) && fresh.length === 0) return
    yield* state.update((x) => ({
      ...x,
      hardware_class: d.cls,
      left_alone: [...(x.left_alone ?? []), ...fresh]
    }))
    yield* Effect.logInfo(`sweep: ${renderDecision(d)}`)
  })

const runScoped = Effect.fn("Sweep.run")(function* (options: SweepOptions) {
  const dir = options.sessionDir
  const locks = yield* StateStore
  yield* locks.lock(dir)
  yield* refuseBaselineSession(dir)
  const store = yield* SweepStore
  const loaded = yield* store.load(dir)
  const doc0 = Option.getOrElse(loaded, () => initialSweep(redactExperiment(options.experiment), iso(0)))
  const state = yield* makeState({
    options,
    store,
    files: yield* AttemptFiles,
    engine: yield* SweepEngine,
    doc: doc0,
    saved: Option.isSome(loaded),
    wallBefore: Option.match(loaded, { onNone: () => 0, onSome: (d) => d.wall_sec ?? 0 })
  })
  const now = yield* nowIso
  const strategy = options.strategy ?? "grid"
  // this invocation on the session's own clock (domain/Sweep/Time.ts): where it began, the wall before
  const invocation = {
    started_at: now,
    wall_before_sec: Option.match(loaded, { onNone: () => 0, onSome: (d) => d.wall_sec ?? 0 })
  }
  // the validity settings as run (docs/trust.md#is-the-number-valid): `hyperloom check` re-judges with them
  const validity = {
    check: options.check ?? null,
    warmup: options.warmup ?? RUNNER_DEFAULTS.warmup,
    max_failed: options.maxFailed ?? DEFAULT_MAX_FAILED
  }
  if (Option.isNone(loaded)) {
    const doc = yield* state.update(() => ({
      ...initialSweep(redactExperiment(options.experiment), now),
      validity,
      cwd: options.cwd,
      strategy,
      invocations: [invocation],
      ...(options.version !== undefined ? { hyperloom_version: options.version } : {})
    }))
    yield* Effect.logInfo(
      `new sweep ${dir}: ${doc.combinations.length} combination(s), ${options.experiment.load.kind === "points" ? `${options.experiment.load.values.length} load point(s) each` : `search for the largest ${options.experiment.load.name} up to ${options.experiment.load.max}`}, ${options.experiment.repeats} repeat(s)`
    )
  } else {
    let doc = doc0
    const was = doc.strategy ?? "grid"
    const diffs = [
      ...experimentDiff(experimentOf(doc.experiment), redactExperiment(options.experiment)),
      // adaptive → grid completes the grid (the one change allowed); grid → adaptive is another experiment
      ...(was === "grid" && strategy === "adaptive"
        ? [{ field: "--strategy", was: "grid (every combination)", now: "adaptive" }]
        : [])
    ]
    // more --load values or a larger --repeats, nothing else changed: only what is new runs
    // (docs/design.md#time-to-the-answer)
    const grow = growthOf(experimentOf(doc.experiment), options.experiment, diffs)
    if (grow.refused.length > 0)
      return yield* new ExperimentChanged({ sessionDir: dir, differences: grow.refused })
    if (grow.loads !== undefined) {
      doc = growLoads(doc, options.experiment.load.kind === "points" ? options.experiment.load.values : [])
      yield* Effect.logInfo(
        `sweep: growing the sweep by ${grow.loads.length} load point(s) (${grow.loads.join(", ")}); everything measured is kept`
      )
    }
    if (grow.repeats !== undefined || grow.fewerRepeats !== undefined)
      yield* Effect.logInfo(growRepeatsLine(doc, grow))
    if (grow.repeats !== undefined) doc = growRepeats(doc, grow.repeats)
    if (was === "adaptive" && strategy === "grid") {
      const skipped = doc.combinations.filter((c) => c.status === "skipped").length
      doc = completeGrid(doc)
      yield* Effect.logInfo(
        `sweep: --strategy grid on an adaptive session: ${skipped} skipped combination(s) run now, and the best is judged again`
      )
    }
    const open = inFlight(doc)
    if (open > 0)
      yield* Effect.logInfo(
        `sweep: ${open} run(s)/engine start(s) were in flight when an earlier run ended; they run again`
      )
    if (doc.status === "done" && open === 0) {
      yield* Effect.logInfo(
        `sweep ${dir} already finished; nothing to run (use a new --session directory to sweep again)`
      )
      return { sessionDir: dir, doc, engineStarts: 0, clientRuns: 0, alreadyDone: true } satisfies SweepReport
    }
    const reopened = reopen(recoverInterrupted(doc, now))
    const saved = yield* state.update(() => ({
      ...reopened,
      validity,
      invocations: [...(reopened.invocations ?? []), invocation]
    }))
    const left = saved.combinations.filter((c) => !isFinalCombination(c)).length
    yield* Effect.logInfo(`resuming sweep ${dir}: ${left} combination(s) not finished`)
  }
  yield* decideHardwareClass(state)
  const start = yield* Clock.currentTimeMillis
  // the status line: redrawn (a terminal) at every save and every few seconds, else logged
  const show = options.redrawStatus
  yield* Effect.forkScoped(
    show === undefined
      ? Effect.flatMap(state.statusLine, (line) => Effect.logInfo(line)).pipe(
          Effect.delay(STATUS_EVERY),
          Effect.repeat(Schedule.spaced(STATUS_EVERY))
        )
      : Effect.flatMap(state.statusLine, show).pipe(Effect.repeat(Schedule.spaced(Duration.seconds(5))))
  )
  const bounded =
    options.deadlineSec === undefined
      ? Effect.asSome(runCombinations(state))
      : Effect.timeoutOption(runCombinations(state), Duration.seconds(options.deadlineSec))
  const finished = yield* bounded.pipe(
    Effect.onInterrupt(() => stopByRun(state, "cancelled", "cancelled (Ctrl-C)"))
  )
  if (Option.isNone(finished)) {
    const took = ((yield* Clock.currentTimeMillis) - start) / 1000
    yield* stopByRun(
      state,
      "stopped",
      `the deadline (${options.deadlineSec} s) passed after ${Math.round(took)} s`
    )
  }
  const counters = yield* state.counters
  return {
    sessionDir: dir,
    doc: yield* state.doc,
    engineStarts: counters.engineStarts,
    clientRuns: counters.clientRuns,
    alreadyDone: false
  } satisfies SweepReport
})

/** Runs (or resumes) a sweep session; see the header. */
export const runSweep = (options: SweepOptions) => Effect.scoped(runScoped(options))

export type SweepError =
  | AttemptError
  | ExperimentChanged
  | HardwareClassAbsent
  | SessionHoldsOther
  | SessionVanished
