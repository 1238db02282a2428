/**
 * The sweep program (docs/design.md#sweeps): the best serving configuration under an SLO. The
 * policy is pure (domain/Sweep*.ts); this file is the loop around it, against service tags only.
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
import { Clock, Data, Duration, Effect, Option, Schedule } from "effect"
import { type FailureClass, isTellingLine, MAX_ERROR_CHARS, MAX_EVIDENCE_LINES } from "../domain/Failure.js"
import type { LeaseRequest } from "../domain/Feasibility.js"
import { redactArgv, redactExperiment } from "../domain/Redact.js"
import {
  CLIENT_LOG,
  ENVIRONMENT_FILE,
  type NodeFacts,
  type Readiness,
  SERVER_LOG
} from "../domain/Serving.js"
import { OutputDigest } from "../domain/Signature.js"
import { classifyClientRun } from "../domain/Sweep/ClientRun.js"
import { engineNote } from "../domain/Sweep/EngineNote.js"
import {
  classOf,
  type HardwareClass,
  type NodeRecord,
  nodeName,
  onNode,
  renderClass,
  sameClass,
  statusLine
} from "../domain/Sweep/Nodes.js"
import { mergeOwn, runCounts } from "../domain/Sweep/Parallel.js"
import {
  afterSetback,
  avoidIds,
  emptyRequeue,
  interruptCombination,
  isNotInstalled,
  type RequeueState,
  renderSetback,
  type Setback
} from "../domain/Sweep/Requeue.js"
import {
  adaptiveView,
  addPoint,
  beginEngine,
  beginRun,
  type CombinationRecord,
  clientArgvOf,
  comboRef,
  completeGrid,
  type Difference,
  type Experiment,
  experimentDiff,
  experimentOf,
  experimentRecord,
  finishPoint,
  finishRun,
  growLoads,
  growRepeats,
  growRepeatsLine,
  growthOf,
  inFlight,
  initialSweep,
  isFinalCombination,
  isFinalPoint,
  loadNumber,
  monotoneSkips,
  nextAdaptive,
  nextRoundPoint,
  nextRun,
  nextSearchStep,
  notRunReason,
  type PointRecord,
  recoverInterrupted,
  renderDifferences,
  reopen,
  type Strategy,
  type SweepDoc,
  setCombination,
  setSweepStatus,
  skipCombination,
  skipRemaining,
  substitute,
  sweepEnvironmentRecord,
  updateEngine,
  withSummary
} from "../domain/Sweep.js"
import { AttemptFiles, type AttemptFilesShape } from "../services/AttemptFiles.js"
import type { LeaseActorFailed } from "../services/BridgeProcess.js"
import { StateStore } from "../services/StateStore.js"
import { SweepStore, type SweepStoreShape } from "../services/SweepStore.js"
import type { AttemptError } from "./AttemptRunner.js"
import { refuseBaselineSession, type SessionHoldsOther } from "./SessionKind.js"
import { type EngineHandle, SweepEngine, type SweepEngineShape } from "./SweepEngine.js"

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

interface Run {
  readonly options: SweepOptions
  readonly dir: string
  readonly store: SweepStoreShape
  readonly files: AttemptFilesShape
  readonly engine: SweepEngineShape
  doc: SweepDoc
  engineStarts: number
  clientRuns: number
  /** sweep.json was written (or found): from then on it must still be there at every save. */
  saved: boolean
  /** What every combination in flight shares (the document's saves, the class, the counts). */
  readonly fleet: Fleet
  /** Set on a combination's own view (`ownRun`): the only combination it writes. */
  readonly only?: number | undefined
  /**
   * The session's wall seconds before this invocation, and when this one began
   * (docs/design.md#time-to-the-answer).
   */
  wallBefore: number
  startedMs: number
}

/** The state combinations in flight share; changed only between two yields (atomic). */
interface Fleet {
  /** The run over the whole sweep: its `doc` is the latest saved document. */
  root: Run | undefined
  /** One save at a time, so the latest document is never overwritten by an older one. */
  readonly lock: Effect.Semaphore
  cls: HardwareClass | undefined
  leftAlone: Array<NodeRecord>
  readonly running: Set<number>
  readonly startSecs: Array<number>
  readonly runSecs: Array<number>
  readonly startedAt: number
  readonly parallel: number
  /** What each combination met of its nodes' faults in this run (domain/Sweep/Requeue.ts). */
  readonly requeue: Map<number, RequeueState>
}

/** A combination's own view of the run: it writes its own record only (domain/Sweep/Parallel.ts). */
const ownRun = (root: Run, index: number): Run => ({
  ...root,
  only: index,
  get engineStarts() {
    return root.engineStarts
  },
  set engineStarts(n: number) {
    root.engineStarts = n
  },
  get clientRuns() {
    return root.clientRuns
  },
  set clientRuns(n: number) {
    root.clientRuns = n
  }
})

const iso = (ms: number) => new Date(ms).toISOString()
const nowIso = Effect.map(Clock.currentTimeMillis, iso)

