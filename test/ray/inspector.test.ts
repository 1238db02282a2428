/**
 * ClusterInspector and ProcFs against real Ray heads (Ray core from the project's venv).
 * Every test that needs a particular cluster arranges its own and tears it down; the driver, the
 * detached actor and the detached placement group only add to one head (each looks only at what it
 * added), so they share one, started in beforeAll, with the check of a lone head's totals, which
 * runs first. Run under the shared lock
 * (`flock /tmp/hyperloom-dev-ray.lock npx vitest run --project ray test/ray/inspector.test.ts`).
 */
import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Either, Layer, ManagedRuntime } from "effect"
import { afterAll, afterEach, assert, beforeAll, beforeEach, describe, it } from "vitest"
import { parseRayAddress } from "../../src/domain/Address.js"
import { gcsServers, raylets } from "../../src/domain/Daemons.js"
import { type ClusterSnapshot, heldResources, totalResources } from "../../src/domain/Snapshot.js"
import * as ClusterInspector from "../../src/services/ClusterInspector.js"
import * as GcsClient from "../../src/services/GcsClient.js"
import * as ProcFs from "../../src/services/ProcFs.js"
import * as Settings from "../../src/services/Settings.js"
import { runCli } from "../support/cli.js"
import { deadPort } from "../support/fakeGcs.js"
import {
  type Head,
  prepareRay,
  RAY_TMP,
  rayBin,
  startDetachedActor,
  startDetachedPlacementGroup,
  startDriver,
  startHead,
  startWorker,
  teardownRay,
  waitFor
} from "../support/ray.js"

/** The live inspector (and /proc) for one test, with its own scope. */
const inspector = (settings: Partial<Settings.SettingsShape> = {}) => {
  const layer = Layer.merge(
    ClusterInspector.layer.pipe(
      Layer.provide(GcsClient.layer),
      Layer.provide(Layer.merge(Settings.layerTest(settings), ProcFs.layer))
    ),
    ProcFs.layer
  )
  const rt = ManagedRuntime.make(layer)
  const run = <A, E>(effect: Effect.Effect<A, E, ClusterInspector.ClusterInspector | ProcFs.ProcFs>) =>
    rt.runPromise(Effect.either(effect))
  return {
    resolve: () => run(Effect.flatMap(ClusterInspector.ClusterInspector, (ci) => ci.resolve)),
    snapshot: (address: string) =>
      run(Effect.flatMap(ClusterInspector.ClusterInspector, (ci) => ci.snapshot(address))),
    daemons: async () => Either.getOrThrow(await run(Effect.flatMap(ProcFs.ProcFs, (p) => p.rayDaemons))),
    dispose: () => rt.dispose()
  }
}

type Inspector = ReturnType<typeof inspector>

const ok = async (p: Promise<Either.Either<ClusterSnapshot, { message: string }>>) => {
  const r = await p
  if (Either.isLeft(r)) throw new Error(r.left.message)
  return r.right
}

const timed = async <A>(f: () => Promise<A>) => {
  const t0 = performance.now()
  const value = await f()
  return { value, ms: performance.now() - t0 }
}

let ci: Inspector | undefined
const open = (settings: Partial<Settings.SettingsShape> = {}) => {
  ci = inspector(settings)
  return ci
}

