/**
 * The hardware class decided before any engine starts (issue 33 item 3): from what Ray tells of each
 * node (its GPU count and accelerator type) and the vendor tool's model where an earlier start
 * recorded it; the class with the most nodes that could serve, the others left alone and named;
 * `--hardware-class` chooses another; a resumed sweep keeps its own.
 */
import { assert, describe, it } from "@effect/vitest"
import type { NodeInfo } from "../../src/domain/Snapshot.js"
import {
  acceleratorToken,
  decideClass,
  fitsClass,
  leftAloneOf,
  matchesChoice,
  refineClass,
  renderDecision,
  sameModel,
  servingNodes
} from "../../src/domain/Sweep/ClassChoice.js"
import type { NodeRecord } from "../../src/domain/Sweep/Nodes.js"
import { idleHeadSnapshot, node, nodeId } from "../support/snapshots.js"

/** A node with `gpus` GPUs, Ray's accelerator type `acc` (none: not told), the slot unless `slot` is 0. */
const rayNode = (seed: number, gpus: number, acc?: string, over: Partial<NodeInfo> = {}): NodeInfo =>
  node({
    nodeId: nodeId(seed),
    hostname: `host-${seed}`,
    isHead: seed === 1,
    resourcesTotal: {
      CPU: 8,
      ...(gpus > 0 ? { GPU: gpus } : {}),
      serving_slot: 1,
      ...(acc === undefined ? {} : { [`accelerator_type:${acc}`]: 1 })
    },
    ...over
  })

const cluster = (...nodes: ReadonlyArray<NodeInfo>) => ({ ...idleHeadSnapshot(), nodes })

const hosts = (ns: ReadonlyArray<NodeRecord>) => ns.map((n) => n.hostname)

