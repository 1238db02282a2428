/**
 * Serving groups (docs/design.md#serving-groups-across-nodes) on one machine: a head and worker
 * raylets joined to it are separate Ray nodes. One cluster for the whole file (read-only checks and
 * groups that clean up after themselves): the head and worker A declare the slot and 2 GPUs, worker
 * B declares 2 GPUs and no slot. So `--nodes 2` places one rank on the head and one on worker A,
 * and `--nodes 3` is infeasible because of worker B.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { DEFAULT_GPU_CLEAN_TIMEOUT_SEC } from "../../src/domain/GpuHolders.js"
import { DEFAULT_STOP_GRACE_SEC } from "../../src/services/BridgeProcess.js"
import { cleanEnv, cliPath, runCli } from "../support/cli.js"
import { groupRun, markedSleeps, pgidOf, ppidOf, rayStatus, waitNothingHeld } from "../support/groups.js"
import {
  closeGcs,
  gcsActors,
  killBridges,
  markerSleep,
  pidsRunning,
  pidsWithArg,
  spawnBridge,
  waitGone
} from "../support/lease.js"
import {
  daemonPids,
  type Head,
  prepareRay,
  projectRoot,
  startHead,
  startWorker,
  teardownRay,
  waitFor
} from "../support/ray.js"

const PORT = 6402

/** `ray status --json`, through the CLI. */
const status = () => rayStatus(runCli)

/** Live actors of ours (lease or group ranks). */
const liveRanks = async (head: Head) =>
  (await gcsActors(head)).filter((a) => a.className.includes("Hyperloom") && a.state !== "DEAD")

/** Nothing of a group is left (no rank actor, no placement group, every slot free), and no slot names a holder. */
const assertNothingHeld = async () => {
  const s = await waitNothingHeld(status)
  for (const n of s.nodes)
    if (n.serving_slot?.declared > 0) assert.deepStrictEqual(n.serving_slot.holders, [])
}

/** Starts the CLI in the background (stdout/stderr collected). */
const startCli = (args: ReadonlyArray<string>) => {
  const child: ChildProcess = spawn(process.execPath, [cliPath, ...args], {
    env: cleanEnv(),
    cwd: projectRoot,
    stdio: ["ignore", "pipe", "pipe"]
  })
  const out = { stdout: "", stderr: "" }
  child.stdout!.on("data", (d) => (out.stdout += d))
  child.stderr!.on("data", (d) => (out.stderr += d))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal }))
  )
  return { child, out, exited }
}

/** `lease run --nodes 2 --gpus 1 -- CMD` in the background, once `count` sleeps of `markers` run (both ranks'). */
const startTwoRanks = async (cmd: ReadonlyArray<string>, markers: ReadonlyArray<string>, count = 2) => {
  const run = startCli(["lease", "run", "--nodes", "2", "--gpus", "1", "--", ...cmd])
  await waitFor(
    "both ranks running",
    () => (markers.flatMap((m) => markedSleeps(m)).length === count ? true : undefined),
    60_000,
    200
  )
  return run
}

