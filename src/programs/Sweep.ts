/**
 * The sweep program (SPEC §12): the best serving configuration under an SLO. The policy is pure
 * (domain/Sweep*.ts); this file is the loop around it, against service tags only.
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
 *      `--repeats` runs (SPEC §16: interleaved), or as the search picks them, each point's runs in
 *      a row; `--between` before each client run; a failed client run is retried once; an engine
 *      that dies during a point fails it and ends the combination (the rest `not_run`);
 *    - the document (with its summary and the best) and summary.csv are saved after every run.
 * 3. The best (or the tie) decides the outcome. `--deadline` stops the run (resumable); Ctrl-C
 *    saves the sweep as cancelled after the engine is stopped and its lease released.
 */
import { Clock, Data, Duration, Effect, Option } from "effect"
import type { AttemptResult } from "../domain/Failure.js"
import {
  AttemptOutcome,
  classifyAttempt,
  type FailureClass,
  isTellingLine,
  MAX_ERROR_CHARS,
  MAX_EVIDENCE_LINES
} from "../domain/Failure.js"
import type { LeaseRequest } from "../domain/Feasibility.js"
import { redactArgv, redactExperiment } from "../domain/Redact.js"
import { CLIENT_LOG, ENVIRONMENT_FILE, type NodeFacts } from "../domain/Serving.js"
import { OutputDigest } from "../domain/Signature.js"
import {
  addPoint,
  beginEngine,
  beginRun,
  type CombinationRecord,
  clientArgvOf,
  comboRef,
  type Difference,
  type Experiment,
  experimentDiff,
  experimentOf,
  experimentRecord,
  finishPoint,
  finishRun,
  inFlight,
  initialSweep,
  isFinalCombination,
  isFinalPoint,
  loadNumber,
  nextRoundPoint,
  nextRun,
  nextSearchStep,
  type PointRecord,
  recoverInterrupted,
  renderDifferences,
  reopen,
  type SweepDoc,
  setCombination,
  setSweepStatus,
  skipRemaining,
  substitute,
  sweepEnvironmentRecord,
  updateEngine,
  withSummary
} from "../domain/Sweep.js"
import { AttemptFiles, type AttemptFilesShape } from "../services/AttemptFiles.js"
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
  readonly readyPath: string
  readonly readyTimeoutSec: number
  /** Bounds each combination's wait for its lease (SPEC §13 `--wait`): past it the sweep stops, naming the holder. */
  readonly waitSec?: number | undefined
  /** Bounds the whole run; past it the sweep stops (resumable) as session_time_exhausted. */
  readonly deadlineSec?: number | undefined
  readonly env: Readonly<Record<string, string | undefined>>
  readonly cwd: string
  /** hyperloom's version, for the session's environment record. */
  readonly version?: string | undefined
}

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
}

const iso = (ms: number) => new Date(ms).toISOString()
const nowIso = Effect.map(Clock.currentTimeMillis, iso)

const save = (run: Run, next: SweepDoc) =>
  Effect.uninterruptible(
    Effect.gen(function* () {
      if (run.saved && !(yield* run.store.stillThere(run.dir)))
        return yield* new SessionVanished({ sessionDir: run.dir })
      const doc = withSummary({ ...next, updated_at: yield* nowIso })
      run.doc = doc
      yield* run.store.save(run.dir, doc)
      run.saved = true
    })
  )

const combo = (run: Run, index: number) => run.doc.combinations[index]!
const pointOf = (run: Run, index: number, load: string) =>
  combo(run, index).points.find((p) => p.load === load)!

const safeName = (s: string) => s.replace(/[^A-Za-z0-9._-]/g, "_")
const comboDir = (run: Run, index: number) => `${run.dir.replace(/\/+$/, "")}/combinations/${index}`

const fmt = (n: number | undefined, unit: string) =>
  n === undefined ? "–" : `${n >= 100 ? Math.round(n) : Math.round(n * 10) / 10} ${unit}`

// ---------------------------------------------------------------------------------------------
// One client run

/** A client run's outcome, classified (SPEC §6/§10; completed = 0 is never a measurement). */
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
    if (outcome.betweenExitCode !== null) {
      return {
        errorClass: "subprocess_nonzero",
        exitCode: outcome.betweenExitCode,
        runtimeSec: outcome.runtimeSec,
        error: `--between exited with code ${outcome.betweenExitCode}; the client did not run`,
        launchLog: "",
        throughput: null
      } satisfies AttemptResult
    }
    const parsed = yield* run.files.readResult(resultFile)
    let result: AttemptResult =
      outcome.timedOut || (outcome.exitCode === null && !outcome.engineDied)
        ? classifyAttempt(
            AttemptOutcome.TimedOut({
              runtimeSec: outcome.runtimeSec,
              timeoutSec: run.options.pointTimeoutSec ?? outcome.runtimeSec,
              outputTail: tail,
              outputSignature: digest.signature()
            })
          )
        : classifyAttempt(
            AttemptOutcome.Exited({
              exitCode: outcome.exitCode ?? 1,
              runtimeSec: outcome.runtimeSec,
              outputTail: tail,
              outputSignature: digest.signature(),
              evidence,
              throughput: parsed?.throughput,
              resultFormat: parsed?.format,
              invalidMetric: parsed?.invalid,
              metrics: parsed?.metrics
            })
          )
    if (result.errorClass === null && result.metrics?.completed === 0) {
      result = {
        ...result,
        errorClass: "invalid_measurement",
        error: "the client reported completed = 0: no request finished, not a measurement"
      }
    }
    if (outcome.engineDied) {
      const died = `the engine exited${outcome.engineExitCode !== null ? ` with code ${outcome.engineExitCode}` : ""} while the client ran`
      result = {
        ...result,
        errorClass: result.errorClass ?? "subprocess_nonzero",
        error: result.error === null ? died : `${died}\n${result.error}`.slice(0, MAX_ERROR_CHARS)
      }
    }
    return result
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
          engine_died: outcome.engineDied
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
        // In rounds (SPEC §16): the point with the fewest runs next, the lowest load first.
        const next = nextRoundPoint(c.points, isFinalPoint)
        if (next === undefined) return "done" as const
        load = next.load
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
      const where = `combination ${comboRef(index, combo(run, index).params)}, ${spec.name}=${load} [${left}; ${combosLeft(run, index)} combination(s) after this]`
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