describe("ClusterInspector on a real Ray head", () => {
  beforeEach(async () => {
    await prepareRay()
  })
  afterEach(async () => {
    await ci?.dispose()
    ci = undefined
    await teardownRay()
  })

  it("TMPDIR=/x ray start --head: hyperloom reads the current-cluster file `ray status` reads (/x/ray), not /tmp/ray", async () => {
    const x = fs.mkdtempSync(path.join(os.tmpdir(), "hl-tmpdir-"))
    // A stale file where hyperloom used to look, naming a dead address.
    fs.mkdirSync(RAY_TMP, { recursive: true })
    const stale = path.join(RAY_TMP, "ray_current_cluster")
    fs.writeFileSync(stale, `127.0.0.1:${await deadPort()}`)
    try {
      execFileSync(
        rayBin,
        [
          "start",
          "--head",
          "--port=6396",
          "--num-cpus=1",
          "--disable-usage-stats",
          "--include-dashboard=false"
        ],
        { env: { ...process.env, TMPDIR: x, RAY_USAGE_STATS_ENABLED: "0" }, stdio: "ignore", timeout: 90_000 }
      )
      const rayFile = fs.readFileSync(path.join(x, "ray", "ray_current_cluster"), "utf8").trim()
      assert.match(rayFile, /:6396$/)
      // `ray status` under the same TMPDIR finds the cluster through that file.
      const rayStatus = spawnSync(rayBin, ["status"], { env: { ...process.env, TMPDIR: x }, timeout: 60_000 })
      assert.strictEqual(rayStatus.status, 0, String(rayStatus.stderr))
      const r = await runCli(["ray", "status", "--json"], { env: { TMPDIR: x } })
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(r.json.source, "current_cluster_file")
      assert.strictEqual(r.json.address, rayFile)
    } finally {
      fs.rmSync(stale, { force: true })
      spawnSync(rayBin, ["stop", "--force"], { env: { ...process.env, TMPDIR: x }, timeout: 90_000 })
      fs.rmSync(x, { recursive: true, force: true })
    }
  })

  it("a worker raylet joined to the head: two nodes, two raylets of one cluster", async () => {
    const head = await startHead({ numCpus: 1 })
    await startWorker(head, { numCpus: 1 })
    const ci = open()
    const s = await waitFor("two alive nodes", async () => {
      const snap = await ok(ci.snapshot(head.gcsAddress))
      return snap.nodes.filter((n) => n.state === "ALIVE").length === 2 ? snap : undefined
    })
    assert.deepStrictEqual(s.nodes.map((n) => n.isHead).sort(), [false, true])
    const daemons = await ci.daemons()
    const rs = raylets(daemons)
    assert.strictEqual(rs.length, 2)
    assert.deepStrictEqual(rs.map((r) => r.nodeId).sort(), s.nodes.map((n) => n.nodeId).sort())
    assert.deepStrictEqual(
      rs.map((r) => r.gcsAddress),
      [head.gcsAddress, head.gcsAddress]
    )
    assert.strictEqual(rs.filter((r) => r.isHead).length, 1)
    assert.strictEqual(gcsServers(daemons).length, 1)
    // one cluster: resolving from raylets alone finds just it
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "hl-raytmp-"))
    const viaRaylets = inspector({ rayTempDir: tmp })
    try {
      const r = await viaRaylets.resolve()
      assert.isTrue(Either.isRight(r))
      if (Either.isRight(r))
        assert.deepStrictEqual([r.right.gcsAddress, r.right.source], [head.gcsAddress, "raylet_cmdline"])
    } finally {
      await viaRaylets.dispose()
      fs.rmSync(tmp, { recursive: true, force: true })
    }
  })

  it("a second head on another port: MultipleClusters from the raylets when there is no current-cluster file", async () => {
    const first = await startHead({ port: 6379, numCpus: 1 })
    const second: Head = await startHead({ port: 6380, numCpus: 1 })
    // Ray's own file names the last one started (and exists after a start: point elsewhere to go without it)
    assert.strictEqual(fs.readFileSync(path.join(RAY_TMP, "ray_current_cluster"), "utf8"), second.gcsAddress)
    const withFile = open()
    const viaFile = await withFile.resolve()
    assert.isTrue(Either.isRight(viaFile) && viaFile.right.gcsAddress === second.gcsAddress)

    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "hl-raytmp-"))
    const noFile = inspector({ rayTempDir: tmp })
    try {
      const r = await noFile.resolve()
      assert.isTrue(Either.isLeft(r))
      if (Either.isRight(r)) return
      assert.strictEqual(r.left._tag, "MultipleClusters")
      if (r.left._tag !== "MultipleClusters") return
      assert.deepStrictEqual(r.left.addresses, [first.gcsAddress, second.gcsAddress])
      // an explicit address picks one, and each GCS answers for its own cluster
      const explicit = inspector({
        rayTempDir: tmp,
        rayAddress: Either.getOrThrow(parseRayAddress(first.gcsAddress))
      })
      try {
        const e = await explicit.resolve()
        assert.isTrue(Either.isRight(e) && e.right.explicit && e.right.gcsAddress === first.gcsAddress)
      } finally {
        await explicit.dispose()
      }
    } finally {
      await noFile.dispose()
      fs.rmSync(tmp, { recursive: true, force: true })
    }
    const a = await ok(withFile.snapshot(first.gcsAddress))
    const b = await ok(withFile.snapshot(second.gcsAddress))
    assert.notStrictEqual(a.clusterId, b.clusterId)
    assert.strictEqual(a.nodes.length, 1)
    assert.strictEqual(b.nodes.length, 1)
    const daemons = await withFile.daemons()
    assert.deepStrictEqual(
      gcsServers(daemons)
        .map((g) => g.port)
        .sort(),
      [6379, 6380]
    )
  })

  it("a dead address fails fast, also on a warm connection to a head that was stopped", async () => {
    const head = await startHead({ numCpus: 1 })
    const ci = open()
    await ok(ci.snapshot(head.gcsAddress))
    // nothing on this port at all
    const dead = `${head.host}:${await deadPort()}`
    const cold = await timed(() => ci.snapshot(dead))
    assert.isTrue(Either.isLeft(cold.value))
    if (Either.isLeft(cold.value))
      assert.match(cold.value.left.detail, /^nothing answers \(is Ray running\?\)/)
    assert.isBelow(cold.ms, 1000)
    // the head goes away under a warm client
    await teardownRay()
    const gone = await timed(() => ci.snapshot(head.gcsAddress))
    assert.isTrue(Either.isLeft(gone.value))
    if (Either.isLeft(gone.value)) {
      assert.strictEqual(gone.value.left._tag, "ClusterUnreachable")
      assert.strictEqual(gone.value.left.address, head.gcsAddress)
    }
    assert.isBelow(gone.ms, 1000)
  })
})

