/**
 * The runs an MCP server started (docs/agents.md): sweeps and baselines in the server's background,
 * under the same leases as any user's, and the budget they draw on.
 *
 * Every engine start goes through the budget first: `SweepEngine.start` (a sweep's engines) and
 * `AttemptRunner.run` (a baseline's attempts) are wrapped for the runs of this server, so a start
 * past `--max-engine-starts` or past the GPU hours never happens: the run is stopped instead, as
 * Ctrl-C stops it (the engine stopped, the lease released, the session saved), and says so. The
 * GPU time an engine held (from its start to its stop, times its GPUs and nodes) is charged when
 * it stops. The deadline and the GPU hours also bound each run's own `deadlineSec`.
 */
import { Clock, Data, Deferred, Effect, Exit, Fiber, type Scope } from "effect"
import { AttemptRunner } from "../../programs/AttemptRunner.js"
import { SweepEngine } from "../../programs/Sweep/Engine.js"
import { type Budget, type BudgetLeft, budgetLeft, budgetRefusal, type Spent } from "./Policy.js"

/** A tool's refusal or failure: a tag an agent can branch on and a sentence it can act on. */
export class ToolError extends Data.TaggedError("ToolError")<{
  readonly tag: string
  readonly message: string
  readonly detail?: Readonly<Record<string, unknown>> | undefined
}> {}

export type RunKind = "sweep" | "baseline"

export interface RunEntry {
  readonly kind: RunKind
  readonly session: string
  readonly startedAt: number
  readonly gpus: number
  /** Client runs the plan holds (retries aside), for progress. */
  readonly planned: number | null
  fiber: Fiber.RuntimeFiber<unknown, unknown> | undefined
  /** Set when the run ended: its exit. */
  exit: Exit.Exit<unknown, unknown> | undefined
  /** The status line the program last drew or logged. */
  line: string | undefined
  /** Why the budget stopped it, when it did. */
  budgetStop: string | undefined
  /** An agent's `cancel` stopped it. */
  cancelled: boolean
  readonly done: Deferred.Deferred<void>
}

export interface Runs {
  readonly budget: Budget
  readonly spent: () => Spent
  readonly left: Effect.Effect<BudgetLeft>
  /** The run of a session (absolute path) this server started, if any. */
  readonly get: (session: string) => RunEntry | undefined
  readonly all: () => ReadonlyArray<RunEntry>
  /** Refuses when the budget cannot cover `starts` engine starts on `gpus` GPUs. */
  readonly check: (need: { readonly starts: number; readonly gpus: number }) => Effect.Effect<void, ToolError>
  /**
   * Starts `program` in the server's background under the budget's guards; refuses a session this
   * server already runs.
   */
  readonly start: <A, E, R>(
    entry: Omit<RunEntry, "fiber" | "exit" | "line" | "budgetStop" | "cancelled" | "done" | "startedAt">,
    program: Effect.Effect<A, E, R>
  ) => Effect.Effect<RunEntry, ToolError, R | SweepEngine | AttemptRunner>
  /** Interrupts a run (a clean stop: engines stopped, leases released) and waits for it. */
  readonly cancel: (entry: RunEntry) => Effect.Effect<void>
  /** Waits for every run to end. */
  readonly awaitAll: Effect.Effect<void>
}