/** A combination: one engine start (one retry for a non-deterministic failure before ready). */
const runCombination = (run: Run, index: number) =>
  Effect.gen(function* () {
    for (;;) {
      const c = combo(run, index)
      const failedStarts = c.engine_starts.filter((s) => s.outcome === "failed").length
      const n = c.engine_starts.length + 1
      const dir = `${comboDir(run, index)}/engine-${n}`
      yield* save(run, beginEngine(run.doc, index, dir, yield* nowIso))
      run.engineStarts++
      yield* Effect.logInfo(
        `sweep: combination ${comboRef(index, c.params)}: starting the engine under a lease: ${c.server_cmd}`
      )
      const outcome = yield* Effect.scoped(
        Effect.gen(function* () {
          const handle = yield* run.engine.start({
            request: run.options.request,
            // what runs is the experiment as given; the document keeps it redacted (Redact.ts)
            server: substitute(run.options.experiment.server, c.params),
            dir,
            readyPath: run.options.readyPath,
            readyTimeoutSec: run.options.readyTimeoutSec,
            waitSec: run.options.waitSec,
            env: run.options.env,
            cwd: run.options.cwd,
            onOutput: (o) => Effect.logDebug(`[combination #${index}] ${o.line}`)
          })
          if (handle.started._tag === "NotReady")
            return { _tag: "not_ready" as const, result: handle.started.result }
          yield* save(
            run,
            updateEngine(run.doc, index, { outcome: "ready", ready_sec: handle.started.readySec })
          )
          yield* recordSweepEnvironment(run, index, handle.started.status?.node)
          yield* Effect.logInfo(
            `sweep: combination #${index}: the engine is ready${handle.started.readySec !== null ? ` after ${handle.started.readySec} s` : ""}`
          )
          return { _tag: "ran" as const, end: yield* runPoints(run, index, handle) }
        })
      ).pipe(
        Effect.catchTag("RayClusterInfeasible", (e) =>
          Effect.succeed({ _tag: "infeasible" as const, error: e.message })
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
          yield* save(
            run,
            updateEngine(run.doc, index, {
              ended_at: ended,
              outcome: "failed",
              class: r.errorClass,
              error: r.error
            })
          )
          const head = (r.error ?? "").split("\n").find((l) => l.trim() !== "") ?? ""
          if (r.errorClass !== null && DETERMINISTIC.has(r.errorClass)) {
            yield* save(
              run,
              skipRemaining(
                setCombination(run.doc, index, { status: "infeasible", class: r.errorClass, error: r.error }),
                index
              )
            )
            yield* Effect.logInfo(
              `sweep: combination #${index}: infeasible (${r.errorClass}, not retried): ${head}`
            )
            return "next" as const
          }
          if (failedStarts === 0) {
            yield* Effect.logInfo(
              `sweep: combination #${index}: the engine failed before ready (${r.errorClass}); retrying once: ${head}`
            )
            continue
          }
          yield* save(
            run,
            skipRemaining(
              setCombination(run.doc, index, { status: "failed", class: r.errorClass, error: r.error }),
              index
            )
          )
          yield* Effect.logInfo(
            `sweep: combination #${index}: the engine failed before ready again (${r.errorClass}); going on`
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

const combinationsLoop = (run: Run) =>
  Effect.gen(function* () {
    for (const c of run.doc.combinations) {
      if (isFinalCombination(combo(run, c.index))) continue
      if ((yield* runCombination(run, c.index)) === "stop") return
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
  const run: Run = {
    options,
    dir,
    store,
    files: yield* AttemptFiles,
    engine: yield* SweepEngine,
    doc: Option.getOrElse(loaded, () => initialSweep(redactExperiment(options.experiment), iso(0))),
    engineStarts: 0,
    clientRuns: 0,
    saved: Option.isSome(loaded)
  }
  const now = yield* nowIso
  if (Option.isNone(loaded)) {
    yield* save(run, {
      ...initialSweep(redactExperiment(options.experiment), now),
      cwd: options.cwd,
      ...(options.version !== undefined ? { hyperloom_version: options.version } : {})
    })
    yield* Effect.logInfo(
      `new sweep ${dir}: ${run.doc.combinations.length} combination(s), ${options.experiment.load.kind === "points" ? `${options.experiment.load.values.length} load point(s) each` : `search for the largest ${options.experiment.load.name} up to ${options.experiment.load.max}`}, ${options.experiment.repeats} repeat(s)`
    )
  } else {
    const diffs = experimentDiff(experimentOf(run.doc.experiment), redactExperiment(options.experiment))
    if (diffs.length > 0) return yield* new ExperimentChanged({ sessionDir: dir, differences: diffs })
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
