/**
 * The points of a ready engine and their repeats (docs/design.md#combinations-and-points,
 * docs/design.md#trusted-answers): a grid's points in rounds (the point with the fewest runs next,
 * the lowest load first) until every point has `--repeats` runs, or the search's points as it picks
 * them, each point's runs in a row. Each run: `--between`, then the client through the engine
 * (Sweep/Engine.ts), its result judged (`judgeRun`) and written as the point's run (`runRecord`);
 * a failed run is retried once at once; an engine that dies during a point fails it and ends the
 * combination. The document is saved after every run (Sweep/State.ts).
 */
import { Clock, Data, Effect } from "effect"
import type { AttemptResult, FailureClass } from "../../domain/Failure.js"
import { redactArgv } from "../../domain/Redact.js"
import type { ClientCounts, StatedLoad } from "../../domain/Results.js"
import { CLIENT_LOG } from "../../domain/Serving.js"
import { classifyClientRun } from "../../domain/Sweep/ClientRun.js"
import { isNotInstalled, type Setback } from "../../domain/Sweep/Requeue.js"
import { engineStartOf, judgeSweepRun, settingsOf } from "../../domain/Sweep/Validity.js"
import {
  addPoint,
  beginRun,
  type CombinationRecord,
  clientArgvOf,
  comboRef,
  experimentRecord,
  finishPoint,
  finishRun,
  isFinalCombination,
  isFinalPoint,
  loadNumber,
  nextRoundPoint,
  nextRun,
  nextSearchStep,
  onNode,
  type PointRecord,
  type SweepDoc
} from "../../domain/Sweep.js"
import {
  askedLoadOf,
  DEFAULT_MAX_FAILED,
  type RunValidity,
  renderFinding,
  rerunHelps
} from "../../domain/Validity.js"
import { readEvidence } from "../Evidence.js"
import { resultFacts } from "../ResultFacts.js"
import type { ClientOutcome, EngineHandle } from "./Engine.js"
import type { SweepState } from "./State.js"

/**
 * A fault of the combination's node, not of its engine (domain/Sweep/Requeue.ts): caught by the
 * combination (Sweep/Combination.ts), which sends it back to the queue.
 */
export class NodeSetback extends Data.TaggedError("NodeSetback")<{ readonly setback: Setback }> {}

const iso = (ms: number) => new Date(ms).toISOString()
export const nowIso = Effect.map(Clock.currentTimeMillis, iso)

const combo = (doc: SweepDoc, index: number) => doc.combinations[index]!
const pointOf = (doc: SweepDoc, index: number, load: string) =>
  combo(doc, index).points.find((p) => p.load === load)!

const safeName = (s: string) => s.replace(/[^A-Za-z0-9._-]/g, "_")
export const comboDir = (state: SweepState, index: number) =>
  `${state.dir.replace(/\/+$/, "")}/combinations/${index}`

const fmt = (n: number | undefined, unit: string) =>
  n === undefined ? "–" : `${n >= 100 ? Math.round(n) : Math.round(n * 10) / 10} ${unit}`

/** A text's last non-empty line, trimmed and cut at 300 characters (the shell's `not found`). */
export const lastLine = (text: string) =>
  text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "")
    .at(-1)
    ?.slice(0, 300)

/** A log's last non-empty line, when it has one. */
const logLastLine = (state: SweepState, file: string) =>
  Effect.map(
    state.files.scanLog(file, () => undefined, 2000).pipe(Effect.orElseSucceed(() => undefined)),
    (tail) => lastLine(tail ?? "")
  )

// ---------------------------------------------------------------------------------------------
// One client run

/**
 * Where a finished client run is judged: its outcome classified (domain/Sweep/ClientRun.ts) on
 * its client.log (the one evidence reader, programs/Evidence.ts) and its result file.
 */
export const judgeRun = (
  state: SweepState,
  outcome: ClientOutcome,
  runDir: string,
  resultFile: string,
  argv: ReadonlyArray<string>
) =>
  Effect.gen(function* () {
    const read = yield* readEvidence(state.files, [{ file: `${runDir}/${CLIENT_LOG}`, channel: "client" }])
    const result = outcome.betweenExitCode !== null ? undefined : yield* state.files.readResult(resultFile)
    const judged = classifyClientRun({
      ...outcome,
      timeoutSec: state.options.pointTimeoutSec,
      outputTail: read.tails[0] ?? "",
      outputSignature: read.signature,
      evidence: read.evidence,
      result
    })
    // what the client sent, from its report and its argv, a local dataset file's size and SHA-256
    // with it, as a baseline's (docs/clients.md#the-workload-on-record)
    const facts = yield* resultFacts(state.files, result, argv)
    return { ...judged, workload: facts.workload, resultNotes: facts.resultNotes, client: result?.client }
  })

