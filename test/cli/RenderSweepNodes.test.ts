/**
 * `sweep show` and the report name each combination's node(s)
 * (docs/design.md#sweeps-at-cluster-scale), the sweep's hardware class and the nodes it left alone;
 * a sweep that recorded no node renders as before.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { renderSweepText } from "../../src/cli/RenderSweep.js"
import { renderSweepReport } from "../../src/cli/RenderSweepReport.js"
import type { NodeRecord } from "../../src/domain/Sweep.js"
import { runSweep } from "../../src/programs/Sweep.js"
import { model, setup, sweepExperiment, sweepOptions } from "../support/sweep.js"

const node = (name: string, gpus: number): NodeRecord => ({
  hostname: name,
  node_id: name
    .charCodeAt(name.length - 1)
    .toString(16)
    .repeat(28),
  gpu_count: gpus,
  gpu_model: "NVIDIA L4",
  driver: "550.54.15",
  cpu_model: "AMD EPYC",
  cpu_count: 8
})

const sweep = (nodes: boolean) =>
  runSweep(
    sweepOptions(
      "/s/nodes",
      sweepExperiment({ load: { kind: "points", name: "c", values: ["1", "4"] }, gpus: 1 }),
      { request: { gpus: 1, servingSlot: true }, parallel: 2 }
    )
  ).pipe(
    Effect.map((r) => r.doc),
    Effect.provide(
      setup({
        run: model,
        // start 2 lands on a 2-GPU node: left alone; the rest alternate gpu-a, gpu-c
        node: nodes
          ? (_, n) => (n === 2 ? node("gpu-b", 2) : n % 2 === 1 ? node("gpu-a", 1) : node("gpu-c", 1))
          : undefined
      })
    )
  )

describe("the node(s) of each combination", () => {
  it.effect("sweep show: a node(s) column, the hardware class, the nodes left alone", () =>
    Effect.gen(function* () {
      const doc = yield* sweep(true)
      const text = renderSweepText("/s/nodes", doc)
      assert.include(text, "hardware class: 1 × NVIDIA L4 per node")
      assert.include(text, "left alone (another hardware class): gpu-b (2 GPU NVIDIA L4)")
      const table = text.slice(text.indexOf("per combination:"))
      assert.match(table, /node\(s\)/)
      for (const c of doc.combinations) {
        const ran = c.engine_starts.filter((s) => s.outcome === "ready").map((s) => s.node!.hostname!)
        assert.lengthOf(ran, 1)
        assert.match(table, new RegExp(`\\n${c.index} .*${ran[0]}`))
      }
      assert.notMatch(table, /gpu-b/)
      const html = renderSweepReport([{ name: "s", doc }], "2026-12-01T00:00:00.000Z")
      assert.include(html, "<th>node(s)</th>")
      assert.match(html, /<td>gpu-[ac]<\/td><td>1<\/td>/)
    })
  )

  it.effect("a sweep that recorded no node: no node column", () =>
    Effect.gen(function* () {
      const doc = yield* sweep(false)
      assert.notInclude(renderSweepText("/s/nodes", doc), "node(s)")
      assert.notInclude(renderSweepReport([{ name: "s", doc }], "2026-12-01T00:00:00.000Z"), "node(s)")
    })
  )
})
