/**
 * The runs of `hyperloom mcp` (src/cli/mcp/Runs.ts) with scripted engines: the budget holds at
 * every engine start (a start past it never happens; the run is stopped instead, saying why), GPU
 * time is charged from an engine's start to its stop, one session runs once, a cancel waits for
 * the run's own clean-up, and `awaitAll` waits for runs started after the runs were made.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Scope } from "effect"
import { makeRuns, runState } from "../../src/cli/mcp/Runs.js"
import { AttemptRunner } from "../../src/programs/AttemptRunner.js"
import type { EngineHandle } from "../../src/programs/Sweep/Engine.js"
import { SweepEngine } from "../../src/programs/Sweep/Engine.js"

/** A scripted engine: each start is counted, holds its engine `holdMs`, and is stopped with its scope. */
const scripted = (holdMs = 0) => {
  const seen = { starts: 0, stopped: 0 }
  const engine = SweepEngine.of({
    start: () =>
      Effect.gen(function* () {
        seen.starts++
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            seen.stopped++
          })
        )
        if (holdMs > 0) yield* Effect.sleep(holdMs)
        return {} as EngineHandle
      }),
    eligibleNodes: () => Effect.succeed(undefined),
    servingNodes: () => Effect.succeed(undefined)
  })
  return { seen, engine }
}

/** A "sweep" of `n` combinations: one engine start each, in turn, as the sweep program makes them. */
const sweepOf = (n: number) =>
  Effect.gen(function* () {
    const engine = yield* SweepEngine
    for (let i = 0; i < n; i++) yield* Effect.scoped(engine.start({} as never))
    return n
  })

const provide =
  (engine: SweepEngine["Type"]) =>
  <A, E>(e: Effect.Effect<A, E, SweepEngine | AttemptRunner>) =>
    e.pipe(
      Effect.provideService(SweepEngine, engine),
      Effect.provideService(AttemptRunner, { run: () => Effect.die("no baseline here") })
    )

describe("the runs of an MCP server", () => {
  it.live("a start past --max-engine-starts never happens: the run is stopped, saying why", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const runs = yield* makeRuns(scope, { maxEngineStarts: 2 })
      const { seen, engine } = scripted(20)
      const entry = yield* provide(engine)(
        runs.start({ kind: "sweep", session: "/r/s", gpus: 1, planned: 3 }, sweepOf(3))
      )
      yield* Deferred.await(entry.done)
      assert.strictEqual(seen.starts, 2, "two engines started, the third refused")
      assert.strictEqual(seen.stopped, 2, "each started engine stopped")
      assert.isTrue(entry.exit !== undefined && Exit.isInterrupted(entry.exit))
      assert.strictEqual(runState(entry), "stopped_by_budget")
      assert.include(entry.budgetStop, "needs 1 engine start(s) and the server's budget has 0 left")
      assert.strictEqual(runs.spent().engineStarts, 2)
      // GPU time: two engines of one GPU, each held 20 ms or more
      assert.isAtLeast(runs.spent().gpuSeconds, 0.04)
      assert.deepInclude(yield* runs.left, { engine_starts: 0 })
      // and the next run is refused before it starts
      const refused = yield* Effect.flip(runs.check({ starts: 1, gpus: 1 }))
      assert.strictEqual(refused.tag, "BudgetExceeded")
      yield* Scope.close(scope, Exit.void)
    })
  )

  it.live("GPU hours: a run past them is stopped at its next engine start", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      // 0.1 s of one GPU
      const runs = yield* makeRuns(scope, { maxGpuHours: 0.1 / 3600 })
      const { seen, engine } = scripted(150)
      const entry = yield* provide(engine)(
        runs.start({ kind: "sweep", session: "/r/g", gpus: 1, planned: 2 }, sweepOf(2))
      )
      yield* Deferred.await(entry.done)
      assert.strictEqual(seen.starts, 1)
      assert.strictEqual(runState(entry), "stopped_by_budget")
      assert.include(entry.budgetStop, "GPU hours are spent")
      yield* Scope.close(scope, Exit.void)
    })
  )

  it.live("one run per session; a cancel interrupts it and waits for its engine to stop", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const runs = yield* makeRuns(scope, {})
      const { seen, engine } = scripted(60_000)
      const entry = yield* provide(engine)(
        runs.start({ kind: "sweep", session: "/r/c", gpus: 0, planned: 1 }, sweepOf(1))
      )
      const again = yield* Effect.flip(
        provide(engine)(runs.start({ kind: "sweep", session: "/r/c", gpus: 0, planned: 1 }, sweepOf(1)))
      )
      assert.strictEqual(again.tag, "SessionBusy")
      while (seen.starts === 0) yield* Effect.sleep(5)
      yield* runs.cancel(entry)
      assert.strictEqual(seen.stopped, 1)
      assert.strictEqual(runState(entry), "cancelled")
      yield* Scope.close(scope, Exit.void)
    })
  )

  it.live("awaitAll waits for the runs started after the runs were made; closing the scope stops them", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const runs = yield* makeRuns(scope, {})
      const { engine } = scripted(50)
      const entry = yield* provide(engine)(
        runs.start({ kind: "sweep", session: "/r/a", gpus: 0, planned: 1 }, sweepOf(2))
      )
      yield* runs.awaitAll
      assert.strictEqual(runState(entry), "finished")
      const { seen, engine: slow } = scripted(60_000)
      const held = yield* provide(slow)(
        runs.start({ kind: "sweep", session: "/r/b", gpus: 0, planned: 1 }, sweepOf(1))
      )
      while (seen.starts === 0) yield* Effect.sleep(5)
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(seen.stopped, 1, "the engine stopped with the server's scope")
      assert.isTrue(held.fiber !== undefined && (yield* Fiber.poll(held.fiber))._tag === "Some")
    })
  )
})
