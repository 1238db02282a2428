/**
 * Programs name their spans `Module.function`, as services do (`Effect.fn("Lease.runLeased")`):
 * the queue's wait for a lease's turn and the ensure/repair entries under the work permit show up
 * in a trace by name, each around the work it does. A tracer that records every span's name and
 * its parent's, over the default one, with the test layers.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Logger, LogLevel, Option, TestClock, Tracer } from "effect"
import type { QueueEntry } from "../../src/domain/Queue.js"
import { ensure, repair } from "../../src/programs/Cluster.js"
import { reportWaiting } from "../../src/programs/Lease.js"
import { awaitTurn, leasesInRay } from "../../src/programs/Queue.js"
import type { Ticket } from "../../src/services/HostQueue.js"
import * as Testing from "../../src/Testing.js"

/** Runs `effect` under a tracer that records `[span, parent span]` names. */
const traced = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const base = yield* Effect.tracer
    const spans: Array<readonly [string, string | undefined]> = []
    const tracer = Tracer.make({
      span: (name, parent, ...rest) => {
        spans.push([
          name,
          Option.getOrUndefined(Option.map(parent, (p) => (p._tag === "Span" ? p.name : p.spanId)))
        ])
        return base.span(name, parent, ...rest)
      },
      context: (f, fiber) => base.context(f, fiber)
    })
    const result = yield* Effect.withTracer(effect, tracer)
    return { result, spans }
  })

const names = (spans: ReadonlyArray<readonly [string, string | undefined]>) => spans.map(([n]) => n)

const entry: QueueEntry = {
  ticket: 1,
  leaseId: "h-0-1",
  pid: 101,
  uid: 0,
  user: "root",
  command: "lease 1",
  gpus: 0,
  joinedAt: 0
}
const alone: Ticket = { entry, look: Effect.succeed([entry]), markHolding: () => Effect.void }

describe("programs' spans", () => {
  it.effect("Queue.awaitTurn and Queue.leasesInRay", () =>
    Effect.gen(function* () {
      const turn = yield* traced(awaitTurn(alone, { waited: false }))
      assert.include(names(turn.spans), "Queue.awaitTurn")
      const inRay = yield* traced(leasesInRay(["h-0-1"]))
      assert.include(names(inRay.spans), "Queue.leasesInRay")
    }).pipe(Effect.provide(Testing.layer()), Logger.withMinimumLogLevel(LogLevel.None))
  )

  it.effect("Lease.reportWaiting, around its looks at the cluster while a lease waits", () =>
    Effect.gen(function* () {
      const said = { waited: false }
      const waiting = yield* traced(
        Effect.gen(function* () {
          const fiber = yield* Effect.fork(
            reportWaiting("127.0.0.1:6379", "serving_slot", () => "someone", said)
          )
          yield* TestClock.adjust("5 seconds")
          yield* Fiber.interrupt(fiber)
        })
      )
      assert.include(names(waiting.spans), "Lease.reportWaiting")
      assert.isTrue(said.waited, "it looked, and said who holds the slot")
    }).pipe(Effect.provide(Testing.layer()), Logger.withMinimumLogLevel(LogLevel.None))
  )

  it.effect("Cluster.ensure and Cluster.repair, around their work under the permit", () =>
    Effect.gen(function* () {
      const ensured = yield* traced(ensure({ gpus: 0, servingSlot: true }))
      assert.include(names(ensured.spans), "Cluster.ensure")
      assert.deepInclude(ensured.spans, ["Cluster.ensureLocked", "Cluster.ensure"])
      const repaired = yield* traced(repair({ gpus: 0, servingSlot: true }, { dryRun: true }))
      assert.include(names(repaired.spans), "Cluster.repair")
      assert.deepInclude(repaired.spans, ["Cluster.repairLocked", "Cluster.repair"])
    }).pipe(Effect.provide(Layer.fresh(Testing.layer())), Logger.withMinimumLogLevel(LogLevel.None))
  )
})
