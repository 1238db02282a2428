/**
 * The children services start (`ray`, the GPU scan's Python) get the environment the Settings
 * layer read (settings.env), never this process's own: a variable only `process.env` has does not
 * reach them, one only the layer has does. Stand-in executables write what they were given.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as ClusterInspector from "../../src/services/ClusterInspector.js"
import * as GpuScan from "../../src/services/GpuScan.js"
import * as RayCli from "../../src/services/RayCli.js"
import * as Settings from "../../src/services/Settings.js"
import { runBounded } from "../../src/services/Subprocess.js"
import { type FakeGpuTools, fakeGpuTools } from "../support/fakeGpuTools.js"

const PROCESS_ONLY = "HYPERLOOM_T_PROCESS_ONLY"
let dir = ""
let tools: FakeGpuTools
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-subprocess-"))
  tools = fakeGpuTools(["nvidia-smi"])
  process.env[PROCESS_ONLY] = "from-process-env"
  process.env.CUDA_VISIBLE_DEVICES = "0"
})
afterAll(() => {
  delete process.env[PROCESS_ONLY]
  delete process.env.CUDA_VISIBLE_DEVICES
  tools.remove()
  fs.rmSync(dir, { recursive: true, force: true })
})

/** The environment a child was given, as `env -0` wrote it to `file`. */
const envOf = (file: string): Record<string, string> =>
  Object.fromEntries(
    fs
      .readFileSync(file, "utf8")
      .split("\0")
      .filter((l) => l !== "")
      .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)])
  )

/** An executable that writes its environment to `<file>.env`, prints `stdout` and exits 0. */
const recorder = (name: string, stdout = "") => {
  const file = path.join(dir, name)
  fs.writeFileSync(file, `#!/bin/sh\nenv -0 > '${file}.env'\nprintf '%s' '${stdout}'\n`, { mode: 0o755 })
  return { file, env: () => envOf(`${file}.env`) }
}

const layerEnv = { PATH: "/usr/bin:/bin", HYPERLOOM_T_LAYER_ONLY: "from-the-layer" }

describe("runBounded's environment", () => {
  it.live("is the one given, whole: nothing of process.env is inherited; unsetEnv removes from it", () =>
    Effect.gen(function* () {
      const child = recorder("plain")
      yield* runBounded([child.file], { timeoutSec: 10, env: layerEnv })
      assert.deepInclude(child.env(), layerEnv)
      assert.notProperty(child.env(), PROCESS_ONLY)
      yield* runBounded([child.file], {
        timeoutSec: 10,
        env: { ...layerEnv, CUDA_VISIBLE_DEVICES: "1" },
        unsetEnv: ["CUDA_VISIBLE_DEVICES"]
      })
      assert.strictEqual(child.env().HYPERLOOM_T_LAYER_ONLY, "from-the-layer")
      assert.notProperty(child.env(), PROCESS_ONLY)
      assert.notProperty(child.env(), "CUDA_VISIBLE_DEVICES")
    }).pipe(Effect.provide(NodeContext.layer))
  )
})

describe("the services' children get settings.env", () => {
  it.live("RayCli.layer: `ray` gets the layer's environment (no device mask, usage stats off)", () => {
    const ray = recorder("ray")
    return Effect.gen(function* () {
      yield* (yield* RayCli.RayCli).stop(10)
      const env = ray.env()
      assert.strictEqual(env.HYPERLOOM_T_LAYER_ONLY, "from-the-layer")
      assert.strictEqual(env.RAY_USAGE_STATS_ENABLED, "0")
      assert.notProperty(env, PROCESS_ONLY)
      assert.notProperty(env, "CUDA_VISIBLE_DEVICES")
    }).pipe(
      Effect.provide(
        RayCli.layer.pipe(
          Layer.provide(ClusterInspector.layerTest({ snapshots: {} })),
          Layer.provide(
            Settings.layerTest({
              rayExecutable: ray.file,
              env: { ...layerEnv, CUDA_VISIBLE_DEVICES: "1" }
            })
          ),
          Layer.provide(NodeContext.layer)
        )
      )
    )
  })

  it.live("GpuScan.layer: the scan's Python gets the layer's environment", () => {
    const python = recorder("python", '{"holders":[],"unreadable":0}')
    const env = { ...layerEnv, PATH: `${tools.path}` }
    return Effect.gen(function* () {
      const report = yield* (yield* GpuScan.GpuScan).scan
      assert.isNull(report.error)
      assert.isTrue(report.scanned)
      assert.strictEqual(python.env().HYPERLOOM_T_LAYER_ONLY, "from-the-layer")
      assert.notProperty(python.env(), PROCESS_ONLY)
    }).pipe(
      Effect.provide(
        GpuScan.layer.pipe(
          Layer.provide(Settings.layerTest({ rayPython: python.file, env })),
          Layer.provide(NodeContext.layer)
        )
      )
    )
  })
})
