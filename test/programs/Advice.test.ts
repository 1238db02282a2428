/**
 * Advice that cannot hurt others' work (issue 15): no message suggests a command that stops Ray
 * work hyperloom cannot see or does not own. With Ray daemons of other clusters (or other PID
 * namespaces) on the host, `ray stop` stops them too; with several clusters, the message says so
 * and asks for RAY_ADDRESS. Programs over the package's test layers.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import type { ProcessInfo } from "../../src/domain/Snapshot.js"
import { Cluster, Inspect, Testing } from "../../src/index.js"

const SLOTLESS = Testing.idleHead({ CPU: 8, GPU: 1 })

/** A second cluster's head on this host: its gcs_server on another port and its raylet. */
const otherCluster = (port: number, pid: number): Array<ProcessInfo> => [
  { pid, ppid: 1, comm: "gcs_server", argv: ["/ray/gcs_server", `--gcs_server_port=${port}`], state: "S" },
  {
    pid: pid + 1,
    ppid: 1,
    comm: "raylet",
    argv: ["/ray/raylet", `--node_id=${"ee".repeat(28)}`, `--gcs-address=10.9.9.9:${port}`, "--head"],
    state: "S"
  }
]

/** Another engineer's head in a PID namespace of its own, seen in this /proc: the same port. */
const otherNamespace = (pid: number): Array<ProcessInfo> => [
  {
    pid,
    ppid: 1,
    comm: "gcs_server",
    argv: ["/ray/gcs_server", `--gcs_server_port=${SLOTLESS.gcsAddress.split(":")[1]}`],
    state: "S"
  }
]

const messageOf = <A, E extends { readonly message: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(Effect.either(effect), (r) => (Either.isLeft(r) ? r.left.message : "succeeded"))

describe("a head without the slot on a host with other Ray work", () => {
  it.effect("alone on the host: the manual fix is the installer's restart", () =>
    Effect.gen(function* () {
      const report = yield* Inspect.doctor({ gpus: 1, servingSlot: true })
      assert.include(report.infeasible?.message, "ray stop --force && ray start --head")
    }).pipe(Effect.provide(Testing.layer({ snapshot: SLOTLESS })))
  )

  for (const [what, processes] of [
    ["daemons of another PID namespace", [...Testing.headDaemons(SLOTLESS), ...otherNamespace(300)]],
    ["a second cluster", [...Testing.headDaemons(SLOTLESS), ...otherCluster(6390, 300)]]
  ] as const) {
    it.effect(`${what}: no ray stop is suggested, by doctor or by the refused repair`, () =>
      Effect.gen(function* () {
        const report = yield* Inspect.doctor({ gpus: 1, servingSlot: true })
        assert.isFalse(report.repair.allowed)
        assert.notInclude(report.infeasible?.message, "ray stop")
        assert.include(report.infeasible?.message, "existing Ray head has no serving_slot resource")
        const refused = yield* messageOf(Cluster.ensure({ gpus: 1, servingSlot: true }))
        assert.isTrue(
          refused.startsWith("ray_cluster_infeasible: existing Ray head has no serving_slot"),
          refused
        )
        assert.notInclude(refused, "ray stop")
        assert.include(refused, "not restarting it automatically")
      }).pipe(Effect.provide(Testing.layer({ snapshot: SLOTLESS, processes })))
    )
  }

  it.effect("several clusters: says so, names them and asks for RAY_ADDRESS", () =>
    Effect.gen(function* () {
      const report = yield* Inspect.doctor({ gpus: 1, servingSlot: true })
      const message = report.infeasible?.message ?? ""
      assert.include(message, "several Ray clusters")
      assert.include(message, "10.9.9.9:6390")
      assert.include(message, "RAY_ADDRESS")
    }).pipe(
      Effect.provide(
        Testing.layer({
          snapshot: SLOTLESS,
          processes: [...Testing.headDaemons(SLOTLESS), ...otherCluster(6390, 300)]
        })
      )
    )
  )
})

describe("ensure with no answering cluster and Ray daemons it cannot reach", () => {
  it.effect("names them and never suggests ray stop", () =>
    Effect.gen(function* () {
      const refused = yield* messageOf(Cluster.ensure({ gpus: 0, servingSlot: true }))
      assert.include(refused, "gcs_server pid 300")
      assert.notInclude(refused, "ray stop")
      assert.include(refused, "RAY_ADDRESS")
    }).pipe(
      Effect.provide(
        Testing.layer({
          processes: otherCluster(6390, 300),
          rayCli: {
            probe: () => ({ answered: false, exitCode: 1, timedOut: false, output: "", elapsedMs: 1 })
          }
        })
      )
    )
  )
})
