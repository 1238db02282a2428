/**
 * The tools of `hyperloom mcp` (docs/agents.md): each a Schema for its arguments and a program over
 * the live services whose result is the CLI's JSON document, plus the budget and the trust block.
 * A refusal or a failure is a `ToolError`: a tag and a sentence an agent can act on.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Clock, Deferred, Effect, Option, Schema } from "effect"
import { compareSessions, type Gate, judgeGate, parseGate } from "../../domain/Compare.js"
import { METRIC_KEYS, type MetricKey } from "../../domain/Results.js"
import { DEFAULT_READY_TIMEOUT_SEC, MAX_WARMUP, RUNNER_DEFAULTS, readiness } from "../../domain/Serving.js"
import { renderState } from "../../domain/State.js"
import { renderSweep, type SweepDoc } from "../../domain/Sweep.js"
import { DEFAULT_MAX_FAILED } from "../../domain/Validity.js"
import { runBaseline } from "../../programs/Baseline.js"
import { checkSession } from "../../programs/Check.js"
import { doctor } from "../../programs/Inspect.js"
import { runSweep } from "../../programs/Sweep.js"
import { Settings } from "../../services/Settings.js"
import { StateStore } from "../../services/StateStore.js"
import { SweepStore } from "../../services/SweepStore.js"
import { VERSION } from "../../version.js"
import { loadSide } from "../commands/compare.js"
import { queueReport } from "../commands/queue.js"
import { betweenOf, dryRunPlan, experimentOf, SWEEP_READY_TIMEOUT_SEC } from "../commands/sweep.js"
import { EXIT } from "../Exit.js"
import { compareJson } from "../RenderCompare.js"
import { type Budget, checkRefusal, commandRefusal, isInside, secondsLeft, sessionPath } from "./Policy.js"
import { type RunEntry, type Runs, runState, ToolError } from "./Runs.js"
import { baselineTrust, sweepTrust } from "./Trust.js"

/** What the server was started with (`hyperloom mcp`'s options). */
export interface ServerPolicy {
  /** The session root, its links resolved. */
  readonly root: string
  readonly allow: ReadonlyArray<string>
  readonly budget: Budget
  readonly allowRepair: boolean
}

/** What a tool call can do besides its work: report progress to the caller and log. */
export interface CallContext {
  /** A progress notification on the call's progress token (none when the caller gave none). */
  readonly progress: (progress: number, total: number | undefined, message: string) => Effect.Effect<void>
}

// ---------------------------------------------------------------------------------------------
// Arguments

const describe = <S extends Schema.Schema.Any>(s: S, description: string) =>
  s.annotations({ description }) as unknown as S

const Session = describe(
  Schema.String,
  "A session directory, relative to the server's session root (e.g. 'sweep-1'); nothing outside the root is read or written."
)
const Gpus = describe(
  Schema.Number.pipe(Schema.int(), Schema.nonNegative()),
  "GPUs per engine (default 1; 0 on a host without GPUs)."
)
const Seconds = Schema.Number.pipe(Schema.positive())

const Experiment = {
  session: Session,
  server: describe(
    Schema.String,
    "The engine's command line with {name} placeholders and $HYPERLOOM_PORT, e.g. 'vllm serve MODEL --port $HYPERLOOM_PORT --max-num-seqs {max-num-seqs}'. One program with its arguments: it must be on the server's allow-list; no ;, &, |, redirections or $(...)."
  ),
  client: describe(
    Schema.Array(Schema.String).pipe(Schema.minItems(1)),
    "The load client's argv (no shell), with {name} placeholders; HYPERLOOM_BASE_URL and HYPERLOOM_RESULT_FILE are set. Its program must be on the allow-list."
  ),
  params: Schema.optional(
    describe(Schema.Array(Schema.String), "'NAME=V1,V2' per engine parameter: the grid is their product.")
  ),
  combos: Schema.optional(
    describe(
      Schema.Array(Schema.String),
      "Instead of params: 'NAME=V,NAME=V' per combination, run as listed."
    )
  ),
  link_vars: Schema.optional(
    describe(
      Schema.Array(Schema.String),
      "'PARAM=LOAD': each combination runs only the load equal to its PARAM."
    )
  ),
  load: Schema.optional(
    describe(Schema.String, "'NAME=V1,V2': the client's load points (e.g. 'concurrency=1,4,16').")
  ),
  search: Schema.optional(
    describe(Schema.String, "'NAME[:MAX]' instead of load (needs slo): the largest load meeting every SLO.")
  ),
  slo: Schema.optional(
    describe(
      Schema.Array(Schema.String),
      "'METRIC<=X' or 'METRIC>=X' on the median over repeats, e.g. 'p99_ttft_ms<=500'."
    )
  ),
  repeats: Schema.optional(
    describe(
      Schema.Number.pipe(Schema.int(), Schema.positive()),
      "Client runs per point (default 1: no noise estimate and no confidence; use >= 2 before claiming a gain)."
    )
  ),
  gpus: Schema.optional(Gpus),
  strategy: Schema.optional(Schema.Literal("grid", "adaptive"))
}