const save = (run: Run, next: SweepDoc) =>
  Effect.uninterruptible(
    run.fleet.lock.withPermits(1)(
      Effect.gen(function* () {
        const root = run.fleet.root ?? run
        if (root.saved && !(yield* run.store.stillThere(run.dir)))
          return yield* new SessionVanished({ sessionDir: run.dir })
        const nowMs = yield* Clock.currentTimeMillis
        const merged = run.only === undefined ? next : mergeOwn(root.doc, run.doc, next, run.only)
        const doc = withSummary({
          ...merged,
          updated_at: iso(nowMs),
          wall_sec: Math.round((root.wallBefore + (nowMs - root.startedMs) / 1000) * 1000) / 1000
        })
        run.doc = doc
        root.doc = doc
        yield* run.store.save(run.dir, doc)
        root.saved = true
        yield* redraw(run)
      })
    )
  )

/**
 * The status line now (docs/design.md#sweeps-at-cluster-scale): combinations done / running /
 * waiting, runs, elapsed, ETA.
 */
const statusNow = (run: Run) =>
  Effect.map(Clock.currentTimeMillis, (now) => {
    const doc = (run.fleet.root ?? run).doc
    const f = run.fleet
    const finals = doc.combinations.filter(isFinalCombination).length
    const running = f.running.size
    const waiting = Math.max(0, doc.combinations.length - finals - running)
    const runs = runCounts(doc)
    return statusLine({
      done: finals,
      running,
      waiting,
      runsDone: runs.done,
      runsPlanned: runs.planned,
      elapsedSec: (now - f.startedAt) / 1000,
      startSecs: f.startSecs,
      runSecs: f.runSecs,
      parallel: f.parallel,
      startsLeft: waiting
    })
  })

const redraw = (run: Run) =>
  run.options.redrawStatus === undefined
    ? Effect.void
    : Effect.flatMap(statusNow(run), run.options.redrawStatus)

const combo = (run: Run, index: number) => run.doc.combinations[index]!
const pointOf = (run: Run, index: number, load: string) =>
  combo(run, index).points.find((p) => p.load === load)!

const safeName = (s: string) => s.replace(/[^A-Za-z0-9._-]/g, "_")
const comboDir = (run: Run, index: number) => `${run.dir.replace(/\/+$/, "")}/combinations/${index}`

const fmt = (n: number | undefined, unit: string) =>
  n === undefined ? "–" : `${n >= 100 ? Math.round(n) : Math.round(n * 10) / 10} ${unit}`

// ---------------------------------------------------------------------------------------------
// One client run

/**
 * A client run's outcome, classified (domain/Sweep/ClientRun.ts) on its client.log and result file.
 */
const judgeRun = (
  run: Run,
  outcome: import("./SweepEngine.js").ClientOutcome,
  runDir: string,
  resultFile: string
) =>
  Effect.gen(function* () {
    const digest = new OutputDigest()
    const evidence: Array<string> = []
    const tail =
      (yield* run.files.scanLog(
        `${runDir}/${CLIENT_LOG}`,
        (line) => {
          digest.add("client", line)
          if (evidence.length < MAX_EVIDENCE_LINES && isTellingLine(line))
            evidence.push(line.trim().slice(0, 1000))
        },
        MAX_ERROR_CHARS * 4
      )) ?? ""
    const result = outcome.betweenExitCode !== null ? undefined : yield* run.files.readResult(resultFile)
    return classifyClientRun({
      ...outcome,
      timeoutSec: run.options.pointTimeoutSec,
      outputTail: tail,
      outputSignature: digest.signature(),
      evidence,
      result
    })
  })

type PointEnd = "done" | "engine_died"

/**
 * One run of a point: its next repeat (or the retry a dead process left owed), a failed run
 * retried once at once; saves after every run. `measured` when the run measured; `failed` when the
 * point failed (both tries) or the engine died — the point is then finished as failed.
 */