/**
 * `--one-run`: the report's benchmark at the load a point asks (docs/clients.md#in-a-sweep): its
 * stated value, and its kind where the load's name says one (`concurrency`, `max_concurrency`: in
 * flight; `rate`, `request_rate`: per second), so that a rate of 2 is never the point at a
 * concurrency of 2. A name that says neither (`c`) takes the one benchmark at that value, and none
 * when the report holds a rate and a concurrency of that value.
 */
export const pointAtLoad = <P extends { readonly load: StatedLoad | null }>(
  points: ReadonlyArray<P>,
  loadName: string,
  load: string
): P | undefined => {
  const asked = askedLoadOf(loadName, load)
  const kind = asked.concurrency !== undefined ? "concurrency" : asked.rate !== undefined ? "rate" : undefined
  const at = points.filter(
    (p) =>
      p.load !== null &&
      (String(p.load.value) === load || Number(p.load.value) === Number(load)) &&
      (kind === undefined || p.load.kind === kind)
  )
  return new Set(at.map((p) => p.load!.kind)).size === 1 ? at[0] : undefined
}

/**
 * A measured run judged (docs/trust.md#is-the-number-valid): every per-run check against the
 * engine start it ran on and the sweep's settings; undefined for a failed run.
 */
const validityOf = (
  state: SweepState,
  doc: SweepDoc,
  index: number,
  load: string,
  r: AttemptResult & { readonly client?: ClientCounts | undefined },
  outcome: ClientOutcome
) => {
  if (r.errorClass !== null) return undefined
  const c = combo(doc, index)
  const run = pointOf(doc, index, load).runs.at(-1)
  return judgeSweepRun({
    params: c.params,
    loadName: doc.experiment.load.name,
    load,
    metrics: r.metrics ?? null,
    client: r.client,
    observations: outcome.observations,
    engine: run === undefined ? undefined : engineStartOf(c, run),
    settings: {
      ...settingsOf(doc, state.options.experiment.slos),
      maxFailed: state.options.maxFailed ?? DEFAULT_MAX_FAILED
    }
  })
}

/** Where one judged client run becomes the point's run: the record `finishRun` writes. */
export const runRecord = (
  r: AttemptResult & { readonly client?: ClientCounts | undefined },
  outcome: ClientOutcome,
  endedAt: string,
  validity?: RunValidity | undefined
) => ({
  ended_at: endedAt,
  status: r.errorClass === null ? ("ok" as const) : ("failed" as const),
  class: r.errorClass,
  error: r.error,
  exit_code: r.exitCode,
  runtime_sec: r.runtimeSec,
  throughput: r.throughput,
  metrics: r.metrics ?? null,
  engine_died: outcome.engineDied,
  between_sec: outcome.betweenSec ?? null,
  ...(validity !== undefined ? { validity } : {}),
  ...(r.client !== undefined && Object.keys(r.client).length > 0 ? { client: r.client } : {}),
  ...(outcome.observations != null ? { observations: outcome.observations } : {}),
  ...(r.workload !== undefined ? { workload: r.workload } : {}),
  ...(r.resultNotes !== undefined && r.resultNotes.length > 0 ? { result_notes: r.resultNotes } : {})
})

/**
 * The client through the engine, counted: `--between`, then argv with the run's folder and result
 * file; a lost node (not its engine) is a NodeSetback, the run left in flight to become interrupted.
 */
const runClient = (
  state: SweepState,
  handle: EngineHandle,
  argv: ReadonlyArray<string>,
  runDir: string,
  resultFile: string
) =>
  Effect.gen(function* () {
    yield* state.count((k) => ({ ...k, clientRuns: k.clientRuns + 1 }))
    const outcome = yield* handle.run({
      argv,
      dir: runDir,
      env: { HYPERLOOM_RESULT_FILE: resultFile, HYPERLOOM_SWEEP_RUN_DIR: runDir },
      between: state.options.between ?? null,
      timeout_sec: state.options.pointTimeoutSec ?? null
    })
    if (outcome.leaseLost !== undefined)
      return yield* new NodeSetback({
        setback: { _tag: "NodeLost", node: handle.node, reason: outcome.leaseLost }
      })
    return outcome
  })

