/**
 * Every repair guard, refusing on a real cluster arranged to break it: `ray doctor` names the
 * guard, `ray repair` fails with the marker and the reason, and no Ray process was killed.
 * And the one situation where the repair is allowed: a lone idle head without the slot.
 */
import { spawnSync } from "node:child_process"
import { afterAll, afterEach, assert, beforeAll, beforeEach, describe, it } from "@effect/vitest"
import { cleanEnv, cliPath, runCli } from "../support/cli.js"
import {
  daemonPids,
  type Head,
  prepareRay,
  projectRoot,
  runPython,
  startDetachedActor,
  startDetachedPlacementGroup,
  startDriver,
  startHead,
  startWorker,
  teardownRay,
  waitFor
} from "../support/ray.js"

const PORT = 6391

const guard = (doctor: any, id: string) => {
  const g = doctor.repair.guards.find((x: any) => x.id === id)
  assert.isDefined(g, `guard ${id} missing from ${JSON.stringify(doctor.repair.guards)}`)
  return g
}

/** The failing guards' ids. */
const failing = (doctor: any): string[] =>
  doctor.repair.guards.filter((g: any) => !g.ok).map((g: any) => g.id)

/** doctor says the repair is refused by `id` (among others allowed), repair refuses and kills nothing. */
const expectRefused = async (
  id: string,
  env: Record<string, string> = {},
  extraArgs: string[] = [],
  // A multi-node run's doctor gives the group's verdict (docs/design.md#group-feasibility): one
  // node, two wanted.
  doctorReason = "no_serving_slot"
) => {
  const doctor = await runCli(["ray", "doctor", "--json", ...extraArgs], { env })
  assert.strictEqual(doctor.code, 7, doctor.stderr)
  assert.isFalse(doctor.json.feasible)
  assert.strictEqual(doctor.json.infeasible.reason, doctorReason)
  assert.isFalse(doctor.json.repair.allowed)
  const g = guard(doctor.json, id)
  assert.isFalse(g.ok)
  assert.isString(g.reason)
  const before = daemonPids()
  const repair = await runCli(["ray", "repair", "--json", ...extraArgs], { env })
  assert.strictEqual(repair.code, 7, repair.stderr)
  const message: string = repair.json.error.message
  assert.isTrue(
    message.startsWith("ray_cluster_infeasible: existing Ray head has no serving_slot resource; "),
    message
  )
  assert.include(message, `; not restarting it automatically: `)
  assert.include(message, g.reason)
  assert.deepStrictEqual(daemonPids(), before, "a refused repair must not kill any Ray process")
  return doctor.json
}

/**
 * The guards that a plain head refuses by the run's own settings alone (an explicit address, a
 * multi-node run, a /proc that hides processes) share one head with the lone-idle check, which runs
 * first: none of them changes the head (a refused repair kills nothing: expectRefused checks it),
 * and each starts by checking that it is still the same head, lone and idle (every guard holds).
 */
