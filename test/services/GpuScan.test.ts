/**
 * `ray doctor`'s view of who holds this host's GPUs (docs/design.md#clean-gpus): the live GpuScan asks
 * python/hyperloom/gpus.py (fake `nvidia-smi` first on PATH printing the recorded output); the
 * doctor's report groups the holders per GPU in `gpu_holders` beside every field of the CLI contract, and its text
 * names each. The device-file half on a real head: test/ray/gpus.test.ts.
 */

import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { renderDoctor } from "../../src/cli/Render.js"
import { Inspect, Testing } from "../../src/index.js"
import { GpuScan, hasGpuDevices, layer } from "../../src/services/GpuScan.js"
import * as Settings from "../../src/services/Settings.js"
import { type FakeGpuTools, fakeGpuTools, fixture } from "../support/fakeGpuTools.js"
import { rayPython } from "../support/ray.js"

let tools: FakeGpuTools
let empty = ""
beforeAll(() => {
  tools = fakeGpuTools(["nvidia-smi"])
  empty = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-nodev-"))
})
afterAll(() => {
  tools.remove()
  fs.rmSync(empty, { recursive: true, force: true })
})

const live = (PATH: string) =>
  layer.pipe(
    Layer.provide(
      Settings.layerTest({
        env: { PATH },
        ...(fs.existsSync(rayPython) ? { rayPython } : {})
      })
    ),
    Layer.provide(NodeContext.layer)
  )

describe("GpuScan (live: python/hyperloom/gpus.py)", () => {
  it.effect("reads the holders the vendor tool lists", () =>
    Effect.gen(function* () {
      tools.setApps(fixture("nvidia-smi-compute-apps.csv"))
      const r = yield* (yield* GpuScan).scan
      assert.isTrue(r.scanned)
      assert.isNull(r.error)
      assert.deepStrictEqual(
        r.holders.map((h) => [h.pid, h.gpu, h.memory_mib]),
        [
          [48213, 0, 20480],
          [51990, 0, null],
          [48213, 1, 20478],
          [51007, 1, 71234]
        ]
      )
    }).pipe(Effect.provide(live(tools.path)))
  )

  it.effect("a host with no GPU device file and no vendor tool is not scanned (no Python started)", () =>
    Effect.gen(function* () {
      assert.isFalse(hasGpuDevices({ PATH: empty }, empty))
      assert.isTrue(hasGpuDevices({ PATH: tools.dir }, empty))
      const r = yield* (yield* GpuScan).scan
      assert.deepStrictEqual(r, { scanned: false, holders: [], unreadable: 0, error: null })
    }).pipe(Effect.provide(live(empty)))
  )
})

describe("ray doctor's gpu_holders", () => {
  const holder = {
    pid: 4242,
    gpu: 1,
    via: "/dev/nvidia1, nvidia-smi",
    user: "alice",
    command: "python3 x.py",
    memory_mib: 900,
    alive: true
  }
  it.effect("per GPU, beside every field of the CLI contract; the text names each holder", () =>
    Effect.gen(function* () {
      const report = yield* Inspect.doctor({ gpus: 1, servingSlot: true })
      for (const name of ["feasible", "infeasible", "repair", "warnings"]) assert.property(report, name)
      assert.deepStrictEqual(report.gpu_holders, {
        scanned: true,
        by_gpu: { "1": [holder], all: [{ ...holder, pid: 7, gpu: null, via: "/dev/kfd" }] },
        unreadable: 2,
        error: null
      })
      const text = renderDoctor(report)
      assert.include(text, "gpus     held (2 process(es) of other users unreadable):")
      assert.include(
        text,
        "  GPU 1: pid 4242 (user alice, python3 x.py, 900 MiB, via /dev/nvidia1, nvidia-smi)"
      )
      assert.include(text, "  all AMD GPUs (/dev/kfd): pid 7")
    }).pipe(
      Effect.provide(
        Testing.layer({
          gpuScan: {
            scanned: true,
            holders: [holder, { ...holder, pid: 7, gpu: null, via: "/dev/kfd" }],
            unreadable: 2
          }
        })
      )
    )
  )

  it.effect("none held, or nothing to scan, is said so", () =>
    Effect.gen(function* () {
      const report = yield* Inspect.doctor({ gpus: 1, servingSlot: true })
      assert.include(renderDoctor(report), "gpus     no GPU device file or vendor tool on this host")
    }).pipe(Effect.provide(Testing.layer()))
  )
})
