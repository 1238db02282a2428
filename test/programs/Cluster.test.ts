/**
 * ensure and repair (src/programs/Cluster.ts) through test layers: a scripted `ray` CLI, a GCS
 * whose answers change as the fake CLI stops and starts heads, and a recorded-shape /proc.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Either, Fiber, Layer, Logger, Option, TestClock } from "effect"
import { RayClusterInfeasible, RayCommandFailed } from "../../src/domain/Errors.js"
import type { ClusterSnapshot, ProcessInfo, ResourceMap } from "../../src/domain/Snapshot.js"
import { ensure, REPAIR_LOG, repair } from "../../src/programs/Cluster.js"
import { guardsFor, inspect } from "../../src/programs/Inspect.js"
import * as ClusterInspector from "../../src/services/ClusterInspector.js"
import * as ProcFs from "../../src/services/ProcFs.js"
import * as RayCli from "../../src/services/RayCli.js"
import * as Settings from "../../src/services/Settings.js"
import * as WorkGate from "../../src/services/WorkGate.js"
import {
  HEAD_NODE_ID,
  idleHeadSnapshot,
  job,
  nodeId,
  withActor,
  withGroup,
  withJob
} from "../support/snapshots.js"

const GCS = ClusterInspector.DEFAULT_TEST_CLUSTER.gcsAddress
const IP = ClusterInspector.DEFAULT_TEST_CLUSTER.host
const PORT = ClusterInspector.DEFAULT_TEST_CLUSTER.port

/** A hand-started head without the slot: 2 CPUs, no GPU key (started with --num-gpus=0). */
const SLOTLESS: ResourceMap = { CPU: 2, memory: 1e9, object_store_memory: 5e8, [`node:${IP}`]: 1 }

const headSnapshot = (resources: ResourceMap, id = HEAD_NODE_ID): ClusterSnapshot => ({
  ...idleHeadSnapshot({ resources, ip: IP, port: PORT, nodeId: id }),
  gcsAddress: GCS
})

/** The head's daemons as /proc shows them. */
const headProcesses = (id: string): ReadonlyArray<ProcessInfo> => [
  {
    pid: 100,
    ppid: 1,
    comm: "gcs_server",
    argv: ["/ray/gcs_server", `--gcs_server_port=${PORT}`],
    state: "S"
  },
  {
    pid: 101,
    ppid: 1,
    comm: "raylet",
    argv: ["/ray/raylet", `--node_id=${id}`, `--gcs-address=${IP}:${PORT}`, "--head"],
    state: "S"
  }
]

interface World {
  /** What the GCS answers; undefined: nothing answers (stopped). */
  current: ClusterSnapshot | undefined
  /** Snapshots read so far. */
  reads: number
  /** Called on each read before answering (a change between the first check and the stop). */
  onRead?: (n: number, w: World) => void
}

/**
 * The layers of one test: `ray stop` takes the head down, `ray start` brings up a new head (a new
 * node id) declaring what the spec asks (`startsWithout` drops resources, as a broken start would).
 */
const harness = (
  initial: ClusterSnapshot | undefined,
  options: {
    readonly probeAnswers?: boolean
    readonly start?: (spec: RayCli.HeadStartSpec) => Effect.Effect<void, RayCommandFailed>
    readonly hiddenReason?: string
    readonly settings?: Partial<Settings.SettingsShape>
  } = {}
) => {
  const world: World = { current: initial, reads: 0 }
  const calls: Array<RayCli.RayCliCall> = []
  const rayCli = RayCli.layerTest(
    {
      probe: () => ({
        answered: options.probeAnswers ?? world.current !== undefined,
        exitCode: (options.probeAnswers ?? world.current !== undefined) ? 0 : 1,
        timedOut: false,
        output: "",
        elapsedMs: 1
      }),
      stop: () =>
        Effect.sync(() => {
          world.current = undefined
        }),
      start: (spec) =>
        Effect.zipRight(
          options.start?.(spec) ?? Effect.void,
          Effect.sync(() => {
            world.current = headSnapshot(
              {
                CPU: spec.numCpus ?? 8,
                ...(spec.numGpus !== undefined && spec.numGpus > 0 ? { GPU: spec.numGpus } : {}),
                ...spec.resources
              },
              nodeId(0x5eed)
            )
          })
        )
    },
    calls
  )
  const cli = { calls }
  const layer = Layer.mergeAll(
    rayCli,
    ClusterInspector.layerTest({
      snapshots: (address) => {
        if (address !== GCS) return undefined
        world.reads += 1
        world.onRead?.(world.reads, world)
        return world.current
      }
    }),
    ProcFs.layerTest(
      headProcesses(HEAD_NODE_ID),
      options.hiddenReason === undefined ? {} : { hiddenReason: options.hiddenReason }
    ),
    Settings.layerTest(options.settings ?? {}),
    WorkGate.layerTest
  )
  return { world, cli, layer }
}