/** `--check`, `--warmup`, `--max-failed` (docs/trust.md#is-the-number-valid), for a run with an engine. */
const Validity = {
  check: Schema.optional(
    describe(
      Schema.String,
      "A program with its arguments run once per engine start, after it is ready and before anything is measured, with HYPERLOOM_BASE_URL and HYPERLOOM_PORT set (known prompts, a small eval): a non-zero exit means the engine answers wrong and nothing is measured on it (check_failed). On the allow-list, no shell syntax."
    )
  ),
  warmup: Schema.optional(
    describe(
      Schema.Number.pipe(Schema.int(), Schema.between(0, MAX_WARMUP)),
      `Requests sent at once after each engine start, discarded, before anything is measured (default ${RUNNER_DEFAULTS.warmup}; 0: none).`
    )
  ),
  max_failed: Schema.optional(
    describe(
      Schema.Number.pipe(Schema.between(0, 100)),
      `A run whose client reports more than this percentage of its requests failed is invalid, kept but never counted (default ${DEFAULT_MAX_FAILED * 100}).`
    )
  )
}

export const PlanArgs = Schema.Struct({
  ...Experiment,
  ...Validity,
  estimate_start_sec: Schema.optional(Seconds),
  estimate_run_sec: Schema.optional(Seconds)
})

export const StartArgs = Schema.Struct({
  ...Experiment,
  reset_prefix_cache: Schema.optional(Schema.Boolean),
  point_timeout_sec: Schema.optional(Seconds),
  ready_path: Schema.optional(Schema.String),
  ready_timeout_sec: Schema.optional(Seconds),
  deadline_sec: Schema.optional(describe(Seconds, "Bound this sweep's run (it stops resumable).")),
  lease_wait_sec: Schema.optional(describe(Seconds, "Give up if a lease is not granted within this.")),
  parallel: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.positive())),
  ...Validity,
  wait: Schema.optional(
    describe(
      Schema.Boolean,
      "true: the call lasts as long as the sweep, with progress notifications, and cancelling the call cancels the sweep; default false: the call returns at once and the sweep runs in the server's background."
    )
  )
})

export const SessionArgs = Schema.Struct({ session: Session })

export const StatusArgs = Schema.Struct({
  session: Session,
  wait_sec: Schema.optional(
    describe(
      Seconds,
      "Wait up to this long for the run to end, with progress notifications (default: answer at once)."
    )
  )
})

export const CompareArgs = Schema.Struct({
  a: describe(Schema.String, "The reference session (relative to the session root)."),
  b: describe(Schema.String, "The session compared against it."),
  metrics: Schema.optional(Schema.Array(Schema.Literal(...METRIC_KEYS))),
  fail_on: Schema.optional(describe(Schema.Array(Schema.String), "Gates, e.g. 'output_throughput<-3%'.")),
  allow_workload_change: Schema.optional(
    describe(
      Schema.Boolean,
      "Give verdicts even where the two sessions' recorded workloads differ (default: none, the differences listed first)."
    )
  )
})

export const DoctorArgs = Schema.Struct({
  gpus: Schema.optional(Gpus),
  serving_slot: Schema.optional(Schema.Boolean)
})