const runRepeat = (run: Run, index: number, load: string, handle: EngineHandle, where: string) =>
  Effect.gen(function* () {
    const repeats = run.doc.experiment.repeats
    const owed = pointOf(run, index, load).runs.at(-1)
    if (owed?.status === "failed" && owed.try === 2) {
      // both tries failed, and the process died before it could say so: the point failed
      yield* save(run, finishPoint(run.doc, index, load, { class: owed.class, error: owed.error }))
      return "failed" as const
    }
    const first = nextRun(pointOf(run, index, load), repeats)
    if (first === null) return "measured" as const
    for (let attempt = first.try; attempt <= 2; attempt++) {
      const repeat = first.repeat
      const c = combo(run, index)
      const n = c.points.reduce((m, p) => m + p.runs.length + p.interrupted_runs.length, 0) + 1
      const runDir = `${comboDir(run, index)}/runs/${n}-${safeName(load)}`
      const resultFile = `${runDir}/result.json`
      const argv = clientArgvOf(experimentRecord(run.options.experiment), combo(run, index).params, load)
      yield* run.files.prepare(runDir, resultFile)
      yield* save(
        run,
        beginRun(run.doc, index, load, {
          repeat,
          try: attempt,
          dir: runDir,
          client_argv: redactArgv(argv),
          started_at: yield* nowIso
        })
      )
      run.clientRuns++
      const outcome = yield* handle.run({
        argv,
        dir: runDir,
        env: { HYPERLOOM_RESULT_FILE: resultFile, HYPERLOOM_SWEEP_RUN_DIR: runDir },
        between: run.options.between ?? null,
        timeout_sec: run.options.pointTimeoutSec ?? null
      })
      if (outcome.leaseLost !== undefined)
        // its node was lost, not its engine: the run stays in flight, to become interrupted
        return yield* new NodeSetback({
          setback: { _tag: "NodeLost", node: handle.node, reason: outcome.leaseLost }
        })
      // what is missing on the node: the --between command, else the client (not when the engine died)
      const missing =
        outcome.betweenExitCode !== null
          ? { what: "--between command" as const, code: outcome.betweenExitCode, log: "between.log" }
          : outcome.engineDied
            ? undefined
            : { what: "client" as const, code: outcome.exitCode, log: CLIENT_LOG }
      // its log's last line names it (the shell's "not found"; Python's exit 1 says so only there)
      const line =
        missing !== undefined && (missing.code === 1 || isNotInstalled(missing.code))
          ? yield* logLastLine(run, `${runDir}/${missing.log}`)
          : undefined
      if (missing !== undefined && isNotInstalled(missing.code, line))
        return yield* new NodeSetback({
          setback: { _tag: "Missing", what: missing.what, node: handle.node, line }
        })
      if (!outcome.engineDied) run.fleet.runSecs.push(outcome.runtimeSec)
      const r = yield* judgeRun(run, outcome, runDir, resultFile)
      yield* save(
        run,
        finishRun(run.doc, index, load, {
          ended_at: yield* nowIso,
          status: r.errorClass === null ? "ok" : "failed",
          class: r.errorClass,
          error: r.error,
          exit_code: r.exitCode,
          runtime_sec: r.runtimeSec,
          throughput: r.throughput,
          metrics: r.metrics ?? null,
          engine_died: outcome.engineDied,
          between_sec: outcome.betweenSec ?? null
        })
      )
      const m = r.metrics
      yield* Effect.logInfo(
        `sweep: ${where}, repeat ${repeat}/${repeats}${attempt > 1 ? " (retry)" : ""}: ${
          r.errorClass === null
            ? `output ${fmt(m?.output_throughput, "tok/s")}, p99 TTFT ${fmt(m?.p99_ttft_ms, "ms")}, p99 TPOT ${fmt(m?.p99_tpot_ms, "ms")}`
            : `failed (${r.errorClass}): ${(r.error ?? "").split("\n")[0]}`
        }`
      )
      if (r.errorClass === null) return "measured" as const
      if (outcome.engineDied || attempt === 2) {
        yield* save(
          run,
          finishPoint(run.doc, index, load, { class: r.errorClass as FailureClass, error: r.error })
        )
        return outcome.engineDied ? ("engine_died" as const) : ("failed" as const)
      }
    }
    return "measured" as const
  })

/**
 * A fault of the combination's node, not of its engine (domain/Sweep/Requeue.ts): caught by
 * runCombination, which sends the combination back to the queue.
 */
class NodeSetback extends Data.TaggedError("NodeSetback")<{ readonly setback: Setback }> {}

/** A text's last non-empty line, trimmed and cut at 300 characters (the shell's `not found`). */
const lastLine = (text: string) =>
  text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "")
    .at(-1)
    ?.slice(0, 300)

/** A log's last non-empty line, when it has one. */
const logLastLine = (run: Run, file: string) =>
  Effect.map(
    run.files.scanLog(file, () => undefined, 2000).pipe(Effect.orElseSucceed(() => undefined)),
    (tail) => lastLine(tail ?? "")
  )

/** The ids of the nodes the sweep leaves alone (another hardware class). */
const leftAloneIds = (run: Run) => run.fleet.leftAlone.flatMap((n) => (n.node_id === null ? [] : [n.node_id]))

/** Ends a point that has all its runs: its stats and SLO verdicts. */
const closePoint = (run: Run, index: number, load: string, where: string) =>
  Effect.gen(function* () {
    yield* save(run, finishPoint(run.doc, index, load))
    const p = pointOf(run, index, load)
    const t = p.stats
    yield* Effect.logInfo(
      `sweep: ${where}: ${p.status} (median over ${run.doc.experiment.repeats}: output ${fmt(t.output_throughput?.median, "tok/s")}, p99 TTFT ${fmt(t.p99_ttft_ms?.median, "ms")}, p99 TPOT ${fmt(t.p99_tpot_ms?.median, "ms")})${p.noisy === true ? "; noisy: output CV over 5 %" : ""}`
    )
  })