const ops = (cli: { calls: ReadonlyArray<{ op: string }> }) => cli.calls.map((c) => c.op)

const SLOT_ONLY = { gpus: 0, servingSlot: true }

describe("repair (hyperloom ray repair)", () => {
  it.effect(
    "repairs a lone idle slot-less head: stop, then start on the same port keeping 0 GPUs as 0",
    () => {
      const { cli, layer, world } = harness(headSnapshot(SLOTLESS))
      return Effect.gen(function* () {
        const outcome = yield* repair(SLOT_ONLY, { dryRun: false })
        assert.strictEqual(outcome.action, "repaired")
        assert.deepStrictEqual(ops(cli), ["stop", "start"])
        const spec = cli.calls[1]!.spec!
        assert.strictEqual(spec.port, PORT)
        assert.strictEqual(spec.numCpus, 2)
        // A head without a GPU key declared 0: restarted with --num-gpus=0, not Ray's detection.
        assert.strictEqual(spec.numGpus, 0)
        assert.deepStrictEqual(spec.resources, { serving_slot: 1 })
        assert.isTrue(outcome.verdict.feasible)
        assert.strictEqual(world.current?.resources[0]?.total.serving_slot, 1)
      }).pipe(Effect.provide(layer))
    }
  )

  it.effect(
    "a process told it may not repair (an MCP server without --allow-repair) refuses a head every guard allows, naming why, stopping nothing",
    () => {
      const why = "this hyperloom is an MCP server started without --allow-repair"
      const { cli, layer } = harness(headSnapshot(SLOTLESS), { settings: { repairRefused: why } })
      return Effect.gen(function* () {
        const e = yield* Effect.flip(repair(SLOT_ONLY, { dryRun: false }))
        assert.instanceOf(e, RayClusterInfeasible)
        assert.include(e.message, why)
        // ensure (every lease's first step) refuses the same way
        const viaEnsure = yield* Effect.flip(ensure(SLOT_ONLY))
        assert.include(viaEnsure.message, why)
        assert.deepStrictEqual(ops(cli), ["probe"], "probed, never stopped or started")
      }).pipe(Effect.provide(layer))
    }
  )

  it.effect("a dry run plans the same restart and changes nothing", () => {
    const { cli, layer } = harness(headSnapshot({ ...SLOTLESS, GPU: 2, nvme: 3 }))
    return Effect.gen(function* () {
      const outcome = yield* repair(SLOT_ONLY, { dryRun: true })
      assert.strictEqual(outcome.action, "would_repair")
      assert.deepStrictEqual(outcome.plan, {
        port: PORT,
        numCpus: 2,
        numGpus: 2,
        resources: { nvme: 3, serving_slot: 1 }
      })
      assert.deepStrictEqual(ops(cli), [])
    }).pipe(Effect.provide(layer))
  })

  it.effect("nothing to repair on a head with the slot", () => {
    const { cli, layer } = harness(headSnapshot({ ...SLOTLESS, serving_slot: 1 }))
    return Effect.gen(function* () {
      assert.strictEqual((yield* repair(SLOT_ONLY, { dryRun: false })).action, "none")
      assert.deepStrictEqual(ops(cli), [])
    }).pipe(Effect.provide(layer))
  })

  it.effect(
    "a guard that fails refuses: the infeasibility error with the reason appended, nothing stopped",
    () => {
      const { cli, layer } = harness(withActor(headSnapshot(SLOTLESS), { name: "keeper", isDetached: true }))
      return Effect.gen(function* () {
        const e = yield* Effect.flip(repair(SLOT_ONLY, { dryRun: false }))
        assert.instanceOf(e, RayClusterInfeasible)
        assert.match(
          e.message,
          /^ray_cluster_infeasible: existing Ray head has no serving_slot resource; .*; not restarting it automatically: actor keeper \(/
        )
        assert.deepStrictEqual(ops(cli), [])
      }).pipe(Effect.provide(layer))
    }
  )

  it.effect(
    "the guards are re-verified right before the stop: a driver that appears meanwhile refuses",
    () => {
      const { cli, layer, world } = harness(headSnapshot(SLOTLESS))
      // The first read passes every guard; by the second (the re-check before stopping) a driver came.
      world.onRead = (n, w) => {
        if (n === 2 && w.current !== undefined) w.current = withJob(w.current, job({ jobId: "05000000" }))
      }
      return Effect.gen(function* () {
        const e = yield* Effect.flip(repair(SLOT_ONLY, { dryRun: false }))
        assert.instanceOf(e, RayClusterInfeasible)
        assert.include(e.message, "; not restarting it automatically: a live driver (job 05000000, pid 1234")
        assert.strictEqual(world.reads, 2)
        assert.deepStrictEqual(ops(cli), [], "nothing was stopped")
      }).pipe(Effect.provide(layer))
    }
  )

  it.effect("a pending placement group (nothing held, no actor) refuses, naming the group", () => {
    const { cli, layer } = harness(
      withGroup(headSnapshot(SLOTLESS), {
        name: "waiting_pg",
        state: "PENDING",
        isDetached: true,
        bundles: []
      })
    )
    return Effect.gen(function* () {
      const e = yield* Effect.flip(repair(SLOT_ONLY, { dryRun: false }))
      assert.include(e.message, "placement group waiting_pg (")
      assert.include(e.message, "PENDING, detached")
      assert.deepStrictEqual(ops(cli), [])
    }).pipe(Effect.provide(layer))
  })

  it.effect(
    "a /proc that hides other users' processes refuses (cluster_inspectable), nothing stopped",
    () => {
      const { cli, layer } = harness(headSnapshot(SLOTLESS), {
        hiddenReason: "/proc is mounted with hidepid=2"
      })
      return Effect.gen(function* () {
        const e = yield* Effect.flip(repair(SLOT_ONLY, { dryRun: false }))
        assert.include(
          e.message,
          "cluster could not be fully inspected: /proc may hide other users' processes"
        )
        assert.include(
          e.message,
          "cannot tell: /proc may hide other users' processes (/proc is mounted with hidepid=2)"
        )
        assert.deepStrictEqual(ops(cli), [])
      }).pipe(Effect.provide(layer))
    }
  )

  it.effect("a failed restart raises the infeasibility error with the failure appended", () => {
    const { cli, layer } = harness(headSnapshot(SLOTLESS), {
      start: (spec) =>
        Effect.fail(
          new RayCommandFailed({
            argv: ["ray", "start", "--head", `--port=${spec.port}`],
            exitCode: 1,
            output: "ConnectionError: port 6379 is taken"
          })
        )
    })
    return Effect.gen(function* () {
      const e = yield* Effect.flip(repair(SLOT_ONLY, { dryRun: false }))
      assert.instanceOf(e, RayClusterInfeasible)
      assert.strictEqual(e.reason, "no_serving_slot")
      assert.match(e.message, /^ray_cluster_infeasible: existing Ray head has no serving_slot resource; /)
      assert.include(
        e.message,
        "; restarting the head failed: `ray start --head --port=6379` exited with code 1: ConnectionError: port 6379 is taken"
      )
      assert.deepStrictEqual(ops(cli), ["stop", "start"])
    }).pipe(Effect.provide(layer))
  })
})

describe("ensure (hyperloom ray ensure, and every lease attempt)", () => {
  it.effect("reuses a head that has the slot, without stopping anything", () => {
    const { cli, layer } = harness(headSnapshot({ ...SLOTLESS, serving_slot: 1 }))
    return Effect.gen(function* () {
      const outcome = yield* ensure(SLOT_ONLY)
      assert.strictEqual(outcome.action, "reused")
      assert.deepStrictEqual(ops(cli), ["probe"])
    }).pipe(Effect.provide(layer))
  })

  it.effect(
    "repairs at most once per attempt: a head short of the slot and GPUs is restarted once, then fails on the GPUs",
    () => {
      const { cli, layer } = harness(headSnapshot({ ...SLOTLESS, GPU: 1 }))
      return Effect.gen(function* () {
        const e = yield* Effect.flip(ensure({ gpus: 2, servingSlot: true }))
        assert.instanceOf(e, RayClusterInfeasible)
        assert.strictEqual((e as RayClusterInfeasible).reason, "insufficient_gpus")
        assert.match(e.message, /^ray_cluster_infeasible: cluster has 1 GPU\(s\), 2 requested; /)
        assert.deepStrictEqual(ops(cli), ["probe", "stop", "start"])
      }).pipe(Effect.provide(layer))
    }
  )

  it.effect("a second attempt on the repaired head reuses it (no second restart)", () => {
    const { cli, layer } = harness(headSnapshot(SLOTLESS))
    return Effect.gen(function* () {
      assert.strictEqual((yield* ensure(SLOT_ONLY)).action, "repaired")
      assert.strictEqual((yield* ensure(SLOT_ONLY)).action, "reused")
      assert.deepStrictEqual(ops(cli), ["probe", "stop", "start", "probe"])
    }).pipe(Effect.provide(layer))
  })

  it.effect("a refused repair in ensure stops nothing and fails with the reasons", () => {
    const { cli, layer } = harness(headSnapshot(SLOTLESS), { settings: { nodes: 2 } })
    return Effect.gen(function* () {
      const e = yield* Effect.flip(ensure(SLOT_ONLY))
      assert.include(e.message, "; not restarting it automatically: this is a multi-node run (2 nodes")
      assert.deepStrictEqual(ops(cli), ["probe"])
    }).pipe(Effect.provide(layer))
  })

  it.effect("starts a head with the slot when nothing answers and no daemon runs", () => {
    const { cli, layer } = harness(undefined, {})
    return Effect.gen(function* () {
      const outcome = yield* ensure({ gpus: 2, servingSlot: true }).pipe(Effect.provide(ProcFs.layerTest([])))
      assert.strictEqual(outcome.action, "started")
      assert.deepStrictEqual(ops(cli), ["probe", "start"])
      assert.strictEqual(cli.calls[1]!.spec!.numGpus, 2)
      assert.deepStrictEqual(cli.calls[1]!.spec!.resources, { serving_slot: 1 })
    }).pipe(Effect.provide(layer))
  })

  it.effect("never starts a head over daemons the probe could not reach", () => {
    const { cli, layer } = harness(undefined, {})
    return Effect.gen(function* () {
      const e = yield* Effect.flip(ensure(SLOT_ONLY))
      assert.strictEqual(e._tag, "EnsureRefused")
      assert.include(e.message, "but Ray daemons run on this host: gcs_server pid 100 (port 6379)")
      assert.deepStrictEqual(ops(cli), ["probe"])
    }).pipe(Effect.provide(layer))
  })
})

/** Every log line of the program, as "LEVEL message". */
const captureLogs = () => {
  const lines: Array<string> = []
  const logger = Logger.make(({ logLevel, message }) => {
    lines.push(`${logLevel.label} ${Array.isArray(message) ? message.join(" ") : String(message)}`)
  })
  return { lines, layer: Logger.replace(Logger.defaultLogger, logger) }
}

/** After the restart (read 3 on), what the GCS shows instead of the new head, until `until`. */
const afterRestart = (world: World, until: number, show: (head: ClusterSnapshot) => ClusterSnapshot) => {
  let head: ClusterSnapshot | undefined
  world.onRead = (n, w) => {
    if (n === 3) head = w.current
    if (n >= 3 && head !== undefined) w.current = n < until ? show(head) : head
  }
}

describe("repair: the slot wait, the re-check and the logs", () => {
  it.effect("logs the SPEC's repair warning, the restart it runs and the head it brought up", () => {
    const { layer } = harness(headSnapshot(SLOTLESS))
    const logs = captureLogs()
    return Effect.gen(function* () {
      yield* repair(SLOT_ONLY, { dryRun: false })
      assert.deepStrictEqual(logs.lines, [
        `WARN ${REPAIR_LOG}`,
        `INFO ray stop --force, then ray start --head --port=${PORT} with {"serving_slot":1}`,
        `INFO Ray head restarted at ${GCS} with serving_slot`
      ])
    }).pipe(Effect.provide(Layer.merge(layer, logs.layer)))
  })

  it.effect(
    "waits until an alive node declares the slot: a slot-less answer, then the slot on a dead node, are not enough",
    () => {
      const { layer, world } = harness(headSnapshot(SLOTLESS))
      const withoutSlot = (s: ClusterSnapshot): ClusterSnapshot => headSnapshot(SLOTLESS, s.nodes[0]!.nodeId)
      const dead = (s: ClusterSnapshot): ClusterSnapshot => ({
        ...s,
        nodes: s.nodes.map((n) => ({ ...n, state: "DEAD" as const }))
      })
      // Read 3 answers without the slot, read 4 with the slot on a dead node only; read 5 shows the
      // new head alive beside the old head's record, which Ray keeps as DEAD.
      let head: ClusterSnapshot | undefined
      world.onRead = (n, w) => {
        if (n === 3) head = w.current
        if (head === undefined) return
        if (n === 3) w.current = withoutSlot(head)
        else if (n === 4) w.current = dead(head)
        else w.current = { ...head, nodes: [...dead(headSnapshot(SLOTLESS)).nodes, ...head.nodes] }
      }
      return Effect.gen(function* () {
        const fiber = yield* Effect.fork(repair(SLOT_ONLY, { dryRun: false }))
        yield* TestClock.adjust(Duration.millis(150))
        assert.strictEqual(world.reads, 4, "still waiting after a slot-less answer and a dead node")
        assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)))
        yield* TestClock.adjust(Duration.seconds(1))
        const outcome = yield* Fiber.join(fiber)
        assert.strictEqual(outcome.action, "repaired")
        assert.strictEqual(world.reads, 5)
        assert.isTrue(outcome.verdict.feasible)
      }).pipe(Effect.provide(layer))
    }
  )

  it.effect(
    "a head that never shows the slot fails the repair after the wait, naming the head",
    () => {
      const { layer, world } = harness(headSnapshot(SLOTLESS))
      afterRestart(world, Number.POSITIVE_INFINITY, (s) => headSnapshot(SLOTLESS, s.nodes[0]!.nodeId))
      return Effect.gen(function* () {
        const fiber = yield* Effect.fork(Effect.flip(repair(SLOT_ONLY, { dryRun: false })))
        yield* TestClock.adjust(Duration.seconds(59))
        assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)), "still waiting before the timeout")
        yield* TestClock.adjust(Duration.seconds(2))
        const e = yield* Fiber.join(fiber)
        assert.instanceOf(e, RayClusterInfeasible)
        assert.strictEqual(e.restartFailure, `the head at ${GCS} did not show serving_slot within 1m`)
      }).pipe(Effect.provide(layer))
    },
    120_000
  ) // ~600 polls on the test clock: seconds, more under mutation testing

  it.effect("a dry run refuses like the repair when a guard fails, planning nothing", () => {
    const { cli, layer } = harness(withActor(headSnapshot(SLOTLESS), { name: "keeper", isDetached: true }))
    return Effect.gen(function* () {
      const e = yield* Effect.flip(repair(SLOT_ONLY, { dryRun: true }))
      assert.instanceOf(e, RayClusterInfeasible)
      assert.include(e.message, "; not restarting it automatically: actor keeper (")
      assert.deepStrictEqual(ops(cli), [])
    }).pipe(Effect.provide(layer))
  })

  it.effect("a cluster that cannot be inspected again before the stop refuses, stopping nothing", () => {
    const { cli, layer, world } = harness(headSnapshot(SLOTLESS))
    world.onRead = (n, w) => {
      if (n === 2) w.current = undefined
    }
    return Effect.gen(function* () {
      const e = yield* Effect.flip(repair(SLOT_ONLY, { dryRun: false }))
      assert.instanceOf(e, RayClusterInfeasible)
      assert.strictEqual(e.refusals.length, 1)
      assert.match(e.refusals[0]!, /^cluster could not be inspected again: \S/)
      assert.deepStrictEqual(ops(cli), [])
    }).pipe(Effect.provide(layer))
  })

  it.effect("a head that got the slot meanwhile (another repairer) is left alone: none", () => {
    const { cli, layer, world } = harness(headSnapshot(SLOTLESS))
    world.onRead = (n, w) => {
      if (n === 2) w.current = headSnapshot({ ...SLOTLESS, serving_slot: 1 }, nodeId(0xbeef))
    }
    return Effect.gen(function* () {
      const outcome = yield* repair(SLOT_ONLY, { dryRun: false })
      assert.strictEqual(outcome.action, "none")
      assert.isNull(outcome.plan)
      assert.isTrue(outcome.verdict.feasible)
      assert.deepStrictEqual(ops(cli), [])
    }).pipe(Effect.provide(layer))
  })

  for (const [step, before] of [
    ["before_stop", []],
    ["before_start", ["stop"]],
    ["before_slot", ["stop", "start"]]
  ] as const) {
    it.effect(`HYPERLOOM_TEST_REPAIR_PAUSE=${step} logs and waits there, then goes on`, () => {
      const { cli, layer } = harness(headSnapshot(SLOTLESS), {
        settings: { testRepairPause: step }
      })
      const logs = captureLogs()
      return Effect.gen(function* () {
        const fiber = yield* Effect.fork(repair(SLOT_ONLY, { dryRun: false }))
        yield* TestClock.adjust(Duration.seconds(60))
        assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)))
        assert.deepStrictEqual(ops(cli), [...before])
        assert.include(logs.lines, `WARN repair paused at ${step} (HYPERLOOM_TEST_REPAIR_PAUSE, test only)`)
        yield* TestClock.adjust(Duration.seconds(61))
        assert.strictEqual((yield* Fiber.join(fiber)).action, "repaired")
        assert.deepStrictEqual(ops(cli), ["stop", "start"])
      }).pipe(Effect.provide(Layer.merge(layer, logs.layer)))
    })
  }
})