describe("repair guards on one shared plain head", () => {
  let head: Head
  let daemons: ReturnType<typeof daemonPids>
  beforeAll(async () => {
    await prepareRay()
    head = await startHead({ port: PORT })
    daemons = daemonPids()
  })
  beforeEach(async () => {
    assert.deepStrictEqual(daemonPids(), daemons, "the shared head is the one started for these tests")
    const idle = await runCli(["ray", "doctor", "--json"])
    assert.deepStrictEqual(failing(idle.json), [], "the shared head is still a lone idle head")
  })
  afterAll(async () => {
    await teardownRay()
  })

  it("a lone idle head without the slot: infeasible, repair allowed, every guard holds", async () => {
    const r = await runCli(["ray", "doctor", "--json"])
    assert.strictEqual(r.code, 7, r.stderr)
    assert.isFalse(r.json.feasible)
    assert.strictEqual(r.json.infeasible.marker, "ray_cluster_infeasible")
    assert.strictEqual(r.json.infeasible.reason, "no_serving_slot")
    assert.isTrue(
      r.json.infeasible.message.startsWith(
        "ray_cluster_infeasible: existing Ray head has no serving_slot resource; "
      )
    )
    assert.isTrue(r.json.repair.allowed, JSON.stringify(r.json.repair.guards))
    assert.deepStrictEqual(failing(r.json), [])
    assert.strictEqual(r.json.repair.guards.length, 9)
    assert.strictEqual(r.json.cluster.address, head.gcsAddress)
  })

  it("an explicit RAY_ADDRESS refuses the repair (address_not_explicit), also `local`", async () => {
    const doctor = await expectRefused("address_not_explicit", { RAY_ADDRESS: head.gcsAddress })
    assert.isTrue(doctor.cluster.explicit)
    assert.deepStrictEqual(failing(doctor), ["address_not_explicit"])
    const local = await expectRefused("address_not_explicit", { RAY_ADDRESS: "local" })
    assert.deepStrictEqual(failing(local), ["address_not_explicit"])
  })

  it("a multi-node run refuses the repair (single_node_run), by env and by --nodes", async () => {
    const doctor = await expectRefused("single_node_run", { HYPERLOOM_NODES: "2" }, [], "insufficient_nodes")
    assert.deepStrictEqual(failing(doctor), ["single_node_run"])
    await expectRefused("single_node_run", {}, ["--nodes", "2"], "insufficient_nodes")
    const bad = await runCli(["ray", "doctor"], { env: { HYPERLOOM_NODES: "two" } })
    assert.strictEqual(bad.code, 2)
    assert.include(bad.stderr, "HYPERLOOM_NODES")
  })

  it("a /proc mounted with hidepid, read without CAP_SYS_PTRACE: not clean (only_our_daemons cannot tell, cluster_inspectable fails)", async (ctx) => {
    // Needs root (to mount) and unshare/setpriv; the new /proc lives in a private mount and PID
    // namespace of the hyperloom process only: nothing changes for anyone else.
    if (process.getuid?.() !== 0 || spawnSync("setpriv", ["--help"]).status !== 0) ctx.skip()
    const r = spawnSync(
      "unshare",
      [
        "--mount",
        "--pid",
        "--fork",
        "--propagation",
        "private",
        "sh",
        "-c",
        'mount -t proc -o hidepid=2 proc /proc && exec setpriv --bounding-set=-sys_ptrace --inh-caps=-sys_ptrace "$0" "$@"',
        process.execPath,
        cliPath,
        "ray",
        "doctor",
        "--json"
      ],
      { env: cleanEnv(), cwd: projectRoot, encoding: "utf8", timeout: 60_000 }
    )
    assert.strictEqual(r.status, 7, r.stderr)
    const doctor = JSON.parse(r.stdout)
    assert.isFalse(doctor.repair.allowed)
    const inspectable = guard(doctor, "cluster_inspectable")
    assert.isFalse(inspectable.ok)
    assert.include(
      inspectable.reason,
      "/proc may hide other users' processes: /proc is mounted with hidepid="
    )
    const ours = guard(doctor, "only_our_daemons")
    assert.isFalse(ours.ok)
    assert.match(ours.reason, /^cannot tell: \/proc may hide other users' processes \(/)
  })
})

describe("repair guards on real heads", () => {
  let head: Head
  beforeEach(async () => {
    await prepareRay()
  })
  afterEach(async () => {
    await teardownRay()
  })

  it("a head with the slot and declared GPUs: feasible; asking for more GPUs: insufficient_gpus", async () => {
    await startHead({ port: PORT, numGpus: 2, slot: true })
    const ok = await runCli(["ray", "doctor", "--json", "--gpus", "2"])
    assert.strictEqual(ok.code, 0, ok.stderr)
    assert.deepStrictEqual(ok.json.request, { gpus: 2, serving_slot: true }, "snake_case like every field")
    assert.isTrue(ok.json.feasible)
    assert.isNull(ok.json.infeasible)
    const short = await runCli(["ray", "doctor", "--json", "--gpus", "4"])
    assert.strictEqual(short.code, 7)
    assert.strictEqual(short.json.infeasible.reason, "insufficient_gpus")
    assert.isTrue(
      short.json.infeasible.message.startsWith("ray_cluster_infeasible: cluster has 2 GPU(s), 4 requested; ")
    )
    const human = await runCli(["ray", "doctor", "--gpus", "4"])
    assert.strictEqual(human.code, 7)
    assert.include(human.stdout, "INFEASIBLE")
  })

  it("a live driver refuses the repair (no_other_drivers)", async () => {
    head = await startHead({ port: PORT })
    const driver = await startDriver(head)
    const doctor = await expectRefused("no_other_drivers")
    assert.include(guard(doctor, "no_other_drivers").reason, String(driver.pid))
  })

  it("a detached actor refuses the repair (no_live_actors)", async () => {
    head = await startHead({ port: PORT })
    await startDetachedActor(head, "hl_keeper")
    const doctor = await expectRefused("no_live_actors")
    assert.include(guard(doctor, "no_live_actors").reason, "hl_keeper")
  })

  it("a held resource with no actor (detached placement group) refuses the repair (no_resources_held)", async () => {
    head = await startHead({ port: PORT, numCpus: 2 })
    await startDetachedPlacementGroup(head, { CPU: 1 })
    const doctor = await expectRefused("no_resources_held")
    assert.include(guard(doctor, "no_resources_held").reason, "CPU")
  })

  it("a pending detached placement group (nothing held, no actor) refuses the repair (no_resources_held)", async () => {
    head = await startHead({ port: PORT, numCpus: 2 })
    // More CPUs than the cluster has: it stays PENDING, holds nothing, yet a restart would drop it.
    const p = await runPython(
      `import ray\nfrom ray.util.placement_group import placement_group\nray.init(address=${JSON.stringify(head.gcsAddress)}, logging_level="ERROR")\npg = placement_group([{"CPU": 64}], name="hl_pending_pg", lifetime="detached")\nprint("ready", flush=True)\n`
    )
    await waitFor("the placement group driver to exit", () => p.child.exitCode !== null || undefined, 60_000)
    const doctor = await expectRefused("no_resources_held")
    assert.deepStrictEqual(failing(doctor), ["no_resources_held"])
    const reason: string = guard(doctor, "no_resources_held").reason
    assert.include(reason, "placement group hl_pending_pg (")
    assert.include(reason, "PENDING, detached")
    assert.notInclude(reason, "resources are held")
  })

  it("a second head on another port refuses the repair (only_our_daemons)", async () => {
    await startHead({ port: PORT + 1, slot: true })
    head = await startHead({ port: PORT }) // the current-cluster file now names this one
    const doctor = await expectRefused("only_our_daemons")
    assert.include(guard(doctor, "only_our_daemons").reason, String(PORT + 1))
  })

  it("a worker raylet joined to the head refuses the repair (one_local_node)", async () => {
    head = await startHead({ port: PORT })
    await startWorker(head, { numCpus: 1 })
    // the worker join rewrote the current-cluster file to the same GCS address
    await expectRefused("one_local_node")
  })

  it("a dead explicit address fails fast with one clear line", async () => {
    const r = await runCli(["ray", "doctor"], { env: { RAY_ADDRESS: "127.0.0.1:1" } })
    assert.strictEqual(r.code, 4)
    assert.isBelow(r.ms, 5_000)
    assert.include(r.stderr, "127.0.0.1:1")
    assert.notInclude(r.stderr, "    at ")
  })
})