/** Runs one point's repeats back to back (the search's points: see Sweep/Repeats.ts). */
const runPoint = (run: Run, index: number, load: string, handle: EngineHandle, where: string) =>
  Effect.gen(function* () {
    while (nextRun(pointOf(run, index, load), run.doc.experiment.repeats) !== null) {
      const end = yield* runRepeat(run, index, load, handle, where)
      if (end === "engine_died") return "engine_died" as PointEnd
      if (end === "failed") return "done" as PointEnd
    }
    yield* closePoint(run, index, load, where)
    return "done" as PointEnd
  })

// ---------------------------------------------------------------------------------------------
// One combination

const pointsLeft = (c: CombinationRecord) => c.points.filter((p) => !isFinalPoint(p)).length

const combosLeft = (run: Run, after: number) =>
  run.doc.combinations.filter((c) => c.index > after && !isFinalCombination(c)).length

/** The points of a ready engine: the grid's pending ones in order, or the search's next one. */
const runPoints = (run: Run, index: number, handle: EngineHandle) =>
  Effect.gen(function* () {
    const spec = run.doc.experiment.load
    for (;;) {
      const c = combo(run, index)
      let load: string
      if (spec.kind === "points") {
        // In rounds (docs/design.md#trusted-answers): the point with the fewest runs next, the
        // lowest load first.
        const next = nextRoundPoint(c.points, isFinalPoint)
        if (next === undefined) return "done" as const
        load = next.load
      } else if (c.points.some((p) => !isFinalPoint(p))) {
        // a point open again (a larger --repeats) or left open: its runs first, then the search
        load = c.points.find((p) => !isFinalPoint(p))!.load
      } else {
        const evaluated = c.points
          .filter(isFinalPoint)
          .map((p: PointRecord) => ({ load: loadNumber(p.load), pass: p.status === "ok" }))
        const step = nextSearchStep(spec.max, evaluated)
        if (step._tag === "done") {
          yield* Effect.logInfo(
            `sweep: combination ${comboRef(index, combo(run, index).params)}: the largest load meeting every SLO is ${step.largest ?? "none (load 1 fails)"} (${evaluated.length} points evaluated)`
          )
          return "done" as const
        }
        load = String(step.load)
        yield* save(run, addPoint(run.doc, index, load))
      }
      const c2 = combo(run, index)
      const left =
        spec.kind === "points"
          ? `point ${c2.points.length - pointsLeft(c2) + 1}/${c2.points.length}, ${pointsLeft(c2) - 1} left here`
          : `search point ${c2.points.length}`
      const where = `combination ${comboRef(index, combo(run, index).params)}${onNode(handle.node)}, ${spec.name}=${load} [${left}; ${combosLeft(run, index)} combination(s) after this]`
      if (spec.kind === "points") {
        const end = yield* runRepeat(run, index, load, handle, where)
        if (end === "engine_died") return "engine_died" as const
        if (end === "measured" && nextRun(pointOf(run, index, load), run.doc.experiment.repeats) === null)
          yield* closePoint(run, index, load, where)
        continue
      }
      const end = yield* runPoint(run, index, load, handle, where)
      if (end === "engine_died") return "engine_died" as const
    }
  })

/** `<session>/environment.json` (issue 27 item 14): the node and commands of the engine just ready. */
const recordSweepEnvironment = (run: Run, index: number, node: NodeFacts | undefined) =>
  Effect.gen(function* () {
    const c = combo(run, index)
    const record = sweepEnvironmentRecord({
      now: yield* nowIso,
      combination: index,
      hyperloomVersion: run.options.version ?? "unknown",
      requestedGpus: run.options.request.gpus,
      node,
      server: c.server_cmd,
      clientArgv: c.points[0]?.client_argv ?? run.doc.experiment.client
    })
    yield* run.files
      .writeJson(`${run.dir.replace(/\/+$/, "")}/${ENVIRONMENT_FILE}`, record)
      .pipe(Effect.catchAll((e) => Effect.logWarning(`cannot write the environment record: ${e.message}`)))
  })

const DETERMINISTIC: ReadonlySet<string> = new Set(["kv_cache_oom", "fast_exit_arg_error"])

/**
 * Whether the sweep takes the node it was granted (docs/design.md#sweeps-at-cluster-scale,
 * "Comparable nodes"): the first node granted sets the sweep's hardware class (a resumed sweep
 * keeps its own); a node of another class is left alone (its Ray id avoided by every later lease of
 * the sweep) and named once. A node that tells nothing, or no Ray id, is taken (it cannot be
 * steered away from).
 */
const admitNode = (run: Run, node: NodeRecord | undefined) =>
  Effect.gen(function* () {
    const f = run.fleet
    if (node === undefined) return true
    const cls = classOf(node)
    if (f.cls === undefined) {
      // decided before the next yield: two combinations granted at once agree on the first
      f.cls = cls
      yield* save(run, { ...run.doc, hardware_class: cls })
      yield* Effect.logInfo(
        `sweep: the hardware class is ${renderClass(cls)} (the first node granted, ${nodeName(node)})`
      )
      return true
    }
    if (sameClass(f.cls, cls) || node.node_id === null) return true
    if (!f.leftAlone.some((n) => n.node_id === node.node_id)) {
      f.leftAlone.push(node)
      yield* save(run, { ...run.doc, left_alone: [...f.leftAlone] })
      yield* Effect.logWarning(
        `sweep: leaving node ${nodeName(node)} (${node.node_id}) alone: it is ${renderClass(cls)}, the sweep runs on ${renderClass(f.cls)}; no combination of this sweep is granted it again`
      )
    }
    return false
  })