/**
 * One run of a point: its next repeat (or the retry a dead process left owed), a failed run
 * retried once at once; saves after every run. `measured` when the run measured; `failed` when the
 * point failed (both tries) or the engine died — the point is then finished as failed.
 */
const runRepeat = (state: SweepState, index: number, load: string, handle: EngineHandle, where: string) =>
  Effect.gen(function* () {
    const doc = yield* state.doc
    const repeats = doc.experiment.repeats
    const owed = pointOf(doc, index, load).runs.at(-1)
    if (owed?.status === "failed" && owed.try === 2) {
      // both tries failed, and the process died before it could say so: the point failed
      yield* state.updateCombination(index, (d) =>
        finishPoint(d, index, load, { class: owed.class, error: owed.error })
      )
      return "failed" as const
    }
    const first = nextRun(pointOf(doc, index, load), repeats)
    if (first === null) return "measured" as const
    for (let attempt = first.try; attempt <= 2; attempt++) {
      const repeat = first.repeat
      const c = combo(yield* state.doc, index)
      const n = c.points.reduce((m, p) => m + p.runs.length + p.interrupted_runs.length, 0) + 1
      const runDir = `${comboDir(state, index)}/runs/${n}-${safeName(load)}`
      const resultFile = `${runDir}/result.json`
      const argv = clientArgvOf(experimentRecord(state.options.experiment), c.params, load)
      yield* state.files.prepare(runDir, resultFile)
      const startedAt = yield* nowIso
      yield* state.updateCombination(index, (d) =>
        beginRun(d, index, load, {
          repeat,
          try: attempt,
          dir: runDir,
          client_argv: redactArgv(argv),
          started_at: startedAt
        })
      )
      const outcome = yield* runClient(state, handle, argv, runDir, resultFile)
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
          ? yield* logLastLine(state, `${runDir}/${missing.log}`)
          : undefined
      if (missing !== undefined && isNotInstalled(missing.code, line))
        return yield* new NodeSetback({
          setback: { _tag: "Missing", what: missing.what, node: handle.node, line }
        })
      if (!outcome.engineDied)
        yield* state.count((k) => ({ ...k, runSecs: [...k.runSecs, outcome.runtimeSec] }))
      const r = yield* judgeRun(state, outcome, runDir, resultFile, argv)
      const endedAt = yield* nowIso
      const validity = validityOf(state, yield* state.doc, index, load, r, outcome)
      yield* state.updateCombination(index, (d) =>
        finishRun(d, index, load, runRecord(r, outcome, endedAt, validity))
      )
      const m = r.metrics
      yield* Effect.logInfo(
        `sweep: ${where}, repeat ${repeat}/${repeats}${attempt > 1 ? " (retry)" : ""}: ${
          r.errorClass === null
            ? `output ${fmt(m?.output_throughput, "tok/s")}, p99 TTFT ${fmt(m?.p99_ttft_ms, "ms")}, p99 TPOT ${fmt(m?.p99_tpot_ms, "ms")}`
            : `failed (${r.errorClass}): ${(r.error ?? "").split("\n")[0]}`
        }`
      )
      if (validity !== undefined && validity.verdict !== "valid")
        yield* Effect.logInfo(
          `sweep: ${where}, repeat ${repeat}/${repeats}: ${validity.verdict}: ${validity.findings.map(renderFinding).join("; ")}`
        )
      // a GPU shared during the run: kept (invalid), and run again once, where that can help
      if (r.errorClass === null && validity !== undefined && attempt === 1 && rerunHelps(validity)) continue
      if (r.errorClass === null) return "measured" as const
      if (outcome.engineDied || attempt === 2) {
        yield* state.updateCombination(index, (d) =>
          finishPoint(d, index, load, { class: r.errorClass as FailureClass, error: r.error })
        )
        return outcome.engineDied ? ("engine_died" as const) : ("failed" as const)
      }
    }
    return "measured" as const
  })

/**
 * `--one-run` (docs/clients.md#in-a-sweep): the pending points of a round in ONE client run, `{NAME}`
 * the comma list of their loads; each point's run is the report's benchmark at its load (matched
 * on the value the report states), a point the report has no benchmark for fails, naming what it
 * holds. A failed run is retried once for the points it failed. `engine_died` as runRepeat.
 */
