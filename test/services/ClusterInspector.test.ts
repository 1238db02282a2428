/**
 * ClusterInspector: which cluster (RAY_ADDRESS, the current-cluster file under Ray's temp dir, the
 * raylets in /proc) and its snapshots, answered through the GcsClient it is given. The GCS
 * transport and decoding are GcsClient's (test/services/GcsClient.test.ts).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import { parseRayAddress } from "../../src/domain/Address.js"
import { ClusterUnreachable, NoClusterFound } from "../../src/domain/Errors.js"
import type { ClusterSnapshot } from "../../src/domain/Snapshot.js"
import * as ClusterInspector from "../../src/services/ClusterInspector.js"
import * as GcsClient from "../../src/services/GcsClient.js"
import * as ProcFs from "../../src/services/ProcFs.js"
import * as Settings from "../../src/services/Settings.js"
import { fixturesDir } from "../support/fakeGcs.js"

/** The live inspector over the given settings, /proc and GCS (nothing answers by default). */
const liveLayer = (
  settings: Partial<Settings.SettingsShape> = {},
  procFs: Layer.Layer<ProcFs.ProcFs> = ProcFs.layerTest([]),
  gcs: Layer.Layer<GcsClient.GcsClient> = GcsClient.layerTest()
) => ClusterInspector.layer.pipe(Layer.provide(Layer.mergeAll(Settings.layerTest(settings), procFs, gcs)))

const snapshot = (gcsAddress: string, clusterId: string): ClusterSnapshot => ({
  gcsAddress,
  clusterId,
  nodes: [],
  actors: [],
  jobs: [],
  resources: [],
  demands: [],
  placementGroups: []
})

describe("ClusterInspector.resolve", () => {
  const made: Array<string> = []
  const tmp = () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-raytmp-"))
    made.push(dir)
    return dir
  }
  afterAll(() => {
    for (const dir of made) fs.rmSync(dir, { recursive: true, force: true })
  })
  const tree = (s: string) => ProcFs.layerWith({ root: path.join(fixturesDir, "proc", s) })
  const address = (raw: string | undefined) => Either.getOrThrow(parseRayAddress(raw))
  const resolveWith = (settings: Partial<Settings.SettingsShape>, procFs: Layer.Layer<ProcFs.ProcFs>) =>
    Effect.flatMap(ClusterInspector.ClusterInspector, (ci) => ci.resolve).pipe(
      Effect.provide(liveLayer(settings, procFs))
    )

  it.effect("auto: the current-cluster file (trimmed), else the raylets' single --gcs-address", () =>
    Effect.gen(function* () {
      const dir = tmp()
      const fromRaylets = yield* resolveWith({ rayTempDir: dir }, tree("head-worker"))
      assert.deepStrictEqual(fromRaylets, {
        gcsAddress: "192.0.2.2:6379",
        host: "192.0.2.2",
        port: 6379,
        explicit: false,
        source: "raylet_cmdline"
      })
      fs.writeFileSync(path.join(dir, "ray_current_cluster"), "192.0.2.2:6380")
      const fromFile = yield* resolveWith({ rayTempDir: dir }, tree("head-worker"))
      assert.strictEqual(fromFile.gcsAddress, "192.0.2.2:6380")
      assert.strictEqual(fromFile.source, "current_cluster_file")
      // the file present: /proc is not even read
      const noProc = yield* resolveWith(
        { rayTempDir: dir },
        ProcFs.layerTest(new ProcFs.ProcUnreadable({ root: "/proc", detail: "EACCES: permission denied" }))
      )
      assert.strictEqual(noProc.gcsAddress, "192.0.2.2:6380")
    })
  )

  it.effect("auto without the file: two heads are MultipleClusters, none is NoClusterFound", () =>
    Effect.gen(function* () {
      const dir = tmp()
      const multi = yield* Effect.flip(resolveWith({ rayTempDir: dir }, tree("two-heads")))
      assert.strictEqual(multi._tag, "MultipleClusters")
      assert.deepStrictEqual(multi._tag === "MultipleClusters" ? multi.addresses : [], [
        "192.0.2.2:6379",
        "192.0.2.2:6380"
      ])
      const none = yield* Effect.flip(resolveWith({ rayTempDir: dir }, ProcFs.layerTest([])))
      assert.instanceOf(none, NoClusterFound)
      const unreadable = yield* Effect.flip(
        resolveWith(
          { rayTempDir: dir },
          ProcFs.layerTest(new ProcFs.ProcUnreadable({ root: "/proc", detail: "EACCES: permission denied" }))
        )
      )
      assert.instanceOf(unreadable, NoClusterFound)
      assert.include(unreadable.message, "EACCES")
    })
  )

  it.effect("explicit addresses: host:port as given, local reads the local cluster, ray:// refused", () =>
    Effect.gen(function* () {
      const dir = tmp()
      const hp = yield* resolveWith({ rayTempDir: dir, rayAddress: address("[::1]:6390") }, tree("two-heads"))
      assert.deepStrictEqual([hp.gcsAddress, hp.explicit, hp.source], ["[::1]:6390", true, "RAY_ADDRESS"])
      const local = yield* resolveWith({ rayTempDir: dir, rayAddress: address("local") }, tree("lone-head"))
      assert.deepStrictEqual(
        [local.gcsAddress, local.explicit, local.source],
        ["192.0.2.2:6379", true, "raylet_cmdline"]
      )
      const client = yield* Effect.flip(
        resolveWith({ rayTempDir: dir, rayAddress: address("ray://192.0.2.2:10001") }, tree("lone-head"))
      )
      assert.strictEqual(client._tag, "InvalidAddress")
      assert.include(client.message, "host:port")
    })
  )
})