/** A combination: one engine start (one retry for a non-deterministic failure before ready). */
const runCombination = (run: Run, index: number) =>
  Effect.gen(function* () {
    for (;;) {
      const c = combo(run, index)
      const failedStarts = c.engine_starts.filter((s) => s.outcome === "failed").length
      const n = c.engine_starts.length + 1
      const dir = `${comboDir(run, index)}/engine-${n}`
      // not charged: a start left alone on another class's node is no failure of the combination
      yield* save(run, beginEngine(run.doc, index, dir, yield* nowIso))
      run.engineStarts++
      yield* Effect.logInfo(
        `sweep: combination ${comboRef(index, c.params)}: starting the engine under a lease: ${c.server_cmd}`
      )
      const outcome = yield* Effect.scoped(
        Effect.gen(function* () {
          const avoid = avoidIds(run.fleet.requeue.get(index), leftAloneIds(run))
          const handle = yield* run.engine.start({
            request: avoid.length === 0 ? run.options.request : { ...run.options.request, avoidNodes: avoid },
            // what runs is the experiment as given; the document keeps it redacted (Redact.ts)
            server: substitute(run.options.experiment.server, c.params),
            dir,
            readiness: run.options.readiness,
            waitSec: run.options.waitSec,
            env: run.options.env,
            cwd: run.options.cwd,
            onOutput: (o) => Effect.logDebug(`[combination #${index}] ${o.line}`)
          })
          if (handle.node !== undefined) yield* save(run, updateEngine(run.doc, index, { node: handle.node }))
          if (!(yield* admitNode(run, handle.node))) return { _tag: "left_alone" as const }
          if (handle.started._tag === "NotReady") {
            const r = handle.started.result
            const line = lastLine(r.launchLog || r.error || "")
            if (isNotInstalled(r.exitCode, line))
              // the node lacks the engine's command: a fault of the node, not of the combination
              return yield* new NodeSetback({
                setback: { _tag: "Missing", what: "engine", node: handle.node, line }
              })
            return { _tag: "not_ready" as const, result: r }
          }
          if (handle.started.readySec !== null) run.fleet.startSecs.push(handle.started.readySec)
          yield* save(
            run,
            updateEngine(run.doc, index, {
              outcome: "ready",
              ready_sec: handle.started.readySec,
              ready_at: yield* nowIso
            })
          )
          yield* recordSweepEnvironment(run, index, handle.started.status?.node)
          yield* Effect.logInfo(
            `sweep: combination #${index}: the engine is ready${onNode(handle.node)}${handle.started.readySec !== null ? ` after ${handle.started.readySec} s` : ""}`
          )
          return { _tag: "ran" as const, end: yield* runPoints(run, index, handle) }
        })
      ).pipe(
        Effect.catchTag("RayClusterInfeasible", (e) =>
          Effect.succeed({ _tag: "infeasible" as const, error: e.message })
        ),
        Effect.catchTag("NodeSetback", (e) =>
          Effect.succeed({ _tag: "setback" as const, setback: e.setback })
        ),
        // the lease's actor died before the engine was ready: its node was lost (not the engine)
        Effect.catchIf(
          (e): e is LeaseActorFailed => e._tag === "LeaseActorFailed" && e.kind === "actor_died",
          (e) =>
            Effect.succeed({
              _tag: "setback" as const,
              setback: {
                _tag: "NodeLost",
                node: combo(run, index).engine_starts.at(-1)?.node,
                reason: e.message
              } satisfies Setback
            })
        ),
        Effect.tapError((e) =>
          Effect.gen(function* () {
            if (e._tag === "SessionVanished") return
            const now = yield* nowIso
            const reason = e._tag === "LeaseWaitExpired" ? "lease_wait_expired" : "lease_failed"
            yield* save(
              run,
              setSweepStatus(
                updateEngine(run.doc, index, { ended_at: now, outcome: "interrupted", error: e.message }),
                "stopped",
                reason,
                e.message,
                now
              )
            )
            yield* Effect.logError(
              `sweep: the lease failed; the same command resumes the sweep once that is fixed`
            )
          })
        )
      )
      const ended = yield* nowIso
      switch (outcome._tag) {
        case "setback": {
          const why = renderSetback(outcome.setback)
          const verdict = afterSetback(run.fleet.requeue.get(index) ?? emptyRequeue, outcome.setback, {
            eligible: yield* run.engine.eligibleNodes(run.options.request.gpus),
            leftAlone: leftAloneIds(run),
            perCombination: run.doc.experiment.nodes
          })
          yield* save(run, interruptCombination(run.doc, index, ended, why))
          if (verdict._tag === "give_up") {
            yield* save(
              run,
              skipRemaining(
                setCombination(run.doc, index, {
                  status: "failed",
                  class: null,
                  error: `${why}; ${verdict.error}`
                }),
                index
              )
            )
            yield* Effect.logWarning(`sweep: combination #${index}: ${why}; ${verdict.error}`)
            return "next" as const
          }
          run.fleet.requeue.set(index, verdict.state)
          yield* Effect.logWarning(
            `sweep: combination #${index}: ${why}; its run in flight is interrupted, and the combination goes back to the queue to run again from its first point not done${outcome.setback._tag === "Missing" ? " (avoiding that node)" : ""}`
          )
          return "requeue" as const
        }
        case "left_alone": {
          yield* save(run, updateEngine(run.doc, index, { ended_at: ended, outcome: "left_alone" }))
          continue
        }
        case "infeasible": {
          yield* save(
            run,
            updateEngine(run.doc, index, {
              ended_at: ended,
              outcome: "failed",
              class: "ray_cluster_infeasible",
              error: outcome.error
            })
          )
          yield* save(run, setSweepStatus(run.doc, "stopped", "ray_cluster_infeasible", outcome.error, ended))
          return "stop" as const
        }
        case "not_ready": {
          const r = outcome.result
          // the engine's own telling line and its server.log, first (docs/design.md#time-to-the-answer)
          const note = engineNote(r, `${dir}/${SERVER_LOG}`)
          yield* save(
            run,
            updateEngine(run.doc, index, {
              ended_at: ended,
              outcome: "failed",
              class: r.errorClass,
              error: note
            })
          )
          const head = note.split("\n")[0] ?? ""
          if (r.errorClass !== null && DETERMINISTIC.has(r.errorClass)) {
            yield* save(
              run,
              skipRemaining(
                setCombination(run.doc, index, { status: "infeasible", class: r.errorClass, error: note }),
                index
              )
            )
            yield* Effect.logInfo(
              `sweep: combination #${index}: infeasible (${r.errorClass}, not retried): ${head}`
            )
            return "next" as const
          }
          // a readiness timeout is not retried: the engine would most likely hang as long again
          if (failedStarts === 0 && r.errorClass !== "timeout") {
            yield* Effect.logInfo(
              `sweep: combination #${index}: the engine failed before ready (${r.errorClass}); retrying once: ${head}`
            )
            continue
          }
          yield* save(
            run,
            skipRemaining(
              setCombination(run.doc, index, { status: "failed", class: r.errorClass, error: note }),
              index
            )
          )
          yield* Effect.logInfo(
            `sweep: combination #${index}: the engine failed before ready${failedStarts === 0 ? " (a readiness timeout: not retried)" : " again"}: ${head}; going on`
          )
          return "next" as const
        }
        case "ran": {
          yield* save(run, updateEngine(run.doc, index, { ended_at: ended }))
          if (outcome.end === "engine_died") {
            yield* save(run, skipRemaining(setCombination(run.doc, index, { status: "engine_died" }), index))
            yield* Effect.logInfo(
              `sweep: combination #${index}: the engine died during a point; its remaining points are not run`
            )
          } else {
            yield* save(run, setCombination(run.doc, index, { status: "done" }))
          }
          return "next" as const
        }
      }
    }
  })

