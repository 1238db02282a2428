/**
 * The live RayCli's probe asks the cluster's GCS first and runs `ray status` only when the GCS
 * does not answer (a Python start saved on every lease); and the scripted test layer records its
 * calls. A stand-in `ray` executable records whether it ran.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { ClusterUnreachable } from "../../src/domain/Errors.js"
import * as ClusterInspector from "../../src/services/ClusterInspector.js"
import * as RayCli from "../../src/services/RayCli.js"
import * as Settings from "../../src/services/Settings.js"
import { idleHead } from "../../src/Testing.js"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-raycli-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

/** A `ray` that logs its argv and exits with `code`. */
const fakeRay = (name: string, code: number) => {
  const file = path.join(dir, name)
  fs.writeFileSync(file, `#!/bin/sh\necho "$@" >> '${file}.log'\nexit ${code}\n`, { mode: 0o755 })
  return { file, calls: () => (fs.existsSync(`${file}.log`) ? fs.readFileSync(`${file}.log`, "utf8") : "") }
}

const live = (ray: string, inspector: ClusterInspector.TestOptions) =>
  RayCli.layer.pipe(
    Layer.provide(ClusterInspector.layerTest(inspector)),
    Layer.provide(Settings.layerTest({ rayExecutable: ray, env: process.env })),
    Layer.provide(NodeContext.layer)
  )

const head = idleHead()

describe("RayCli.layer probe", () => {
  it.live("a GCS that answers is the answer: `ray status` is not run", () => {
    const ray = fakeRay("ray-unused", 0)
    return Effect.gen(function* () {
      const probe = yield* (yield* RayCli.RayCli).probe()
      assert.isTrue(probe.answered)
      assert.include(probe.output, head.gcsAddress)
      assert.strictEqual(ray.calls(), "")
    }).pipe(Effect.provide(live(ray.file, { snapshots: { [head.gcsAddress]: head } })))
  })

  it.live("a silent GCS falls back to `ray status`, which keeps the last word", () => {
    const answering = fakeRay("ray-answers", 0)
    const silent = fakeRay("ray-silent", 1)
    const unreachable = new ClusterUnreachable({ address: head.gcsAddress, detail: "UNAVAILABLE" })
    return Effect.gen(function* () {
      const yes = yield* Effect.flatMap(RayCli.RayCli, (cli) => cli.probe()).pipe(
        Effect.provide(live(answering.file, { snapshots: { [head.gcsAddress]: unreachable } }))
      )
      assert.isTrue(yes.answered)
      assert.strictEqual(answering.calls().trim(), "status")
      const no = yield* Effect.flatMap(RayCli.RayCli, (cli) => cli.probe()).pipe(
        Effect.provide(live(silent.file, { snapshots: {} }))
      )
      assert.isFalse(no.answered)
      assert.strictEqual(no.exitCode, 1)
      assert.strictEqual(silent.calls().trim(), "status")
    })
  })
})

describe("RayCli.layerTest", () => {
  it.effect("answers from its script and records every call", () => {
    const calls: Array<RayCli.RayCliCall> = []
    return Effect.gen(function* () {
      const cli = yield* RayCli.RayCli
      assert.isFalse((yield* cli.probe()).answered)
      yield* cli.stop()
      const spec = { port: 6379, numCpus: 2, numGpus: 0, resources: { serving_slot: 1 }, timeoutSec: 5 }
      yield* cli.start(spec)
      assert.deepStrictEqual(
        calls.map((c) => c.op),
        ["probe", "stop", "start"]
      )
      assert.deepStrictEqual(calls[2]?.spec, spec)
    }).pipe(
      Effect.provide(
        RayCli.layerTest(
          { probe: () => ({ answered: false, exitCode: 1, timedOut: false, output: "", elapsedMs: 1 }) },
          calls
        )
      )
    )
  })
})