const runBatch = (
  state: SweepState,
  index: number,
  loads: ReadonlyArray<string>,
  handle: EngineHandle,
  where: string
) =>
  Effect.gen(function* () {
    let pending = [...loads]
    for (let attempt = 1; attempt <= 2 && pending.length > 0; attempt++) {
      const doc = yield* state.doc
      const c = combo(doc, index)
      const n = c.points.reduce((m, p) => m + p.runs.length + p.interrupted_runs.length, 0) + 1
      const runDir = `${comboDir(state, index)}/runs/${n}-all`
      const resultFile = `${runDir}/result.json`
      const argv = clientArgvOf(experimentRecord(state.options.experiment), c.params, pending.join(","))
      yield* state.files.prepare(runDir, resultFile)
      const startedAt = yield* nowIso
      for (const load of pending) {
        const next = nextRun(pointOf(doc, index, load), doc.experiment.repeats)
        yield* state.updateCombination(index, (d) =>
          beginRun(d, index, load, {
            repeat: next?.repeat ?? 1,
            try: attempt,
            dir: runDir,
            client_argv: redactArgv(argv),
            started_at: startedAt
          })
        )
      }
      const outcome = yield* runClient(state, handle, argv, runDir, resultFile)
      if (!outcome.engineDied)
        yield* state.count((k) => ({ ...k, runSecs: [...k.runSecs, outcome.runtimeSec] }))
      const read = yield* readEvidence(state.files, [{ file: `${runDir}/${CLIENT_LOG}`, channel: "client" }])
      const result = outcome.betweenExitCode !== null ? undefined : yield* state.files.readResult(resultFile)
      const endedAt = yield* nowIso
      const loadName = doc.experiment.load.name
      const failed: Array<string> = []
      for (const load of pending) {
        const point = pointAtLoad(result?.points ?? [], loadName, load)
        const held = (result?.points ?? []).map((p) =>
          p.load === null ? p.label : `${p.load.kind} ${String(p.load.value)}`
        )
        const judged = classifyClientRun({
          ...outcome,
          timeoutSec: state.options.pointTimeoutSec,
          outputTail: read.tails[0] ?? "",
          outputSignature: read.signature,
          evidence: read.evidence,
          result:
            point === undefined
              ? undefined
              : {
                  throughput: point.throughput,
                  format: result?.format,
                  invalid: point.invalid,
                  metrics: point.metrics
                }
        })
        // the run itself went well, but its report has nothing at this load: never a point at another load
        const r0: AttemptResult =
          judged.errorClass === "no_report" && result !== undefined && point === undefined
            ? {
                ...judged,
                error:
                  result.points === undefined
                    ? `--one-run: the client's ${result.format} result states no loads; --one-run needs a report of several benchmarks (GuideLLM, AIPerf; docs/clients.md#in-a-sweep)`
                    : `--one-run: the report (${resultFile}) holds no benchmark at ${loadName}=${load}; it holds ${held.join(", ")}`
              }
            : judged
        const facts = yield* resultFacts(state.files, point, argv)
        const r: AttemptResult = { ...r0, workload: facts.workload, resultNotes: facts.resultNotes }
        yield* state.updateCombination(index, (d) =>
          finishRun(d, index, load, runRecord(r, outcome, endedAt))
        )
        const m = r.metrics
        yield* Effect.logInfo(
          `sweep: ${where}, ${loadName}=${load}${attempt > 1 ? " (retry)" : ""}: ${
            r.errorClass === null
              ? `output ${fmt(m?.output_throughput, "tok/s")}, p99 TTFT ${fmt(m?.p99_ttft_ms, "ms")}, p99 TPOT ${fmt(m?.p99_tpot_ms, "ms")}`
              : `failed (${r.errorClass}): ${(r.error ?? "").split("\n")[0]}`
          }`
        )
        if (r.errorClass === null) continue
        if (outcome.engineDied || attempt === 2)
          yield* state.updateCombination(index, (d) =>
            finishPoint(d, index, load, { class: r.errorClass as FailureClass, error: r.error })
          )
        else failed.push(load)
      }
      if (outcome.engineDied) return "engine_died" as const
      pending = failed
    }
    return "measured" as const
  })