describe("inspect and guardsFor: the guard wiring", () => {
  it.effect("an unreadable /proc reaches the inspection as its message, and the guards cannot tell", () => {
    const { layer } = harness(headSnapshot(SLOTLESS))
    const unreadable = new ProcFs.ProcUnreadable({ root: "/proc", detail: "EACCES: permission denied" })
    return Effect.gen(function* () {
      const inspection = yield* inspect()
      assert.deepStrictEqual(inspection.daemons, Either.left(unreadable.message))
      const guards = yield* guardsFor(inspection)
      const failed = guards.filter((g) => !g.ok).map((g) => g.id)
      assert.deepStrictEqual(failed, ["one_local_node", "only_our_daemons", "cluster_inspectable"])
    }).pipe(Effect.provide(Layer.merge(layer, ProcFs.layerTest(unreadable))))
  })

  it.effect("a lone idle head passes every guard; this run's facts from the settings decide theirs", () => {
    const one = harness(headSnapshot(SLOTLESS))
    const multi = harness(headSnapshot(SLOTLESS), { settings: { nodes: 2 } })
    const verdicts = Effect.gen(function* () {
      const guards = yield* guardsFor(yield* inspect())
      return guards.map((g) => [g.id, g.ok] as const)
    })
    return Effect.gen(function* () {
      const all = yield* verdicts.pipe(Effect.provide(one.layer))
      assert.isTrue(all.length >= 8)
      assert.isTrue(all.every(([, ok]) => ok))
      const two = yield* verdicts.pipe(Effect.provide(multi.layer))
      assert.deepStrictEqual(
        two.filter(([, ok]) => !ok).map(([id]) => id),
        ["single_node_run"]
      )
    })
  })
})