export const BaselineArgs = Schema.Struct({
  session: Session,
  command: describe(
    Schema.Array(Schema.String).pipe(Schema.minItems(1)),
    "The benchmark's argv (with server: the load client); its program must be on the allow-list."
  ),
  server: Schema.optional(
    describe(Schema.String, "A serving engine's command line (as start_sweep's server).")
  ),
  gpus: Schema.optional(Gpus),
  attempt_timeout_sec: Schema.optional(Seconds),
  deadline_sec: Schema.optional(Seconds),
  ready_path: Schema.optional(Schema.String),
  ready_timeout_sec: Schema.optional(Seconds),
  ...Validity,
  wait: Schema.optional(Schema.Boolean)
})

// ---------------------------------------------------------------------------------------------
// Paths under the root

/** The deepest existing ancestor of `p`, its links resolved, with the rest appended. */
const realish = (p: string): string => {
  const rest: Array<string> = []
  let at = p
  for (;;) {
    try {
      return path.join(fs.realpathSync(at), ...rest.reverse())
    } catch {
      const parent = path.dirname(at)
      if (parent === at) return p
      rest.push(path.basename(at))
      at = parent
    }
  }
}

/** A session an agent named, as a path inside the root once every link is resolved, or a refusal. */
export const sessionIn = (policy: ServerPolicy, name: string) =>
  Effect.suspend(() => {
    const lexical = sessionPath(policy.root, name)
    if (!lexical.ok) return Effect.fail(new ToolError({ tag: "OutsideSessionRoot", message: lexical.error }))
    const real = realish(lexical.path)
    if (!isInside(policy.root, real) || real === policy.root)
      return Effect.fail(
        new ToolError({
          tag: "OutsideSessionRoot",
          message: `session '${name}' leads outside the server's session root ${policy.root} through a link (to ${real}): name a directory inside the root; nothing outside it is read or written`
        })
      )
    return Effect.succeed(lexical.path)
  })

/** The session's name as the agent gives it back (relative to the root). */
const nameOf = (policy: ServerPolicy, dir: string) => path.relative(policy.root, dir)

// ---------------------------------------------------------------------------------------------
// Failures as an agent reads them

/** Any failure of a program as a ToolError: its tag and message (never a crash of the server). */
export const asToolError = (e: unknown): ToolError =>
  e instanceof ToolError
    ? e
    : typeof e === "object" && e !== null && "_tag" in e
      ? new ToolError({
          tag: String((e as { _tag: unknown })._tag),
          message: String((e as { message?: unknown }).message ?? (e as { _tag: unknown })._tag)
        })
      : new ToolError({ tag: "Failed", message: String(e) })

const usage = (message: string) => new ToolError({ tag: "UsageError", message })

// ---------------------------------------------------------------------------------------------
// Sessions' documents

const loadSweep = (dir: string) =>
  Effect.flatMap(SweepStore, (s) => s.load(dir)).pipe(Effect.mapError(asToolError))
const loadState = (dir: string) =>
  Effect.flatMap(StateStore, (s) => s.load(dir)).pipe(Effect.mapError(asToolError))

/** sweep.json as `sweep show --json` prints it. */
const sweepJson = (doc: SweepDoc) => JSON.parse(renderSweep(doc)) as Record<string, unknown>

/** Client runs recorded in a sweep, for progress. */
export const runsDone = (doc: SweepDoc) =>
  doc.combinations.reduce((n, c) => n + c.points.reduce((m, p) => m + p.runs.length, 0), 0)

/** A session's document with its trust block: a sweep's or a baseline's, or SessionNotFound. */
export const showSession = (policy: ServerPolicy, dir: string) =>
  Effect.gen(function* () {
    const sweep = yield* loadSweep(dir)
    if (Option.isSome(sweep))
      return {
        session: nameOf(policy, dir),
        kind: "sweep" as const,
        document: sweepJson(sweep.value),
        trust: sweepTrust(sweep.value)
      }
    const state = yield* loadState(dir)
    if (Option.isSome(state))
      return {
        session: nameOf(policy, dir),
        kind: "baseline" as const,
        document: JSON.parse(renderState(state.value)) as Record<string, unknown>,
        trust: baselineTrust(state.value)
      }
    return yield* new ToolError({
      tag: "SessionNotFound",
      message: `no sweep or baseline session at '${nameOf(policy, dir)}' under the session root: start one (start_sweep, baseline_run) or name an existing one`
    })
  })