/** Ends a point that has all its runs: its stats and SLO verdicts. */
const closePoint = (state: SweepState, index: number, load: string, where: string) =>
  Effect.gen(function* () {
    const doc = yield* state.updateCombination(index, (d) => finishPoint(d, index, load))
    const p = pointOf(doc, index, load)
    const t = p.stats
    yield* Effect.logInfo(
      `sweep: ${where}: ${p.status} (median over ${doc.experiment.repeats}: output ${fmt(t.output_throughput?.median, "tok/s")}, p99 TTFT ${fmt(t.p99_ttft_ms?.median, "ms")}, p99 TPOT ${fmt(t.p99_tpot_ms?.median, "ms")})${p.noisy === true ? "; noisy: output CV over 5 %" : ""}`
    )
  })

/** Runs one point's repeats back to back (the search's points: see Sweep/Repeats.ts). */
const runPoint = (state: SweepState, index: number, load: string, handle: EngineHandle, where: string) =>
  Effect.gen(function* () {
    for (;;) {
      const doc = yield* state.doc
      if (nextRun(pointOf(doc, index, load), doc.experiment.repeats) === null) break
      const end = yield* runRepeat(state, index, load, handle, where)
      if (end === "engine_died") return "engine_died" as const
      if (end === "failed") return "done" as const
    }
    yield* closePoint(state, index, load, where)
    return "done" as const
  })

// ---------------------------------------------------------------------------------------------
// The points of a ready engine

const pointsLeft = (c: CombinationRecord) => c.points.filter((p) => !isFinalPoint(p)).length

const combosLeft = (doc: SweepDoc, after: number) =>
  doc.combinations.filter((c) => c.index > after && !isFinalCombination(c)).length

/** The points of a ready engine: the grid's pending ones in order, or the search's next one. */
export const runPoints = (state: SweepState, index: number, handle: EngineHandle) =>
  Effect.gen(function* () {
    for (;;) {
      const doc = yield* state.doc
      const spec = doc.experiment.load
      const c = combo(doc, index)
      let load: string
      if (spec.kind === "points") {
        // In rounds (docs/design.md#trusted-answers): the point with the fewest runs next, the
        // lowest load first.
        const next = nextRoundPoint(c.points, isFinalPoint)
        if (next === undefined) return "done" as const
        load = next.load
        if (doc.experiment.one_run === true) {
          // --one-run: every point of this round in one client run
          const round = c.points
            .filter((p) => !isFinalPoint(p) && p.runs.length === next.runs.length)
            .map((p) => p.load)
          const where = `combination ${comboRef(index, c.params)}${onNode(handle.node)}, ${spec.name}=${round.join(",")} in one run [${combosLeft(doc, index)} combination(s) after this]`
          const end = yield* runBatch(state, index, round, handle, where)
          if (end === "engine_died") return "engine_died" as const
          const after = yield* state.doc
          for (const l of round) {
            const p = pointOf(after, index, l)
            if (!isFinalPoint(p) && nextRun(p, after.experiment.repeats) === null)
              yield* closePoint(state, index, l, where)
          }
          continue
        }
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
            `sweep: combination ${comboRef(index, c.params)}: the largest load meeting every SLO is ${step.largest ?? "none (load 1 fails)"} (${evaluated.length} points evaluated)`
          )
          return "done" as const
        }
        load = String(step.load)
        const added = load
        yield* state.updateCombination(index, (d) => addPoint(d, index, added))
      }
      const now = yield* state.doc
      const c2 = combo(now, index)
      const left =
        spec.kind === "points"
          ? `point ${c2.points.length - pointsLeft(c2) + 1}/${c2.points.length}, ${pointsLeft(c2) - 1} left here`
          : `search point ${c2.points.length}`
      const where = `combination ${comboRef(index, c2.params)}${onNode(handle.node)}, ${spec.name}=${load} [${left}; ${combosLeft(now, index)} combination(s) after this]`
      if (spec.kind === "points") {
        const end = yield* runRepeat(state, index, load, handle, where)
        if (end === "engine_died") return "engine_died" as const
        const after = yield* state.doc
        if (end === "measured" && nextRun(pointOf(after, index, load), after.experiment.repeats) === null)
          yield* closePoint(state, index, load, where)
        continue
      }
      const end = yield* runPoint(state, index, load, handle, where)
      if (end === "engine_died") return "engine_died" as const
    }
  })