// ---------------------------------------------------------------------------------------------
// The run

/** A combination ended the whole sweep (an infeasible cluster): the others in flight are stopped. */
class SweepStopped extends Data.TaggedError("SweepStopped")<{}> {}

/**
 * The combinations not finished, up to `parallel` at once (docs/design.md#sweeps-at-cluster-scale),
 * handed out in the sweep's order: a finished one frees its place (and Ray its node's slot) for the
 * next. Each runs under its own lease; where it runs is Ray's to decide (the serving slot: one
 * engine per node), steered only away from the nodes the sweep leaves alone. One that stops the
 * sweep stops the others (their runs in flight become interrupted, their points run again on a
 * resume); so does a lease failure, which fails the run.
 */
const runCombinations = (run: Run, parallel: number) =>
  Effect.gen(function* () {
    const order = run.doc.combinations.filter((c) => !isFinalCombination(c)).map((c) => c.index)
    let next = 0
    const worker = Effect.gen(function* () {
      while (next < order.length) {
        const index = order[next++]!
        run.fleet.running.add(index)
        const end = yield* runCombination(parallel === 1 ? run : ownRun(run, index), index).pipe(
          Effect.ensuring(Effect.sync(() => run.fleet.running.delete(index)))
        )
        if (end === "stop") return yield* new SweepStopped()
        // back to the queue, after the combinations already waiting (domain/Sweep/Requeue.ts)
        if (end === "requeue") order.push(index)
      }
    })
    const workers = Math.max(1, Math.min(parallel, order.length))
    return yield* Effect.all(
      Array.from({ length: workers }, () => worker),
      {
        concurrency: "unbounded",
        discard: true
      }
    ).pipe(
      Effect.as("finished" as const),
      Effect.catchTag("SweepStopped", () => Effect.succeed("stopped" as const)),
      Effect.tapError(() =>
        workers > 1
          ? Effect.flatMap(nowIso, (now) => save(run, recoverInterrupted(run.doc, now)))
          : Effect.void
      )
    )
  })