// ---------------------------------------------------------------------------------------------
// The experiment

type ExperimentArgs = Schema.Schema.Type<typeof PlanArgs>

const experimentFrom = (a: ExperimentArgs) =>
  Effect.gen(function* () {
    const settings = yield* Settings
    return yield* experimentOf({
      server: a.server,
      param: a.params ?? [],
      combo: a.combos ?? [],
      linkVars: a.link_vars ?? [],
      load: Option.fromNullable(a.load),
      search: Option.fromNullable(a.search),
      slo: a.slo ?? [],
      repeats: Option.fromNullable(a.repeats),
      gpus: a.gpus ?? 1,
      nodes: settings.nodes,
      client: a.client
    }).pipe(Effect.mapError((e) => usage(e.message)))
  })

/** Why the allow-list refuses an experiment's engine, values, client or check; undefined: it does not. */
const refusalOf = (policy: ServerPolicy, a: ExperimentArgs) =>
  commandRefusal(
    policy.allow,
    a.server,
    [...(a.params ?? []), ...(a.combos ?? []), ...(a.load === undefined ? [] : [a.load])],
    a.client
  ) ?? (a.check === undefined ? undefined : checkRefusal(policy.allow, a.check))

const allowed = (policy: ServerPolicy, a: ExperimentArgs) => {
  const refusal = refusalOf(policy, a)
  return refusal === undefined
    ? Effect.void
    : Effect.fail(new ToolError({ tag: "NotAllowed", message: refusal }))
}

const checkAllowed = (policy: ServerPolicy, check: string | undefined) => {
  const refusal = check === undefined ? undefined : checkRefusal(policy.allow, check)
  return refusal === undefined
    ? Effect.void
    : Effect.fail(new ToolError({ tag: "NotAllowed", message: refusal }))
}

/** The validity options of a run with an engine, as the program takes them (max_failed: a percentage). */
const validityOf = (a: {
  readonly check?: string
  readonly warmup?: number
  readonly max_failed?: number
}) => ({
  check: a.check,
  warmup: a.warmup,
  maxFailed: a.max_failed === undefined ? undefined : a.max_failed / 100
})

// ---------------------------------------------------------------------------------------------
// The tools

export const doctorTool = (runs: Runs, a: Schema.Schema.Type<typeof DoctorArgs>) =>
  Effect.gen(function* () {
    const report = yield* doctor({
      gpus: a.gpus ?? 1,
      servingSlot: a.serving_slot ?? true,
      gpuCleanTimeoutSec: undefined
    })
    return { ...report, budget: { left: yield* runs.left } }
  }).pipe(Effect.mapError(asToolError))

export const queueTool = queueReport.pipe(Effect.mapError(asToolError))

export const planTool = (policy: ServerPolicy, runs: Runs, a: Schema.Schema.Type<typeof PlanArgs>) =>
  Effect.gen(function* () {
    const dir = yield* sessionIn(policy, a.session)
    const experiment = yield* experimentFrom(a)
    const given =
      a.estimate_start_sec !== undefined && a.estimate_run_sec !== undefined
        ? { start_sec: a.estimate_start_sec, run_sec: a.estimate_run_sec, source: "options" as const }
        : null
    const plan = yield* dryRunPlan(experiment, a.strategy ?? "grid", dir, given)
    const refusal = refusalOf(policy, a)
    const starts = plan.session?._tag === "left" ? plan.session.engine_starts : plan.combinations
    const budget = yield* runs.check({ starts, gpus: experiment.gpus }).pipe(
      Effect.as(null),
      Effect.catchAll((e) => Effect.succeed(e.message))
    )
    return {
      dry_run: true,
      session: nameOf(policy, dir),
      ...plan,
      allowed: refusal === undefined,
      refused: refusal ?? budget,
      budget: { left: yield* runs.left, engine_starts_needed: starts }
    }
  }).pipe(Effect.mapError(asToolError))