describe("the hardware class before the first lease", () => {
  it("Ray's accelerator type is a token of the vendor's name; the two depths match, two vendor names only whole", () => {
    assert.strictEqual(acceleratorToken("NVIDIA L4"), "L4")
    assert.strictEqual(acceleratorToken("Tesla V100-SXM2-16GB"), "V100")
    assert.strictEqual(acceleratorToken("NVIDIA A100-SXM4-80GB"), "A100")
    assert.strictEqual(acceleratorToken("NVIDIA GeForce RTX 5090"), "GeForce-RTX-5090")
    assert.strictEqual(acceleratorToken("L4"), "L4")
    assert.isTrue(sameModel("L4", "NVIDIA L4"))
    assert.isTrue(sameModel("NVIDIA A100-SXM4-80GB", "A100"))
    assert.isFalse(sameModel("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB"))
    assert.isFalse(sameModel("L4", "A100"))
    assert.isTrue(sameModel(null, "A100"))
    assert.isTrue(sameModel("AMD-Instinct-MI300X", "AMD-Instinct-MI300X-OAM"))
  })

  it("the class with the most nodes that could serve; the others left alone and named once", () => {
    const snap = cluster(
      rayNode(1, 1, "L4"),
      rayNode(2, 1, "L4"),
      rayNode(3, 1, "A100"),
      rayNode(4, 2, "L4"),
      rayNode(5, 1, "L4"),
      // not alive, no slot, too few GPUs: they could not serve, so they are no class's
      rayNode(6, 1, "H100", { state: "DEAD" }),
      rayNode(7, 1, "H100", { resourcesTotal: { GPU: 1, "accelerator_type:H100": 1 } }),
      rayNode(8, 0)
    )
    const nodes = servingNodes(snap, 1)
    assert.deepStrictEqual(hosts(nodes), ["host-1", "host-2", "host-3", "host-4", "host-5"])
    const d = decideClass(nodes, {})
    assert.strictEqual(d._tag, "decided")
    if (d._tag !== "decided") return
    assert.deepStrictEqual(d.cls, { gpu_count: 1, gpu_model: "L4", cpu_model: null })
    assert.deepStrictEqual(hosts(d.nodes), ["host-1", "host-2", "host-5"])
    assert.deepStrictEqual(hosts(leftAloneOf(d)), ["host-3", "host-4"])
    assert.strictEqual(
      renderDecision(d),
      "hardware class: 1 × L4 per node (3 node(s): host-1, host-2, host-5; the class with the most nodes that could serve); left alone (another class): 1 × A100 per node (host-3); 2 × L4 per node (host-4); --hardware-class chooses another"
    )
  })

  it("--hardware-class chooses another class present; one not present is refused naming those there", () => {
    const nodes = servingNodes(cluster(rayNode(1, 1, "L4"), rayNode(2, 1, "L4"), rayNode(3, 2, "A100")), 1)
    const d = decideClass(nodes, { chosen: "2xA100" })
    assert.isTrue(d._tag === "decided" && d.why === "chosen")
    assert.deepStrictEqual(d._tag === "decided" ? hosts(d.nodes) : [], ["host-3"])
    assert.deepStrictEqual(hosts(leftAloneOf(d)), ["host-1", "host-2"])
    assert.isTrue(decideClass(nodes, { chosen: "nvidia a100" })._tag === "decided")
    const no = decideClass(nodes, { chosen: "H100" })
    assert.strictEqual(no._tag, "unknown")
    assert.strictEqual(
      renderDecision(no),
      "--hardware-class H100: no node of that class could serve; present: 1 × L4 per node (host-1, host-2); 2 × A100 per node (host-3)"
    )
    assert.isTrue(matchesChoice({ gpu_count: 0, gpu_model: null, cpu_model: null }, "cpu"))
    assert.isFalse(matchesChoice({ gpu_count: 1, gpu_model: "L4", cpu_model: null }, "2×L4"))
  })

  it("a resumed sweep keeps its class; the vendor tool's model recorded for a node is used, and told apart where Ray cannot", () => {
    const snap = cluster(rayNode(1, 1, "A100"), rayNode(2, 1, "A100"), rayNode(3, 1, "A100"))
    // earlier starts of this sweep recorded what the vendor tool said on nodes 1 and 2
    const told = (seed: number, model: string): NodeRecord => ({
      hostname: `gpu-${seed}`,
      node_id: nodeId(seed),
      gpu_count: 1,
      gpu_model: model,
      driver: "550",
      cpu_model: "EPYC",
      cpu_count: 8
    })
    const nodes = servingNodes(snap, 1, [told(1, "NVIDIA A100-SXM4-80GB"), told(2, "NVIDIA A100-SXM4-40GB")])
    assert.deepStrictEqual(
      nodes.map((n) => n.gpu_model),
      ["NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB", "A100"]
    )
    const kept = { gpu_count: 1, gpu_model: "NVIDIA A100-SXM4-40GB", cpu_model: null }
    const d = decideClass(nodes, { kept })
    assert.isTrue(d._tag === "decided" && d.why === "kept")
    // node 3 told Ray's token only: it may be of the class; node 1 told another model
    assert.deepStrictEqual(d._tag === "decided" ? hosts(d.nodes) : [], ["gpu-2", "host-3"])
    assert.deepStrictEqual(hosts(leftAloneOf(d)), ["gpu-1"])
  })

  it("refined by what the first node granted tells; fits holds the GPU count first", () => {
    const cls = { gpu_count: 1, gpu_model: "L4", cpu_model: null }
    const granted: NodeRecord = {
      hostname: "a",
      node_id: nodeId(1),
      gpu_count: 1,
      gpu_model: "NVIDIA L4",
      driver: null,
      cpu_model: "EPYC",
      cpu_count: 8
    }
    assert.deepStrictEqual(refineClass(cls, granted), {
      gpu_count: 1,
      gpu_model: "NVIDIA L4",
      cpu_model: null
    })
    assert.isFalse(fitsClass(cls, { ...granted, gpu_count: 2 }))
    assert.isFalse(fitsClass(cls, { ...granted, gpu_model: "NVIDIA A100" }))
    // no GPU: the CPU model, once told
    const cpu = { gpu_count: 0, gpu_model: null, cpu_model: null }
    const cpuNode = { ...granted, gpu_count: 0, gpu_model: null }
    assert.deepStrictEqual(refineClass(cpu, cpuNode), { gpu_count: 0, gpu_model: null, cpu_model: "EPYC" })
    assert.isFalse(fitsClass({ ...cpu, cpu_model: "Xeon" }, cpuNode))
  })

  it("nothing that could serve yet: the first node granted decides, as before", () => {
    const d = decideClass(servingNodes(cluster(rayNode(1, 0)), 1), {})
    assert.strictEqual(d._tag, "undecided")
    assert.include(renderDecision(d), "the first node granted decides it")
    // stand-in clusters tell no accelerator type: one class of "1 × GPU (model not told)"
    const plain = decideClass(servingNodes(cluster(rayNode(1, 1), rayNode(2, 1), rayNode(3, 2)), 1), {})
    assert.deepStrictEqual(plain._tag === "decided" ? plain.cls : undefined, {
      gpu_count: 1,
      gpu_model: null,
      cpu_model: null
    })
    assert.deepStrictEqual(hosts(leftAloneOf(plain)), ["host-3"])
  })
})