describe("ClusterInspector.snapshot", () => {
  it.effect("answers through the GcsClient it is given: its snapshots and its failures, as they are", () =>
    Effect.gen(function* () {
      const ci = yield* ClusterInspector.ClusterInspector
      const s = yield* ci.snapshot("192.0.2.2:6379")
      assert.deepStrictEqual(s, snapshot("192.0.2.2:6379", "ab"))
      const e = yield* Effect.flip(ci.snapshot("192.0.2.2:6380"))
      assert.instanceOf(e, ClusterUnreachable)
      assert.strictEqual(e.detail, "head restarting")
    }).pipe(
      Effect.provide(
        liveLayer(
          {},
          undefined,
          GcsClient.layerTest({
            snapshots: {
              "192.0.2.2:6379": snapshot("192.0.2.2:6379", "ab"),
              "192.0.2.2:6380": new ClusterUnreachable({
                address: "192.0.2.2:6380",
                detail: "head restarting"
              })
            }
          })
        )
      )
    )
  )
})

describe("ClusterInspector.layerTest", () => {
  it.effect("serves the given resolution and snapshots, and errors", () =>
    Effect.gen(function* () {
      const ci = yield* ClusterInspector.ClusterInspector
      const r = yield* ci.resolve
      assert.strictEqual(r.gcsAddress, "192.0.2.2:6379")
      const s = yield* ci.snapshot("192.0.2.2:6379")
      assert.strictEqual(s.clusterId, "ab")
      const e = yield* Effect.flip(ci.snapshot("192.0.2.2:6380"))
      assert.strictEqual(e.detail, "head restarting")
      const unknown = yield* Effect.flip(ci.snapshot("192.0.2.2:1"))
      assert.match(unknown.detail, /nothing answers/)
    }).pipe(
      Effect.provide(
        ClusterInspector.layerTest({
          snapshots: {
            "192.0.2.2:6379": snapshot("192.0.2.2:6379", "ab"),
            "192.0.2.2:6380": new ClusterUnreachable({ address: "192.0.2.2:6380", detail: "head restarting" })
          }
        })
      )
    )
  )

  it.effect("a resolution error is served as a failure", () =>
    Effect.gen(function* () {
      const ci = yield* ClusterInspector.ClusterInspector
      const e = yield* Effect.flip(ci.resolve)
      assert.strictEqual(e._tag, "NoClusterFound")
    }).pipe(
      Effect.provide(ClusterInspector.layerTest({ resolved: new NoClusterFound({ detail: "nothing here" }) }))
    )
  )
})