/** A run's status as `sweep_status` gives it. */
export const statusOf = (policy: ServerPolicy, runs: Runs, dir: string, entry: RunEntry | undefined) =>
  Effect.gen(function* () {
    const sweep = yield* loadSweep(dir)
    const state = Option.isNone(sweep) ? yield* loadState(dir) : Option.none()
    if (entry === undefined && Option.isNone(sweep) && Option.isNone(state))
      return yield* new ToolError({
        tag: "SessionNotFound",
        message: `no sweep or baseline session at '${nameOf(policy, dir)}' and none started by this server: start one with start_sweep`
      })
    const now = yield* Clock.currentTimeMillis
    const failure = entry?.exit !== undefined && entry.exit._tag === "Failure" ? entry.exit.cause : undefined
    const error =
      failure === undefined
        ? null
        : (() => {
            const squashed = failure._tag === "Fail" ? failure.error : undefined
            const e = asToolError(squashed ?? "the run failed")
            return { tag: e.tag, message: e.message }
          })()
    const doc = Option.getOrUndefined(sweep)
    return {
      session: nameOf(policy, dir),
      kind: doc !== undefined ? "sweep" : Option.isSome(state) ? "baseline" : (entry?.kind ?? null),
      run:
        entry === undefined
          ? "not started by this server"
          : entry.budgetStop !== undefined && entry.exit === undefined
            ? "stopping (budget)"
            : runState(entry),
      running_sec: entry === undefined ? null : Math.round((now - entry.startedAt) / 1000),
      status_line: entry?.line ?? null,
      budget_stop: entry?.budgetStop ?? null,
      error,
      progress: doc === undefined ? null : { runs_done: runsDone(doc), runs_planned: entry?.planned ?? null },
      status: doc?.status ?? (Option.isSome(state) ? state.value.status : null),
      stop_reason: doc?.stop_reason ?? (Option.isSome(state) ? state.value.stop_reason : null),
      summary: doc === undefined ? null : sweepJson(doc).summary,
      trust: doc !== undefined ? sweepTrust(doc) : Option.isSome(state) ? baselineTrust(state.value) : null,
      budget: { left: yield* runs.left }
    }
  }).pipe(Effect.mapError(asToolError))

/** Waits for `entry` up to `sec` (undefined: to its end), reporting progress every second. */
export const follow = (entry: RunEntry, dir: string, call: CallContext, sec: number | undefined) =>
  Effect.gen(function* () {
    const began = yield* Clock.currentTimeMillis
    let last = -1
    let lastLine: string | undefined
    for (;;) {
      if (entry.exit !== undefined) return
      const now = yield* Clock.currentTimeMillis
      if (sec !== undefined && now - began >= sec * 1000) return
      const doc = yield* loadSweep(dir).pipe(Effect.orElseSucceed(() => Option.none()))
      const done = Option.match(doc, { onNone: () => 0, onSome: runsDone })
      if (done !== last || entry.line !== lastLine) {
        last = done
        lastLine = entry.line
        yield* call.progress(
          done,
          entry.planned ?? undefined,
          entry.line ??
            `${done} client run(s) done${entry.planned === null ? "" : ` of about ${entry.planned}`}`
        )
      }
      yield* Effect.race(Effect.sleep("1 second"), Deferred.await(entry.done))
    }
  })

/** A run's own deadline: the agent's, bounded by what the budget's GPU hours and deadline leave. */
const runDeadline = (runs: Runs, gpus: number, atOnce: number, asked: number | undefined) =>
  Effect.map(Clock.currentTimeMillis, (now) => {
    const bound = secondsLeft(runs.budget, runs.spent(), now, { gpus, atOnce })
    return bound === undefined ? asked : asked === undefined ? bound : Math.min(bound, asked)
  })

/**
 * A run just started: its first moments (a run that cannot begin, on a session another process
 * holds or a lease refused at once, says so in this call rather than in a later status), with
 * `wait` all of it (cancelling the call cancels the run, as Ctrl-C: engines stopped, leases
 * released), then its status; a run that failed is the call's error.
 */
