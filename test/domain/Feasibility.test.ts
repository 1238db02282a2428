import { assert, describe, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { INFEASIBLE_MARKER, RayClusterInfeasible } from "../../src/domain/Errors.js"
import {
  checkFeasibility,
  type FeasibilityVerdict,
  RESOURCE_EPSILON,
  SERVING_SLOT
} from "../../src/domain/Feasibility.js"
import { restartPlan } from "../../src/domain/Restart.js"
import type { ClusterSnapshot, ResourceMap } from "../../src/domain/Snapshot.js"
import {
  HEAD_IP,
  idleHeadSnapshot,
  node,
  nodeId,
  nodeResources,
  withHeld,
  withNode
} from "../support/snapshots.js"

const NO_SLOT_PREFIX = `${INFEASIBLE_MARKER}: existing Ray head has no serving_slot resource; `

/** A head declaring exactly `resources` (plus nothing else), idle, on `port`. */
const head = (resources: ResourceMap, port = 6379) => idleHeadSnapshot({ resources, port })

const infeasibleOf = (verdict: FeasibilityVerdict): RayClusterInfeasible => {
  assert.isFalse(verdict.feasible)
  assert.instanceOf(verdict.infeasible, RayClusterInfeasible)
  return verdict.infeasible!
}

const assertFeasible = (verdict: FeasibilityVerdict) => {
  assert.isTrue(verdict.feasible)
  assert.isUndefined(verdict.infeasible)
}

/** Two alive nodes, each with its own resource report. */
const twoNodes = (a: ResourceMap, b: ResourceMap): ClusterSnapshot => {
  const base = idleHeadSnapshot({ resources: a })
  const second = nodeId(2)
  return {
    ...withNode(base, { nodeId: second, isHead: false, resourcesTotal: b }),
    resources: [...base.resources, nodeResources({ nodeId: second, total: b, available: b })]
  }
}

describe("checkFeasibility", () => {
  it("a head with the slot and enough GPUs is feasible, without warnings", () => {
    const verdict = checkFeasibility(head({ CPU: 2, GPU: 2, serving_slot: 1 }), {
      gpus: 2,
      servingSlot: true
    })
    assertFeasible(verdict)
    assert.deepStrictEqual(verdict.warnings, [])
  })

  describe("no serving_slot", () => {
    it("is infeasible with reason no_serving_slot and the manual fix on the head's port", () => {
      const verdict = checkFeasibility(head({ CPU: 2, GPU: 2 }, 6380), { gpus: 1, servingSlot: true })
      const error = infeasibleOf(verdict)
      assert.strictEqual(error._tag, "RayClusterInfeasible")
      assert.strictEqual(error.reason, "no_serving_slot")
      assert.deepStrictEqual(error.refusals, [])
      assert.isUndefined(error.restartFailure)
      assert.isTrue(error.message.startsWith(NO_SLOT_PREFIX), error.message)
      assert.strictEqual(
        error.detail,
        "existing Ray head has no serving_slot resource; restart it with: ray stop --force && " +
          `ray start --head --port=6380 --num-cpus=2 --num-gpus=2 --resources='{"serving_slot": 1}' --disable-usage-stats ` +
          "(ray stop --force kills every Ray process on this host)"
      )
    })

    it("the manual fix starts the head as the automatic repair would (restartPlan: CPUs, GPUs, resources)", () => {
      const snapshot = head({ CPU: 3, GPU: 1, memory: 1e9, nvme: 2 }, 6390)
      const plan = restartPlan(snapshot, 6390, undefined)
      const error = infeasibleOf(checkFeasibility(snapshot, { gpus: 1, servingSlot: true }))
      assert.include(
        error.detail,
        `ray start --head --port=${plan.port} --num-cpus=${plan.numCpus} --num-gpus=${plan.numGpus} ` +
          `--resources='${JSON.stringify(plan.resources).replaceAll(",", ", ").replaceAll(":", ": ")}' `
      )
      assert.include(error.detail, " --num-cpus=3 --num-gpus=1 ")
    })

    it("the manual fix keeps the head's custom resources but not Ray's own", () => {
      const totals = {
        CPU: 4,
        GPU: 1,
        memory: 1e9,
        object_store_memory: 1e8,
        [`node:${HEAD_IP}`]: 1,
        "node:__internal_head__": 1,
        "accelerator_type:A100": 1,
        nvme: 2
      }
      const error = infeasibleOf(checkFeasibility(head(totals), { gpus: 1, servingSlot: true }))
      assert.include(error.detail, ` --num-gpus=1 --resources='{"nvme": 2, "serving_slot": 1}' `)
      for (const builtin of ["CPU", "memory", "node:", "accelerator_type"]) {
        assert.notInclude(error.detail, `"${builtin}`)
      }
    })

    it("the manual fix puts the slot last, at 1, whatever the head declared of it", () => {
      const error = infeasibleOf(
        checkFeasibility(head({ serving_slot: 0.5, nvme: 2 }), { gpus: 0, servingSlot: true })
      )
      assert.include(error.detail, `--resources='{"nvme": 2, "serving_slot": 1}'`)
    })

    it("the manual fix keeps 0 GPUs as --num-gpus=0 when the head has none (else Ray detects them all)", () => {
      const error = infeasibleOf(checkFeasibility(head({ CPU: 2 }), { gpus: 0, servingSlot: true }))
      assert.include(error.detail, `--port=6379 --num-cpus=2 --num-gpus=0 --resources='{"serving_slot": 1}'`)
    })

    it("the manual fix quotes a resource name with a quote in it for the shell", () => {
      const error = infeasibleOf(checkFeasibility(head({ "it's": 1 }), { gpus: 0, servingSlot: true }))
      assert.include(error.detail, `--resources='{"it'\\''s": 1, "serving_slot": 1}'`)
    })

    it("takes the port from an IPv6 GCS address, and says <port> when there is none", () => {
      const v6 = { ...head({ GPU: 1 }), gcsAddress: "[::1]:6381" }
      assert.include(
        infeasibleOf(checkFeasibility(v6, { gpus: 1, servingSlot: true })).detail,
        "--port=6381 "
      )
      const bare = { ...head({ GPU: 1 }), gcsAddress: "gpu-host" }
      assert.include(
        infeasibleOf(checkFeasibility(bare, { gpus: 1, servingSlot: true })).detail,
        "--port=<port> "
      )
    })

    it("a slot total of zero or a fraction of a slot is no slot", () => {
      for (const slots of [0, 0.5]) {
        const error = infeasibleOf(
          checkFeasibility(head({ GPU: 2, serving_slot: slots }), { gpus: 1, servingSlot: true })
        )
        assert.strictEqual(error.reason, "no_serving_slot")
        assert.notInclude(error.detail, `"serving_slot": ${slots}`)
      }
    })

    it("does not matter when the lease does not want the slot", () => {
      const verdict = checkFeasibility(head({ GPU: 2 }), { gpus: 2, servingSlot: false })
      assertFeasible(verdict)
      assert.deepStrictEqual(verdict.warnings, [])
    })
  })

  describe("GPUs", () => {
    it.each([
      { gpus: 0, requested: 2, text: "cluster has 0 GPU(s), 2 requested; " },
      { gpus: 1, requested: 2, text: "cluster has 1 GPU(s), 2 requested; " },
      { gpus: 2, requested: 3, text: "cluster has 2 GPU(s), 3 requested; " },
      { gpus: 0.5, requested: 1, text: "cluster has 0.5 GPU(s), 1 requested; " }
    ])("$gpus GPU(s) against $requested requested is insufficient_gpus", ({ gpus, requested, text }) => {
      const resources: ResourceMap =
        gpus === 0 ? { CPU: 2, serving_slot: 1 } : { CPU: 2, GPU: gpus, serving_slot: 1 }
      const error = infeasibleOf(checkFeasibility(head(resources), { gpus: requested, servingSlot: true }))
      assert.strictEqual(error.reason, "insufficient_gpus")
      assert.deepStrictEqual(error.refusals, [])
      assert.isUndefined(error.restartFailure)
      assert.isTrue(error.message.startsWith(`${INFEASIBLE_MARKER}: ${text}`), error.message)
      assert.include(error.detail, `request at most ${gpus} with --gpus`)
      assert.include(error.detail, `--num-gpus=${requested}`)
    })

    it.each([
      { gpus: 2, requested: 2 },
      { gpus: 4, requested: 2 },
      { gpus: 1, requested: 0.5 }
    ])("$gpus GPU(s) against $requested requested is feasible", ({ gpus, requested }) => {
      assertFeasible(
        checkFeasibility(head({ GPU: gpus, serving_slot: 1 }), { gpus: requested, servingSlot: true })
      )
    })

    it("gives the whole advice", () => {
      const error = infeasibleOf(
        checkFeasibility(head({ GPU: 1, serving_slot: 1 }), { gpus: 2, servingSlot: true })
      )
      assert.strictEqual(
        error.detail,
        "cluster has 1 GPU(s), 2 requested; request at most 1 with --gpus, or start the head with " +
          "--num-gpus=2 on a host that has them (the GPU count is fixed when the head starts)"
      )
    })

    it("tolerates rounding in the GPU total, up to exactly the tolerance", () => {
      const slot = { serving_slot: 1 }
      assertFeasible(
        checkFeasibility(head({ GPU: 2 - RESOURCE_EPSILON, ...slot }), { gpus: 2, servingSlot: true })
      )
      const error = infeasibleOf(
        checkFeasibility(head({ GPU: 2 - 2 * RESOURCE_EPSILON, ...slot }), { gpus: 2, servingSlot: true })
      )
      assert.strictEqual(error.reason, "insufficient_gpus")
    })

    it("a request for no GPUs never fails on GPUs, even without a GPU key", () => {
      assertFeasible(checkFeasibility(head({ CPU: 2, serving_slot: 1 }), { gpus: 0, servingSlot: true }))
      assertFeasible(checkFeasibility(head({}), { gpus: 0, servingSlot: false }))
    })

    it("counts the GPUs of every node", () => {
      const snapshot = twoNodes({ GPU: 1, serving_slot: 1 }, { GPU: 1, serving_slot: 1 })
      const verdict = checkFeasibility(snapshot, { gpus: 2, servingSlot: true })
      assertFeasible(verdict)
      assert.deepStrictEqual(verdict.warnings, [])
    })
  })

  it("checks the slot before the GPUs, so a head short of both still reaches the repair", () => {
    const error = infeasibleOf(checkFeasibility(head({ CPU: 2 }), { gpus: 2, servingSlot: true }))
    assert.strictEqual(error.reason, "no_serving_slot")
  })

  it("without the slot in the request, a head short of both fails on GPUs", () => {
    const error = infeasibleOf(checkFeasibility(head({ CPU: 2 }), { gpus: 2, servingSlot: false }))
    assert.strictEqual(error.reason, "insufficient_gpus")
  })

  it("decides from totals: a head whose slot and GPUs are all held right now is feasible", () => {
    const busy = withHeld(head({ CPU: 2, GPU: 2, serving_slot: 1 }), { CPU: 2, GPU: 2, serving_slot: 1 })
    assert.deepStrictEqual(busy.resources[0]!.available, {})
    assertFeasible(checkFeasibility(busy, { gpus: 2, servingSlot: true }))
  })

  describe("slot warnings", () => {
    it("warns when one node declares two slots", () => {
      const verdict = checkFeasibility(head({ GPU: 2, serving_slot: 2 }), { gpus: 1, servingSlot: true })
      assertFeasible(verdict)
      assert.deepStrictEqual(verdict.warnings, [
        "serving_slot total is 2 on node ab12cd34ab12… (head); it should be 1 per node, or two serving runs can overlap"
      ])
    })

    it("checks each node, not the cluster's sum: two slots on one node and none on the other is a warning", () => {
      // The sum (2 on 2 nodes) looked right, yet two serving runs can overlap on the first node.
      const verdict = checkFeasibility(twoNodes({ GPU: 1, serving_slot: 2 }, { GPU: 1 }), {
        gpus: 1,
        servingSlot: true
      })
      assert.deepStrictEqual(verdict.warnings, [
        "serving_slot total is 2 on node ab12cd34ab12… (head); it should be 1 per node, or two serving runs can overlap"
      ])
    })

    it("names every node whose slot is not 1, and leaves a node without a slot alone (it serves nothing)", () => {
      const verdict = checkFeasibility(twoNodes({ GPU: 1, serving_slot: 1 }, { GPU: 1 }), {
        gpus: 1,
        servingSlot: true
      })
      assert.deepStrictEqual(verdict.warnings, [])
      const both = checkFeasibility(twoNodes({ serving_slot: 3 }, { serving_slot: 0.5 }), {
        gpus: 0,
        servingSlot: true
      })
      assert.deepStrictEqual(both.warnings, [
        "serving_slot total is 3 on node ab12cd34ab12… (head); it should be 1 per node, or two serving runs can overlap",
        `serving_slot total is 0.5 on node ${nodeId(2).slice(0, 12)}…; it should be 1 per node, or two serving runs can overlap`
      ])
    })

    it("does not count a dead node record as a node", () => {
      const snapshot = withNode(head({ GPU: 1, serving_slot: 1 }), { nodeId: nodeId(3), state: "DEAD" })
      assert.deepStrictEqual(checkFeasibility(snapshot, { gpus: 1, servingSlot: true }).warnings, [])
    })

    it("does not warn about a dead node's resource report either", () => {
      const both = twoNodes({ GPU: 1, serving_slot: 1 }, { serving_slot: 2 })
      const snapshot = {
        ...both,
        nodes: both.nodes.map((n, i) => (i === 1 ? { ...n, state: "DEAD" as const } : n))
      }
      assert.deepStrictEqual(checkFeasibility(snapshot, { gpus: 0, servingSlot: true }).warnings, [])
    })

    it("without resource reports, checks the alive nodes' declared totals", () => {
      const snapshot = { ...head({ GPU: 1, serving_slot: 2 }), resources: [] }
      assert.deepStrictEqual(checkFeasibility(snapshot, { gpus: 0, servingSlot: true }).warnings, [
        "serving_slot total is 2 on node ab12cd34ab12… (head); it should be 1 per node, or two serving runs can overlap"
      ])
    })

    it("shows a node id of at most 12 characters whole", () => {
      const snapshot = idleHeadSnapshot({ nodeId: "0123456789ab", resources: { serving_slot: 2 } })
      assert.deepStrictEqual(checkFeasibility(snapshot, { gpus: 0, servingSlot: true }).warnings, [
        "serving_slot total is 2 on node 0123456789ab (head); it should be 1 per node, or two serving runs can overlap"
      ])
    })

    it("does not warn about a missing slot: that is the error's job (or not wanted)", () => {
      assert.deepStrictEqual(checkFeasibility(head({ GPU: 1 }), { gpus: 1, servingSlot: true }).warnings, [])
      assert.deepStrictEqual(checkFeasibility(head({ GPU: 1 }), { gpus: 1, servingSlot: false }).warnings, [])
    })

    it("keeps the warning on an infeasible verdict", () => {
      const verdict = checkFeasibility(head({ GPU: 1, serving_slot: 2 }), { gpus: 2, servingSlot: true })
      assert.strictEqual(infeasibleOf(verdict).reason, "insufficient_gpus")
      assert.lengthOf(verdict.warnings, 1)
      assert.isTrue(verdict.warnings[0]!.startsWith("serving_slot total is 2 on node "))
    })

    it("tolerates rounding in the slot total, below the tolerance only", () => {
      const request = { gpus: 0, servingSlot: true }
      assert.deepStrictEqual(checkFeasibility(head({ serving_slot: 1 - 1e-9 }), request).warnings, [])
      assert.deepStrictEqual(
        checkFeasibility(head({ serving_slot: 1 + RESOURCE_EPSILON / 2 }), request).warnings,
        []
      )
      assert.lengthOf(checkFeasibility(head({ serving_slot: 1 + RESOURCE_EPSILON }), request).warnings, 1)
    })

    it("a slot short of one by exactly the tolerance is still a slot, short by more is none", () => {
      const request = { gpus: 0, servingSlot: true }
      assertFeasible(checkFeasibility(head({ serving_slot: 1 - RESOURCE_EPSILON }), request))
      assert.strictEqual(
        infeasibleOf(checkFeasibility(head({ serving_slot: 1 - 2 * RESOURCE_EPSILON }), request)).reason,
        "no_serving_slot"
      )
    })
  })

  it("reads totals from the node records when the resource table is empty", () => {
    const snapshot: ClusterSnapshot = {
      ...idleHeadSnapshot(),
      nodes: [node({ resourcesTotal: { GPU: 2 } })],
      resources: []
    }
    assert.strictEqual(
      infeasibleOf(checkFeasibility(snapshot, { gpus: 1, servingSlot: true })).reason,
      "no_serving_slot"
    )
  })

  const resourceMap = fc.dictionary(
    fc.constantFrom("CPU", "GPU", SERVING_SLOT, "nvme"),
    fc.integer({ min: 0, max: 4 }).map((n) => n / 2)
  )

  it.prop(
    "depends on totals only: what is free now never changes the verdict",
    {
      total: resourceMap,
      available: resourceMap,
      gpus: fc.integer({ min: 0, max: 4 }),
      servingSlot: fc.boolean()
    },
    ({ total, available, gpus, servingSlot }) => {
      const idle = head(total)
      const busy: ClusterSnapshot = { ...idle, resources: [{ ...idle.resources[0]!, available }] }
      const a = checkFeasibility(idle, { gpus, servingSlot })
      const b = checkFeasibility(busy, { gpus, servingSlot })
      assert.strictEqual(a.feasible, b.feasible)
      assert.strictEqual(a.infeasible?.message, b.infeasible?.message)
      assert.deepStrictEqual(a.warnings, b.warnings)
    }
  )

  it.prop(
    "an infeasible verdict always carries the marker and one of the two reasons; a feasible one none",
    { total: resourceMap, gpus: fc.integer({ min: 0, max: 4 }), servingSlot: fc.boolean() },
    ({ total, gpus, servingSlot }) => {
      const verdict = checkFeasibility(head(total), { gpus, servingSlot })
      assert.strictEqual(verdict.feasible, verdict.infeasible === undefined)
      if (verdict.infeasible !== undefined) {
        assert.isTrue(verdict.infeasible.message.startsWith(`${INFEASIBLE_MARKER}: `))
        const expected =
          servingSlot && (total[SERVING_SLOT] ?? 0) < 1 ? "no_serving_slot" : "insufficient_gpus"
        assert.strictEqual(verdict.infeasible.reason, expected)
      } else {
        assert.isAtLeast(total["GPU"] ?? 0, gpus)
      }
    }
  )
})

describe("the manual fix in the no_serving_slot message", () => {
  it("carries --num-cpus only when the head declares CPUs", () => {
    const request = { gpus: 1, servingSlot: true }
    const withCpus = infeasibleOf(checkFeasibility(head({ CPU: 3, GPU: 1 }), request)).message
    assert.include(withCpus, " --num-cpus=3 --num-gpus=1 ")
    const noCpus = infeasibleOf(checkFeasibility(head({ GPU: 1 }), request)).message
    assert.notInclude(noCpus, "--num-cpus")
    assert.include(noCpus, "--port=6379 --num-gpus=1 ")
  })
})
