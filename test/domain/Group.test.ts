import { assert, describe, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { INFEASIBLE_MARKER, RayClusterInfeasible } from "../../src/domain/Errors.js"
import {
  checkGroupFeasibility,
  groupBundle,
  groupExitCode,
  isEnvName,
  isSlotResource,
  rankEnvironment,
  rayExecutorBackendRefusal,
  slotHolders,
  wantsSlot
} from "../../src/domain/Group.js"
import type { ClusterSnapshot, ResourceMap } from "../../src/domain/Snapshot.js"
import {
  actor,
  HEAD_IP,
  HEAD_NODE_ID,
  idleHeadSnapshot,
  job,
  jobId,
  node,
  nodeId,
  nodeResources,
  withHeld
} from "../support/snapshots.js"

/** A head plus workers, each declaring its own resources, all idle. */
const cluster = (head: ResourceMap, ...workers: ReadonlyArray<ResourceMap>): ClusterSnapshot => {
  const base = idleHeadSnapshot({ resources: head })
  const ids = workers.map((_, i) => nodeId(0x100 + i))
  return {
    ...base,
    nodes: [
      ...base.nodes,
      ...workers.map((w, i) =>
        node({ nodeId: ids[i]!, isHead: false, address: `10.0.1.${i + 1}`, resourcesTotal: w })
      )
    ],
    resources: [
      ...base.resources,
      ...workers.map((w, i) => nodeResources({ nodeId: ids[i]!, total: w, available: w }))
    ]
  }
}

const SLOT_2GPU = { CPU: 2, GPU: 2, serving_slot: 1 }
const GCS = `${HEAD_IP}:6379`

describe("checkGroupFeasibility", () => {
  it("is feasible when enough alive nodes have the slot and the GPUs", () => {
    const v = checkGroupFeasibility(cluster(SLOT_2GPU, SLOT_2GPU), { nodes: 2, gpus: 2, servingSlot: true })
    assert.isTrue(v.feasible)
    assert.isUndefined(v.infeasible)
    assert.strictEqual(v.eligible.length, 2)
    assert.deepStrictEqual(v.warnings, [])
  })

  it("a worker without the slot: insufficient_nodes naming it, with the ray start that joins it with the slot", () => {
    const v = checkGroupFeasibility(cluster(SLOT_2GPU, { CPU: 2, GPU: 2 }), {
      nodes: 2,
      gpus: 1,
      servingSlot: true
    })
    assert.isFalse(v.feasible)
    const e = v.infeasible!
    assert.instanceOf(e, RayClusterInfeasible)
    assert.strictEqual(e.reason, "insufficient_nodes")
    assert.isTrue(
      e.message.startsWith(
        `${INFEASIBLE_MARKER}: cluster has 1 node(s) with serving_slot and 1 GPU(s), 2 needed`
      )
    )
    assert.include(e.message, `node ${nodeId(0x100).slice(0, 12)}… (10.0.1.1) has no serving_slot`)
    assert.include(
      e.message,
      `on that node: ray stop && ray start --address=${GCS} --num-gpus=2 --resources='{"serving_slot": 1}'`
    )
    assert.notInclude(e.message, "ray stop --force", "a group fix never stops every Ray process of a host")
  })

  it("a node short of GPUs is named with what it has and needs", () => {
    const v = checkGroupFeasibility(cluster(SLOT_2GPU, { GPU: 1, serving_slot: 1 }), {
      nodes: 2,
      gpus: 2,
      servingSlot: true
    })
    assert.strictEqual(v.infeasible?.reason, "insufficient_nodes")
    assert.include(v.infeasible!.message, "(10.0.1.1) has 1 GPU(s), 2 needed")
  })

  it("a head without the slot gets the head's own fix; a node lacking both says both", () => {
    const v = checkGroupFeasibility(cluster({ CPU: 2 }, SLOT_2GPU), { nodes: 2, gpus: 1, servingSlot: true })
    const m = v.infeasible!.message
    assert.include(
      m,
      `node ${HEAD_NODE_ID.slice(0, 12)}… (${HEAD_IP}, head) has no serving_slot and 0 GPU(s), 1 needed`
    )
    assert.include(
      m,
      "on the head: ray stop && ray start --head --port=6379 --num-gpus=1 --resources='{\"serving_slot\": 1}'"
    )
  })

  it("too few nodes: says how many more to join, and how", () => {
    const v = checkGroupFeasibility(cluster(SLOT_2GPU, SLOT_2GPU), { nodes: 4, gpus: 2, servingSlot: true })
    assert.strictEqual(v.infeasible?.reason, "insufficient_nodes")
    assert.include(v.infeasible!.message, "4 needed")
    assert.include(
      v.infeasible!.message,
      `only 2 node(s) are alive: join 2 more with ray start --address=${GCS} --num-gpus=2 --resources='{"serving_slot": 1}'`
    )
  })

  it("dead nodes do not count, and are mentioned", () => {
    const s = cluster(SLOT_2GPU, SLOT_2GPU)
    const dead = { ...s, nodes: s.nodes.map((n, i) => (i === 1 ? { ...n, state: "DEAD" as const } : n)) }
    const v = checkGroupFeasibility(dead, { nodes: 2, gpus: 1, servingSlot: true })
    assert.isFalse(v.feasible)
    assert.include(v.infeasible!.message, "(1 dead node record(s) not counted)")
  })

  it("--no-serving-slot does not need the slot; a node with serving_slot 2 is a warning", () => {
    const v = checkGroupFeasibility(cluster({ GPU: 1, serving_slot: 2 }, { GPU: 1 }), {
      nodes: 2,
      gpus: 1,
      servingSlot: false
    })
    assert.isTrue(v.feasible)
    assert.strictEqual(v.warnings.length, 1)
    assert.include(v.warnings[0]!, "declares serving_slot 2")
  })

  it("decides from declared totals, not from what is free now (a held slot still counts)", () => {
    const busy = withHeld(cluster(SLOT_2GPU, SLOT_2GPU), { serving_slot: 1, GPU: 2 })
    assert.isTrue(checkGroupFeasibility(busy, { nodes: 2, gpus: 2, servingSlot: true }).feasible)
  })

  it("property: feasible exactly when at least N alive nodes qualify", () => {
    const nodeArb = fc.record({
      gpus: fc.integer({ min: 0, max: 4 }),
      slot: fc.boolean(),
      alive: fc.boolean()
    })
    fc.assert(
      fc.property(
        fc.array(nodeArb, { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 2, max: 5 }),
        fc.integer({ min: 0, max: 4 }),
        (nodes, n, g) => {
          const res = (x: (typeof nodes)[number]): ResourceMap => ({
            ...(x.gpus > 0 ? { GPU: x.gpus } : {}),
            ...(x.slot ? { serving_slot: 1 } : {})
          })
          const [first, ...rest] = nodes
          const s = cluster(res(first!), ...rest.map(res))
          const withStates = {
            ...s,
            nodes: s.nodes.map((x, i) => ({
              ...x,
              state: nodes[i]!.alive ? ("ALIVE" as const) : ("DEAD" as const)
            }))
          }
          const qualifying = nodes.filter((x) => x.alive && x.slot && x.gpus >= g).length
          const v = checkGroupFeasibility(withStates, { nodes: n, gpus: g, servingSlot: true })
          return (
            v.feasible === qualifying >= n && (v.feasible || v.infeasible?.reason === "insufficient_nodes")
          )
        }
      )
    )
  })
})

describe("groupBundle", () => {
  it("asks for the GPUs and the slot, leaving zero amounts out", () => {
    assert.deepStrictEqual(groupBundle({ nodes: 2, gpus: 2, servingSlot: true }), { GPU: 2, serving_slot: 1 })
    assert.deepStrictEqual(groupBundle({ nodes: 2, gpus: 0, servingSlot: true }), { serving_slot: 1 })
    assert.deepStrictEqual(groupBundle({ nodes: 2, gpus: 1, servingSlot: false }), { GPU: 1 })
  })
})

describe("slot holders", () => {
  const PG = "a51915b35d35e029c18b25a0721601000000"
  it("recognises the slot under the names Ray gives it inside a placement group", () => {
    assert.isTrue(isSlotResource("serving_slot"))
    assert.isTrue(isSlotResource(`serving_slot_group_0_${PG}`))
    assert.isTrue(isSlotResource(`serving_slot_group_${PG}`))
    assert.isFalse(isSlotResource("GPU"))
    assert.isFalse(isSlotResource(`GPU_group_0_${PG}`))
    assert.isTrue(wantsSlot(actor({ requiredResources: { [`serving_slot_group_1_${PG}`]: 1 } })))
    assert.isFalse(wantsSlot(actor({ requiredResources: { GPU: 1 } })))
  })

  it("per node: declared, held, and who holds it (a single lease, a group rank, a bare reservation)", () => {
    const worker = nodeId(0x100)
    const base = cluster(SLOT_2GPU, SLOT_2GPU, { CPU: 2 })
    // The head's slot is taken by a plain lease; the worker's is reserved by a group whose rank runs.
    const workerRow = {
      ...SLOT_2GPU,
      [`serving_slot_group_1_${PG}`]: 1,
      [`serving_slot_group_${PG}`]: 1
    }
    const s: ClusterSnapshot = {
      ...base,
      resources: base.resources.map((r) =>
        r.nodeId === worker ? { ...r, total: workerRow, available: { CPU: 2, GPU: 1 } } : r
      ),
      actors: [
        actor({ name: "lease", pid: 11, jobId: jobId(2), requiredResources: { GPU: 1, serving_slot: 1 } }),
        actor({
          actorId: "b".repeat(32),
          nodeId: worker,
          className: "HyperloomLease",
          pid: 22,
          jobId: jobId(3),
          requiredResources: { [`serving_slot_group_1_${PG}`]: 1, [`GPU_group_1_${PG}`]: 1 }
        }),
        actor({ actorId: "c".repeat(32), state: "DEAD", pid: 33 })
      ],
      jobs: [job({ jobId: jobId(2), driverPid: 500 }), job({ jobId: jobId(3), driverPid: 600 })]
    }
    const held = withHeld(s, { serving_slot: 1 })
    const [head, w, third] = slotHolders(held)
    assert.strictEqual(head!.declared, 1)
    assert.strictEqual(head!.held, 1)
    assert.deepStrictEqual(
      head!.holders.map((h) => [h.name, h.pid, h.driverPid, h.placementGroup]),
      [["lease", 11, 500, null]]
    )
    assert.strictEqual(w!.held, 1)
    assert.deepStrictEqual(w!.placementGroups, [PG])
    assert.deepStrictEqual(
      w!.holders.map((h) => [h.pid, h.placementGroup, h.bundle, h.driverPid]),
      [[22, PG, 1, 600]]
    )
    assert.strictEqual(third!.declared, 0)
    assert.strictEqual(third!.held, 0)
    assert.deepStrictEqual(third!.holders, [])
  })
})

describe("groupExitCode", () => {
  it("is the first failing rank's code, in arrival order, else 0", () => {
    assert.strictEqual(groupExitCode([]), 0)
    assert.strictEqual(
      groupExitCode([
        { rank: 1, code: 0 },
        { rank: 0, code: 0 }
      ]),
      0
    )
    assert.strictEqual(
      groupExitCode([
        { rank: 1, code: 3 },
        { rank: 0, code: 143 }
      ]),
      3
    )
    assert.strictEqual(
      groupExitCode([
        { rank: 0, code: 0 },
        { rank: 1, code: 7 },
        { rank: 2, code: 137 }
      ]),
      7
    )
  })
})

describe("what a rank is sent of the launching environment (docs/design.md#what-each-node-is-given)", () => {
  const launching = {
    PATH: "/launcher/bin:/usr/bin",
    LD_LIBRARY_PATH: "/launcher/lib",
    HOME: "/home/me",
    HYPERLOOM_RESULT_FILE: "/s/attempts/1/result.json",
    HYPERLOOM_ATTEMPT: "1",
    HF_TOKEN: "secret",
    NCCL_SOCKET_IFNAME: "eth1",
    UNSET: undefined
  }

  it("only HYPERLOOM_* by default: never the launching host's PATH, libraries or secrets", () => {
    assert.deepStrictEqual(rankEnvironment(launching, []), {
      HYPERLOOM_RESULT_FILE: "/s/attempts/1/result.json",
      HYPERLOOM_ATTEMPT: "1"
    })
  })

  it("plus the names listed with --rank-env (a name that is not set is not sent)", () => {
    assert.deepStrictEqual(rankEnvironment(launching, ["NCCL_SOCKET_IFNAME", "UNSET", "NOT_THERE"]), {
      HYPERLOOM_RESULT_FILE: "/s/attempts/1/result.json",
      HYPERLOOM_ATTEMPT: "1",
      NCCL_SOCKET_IFNAME: "eth1"
    })
  })

  it("a --rank-env name is a variable name", () => {
    for (const ok of ["HF_TOKEN", "_X", "a1"]) assert.isTrue(isEnvName(ok), ok)
    for (const bad of ["", "1A", "A-B", "A=B", "A B"]) assert.isFalse(isEnvName(bad), bad)
  })
})

describe("vLLM's ray executor backend is refused before anything starts (docs/design.md#serving-engines-in-a-group)", () => {
  it("in any spelling argparse takes", () => {
    for (const cmd of [
      "vllm serve M --distributed-executor-backend ray --port $HYPERLOOM_PORT",
      "vllm serve M --distributed-executor-backend=ray",
      "vllm serve M --tensor-parallel-size 16 --distributed-executor-backend 'ray'",
      "python -m vllm.entrypoints.openai.api_server --model M --distributed-executor-backend  ray"
    ]) {
      const line = rayExecutorBackendRefusal(cmd)
      assert.isDefined(line, cmd)
      assert.include(line, "--nnodes $HYPERLOOM_WORLD_SIZE --node-rank $HYPERLOOM_RANK")
      assert.include(line, "--headless")
      assert.notInclude(line ?? "", "\n")
    }
  })
  it("not for the multiprocessing backend, another option or a model named ray", () => {
    for (const cmd of [
      "vllm serve M --distributed-executor-backend mp",
      "vllm serve ray-model --port 1",
      "vllm serve M --distributed-executor-backend raylike",
      "sglang.launch_server --model-path ray --nnodes 2"
    ]) {
      assert.isUndefined(rayExecutorBackendRefusal(cmd), cmd)
    }
  })
})