/**
 * `--strategy adaptive` (docs/design.md#time-to-the-answer): the search (domain/Sweep/Adaptive.ts)
 * names the next combination after each one ends; what it rules out is `skipped` with the reason as
 * soon as it is known (monotone infeasibility), and what it never reached when it settles.
 */
const adaptiveLoop = (run: Run) =>
  Effect.gen(function* () {
    const params = run.doc.experiment.params
    const total = run.doc.combinations.length
    // combinations it already started and that are open (a larger --repeats, or left open): theirs
    // first, so the search goes on from what they measure
    for (const c of run.doc.combinations)
      if (!isFinalCombination(c) && c.engine_starts.length > 0)
        if ((yield* runCombination(run, c.index)) === "stop") return
    for (;;) {
      const skips = monotoneSkips(params, adaptiveView(run.doc))
      if (skips.length > 0) {
        yield* save(
          run,
          skips.reduce((d, k) => skipCombination(d, k.index, k.reason), run.doc)
        )
        for (const k of skips) yield* Effect.logInfo(`sweep: combination #${k.index} skipped: ${k.reason}`)
      }
      const step = nextAdaptive(params, adaptiveView(run.doc))
      if (step._tag === "done") {
        const reason = notRunReason(step.settledAt.map((i) => combo(run, i).params))
        const left = run.doc.combinations.filter((c) => !isFinalCombination(c))
        yield* save(
          run,
          left.reduce((d, c) => skipCombination(d, c.index, reason), run.doc)
        )
        const started = run.doc.combinations.filter((c) => c.engine_starts.length > 0).length
        yield* Effect.logInfo(
          `sweep: the adaptive search settled after ${started} of ${total} combination(s); ${left.length} not run (skipped): ${reason}`
        )
        break
      }
      yield* Effect.logInfo(
        `sweep: adaptive: combination ${comboRef(step.index, combo(run, step.index).params)}: ${step.why}`
      )
      if ((yield* runCombination(run, step.index)) === "stop") return
    }
    yield* save(run, setSweepStatus(run.doc, "done", null, null, yield* nowIso))
  })

const combinationsLoop = (run: Run) =>
  Effect.gen(function* () {
    if (run.doc.strategy === "adaptive") return yield* adaptiveLoop(run)
    const ended = yield* runCombinations(run, run.fleet.parallel)
    if (ended === "stopped") {
      if (run.fleet.parallel > 1) yield* save(run, recoverInterrupted(run.doc, yield* nowIso))
      return
    }
    yield* save(run, setSweepStatus(run.doc, "done", null, null, yield* nowIso))
  })

/** Stopped by the run (deadline, Ctrl-C): whatever was in flight is marked interrupted. */
const stopByRun = (run: Run, status: "stopped" | "cancelled", why: string) =>
  Effect.gen(function* () {
    const now = yield* nowIso
    const reason = status === "cancelled" ? "orchestrator_cancelled" : "session_time_exhausted"
    yield* save(run, setSweepStatus(recoverInterrupted(run.doc, now), status, reason, why, now)).pipe(
      Effect.catchAll((e) => Effect.logError(`cannot write the sweep's state: ${e.message}`))
    )
    yield* Effect.logInfo(`sweep ${status}: ${why}; ${run.dir}/sweep.json saved; the same command resumes it`)
  })

