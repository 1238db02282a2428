/**
 * Sweeps at cluster scale (docs/design.md#sweeps-at-cluster-scale), the pure part: a node's
 * hardware class, `--parallel auto` read from the cluster, `--parallel`'s parsing, the status line
 * and its ETA, and how one combination's save is laid over the others'.
 */
import { describe, expect, it } from "vitest"
import { mergeOwn, runCounts } from "../../src/domain/Sweep/Parallel.js"
import {
  autoParallel,
  classOf,
  etaSec,
  initialSweep,
  type NodeRecord,
  parseParallel,
  sameClass,
  statusLine
} from "../../src/domain/Sweep.js"
import { nodeRecordOf } from "../../src/programs/SweepEngine.js"
import { idleHeadSnapshot, node, nodeId } from "../support/snapshots.js"

const facts = (over: Partial<NodeRecord> = {}): NodeRecord => ({
  hostname: "h1",
  node_id: nodeId(1),
  gpu_count: 2,
  gpu_model: "NVIDIA L4",
  driver: "550.54.15",
  cpu_model: "AMD EPYC 7B13",
  cpu_count: 16,
  ...over
})

describe("hardware class", () => {
  it("is the GPU model and count per node; with no GPU, the CPU model", () => {
    expect(classOf(facts())).toEqual({ gpu_count: 2, gpu_model: "NVIDIA L4", cpu_model: null })
    expect(classOf(facts({ gpu_count: 0, gpu_model: null }))).toEqual({
      gpu_count: 0,
      gpu_model: null,
      cpu_model: "AMD EPYC 7B13"
    })
    // another CPU under the same GPUs is the same class; another GPU count is not
    expect(sameClass(classOf(facts()), classOf(facts({ cpu_model: "Xeon", hostname: "h2" })))).toBe(true)
    expect(sameClass(classOf(facts()), classOf(facts({ gpu_count: 1 })))).toBe(false)
    expect(sameClass(classOf(facts()), classOf(facts({ gpu_model: "NVIDIA A100" })))).toBe(false)
  })

  it("a node's record: the runner's facts and Ray's GPU count and accelerator type", () => {
    const status = {
      version: 1 as const,
      state: "ready" as const,
      outcome: null,
      port: 1,
      base_url: null,
      ready_sec: 1,
      exit_code: null,
      runtime_sec: null,
      gone: false,
      node: { hostname: "gpu-3", gpus: [], ray_node_id: nodeId(3), cpu_model: "EPYC", cpu_count: 8 }
    }
    expect(nodeRecordOf(status, { hostname: "10.0.0.3", gpuCount: 4, accelerator: "L4" })).toEqual({
      hostname: "gpu-3",
      node_id: nodeId(3),
      gpu_count: 4,
      gpu_model: "L4",
      driver: null,
      cpu_model: "EPYC",
      cpu_count: 8
    })
    expect(nodeRecordOf(undefined, undefined)).toBeUndefined()
  })
})

describe("--parallel", () => {
  it("parses a whole number >= 1 or auto", () => {
    expect(parseParallel("3")).toEqual({ ok: true, value: 3 })
    expect(parseParallel("auto")).toEqual({ ok: true, value: "auto" })
    for (const bad of ["0", "-1", "1.5", "all", ""]) expect(parseParallel(bad).ok).toBe(false)
  })

  it("auto: alive nodes with the slot and enough GPUs, of the sweep's class, not left alone; a group's K nodes each", () => {
    const base = idleHeadSnapshot()
    const gpuNode = (seed: number, gpus: number, over: Record<string, number> = {}, alive = true) =>
      node({
        nodeId: nodeId(seed),
        state: alive ? "ALIVE" : "DEAD",
        resourcesTotal: { CPU: 8, GPU: gpus, serving_slot: 1, "accelerator_type:L4": 1, ...over }
      })
    const snap = {
      ...base,
      nodes: [
        gpuNode(1, 2),
        gpuNode(2, 2),
        gpuNode(3, 2),
        gpuNode(4, 4), // another GPU count
        gpuNode(5, 2, { serving_slot: 0 }), // no slot
        gpuNode(6, 2, {}, false), // dead
        gpuNode(7, 1) // too few GPUs
      ]
    }
    expect(autoParallel(snap, { gpus: 2, nodes: 1 })).toBe(4)
    const cls = { gpu_count: 2, gpu_model: "NVIDIA L4", cpu_model: null }
    expect(autoParallel(snap, { gpus: 2, nodes: 1, cls })).toBe(3)
    expect(autoParallel(snap, { gpus: 2, nodes: 1, cls, leftAlone: [nodeId(2)] })).toBe(2)
    expect(autoParallel(snap, { gpus: 2, nodes: 3, cls })).toBe(1)
    // never less than one
    expect(autoParallel({ ...snap, nodes: [] }, { gpus: 2, nodes: 1 })).toBe(1)
  })
})