const settle = (
  policy: ServerPolicy,
  runs: Runs,
  dir: string,
  entry: RunEntry,
  wait: boolean,
  call: CallContext
) =>
  Effect.gen(function* () {
    // the first moments too: a waited-on call cancelled before its first status cancels the run
    const first = Effect.race(Effect.sleep("1500 millis"), Deferred.await(entry.done))
    if (wait)
      yield* first.pipe(
        Effect.zipRight(follow(entry, dir, call, undefined)),
        Effect.onInterrupt(() => runs.cancel(entry))
      )
    else yield* first
    const status = yield* statusOf(policy, runs, dir, entry)
    if (status.error !== null && entry.exit !== undefined)
      return yield* new ToolError({ tag: status.error.tag, message: status.error.message })
    return status
  })

export const startTool = (
  policy: ServerPolicy,
  runs: Runs,
  a: Schema.Schema.Type<typeof StartArgs>,
  call: CallContext,
  log: (line: string) => Effect.Effect<void>
) =>
  Effect.gen(function* () {
    const dir = yield* sessionIn(policy, a.session)
    yield* allowed(policy, a)
    const experiment = yield* experimentFrom(a)
    const strategy = a.strategy ?? "grid"
    const plan = yield* dryRunPlan(experiment, strategy, dir, null)
    if (plan.session?._tag === "refused")
      return yield* new ToolError({
        tag: "ExperimentChanged",
        message: `session '${a.session}' holds a different sweep (${plan.session.differences.map((d) => `${d.field}: ${d.was} -> ${d.now}`).join("; ")}); two experiments never mix: use a new session name`
      })
    const starts = plan.session?._tag === "left" ? plan.session.engine_starts : plan.combinations
    const gpus = experiment.gpus * experiment.nodes
    yield* runs.check({ starts: Math.min(starts, 1), gpus })
    yield* runs.check({ starts, gpus })
    const settings = yield* Settings
    const parallel = a.parallel ?? 1
    const deadlineSec = yield* runDeadline(runs, gpus, parallel, a.deadline_sec)
    const entry = yield* runs.start(
      {
        kind: "sweep",
        session: dir,
        gpus,
        planned: plan.session?._tag === "left" ? plan.session.runs : plan.runs
      },
      runSweep({
        sessionDir: dir,
        experiment,
        request: { gpus: experiment.gpus, servingSlot: true, gpuCleanTimeoutSec: undefined },
        between: betweenOf(a.reset_prefix_cache ?? false, undefined),
        pointTimeoutSec: a.point_timeout_sec,
        readiness: readiness(a.ready_path, a.ready_timeout_sec ?? SWEEP_READY_TIMEOUT_SEC),
        deadlineSec,
        waitSec: a.lease_wait_sec,
        parallel,
        redrawStatus: (line) =>
          Effect.suspend(() => {
            const entry = runs.get(dir)
            if (entry !== undefined) entry.line = line
            return log(`${a.session}: ${line}`)
          }),
        env: settings.env,
        cwd: settings.cwd,
        version: VERSION,
        strategy,
        ...validityOf(a)
      })
    )
    return yield* settle(policy, runs, dir, entry, a.wait === true, call)
  }).pipe(Effect.mapError(asToolError))

export const statusTool = (
  policy: ServerPolicy,
  runs: Runs,
  a: Schema.Schema.Type<typeof StatusArgs>,
  call: CallContext
) =>
  Effect.gen(function* () {
    const dir = yield* sessionIn(policy, a.session)
    const entry = runs.get(dir)
    if (entry !== undefined && a.wait_sec !== undefined) yield* follow(entry, dir, call, a.wait_sec)
    return yield* statusOf(policy, runs, dir, entry)
  }).pipe(Effect.mapError(asToolError))

export const showTool = (policy: ServerPolicy, a: Schema.Schema.Type<typeof SessionArgs>) =>
  Effect.flatMap(sessionIn(policy, a.session), (dir) => showSession(policy, dir)).pipe(
    Effect.mapError(asToolError)
  )