const runScoped = Effect.fn("Sweep.run")(function* (options: SweepOptions) {
  const dir = options.sessionDir
  const locks = yield* StateStore
  yield* locks.lock(dir)
  yield* refuseBaselineSession(dir)
  const store = yield* SweepStore
  const loaded = yield* store.load(dir)
  const doc0 = Option.getOrElse(loaded, () => initialSweep(redactExperiment(options.experiment), iso(0)))
  const fleet: Fleet = {
    root: undefined,
    lock: yield* Effect.makeSemaphore(1),
    cls: doc0.hardware_class,
    leftAlone: [...(doc0.left_alone ?? [])],
    running: new Set(),
    startSecs: [],
    runSecs: [],
    startedAt: yield* Clock.currentTimeMillis,
    parallel: Math.max(1, Math.floor(options.parallel ?? 1)),
    requeue: new Map()
  }
  const run: Run = {
    options,
    dir,
    store,
    files: yield* AttemptFiles,
    engine: yield* SweepEngine,
    doc: doc0,
    engineStarts: 0,
    clientRuns: 0,
    saved: Option.isSome(loaded),
    fleet,
    wallBefore: Option.match(loaded, { onNone: () => 0, onSome: (d) => d.wall_sec ?? 0 }),
    startedMs: yield* Clock.currentTimeMillis
  }
  fleet.root = run
  const now = yield* nowIso
  const strategy = options.strategy ?? "grid"
  if (Option.isNone(loaded)) {
    yield* save(run, {
      ...initialSweep(redactExperiment(options.experiment), now),
      cwd: options.cwd,
      strategy,
      ...(options.version !== undefined ? { hyperloom_version: options.version } : {})
    })
    yield* Effect.logInfo(
      `new sweep ${dir}: ${run.doc.combinations.length} combination(s), ${options.experiment.load.kind === "points" ? `${options.experiment.load.values.length} load point(s) each` : `search for the largest ${options.experiment.load.name} up to ${options.experiment.load.max}`}, ${options.experiment.repeats} repeat(s)`
    )
  } else {
    const was = run.doc.strategy ?? "grid"
    const diffs = [
      ...experimentDiff(experimentOf(run.doc.experiment), redactExperiment(options.experiment)),
      // adaptive → grid completes the grid (the one change allowed); grid → adaptive is another experiment
      ...(was === "grid" && strategy === "adaptive"
        ? [{ field: "--strategy", was: "grid (every combination)", now: "adaptive" }]
        : [])
    ]
    // more --load values or a larger --repeats, nothing else changed: only what is new runs
    // (docs/design.md#time-to-the-answer)
    const grow = growthOf(experimentOf(run.doc.experiment), options.experiment, diffs)
    if (grow.refused.length > 0)
      return yield* new ExperimentChanged({ sessionDir: dir, differences: grow.refused })
    if (grow.loads !== undefined) {
      run.doc = growLoads(
        run.doc,
        options.experiment.load.kind === "points" ? options.experiment.load.values : []
      )
      yield* Effect.logInfo(
        `sweep: growing the sweep by ${grow.loads.length} load point(s) (${grow.loads.join(", ")}); everything measured is kept`
      )
    }
    if (grow.repeats !== undefined || grow.fewerRepeats !== undefined)
      yield* Effect.logInfo(growRepeatsLine(run.doc, grow))
    if (grow.repeats !== undefined) run.doc = growRepeats(run.doc, grow.repeats)
    if (was === "adaptive" && strategy === "grid") {
      const skipped = run.doc.combinations.filter((c) => c.status === "skipped").length
      run.doc = completeGrid(run.doc)
      yield* Effect.logInfo(
        `sweep: --strategy grid on an adaptive session: ${skipped} skipped combination(s) run now, and the best is judged again`
      )
    }
    const open = inFlight(run.doc)
    if (open > 0)
      yield* Effect.logInfo(
        `sweep: ${open} run(s)/engine start(s) were in flight when an earlier run ended; they run again`
      )
    const reopened = reopen(recoverInterrupted(run.doc, now))
    if (run.doc.status === "done" && open === 0) {
      yield* Effect.logInfo(
        `sweep ${dir} already finished; nothing to run (use a new --session directory to sweep again)`
      )
      return {
        sessionDir: dir,
        doc: run.doc,
        engineStarts: 0,
        clientRuns: 0,
        alreadyDone: true
      } satisfies SweepReport
    }
    yield* save(run, reopened)
    const left = run.doc.combinations.filter((c) => !isFinalCombination(c)).length
    yield* Effect.logInfo(`resuming sweep ${dir}: ${left} combination(s) not finished`)
  }
  const start = yield* Clock.currentTimeMillis
  // the status line: redrawn (a terminal) at every save and every few seconds, else logged
  const show = options.redrawStatus
  yield* Effect.forkScoped(
    show === undefined
      ? Effect.flatMap(statusNow(run), (line) => Effect.logInfo(line)).pipe(
          Effect.delay(STATUS_EVERY),
          Effect.repeat(Schedule.spaced(STATUS_EVERY))
        )
      : Effect.flatMap(statusNow(run), show).pipe(Effect.repeat(Schedule.spaced(Duration.seconds(5))))
  )
  const bounded =
    options.deadlineSec === undefined
      ? Effect.asSome(combinationsLoop(run))
      : Effect.timeoutOption(combinationsLoop(run), Duration.seconds(options.deadlineSec))
  const finished = yield* bounded.pipe(
    Effect.onInterrupt(() => stopByRun(run, "cancelled", "cancelled (Ctrl-C)"))
  )
  if (Option.isNone(finished)) {
    const took = ((yield* Clock.currentTimeMillis) - start) / 1000
    yield* stopByRun(
      run,
      "stopped",
      `the deadline (${options.deadlineSec} s) passed after ${Math.round(took)} s`
    )
  }
  return {
    sessionDir: dir,
    doc: run.doc,
    engineStarts: run.engineStarts,
    clientRuns: run.clientRuns,
    alreadyDone: false
  } satisfies SweepReport
})

/** Runs (or resumes) a sweep session; see the header. */
export const runSweep = (options: SweepOptions) => Effect.scoped(runScoped(options))

export type SweepError = AttemptError | ExperimentChanged | SessionHoldsOther | SessionVanished
