/**
 * The package's test layers as a program built on hyperloom meets them (src/Testing.ts): the
 * default head is a healthy local head, so the guards that read /proc hold on it too.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Inspect, Testing } from "../src/index.js"

describe("Testing.layer", () => {
  it.effect("the default head is feasible and passes every repair guard", () =>
    Effect.gen(function* () {
      const report = yield* Inspect.doctor({ gpus: 1, servingSlot: true })
      assert.isTrue(report.feasible)
      assert.deepStrictEqual(
        report.repair.guards.filter((g) => !g.ok).map((g) => `${g.id}: ${g.reason}`),
        []
      )
      assert.isTrue(report.repair.allowed)
    }).pipe(Effect.provide(Testing.layer()))
  )

  it.effect("a head of the caller's own (here without the slot) gets its daemons by default", () =>
    Effect.gen(function* () {
      const report = yield* Inspect.doctor({ gpus: 4, servingSlot: true })
      assert.strictEqual(report.infeasible?.reason, "no_serving_slot")
      assert.isTrue(report.repair.allowed)
    }).pipe(Effect.provide(Testing.layer({ snapshot: Testing.idleHead({ CPU: 2, GPU: 4 }) })))
  )

  it("headDaemons: the head's gcs_server with its port and a raylet per alive node", () => {
    const daemons = Testing.headDaemons(Testing.idleHead(undefined, "10.1.2.3:6390"))
    assert.deepStrictEqual(
      daemons.map((p) => [p.comm, ...p.argv.slice(1)]),
      [
        ["gcs_server", "--gcs_server_port=6390"],
        [
          "raylet",
          `--node_id=${Testing.idleHead().nodes[0]!.nodeId}`,
          "--gcs-address=10.1.2.3:6390",
          "--head"
        ]
      ]
    )
  })
})
