/**
 * What only a long-lived process shows: the repair refused because this process already
 * submitted a lease actor, and two leases at once in one process sharing one repair. Runs the
 * programs in-process on the live layers, against real heads.
 */
import { afterEach, assert, beforeEach, describe, it } from "@effect/vitest"
import { Effect, Either, Logger } from "effect"
import * as Live from "../../src/Live.js"
import { REPAIR_LOG } from "../../src/programs/Cluster.js"
import { runLeased } from "../../src/programs/Lease.js"
import { daemonPids, prepareRay, startHead, teardownRay } from "../support/ray.js"

const PORT = 6398

/** Runs an effect on the live layers (environment without RAY_ADDRESS), collecting its log lines. */
const runLive = <A, E>(effect: Effect.Effect<A, E, any>) => {
  const logs: string[] = []
  const logger = Logger.make(({ message }) => {
    logs.push(Array.isArray(message) ? message.map(String).join(" ") : String(message))
  })
  return Effect.runPromise(
    effect.pipe(
      Effect.provide(Live.layer),
      Effect.provide(Logger.replace(Logger.defaultLogger, logger)),
      Effect.either,
      Effect.map((result) => ({ result, logs }))
    ) as Effect.Effect<{ result: Either.Either<A, E>; logs: string[] }>
  )
}

const lease = (servingSlot: boolean, argv: string[]) =>
  runLeased({ request: { gpus: 0, servingSlot }, argv, env: process.env, cwd: process.cwd() })

describe("leases and the repair inside one process", () => {
  const saved = process.env.RAY_ADDRESS
  beforeEach(async () => {
    delete process.env.RAY_ADDRESS
    await prepareRay()
  })
  afterEach(async () => {
    if (saved !== undefined) process.env.RAY_ADDRESS = saved
    await teardownRay()
  })

  it("refuses the repair once this process has submitted a lease actor (no_lease_submitted), killing nothing", async () => {
    await startHead({ port: PORT })
    const before = daemonPids()
    const { result } = await runLive(
      Effect.gen(function* () {
        // A lease without the slot is feasible on this head: it runs, and marks "lease submitted".
        const first = yield* lease(false, ["true"])
        assert.strictEqual(first.exitCode, 0)
        // Its actor is dead and its driver gone now; only the process-wide fact remains.
        return yield* lease(true, ["true"])
      })
    )
    assert.isTrue(Either.isLeft(result), "the second lease must fail")
    const error = (result as Either.Left<any, any>).left
    assert.strictEqual(error._tag, "RayClusterInfeasible")
    assert.isTrue(
      error.message.startsWith("ray_cluster_infeasible: existing Ray head has no serving_slot resource; ")
    )
    assert.include(
      error.message,
      "; not restarting it automatically: this process already submitted a lease actor (actor creation is asynchronous)"
    )
    assert.deepStrictEqual(daemonPids(), before, "a refused repair must not kill any Ray process")
  })

  it("two leases at once in one process on a slot-less head: one repair, both run", async () => {
    await startHead({ port: PORT })
    const before = daemonPids()
    const { result, logs } = await runLive(
      Effect.all(
        [lease(true, ["sh", "-c", "sleep 1; exit 3"]), lease(true, ["sh", "-c", "sleep 1; exit 4"])],
        {
          concurrency: 2
        }
      )
    )
    assert.isTrue(Either.isRight(result), String(Either.isLeft(result) && (result.left as any).message))
    const [a, b] = (result as Either.Right<any, any>).right
    assert.deepStrictEqual([a.exitCode, b.exitCode], [3, 4])
    assert.strictEqual(logs.filter((l) => l === REPAIR_LOG).length, 1, logs.join("\n"))
    const after = daemonPids()
    assert.strictEqual(after.gcsServers.length, 1)
    assert.notDeepEqual(after.gcsServers, before.gcsServers, "the head was restarted once")
  })
})
