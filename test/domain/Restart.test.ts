import { assert, describe, it } from "@effect/vitest"
import { restartPlan } from "../../src/domain/Restart.js"
import { HEAD_IP, idleHeadSnapshot, node, nodeId, nodeResources } from "../support/snapshots.js"

const head = (resources: Record<string, number>) =>
  idleHeadSnapshot({
    resources: {
      memory: 1e9,
      object_store_memory: 5e8,
      [`node:${HEAD_IP}`]: 1,
      "node:__internal_head__": 1,
      ...resources
    }
  })

describe("restartPlan", () => {
  it("keeps the port, the CPU count, the declared GPUs and the custom resources, and adds the slot", () => {
    const plan = restartPlan(head({ CPU: 8, GPU: 2, foo: 3 }), 6390, undefined)
    assert.deepStrictEqual(plan, {
      port: 6390,
      numCpus: 8,
      numGpus: 2,
      resources: { foo: 3, serving_slot: 1 }
    })
  })

  it("keeps 0 as 0: a head that declared no GPUs is restarted with --num-gpus=0, not with every GPU Ray detects", () => {
    // `ray start --head --num-gpus=0` gives no GPU key at all (Ray 2.58), so no key means 0 declared.
    assert.strictEqual(restartPlan(head({ CPU: 2 }), 6379, undefined).numGpus, 0)
    assert.strictEqual(restartPlan(head({ CPU: 2, GPU: 0 }), 6379, undefined).numGpus, 0)
  })

  it("HYPERLOOM_RAY_NUM_GPUS overrides the old head's GPUs, also 0", () => {
    assert.strictEqual(restartPlan(head({ CPU: 2, GPU: 2 }), 6379, 4).numGpus, 4)
    assert.strictEqual(restartPlan(head({ CPU: 2, GPU: 2 }), 6379, 0).numGpus, 0)
  })

  it("never copies Ray's own resources (memory, node markers, accelerator types) and sets the slot to 1", () => {
    const plan = restartPlan(head({ CPU: 2, "accelerator_type:A100": 1, serving_slot: 3 }), 6379, undefined)
    assert.deepStrictEqual(plan.resources, { serving_slot: 1 })
  })

  it("reads the head node's totals, not a worker's", () => {
    const snapshot = head({ CPU: 4, bar: 1 })
    const worker = node({ nodeId: nodeId(7), isHead: false, resourcesTotal: { CPU: 16, baz: 2 } })
    const two = {
      ...snapshot,
      nodes: [worker, ...snapshot.nodes],
      resources: [
        nodeResources({ nodeId: nodeId(7), total: { CPU: 16, baz: 2 }, available: {} }),
        ...snapshot.resources
      ]
    }
    const plan = restartPlan(two, 6379, undefined)
    assert.strictEqual(plan.numCpus, 4)
    assert.deepStrictEqual(plan.resources, { bar: 1, serving_slot: 1 })
  })

  it("leaves the CPU count to Ray when the old head reported none", () => {
    assert.isUndefined(restartPlan(head({ GPU: 1 }), 6379, undefined).numCpus)
  })

  it("takes the alive head over a dead head record that comes first", () => {
    const snapshot = head({ CPU: 4 })
    const dead = node({ nodeId: nodeId(9), state: "DEAD", resourcesTotal: { CPU: 64, stale: 1 } })
    const withDead = {
      ...snapshot,
      nodes: [dead, ...snapshot.nodes],
      resources: [
        nodeResources({ nodeId: nodeId(9), total: { CPU: 64, stale: 1 }, available: {} }),
        ...snapshot.resources
      ]
    }
    const plan = restartPlan(withDead, 6379, undefined)
    assert.strictEqual(plan.numCpus, 4)
    assert.deepStrictEqual(plan.resources, { serving_slot: 1 })
  })

  it("reads the resource table first and falls back to the node record", () => {
    const snapshot = head({ CPU: 4, fromTable: 2 })
    const recordOnly = {
      ...snapshot,
      nodes: snapshot.nodes.map((n) => ({ ...n, resourcesTotal: { CPU: 8, fromRecord: 1 } }))
    }
    assert.deepStrictEqual(restartPlan(recordOnly, 6379, undefined).resources, {
      fromTable: 2,
      serving_slot: 1
    })
    const noTable = { ...recordOnly, resources: [] }
    const plan = restartPlan(noTable, 6379, undefined)
    assert.strictEqual(plan.numCpus, 8)
    assert.deepStrictEqual(plan.resources, { fromRecord: 1, serving_slot: 1 })
  })

  it("plans a bare slot-only head from an empty snapshot", () => {
    const empty = { ...head({}), nodes: [], resources: [] }
    assert.deepStrictEqual(restartPlan(empty, 6379, undefined), {
      port: 6379,
      numCpus: undefined,
      numGpus: 0,
      resources: { serving_slot: 1 }
    })
  })
})