describe("the status line", () => {
  const p = {
    done: 2,
    running: 3,
    waiting: 4,
    runsDone: 10,
    runsPlanned: 36,
    elapsedSec: 125,
    startSecs: [60, 60],
    runSecs: [30, 30],
    parallel: 3,
    startsLeft: 4
  }

  it("counts, elapsed, and an ETA from the starts and runs measured so far", () => {
    // (4 starts × 60 s + 26 runs × 30 s) / 3 at once = 340 s
    expect(etaSec(p)).toBe(340)
    expect(statusLine(p)).toBe("sweep: 2 done, 3 running, 4 waiting; runs 10/36; elapsed 2m05s; ETA 5m40s")
  })

  it("adaptive (issue 33 item 2): the ETA divides by the combinations the search runs at once, not by --parallel", () => {
    // the search runs one combination now, though --parallel 3 was asked
    const adaptive = { ...p, running: 1, strategy: "adaptive" as const }
    // (4 starts × 60 s + 26 runs × 30 s) / 1 at once, at most: the search may start fewer
    expect(etaSec(adaptive)).toBe(1020)
    expect(statusLine(adaptive)).toContain("ETA at most 17m00s")
    // three at once: the same as the grid's
    expect(etaSec({ ...adaptive, running: 3 })).toBe(340)
  })

  it("no ETA before an engine start and a run are measured", () => {
    expect(etaSec({ ...p, runSecs: [] })).toBeUndefined()
    expect(statusLine({ ...p, startSecs: [] })).toContain("ETA –")
  })
})

describe("several combinations saving at once", () => {
  const e = {
    server: "engine {s}",
    client: ["client", "{c}"],
    params: [{ name: "s", values: ["1", "2"] }],
    load: { kind: "points" as const, name: "c", values: ["1", "2"] },
    slos: [],
    repeats: 2,
    gpus: 0,
    nodes: 1
  }

  it("one combination's save keeps what the others saved since", () => {
    const before = initialSweep(e, "2026-01-01T00:00:00.000Z")
    const latest = {
      ...before,
      combinations: before.combinations.map((c) => (c.index === 1 ? { ...c, status: "running" as const } : c))
    }
    const next = {
      ...before,
      status: "stopped" as const,
      combinations: before.combinations.map((c) => (c.index === 0 ? { ...c, status: "done" as const } : c))
    }
    const merged = mergeOwn(latest, before, next, 0)
    expect(merged.combinations.map((c) => c.status)).toEqual(["done", "running"])
    // a sweep-wide field the combination changed is taken; one it did not is the latest's
    expect(merged.status).toBe("stopped")
    expect(
      mergeOwn({ ...latest, status: "cancelled" }, before, { ...next, status: before.status }, 0).status
    ).toBe("cancelled")
  })

  it("runs planned: every point's repeats", () => {
    expect(runCounts(initialSweep(e, "2026-01-01T00:00:00.000Z"))).toEqual({ planned: 8, done: 0 })
  })
})