export const compareTool = (policy: ServerPolicy, a: Schema.Schema.Type<typeof CompareArgs>) =>
  Effect.gen(function* () {
    const da = yield* sessionIn(policy, a.a)
    const db = yield* sessionIn(policy, a.b)
    const metrics: Array<MetricKey> = [...(a.metrics ?? ["output_throughput"])]
    const gates: Array<Gate> = []
    for (const text of a.fail_on ?? []) {
      const g = parseGate(text)
      if (!g.ok) return yield* usage(g.error)
      gates.push(g.gate)
      if (!metrics.includes(g.gate.metric)) metrics.push(g.gate.metric)
    }
    const sa = yield* loadSide(da).pipe(Effect.mapError(asToolError))
    const sb = yield* loadSide(db).pipe(Effect.mapError(asToolError))
    if (sa.kind !== sb.kind)
      return yield* usage(
        `compare takes two sweep sessions or two baseline sessions: '${a.a}' is a ${sa.kind} session, '${a.b}' a ${sb.kind} session`
      )
    const comparison = compareSessions(sa, sb, metrics, {
      allowWorkloadChange: a.allow_workload_change === true
    })
    const results = gates.map((g) => judgeGate(comparison, g))
    const failed = results.some((r) => r.failed)
    return {
      ...compareJson(comparison, results, failed ? EXIT.compareRegression : EXIT.ok),
      gate_failed: failed
    }
  }).pipe(Effect.mapError(asToolError))

export const cancelTool = (policy: ServerPolicy, runs: Runs, a: Schema.Schema.Type<typeof SessionArgs>) =>
  Effect.gen(function* () {
    const dir = yield* sessionIn(policy, a.session)
    const entry = runs.get(dir)
    if (entry === undefined)
      return yield* new ToolError({
        tag: "NotStartedHere",
        message: `this server started no run on '${a.session}': it cancels only what it started (another process's run is never stopped from here)`
      })
    if (entry.exit === undefined) yield* runs.cancel(entry)
    return yield* statusOf(policy, runs, dir, entry)
  }).pipe(Effect.mapError(asToolError))

export const baselineTool = (
  policy: ServerPolicy,
  runs: Runs,
  a: Schema.Schema.Type<typeof BaselineArgs>,
  call: CallContext
) =>
  Effect.gen(function* () {
    const dir = yield* sessionIn(policy, a.session)
    const server = a.server
    const refusal =
      server === undefined
        ? commandRefusal(policy.allow, a.command.join(" "), [], a.command)
        : commandRefusal(policy.allow, server, [], a.command)
    if (refusal !== undefined) return yield* new ToolError({ tag: "NotAllowed", message: refusal })
    if (server === undefined && (a.check ?? a.warmup ?? a.max_failed) !== undefined)
      return yield* new ToolError({
        tag: "UsageError",
        message:
          "check, warmup and max_failed go with server: without an engine there is nothing to check or warm"
      })
    yield* checkAllowed(policy, a.check)
    const gpus = a.gpus ?? 1
    yield* runs.check({ starts: 1, gpus })
    const settings = yield* Settings
    const deadlineSec = yield* runDeadline(runs, gpus, 1, a.deadline_sec)
    const entry = yield* runs.start(
      { kind: "baseline", session: dir, gpus, planned: null },
      runBaseline({
        sessionDir: dir,
        request: { gpus, servingSlot: true, gpuCleanTimeoutSec: undefined },
        argv: a.command,
        attemptTimeoutSec: a.attempt_timeout_sec,
        deadlineSec,
        env: settings.env,
        cwd: settings.cwd,
        onOutput: () => Effect.void,
        serving:
          server === undefined
            ? undefined
            : {
                server,
                readiness: readiness(a.ready_path, a.ready_timeout_sec ?? DEFAULT_READY_TIMEOUT_SEC),
                ...validityOf(a)
              },
        version: VERSION
      })
    )
    return yield* settle(policy, runs, dir, entry, a.wait === true, call)
  }).pipe(Effect.mapError(asToolError))

/** `hyperloom check --json` on a session under the root: its runs' validity judged again, nothing run or written. */
export const checkTool = (policy: ServerPolicy, a: Schema.Schema.Type<typeof SessionArgs>) =>
  Effect.gen(function* () {
    const dir = yield* sessionIn(policy, a.session)
    const report = yield* checkSession(dir).pipe(Effect.mapError(asToolError))
    return { ...report, session: nameOf(policy, dir) }
  }).pipe(Effect.mapError(asToolError))