/** The runs of one server, forked in `scope` (closing it stops them all). */
export const makeRuns = (scope: Scope.Scope, budget: Budget): Effect.Effect<Runs> =>
  Effect.sync(() => {
    const entries = new Map<string, RunEntry>()
    let engineStarts = 0
    let gpuSeconds = 0
    const spent = (): Spent => ({ engineStarts, gpuSeconds })
    const left = Effect.map(Clock.currentTimeMillis, (now) => budgetLeft(budget, spent(), now))

    const check = (need: { readonly starts: number; readonly gpus: number }) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const refusal = budgetRefusal(budget, spent(), now, need)
        return refusal === undefined
          ? Effect.void
          : Effect.fail(
              new ToolError({
                tag: "BudgetExceeded",
                message: refusal,
                detail: { left: budgetLeft(budget, spent(), now) }
              })
            )
      })

    /**
     * One engine start of `entry`'s run: refused past the budget (the whole run is then stopped,
     * as Ctrl-C stops it), else counted, and its GPU time charged when its scope closes.
     */
    const guardStart = <A, E, R>(entry: RunEntry, start: Effect.Effect<A, E, R>) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const refusal = budgetRefusal(budget, spent(), now, { starts: 1, gpus: entry.gpus })
        if (refusal !== undefined) {
          entry.budgetStop = `the budget stopped this run before its next engine start: ${refusal}`
          yield* Effect.logWarning(`${entry.session}: ${entry.budgetStop}`)
          if (entry.fiber !== undefined) yield* Fiber.interruptFork(entry.fiber)
          return yield* Effect.interrupt
        }
        engineStarts++
        return yield* start
      })
    const charge = (entry: RunEntry, since: number) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        gpuSeconds += (Math.max(0, now - since) / 1000) * entry.gpus
      })

    const start: Runs["start"] = (init, program) =>
      Effect.gen(function* () {
        const held = entries.get(init.session)
        if (held !== undefined && held.exit === undefined)
          return yield* new ToolError({
            tag: "SessionBusy",
            message: `this server is already running a ${held.kind} on session ${init.session}: wait for it (sweep_status with wait_sec), or cancel it, before starting another there`
          })
        const entry: RunEntry = {
          ...init,
          startedAt: yield* Clock.currentTimeMillis,
          fiber: undefined,
          exit: undefined,
          line: undefined,
          budgetStop: undefined,
          cancelled: false,
          done: yield* Deferred.make<void>()
        }
        const engine = yield* SweepEngine
        const runner = yield* AttemptRunner
        const guarded = program.pipe(
          Effect.provideService(SweepEngine, {
            ...engine,
            start: (spec) =>
              guardStart(
                entry,
                Effect.gen(function* () {
                  const since = yield* Clock.currentTimeMillis
                  yield* Effect.addFinalizer(() => charge(entry, since))
                  return yield* engine.start(spec)
                })
              )
          }),
          Effect.provideService(AttemptRunner, {
            run: (spec) =>
              guardStart(
                entry,
                Effect.gen(function* () {
                  const since = yield* Clock.currentTimeMillis
                  return yield* runner.run(spec).pipe(Effect.ensuring(charge(entry, since)))
                })
              )
          }),
          Effect.onExit((exit) =>
            Effect.zipRight(
              Effect.sync(() => {
                entry.exit = exit
              }),
              Deferred.succeed(entry.done, undefined)
            )
          )
        )
        entries.set(init.session, entry)
        entry.fiber = yield* Effect.forkIn(guarded, scope)
        return entry
      })

    const cancel = (entry: RunEntry) =>
      Effect.gen(function* () {
        entry.cancelled = true
        if (entry.fiber !== undefined) yield* Fiber.interrupt(entry.fiber)
        yield* Deferred.await(entry.done)
      })

    return {
      budget,
      spent,
      left,
      get: (session) => entries.get(session),
      all: () => [...entries.values()],
      check,
      start,
      cancel,
      // read when awaited, not when the runs were made: the runs started since
      awaitAll: Effect.suspend(() =>
        Effect.forEach([...entries.values()], (e) => Deferred.await(e.done), { discard: true })
      )
    } satisfies Runs
  })

/** What a run's end was, as an agent reads it. */
export const runState = (
  entry: RunEntry
): "running" | "finished" | "failed" | "cancelled" | "stopped_by_budget" =>
  entry.exit === undefined
    ? "running"
    : entry.budgetStop !== undefined
      ? "stopped_by_budget"
      : Exit.isSuccess(entry.exit)
        ? "finished"
        : Exit.isInterrupted(entry.exit) || entry.cancelled
          ? "cancelled"
          : "failed"