describe("serving groups across two Ray nodes on one host", () => {
  let head: Head
  let nodeIds: { head: string; slotWorker: string; noSlotWorker: string }

  beforeAll(async () => {
    await prepareRay()
    head = await startHead({ port: PORT, numGpus: 2, numCpus: 1, slot: true })
    const before = (await status()).nodes.map((n: any) => n.node_id)
    await startWorker(head, { numCpus: 1, numGpus: 2, resources: { serving_slot: 1 } })
    const withA = await waitFor("worker A joined", async () => {
      const ids = (await status()).nodes.filter((n: any) => n.state === "ALIVE").map((n: any) => n.node_id)
      return ids.length === 2 ? ids : undefined
    })
    await startWorker(head, { numCpus: 1, numGpus: 2 })
    const all = await waitFor("worker B joined", async () => {
      const ids = (await status()).nodes.filter((n: any) => n.state === "ALIVE").map((n: any) => n.node_id)
      return ids.length === 3 ? ids : undefined
    })
    const slotWorker = withA.find((id: string) => !before.includes(id))!
    nodeIds = {
      head: before[0],
      slotWorker,
      noSlotWorker: all.find((id: string) => id !== before[0] && id !== slotWorker)!
    }
  })
  afterAll(async () => {
    killBridges()
    closeGcs()
    await teardownRay()
  })

  it("ray status shows each node's slot: declared on the head and worker A, none on worker B, all free", async () => {
    const s = await status()
    const byId = new Map(s.nodes.map((n: any) => [n.node_id, n]))
    const slot = (id: string) => (byId.get(id) as any).serving_slot
    assert.deepStrictEqual(
      [slot(nodeIds.head).declared, slot(nodeIds.slotWorker).declared, slot(nodeIds.noSlotWorker).declared],
      [1, 1, 0]
    )
    for (const id of Object.values(nodeIds)) {
      assert.strictEqual(slot(id).held, 0)
      assert.deepStrictEqual(slot(id).holders, [])
    }
  })

  it("a node without the slot: doctor and lease run give insufficient_nodes with the fix, and kill nothing", async () => {
    const ok = await runCli(["ray", "doctor", "--json", "--nodes", "2", "--gpus", "2"])
    assert.strictEqual(ok.code, 0, ok.stderr)
    assert.isTrue(ok.json.feasible)
    assert.sameMembers(
      ok.json.group.eligible.map((n: any) => n.node_id),
      [nodeIds.head, nodeIds.slotWorker]
    )

    const before = daemonPids()
    const doctor = await runCli(["ray", "doctor", "--json", "--nodes", "3", "--gpus", "1"])
    assert.strictEqual(doctor.code, 7, doctor.stderr)
    assert.isFalse(doctor.json.feasible)
    assert.strictEqual(doctor.json.infeasible.reason, "insufficient_nodes")
    const message: string = doctor.json.infeasible.message
    assert.isTrue(
      message.startsWith(
        "ray_cluster_infeasible: cluster has 2 node(s) with serving_slot and 1 GPU(s), 3 needed"
      ),
      message
    )
    assert.include(message, `node ${nodeIds.noSlotWorker.slice(0, 12)}… (${head.host}) has no serving_slot`)
    assert.include(
      message,
      `on that node: ray stop && ray start --address=${head.gcsAddress} --num-gpus=2 --resources='{"serving_slot": 1}'`
    )
    assert.deepStrictEqual(doctor.json.group.short, [
      { node_id: nodeIds.noSlotWorker, address: head.host, lacks_serving_slot: true, gpus_short: null }
    ])
    assert.isFalse(doctor.json.repair.allowed)
    assert.isFalse(doctor.json.repair.guards.find((g: any) => g.id === "single_node_run").ok)

    const lease = await runCli(["lease", "run", "--json", "--nodes", "3", "--gpus", "1", "--", "true"])
    // lease run keeps CMD's exit codes apart from its own: 125, the precise code in the JSON.
    assert.strictEqual(lease.code, 125, lease.stderr)
    assert.strictEqual(lease.json.error.exit_code, 7)
    assert.include(lease.stderr, "(hyperloom exit code 7)")
    assert.isTrue(lease.json.error.message.startsWith("ray_cluster_infeasible: cluster has 2 node(s)"))
    assert.include(lease.json.error.message, "--resources='{\"serving_slot\": 1}'")
    assert.deepStrictEqual(daemonPids(), before, "an infeasible group must not stop or start any Ray process")
    assert.deepStrictEqual(await liveRanks(head), [], "nothing was submitted")
  })

  it("a 2-rank group runs one rank per node with the rank environment, holding both slots, and leaves nothing held", async () => {
    const env =
      "rank=$HYPERLOOM_RANK world=$HYPERLOOM_WORLD_SIZE leader=$HYPERLOOM_LEADER_HOST:$HYPERLOOM_LEADER_PORT cvd=$CUDA_VISIBLE_DEVICES"
    const run = startCli(groupRun(`echo "${env}"; sleep 4`))
    // While it runs: both slots held, by the group's two ranks, on distinct nodes.
    const during = await waitFor(
      "both ranks holding their node's slot",
      async () => {
        const s = await status()
        const held = s.nodes.filter((n: any) => n.serving_slot?.holders.length > 0)
        return held.length === 2 ? s : undefined
      },
      60_000,
      300
    )
    const holders = during.nodes.filter((n: any) => n.serving_slot?.holders.length > 0)
    assert.sameMembers(
      holders.map((n: any) => n.node_id),
      [nodeIds.head, nodeIds.slotWorker]
    )
    for (const n of holders) {
      assert.strictEqual(n.serving_slot.held, 1)
      assert.strictEqual(n.serving_slot.holders[0].class_name, "HyperloomGroupRank")
      assert.isString(n.serving_slot.holders[0].placement_group)
    }
    assert.sameMembers(
      holders.map((n: any) => n.serving_slot.holders[0].bundle),
      [0, 1]
    )
    const { code } = await run.exited
    assert.strictEqual(code, 0, run.out.stderr)
    const r = JSON.parse(run.out.stdout)
    assert.strictEqual(r.exit_code, 0)
    assert.strictEqual(r.group.nodes, 2)
    assert.strictEqual(r.group.ranks.length, 2)
    assert.notStrictEqual(r.group.ranks[0].node_id, r.group.ranks[1].node_id, "one rank per node")
    assert.strictEqual(r.group.leader_host, head.host)
    assert.isAbove(r.group.leader_port, 0)
    // Output lines are prefixed by rank (with --json, on stderr), each with its own environment.
    for (const rank of [0, 1]) {
      assert.include(
        run.out.stderr,
        `[rank ${rank}] rank=${rank} world=2 leader=${head.host}:${r.group.leader_port} cvd=0`
      )
    }
    await assertNothingHeld()
  })

  it("one rank failing stops the others; the exit code is the failing rank's", async () => {
    const marker = markerSleep()
    const t0 = Date.now()
    const run = await runCli(
      groupRun(
        `if [ "$HYPERLOOM_RANK" = 1 ]; then sleep 1; echo failing >&2; exit 3; fi; exec sleep ${marker}`
      ),
      { timeoutMs: 120_000 }
    )
    assert.strictEqual(run.code, 3, run.stderr)
    assert.strictEqual(run.json.exit_code, 3)
    assert.strictEqual(run.json.group.failed_rank, 1)
    const rank0 = run.json.group.ranks.find((k: any) => k.rank === 0)
    assert.strictEqual(rank0.exit_code, 143, "rank 0 was stopped with SIGTERM")
    assert.include(run.stderr, "[rank 1] failing")
    assert.isBelow(Date.now() - t0, 60_000)
    assert.deepStrictEqual(pidsWithArg(marker), [], "rank 0's command was stopped")
    await assertNothingHeld()
  })

  it("a group waiting for a slot held by a single lease says so and by whom, then runs; the wait is not charged", async () => {
    const holderMarker = markerSleep()
    const holder = startCli(["lease", "run", "--gpus", "1", "--", "sleep", holderMarker])
    await waitFor(
      "the single lease running",
      () => (markedSleeps(holderMarker).length === 1 ? true : undefined),
      60_000,
      200
    )
    const group = startCli([
      "lease",
      "run",
      "--json",
      "--nodes",
      "2",
      "--gpus",
      "1",
      "--timeout",
      "5",
      "--",
      "sh",
      "-c",
      "sleep 1"
    ])
    await waitFor(
      "the group saying it waits",
      () => (group.out.stderr.includes("waiting for 2 nodes") ? true : undefined),
      60_000,
      200
    )
    // Waiting longer than --timeout: the wait is not charged. Then the holder's command ends, its
    // lease is released and the group is placed.
    await new Promise((r) => setTimeout(r, 2_500))
    for (const pid of markedSleeps(holderMarker)) process.kill(pid, "SIGTERM")
    const { code } = await group.exited
    const run = { code, stderr: group.out.stderr, json: JSON.parse(group.out.stdout) }
    assert.strictEqual(run.code, 0, run.stderr)
    assert.isAbove(run.json.waited_sec, 2, "waited past --timeout 2 without timing out")
    assert.isFalse(run.json.timed_out)
    assert.match(
      run.stderr,
      /waiting for 2 nodes with serving_slot and 1 GPU\(s\) each: held by node [0-9a-f]{12}… \([^)]*\): actor lease `.+` of \S+, \d+ GPUs?, since [\d-]+ [\d:]+ UTC \(bridge [^)]+\) \(pid \d+, job [0-9a-f]{8}, driver pid \d+\)/
    )
    assert.strictEqual((await holder.exited).code, 143, "the holder's command was ended by SIGTERM")
    await assertNothingHeld()
  })

  it("baseline run --nodes 2 runs its attempt as a group: rank 0 (on hyperloom's node) reports the throughput", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "hl-group-baseline-"))
    try {
      const r = await runCli(
        [
          "baseline",
          "run",
          "--json",
          "--session",
          dir,
          "--nodes",
          "2",
          "--gpus",
          "1",
          "--",
          "sh",
          "-c",
          'echo "rank $HYPERLOOM_RANK of $HYPERLOOM_WORLD_SIZE"; if [ "$HYPERLOOM_RANK" = 0 ]; then echo \'{"throughput": 7}\' > "$HYPERLOOM_RESULT_FILE"; fi'
        ],
        { timeoutMs: 120_000 }
      )
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(r.json.status, "succeeded")
      assert.strictEqual(r.json.baseline_tput, 7)
      assert.strictEqual(r.json.baseline_attempts.length, 1)
      assert.include(r.stderr, "[attempt 1] [rank 0] rank 0 of 2")
      assert.include(r.stderr, "[attempt 1] [rank 1] rank 1 of 2")
      await assertNothingHeld()
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("baseline run --nodes 2 --server: the engine runs as both ranks, the client beside rank 0; the group ends with it", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "hl-group-serving-"))
    try {
      const engine = path.join(projectRoot, "examples", "fake-engine.mjs")
      const client = path.join(projectRoot, "examples", "fake-bench-client.mjs")
      const r = await runCli(
        [
          "baseline",
          "run",
          "--json",
          "--session",
          dir,
          "--nodes",
          "2",
          "--gpus",
          "1",
          "--server",
          `${process.execPath} ${engine} --load-sec 0.5 --port $HYPERLOOM_PORT`,
          "--ready-timeout",
          "60",
          "--",
          process.execPath,
          client,
          "--num-prompts",
          "4",
          "--output-len",
          "8"
        ],
        { timeoutMs: 150_000 }
      )
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(r.json.status, "succeeded")
      assert.isAbove(r.json.baseline_tput, 0)
      // Rank 1 ran the engine alone, on a port of its own node, and was stopped with the group.
      assert.match(r.stderr, /\[attempt 1\] \[rank 1\] .*\S/)
      const serve = JSON.parse(readFileSync(path.join(dir, "attempts", "1", "serve.json"), "utf8"))
      assert.strictEqual(serve.outcome, "client_exited")
      await assertNothingHeld()
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("the group bridge: rank 0 runs leader_argv with its own port, and with end_with_leader its end stops the others (no failure)", async () => {
    const marker = markerSleep()
    const g = spawnBridge(process.env, "group")
    g.send({
      op: "group",
      address: head.gcsAddress,
      nodes: 2,
      gpus: 1,
      argv: ["sleep", marker],
      leader_argv: ["sh", "-c", "echo leading on $HYPERLOOM_BASE_URL; sleep 1"],
      end_with_leader: true,
      rank_ports: true,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      cwd: projectRoot,
      stop_grace_sec: DEFAULT_STOP_GRACE_SEC,
      gpu_clean_timeout_sec: DEFAULT_GPU_CLEAN_TIMEOUT_SEC
    })
    const ended = await g.waitEvent((e) => e.event === "ended", 60_000)
    assert.strictEqual(ended.code, 0)
    assert.isNull(ended.failed_rank)
    const exits = g.events.filter((e) => e.event === "exit").map((e) => [e.rank, e.code])
    assert.deepStrictEqual(exits, [
      [0, 0],
      [1, 143]
    ])
    const leading = g.events.find((e) => e.event === "output" && e.rank === 0)
    assert.match(
      leading?.line ?? "",
      /^leading on http:\/\/127\.0\.0\.1:\d+$/,
      "rank_ports: rank 0's own port"
    )
    assert.deepStrictEqual(markedSleeps(marker), [])
    g.send({ op: "release" })
    assert.strictEqual((await g.exited).code, 0)
    await assertNothingHeld()
  })

  it("SIGKILL of the CLI during a group leaves no rank running and no placement group", async () => {
    const marker = markerSleep()
    const run = await startTwoRanks(["sleep", marker], [marker])
    run.child.kill("SIGKILL")
    await run.exited
    await waitGone("every rank's command", () => pidsWithArg(marker), 20_000)
    await assertNothingHeld()
  })

  it("SIGKILL of the group bridge (the driver) leaves no rank running and no placement group (per rank: docs/design.md#the-slot-means-the-gpus-are-free)", async () => {
    const marker = markerSleep()
    const run = await startTwoRanks(["sleep", marker], [marker])
    const bridges = pidsRunning("group")
    assert.strictEqual(bridges.length, 1, "one group bridge")
    process.kill(bridges[0]!, "SIGKILL")
    await waitGone("every rank's command", () => markedSleeps(marker), 20_000)
    const { code } = await run.exited
    assert.strictEqual(code, 125, `the lease failed: ${run.out.stderr}`)
    await assertNothingHeld()
  })

  it("SIGKILL of the group bridge while a rank's supervisor and keeper are frozen: no slot is free while anything of a rank runs, and the CLI lets them go once nothing does", async () => {
    const marker = markerSleep()
    const child = markerSleep()
    const run = await startTwoRanks(
      ["sh", "-c", `sleep ${child} & sleep ${marker}; wait`],
      [marker, child],
      4
    )
    const running = () => [...markedSleeps(marker), ...markedSleeps(child)]
    // sleep's parent is sh, whose parent is the rank's supervisor: its group is it and its keeper.
    const guards = pgidOf(ppidOf(ppidOf(markedSleeps(marker)[0]!)))
    const bridges = pidsRunning("group")
    assert.strictEqual(bridges.length, 1, "one group bridge")
    process.kill(-guards, "SIGSTOP")
    const seen: Array<string> = []
    try {
      process.kill(bridges[0]!, "SIGKILL")
      // Until both slots are free: no look may find one free while a rank's sleep still runs.
      await waitFor(
        "both slots free",
        async () => {
          // The look first: what still runs after it ran when it was taken.
          const s = await status()
          const left = running()
          const free = s.nodes.filter(
            (n: any) => n.state === "ALIVE" && n.serving_slot?.declared > 0 && n.serving_slot.held === 0
          )
          if (free.length > 0 && left.length > 0)
            seen.push(`${free.length} slot(s) free while ${left.length} sleep(s) of the ranks ran`)
          return free.length === 2 ? true : undefined
        },
        60_000,
        100
      )
    } finally {
      try {
        process.kill(-guards, "SIGCONT")
      } catch {}
      for (const pid of running()) {
        try {
          process.kill(pid, "SIGKILL")
        } catch {}
      }
    }
    const { code } = await run.exited
    assert.strictEqual(code, 125, `the lease failed: ${run.out.stderr}`)
    assert.deepStrictEqual(seen, [], run.out.stderr)
    await assertNothingHeld()
  })

  it("SIGKILL of one rank's actor worker: its command dies, the other rank is stopped, nothing held", async () => {
    const marker = markerSleep()
    const run = await startTwoRanks(["sleep", marker], [marker])
    // sleep's parent is the rank's command supervisor, whose parent is the actor's worker.
    const worker = ppidOf(ppidOf(markedSleeps(marker)[0]!))
    process.kill(worker, "SIGKILL")
    await waitGone("every rank's command", () => markedSleeps(marker), 20_000)
    const { code } = await run.exited
    assert.strictEqual(code, 125, run.out.stderr)
    assert.include(run.out.stderr, "died")
    assert.include(run.out.stderr, "(hyperloom exit code 9)")
    await assertNothingHeld()
  })
})