describe("ClusterInspector on one shared head (2 CPUs, 2 GPUs, custom_x 3)", () => {
  let head: Head
  beforeAll(async () => {
    await prepareRay()
    head = await startHead({ numGpus: 2, numCpus: 2, resources: { custom_x: 3 } })
  })
  afterEach(async () => {
    await ci?.dispose()
    ci = undefined
  })
  afterAll(async () => {
    await teardownRay()
  })

  // First: it checks the head as started (nothing held, no actor).
  it("a lone head with declared GPUs and a custom resource: totals, node id as the raylet's --node_id", async () => {
    const ci = open()
    const resolved = await ci.resolve()
    assert.isTrue(Either.isRight(resolved))
    if (Either.isLeft(resolved)) return
    assert.deepStrictEqual(resolved.right, {
      gcsAddress: head.gcsAddress,
      host: head.host,
      port: head.port,
      explicit: false,
      source: "current_cluster_file"
    })
    const s = await waitFor("the node's resources", async () => {
      const snap = await ok(ci.snapshot(head.gcsAddress))
      return snap.resources.length === 1 ? snap : undefined
    })
    assert.match(s.clusterId, /^[0-9a-f]{56}$/)
    assert.strictEqual(s.rayVersion, "2.58.0")
    assert.strictEqual(s.nodes.length, 1)
    const node = s.nodes[0]!
    assert.deepStrictEqual([node.state, node.isHead, node.address], ["ALIVE", true, head.host])
    const totals = totalResources(s)
    assert.strictEqual(totals.GPU, 2)
    assert.strictEqual(totals.CPU, 2)
    assert.strictEqual(totals.custom_x, 3)
    assert.notProperty(totals, "serving_slot")
    assert.strictEqual(node.resourcesTotal.GPU, 2)
    assert.deepStrictEqual(s.resources[0]!.available, s.resources[0]!.total)
    assert.deepStrictEqual(heldResources(s), [])
    assert.deepStrictEqual(s.actors, [])

    // /proc: one gcs_server on the head's port, one head raylet whose --node_id is the GCS's node id
    const daemons = await ci.daemons()
    assert.deepStrictEqual(
      gcsServers(daemons).map((g) => g.port),
      [head.port]
    )
    const [raylet] = raylets(daemons)
    assert.strictEqual(raylets(daemons).length, 1)
    assert.strictEqual(raylet?.nodeId, node.nodeId)
    assert.strictEqual(raylet?.gcsAddress, head.gcsAddress)
    assert.isTrue(raylet?.isHead)
    assert.strictEqual(s.resources[0]!.nodeId, node.nodeId)

    // the GCS listens on every interface: 127.0.0.1 reads the same cluster
    const local = await ok(ci.snapshot(`127.0.0.1:${head.port}`))
    assert.strictEqual(local.clusterId, s.clusterId)

    // warm calls are cheap
    const warm = await timed(() => ok(ci.snapshot(head.gcsAddress)))
    assert.isBelow(warm.ms, 100)
  })

  it("a live driver is a job that is not dead, with its pid; it turns dead when killed", async () => {
    const ci = open()
    const driver = await startDriver(head)
    const jobId = driver.ready.split(" ")[1]!
    assert.match(jobId, /^[0-9a-f]+$/)
    const s = await ok(ci.snapshot(head.gcsAddress))
    const job = s.jobs.find((j) => j.jobId === jobId)
    assert.isDefined(job, `job ${jobId} in ${JSON.stringify(s.jobs)}`)
    assert.strictEqual(job?.isDead, false)
    assert.strictEqual(job?.driverPid, driver.pid)
    assert.strictEqual(job?.driverIp, head.host)
    driver.kill()
    await waitFor("the driver's job to turn dead", async () => {
      const after = await ok(ci.snapshot(head.gcsAddress))
      return after.jobs.find((j) => j.jobId === jobId)?.isDead === true || undefined
    })
  })

  it("a detached actor is ALIVE and detached after its driver exited", async () => {
    const ci = open()
    const name = await startDetachedActor(head)
    const s = await waitFor("the detached actor to be ALIVE", async () => {
      const snap = await ok(ci.snapshot(head.gcsAddress))
      return snap.actors.find((a) => a.name === name)?.state === "ALIVE" ? snap : undefined
    })
    const actor = s.actors.find((a) => a.name === name)!
    assert.isTrue(actor.isDetached)
    assert.strictEqual(actor.className, "Keeper")
    assert.match(actor.actorId, /^[0-9a-f]{32}$/)
    assert.strictEqual(actor.nodeId, s.nodes[0]!.nodeId)
    assert.isAbove(actor.pid, 0)
    // its driver is gone: its job is dead, so jobs alone would not show the actor
    const job = s.jobs.find((j) => j.jobId === actor.jobId)
    assert.strictEqual(job?.isDead, true)
  })

  it("a detached placement group holds its resource: lower (or absent) in available", async () => {
    const ci = open()
    await startDetachedPlacementGroup(head, { CPU: 1 })
    const s = await waitFor("the held CPU to show", async () => {
      const snap = await ok(ci.snapshot(head.gcsAddress))
      return heldResources(snap).some((h) => h.resource === "CPU") ? snap : undefined
    })
    const r = s.resources[0]!
    assert.strictEqual(r.total.CPU, 2)
    assert.strictEqual(r.available.CPU ?? 0, 1)
    assert.deepStrictEqual(
      heldResources(s)
        .filter((h) => h.resource === "CPU")
        .map((h) => [h.nodeId, h.held]),
      [[s.nodes[0]!.nodeId, 1]]
    )
    // GetAllPlacementGroup: the group itself, created, detached, its bundle placed on the head.
    assert.deepStrictEqual(
      s.placementGroups.map((g) => [
        g.state,
        g.isDetached,
        g.strategy,
        g.bundles.map((b) => [b.resources, b.nodeId])
      ]),
      [["CREATED", true, "PACK", [[{ CPU: 1 }, s.nodes[0]!.nodeId]]]]
    )
    assert.match(s.placementGroups[0]!.groupId, /^[0-9a-f]{36}$/)
  })
})
