/**
 * Serving groups across two hosts of their own (docs/design.md#serving-groups-across-nodes,
 * scripts/two-hosts.sh): the head host runs Ray's head and hyperloom from the checkout; the worker
 * host runs a Ray node joined to it over a veth pair and has the Ray installation but nothing of
 * hyperloom (the checkout is hidden there). Each node declares the slot and one GPU, so `--nodes 2`
 * puts one rank on each host. One cluster for the file; the partition test comes last (the cut-off
 * node does not come back).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { groupLease, groupRun, markedSleeps, ppidOf, rayStatus, waitNothingHeld } from "../support/groups.js"
import {
  GCS,
  type Hosts,
  makeHosts,
  onHost,
  realRay,
  startCluster,
  WORKER_IP,
  whyNoHosts
} from "../support/hosts.js"
import { markerSleep, pidsWithArg } from "../support/lease.js"
import { projectRoot, sleep, waitFor } from "../support/ray.js"

const HEALTH_CHECK = { health_check_period_ms: 2000, health_check_timeout_ms: 2000 }
/** What Ray's health checks make of that: a node is dead after ~5 × (2 s + 2 s). */
const NODE_DEATH_SEC = 5 * 4

const why = whyNoHosts()
if (why !== undefined) process.stderr.write(`two-hosts tests skipped: cannot make namespaces here (${why})\n`)

/** `sleep MARKER` processes on a host (not the supervisors, whose argv also holds the marker). */
const sleepsOn = (hosts: Hosts, host: "head" | "worker", marker: string) =>
  markedSleeps(marker, (pid) => onHost(hosts, host, pid))

describe.skipIf(why !== undefined)("serving groups across two hosts of their own", () => {
  let hosts: Hosts

  /** The cluster as the head host's hyperloom sees it. */
  const status = () => rayStatus(hosts.cli)

  /** How many of the cluster's nodes Ray has ALIVE. */
  const aliveNodes = async () => (await status()).nodes.filter((n: any) => n.state === "ALIVE").length

  /** No rank left anywhere: no live rank actor, no placement group, every slot free. */
  const assertNothingHeld = () => waitNothingHeld(status)

  beforeAll(async () => {
    hosts = await makeHosts()
    // Ray declares a node dead after health_check_failure_threshold (5) checks that each time
    // out: ~5 × (period + timeout), by default 5 × (3 s + 10 s) ≈ 65 s (measured 63-69 s here).
    // Shortened to ≈ 20 s so the partition test is lean; the bridge reads these values from the
    // cluster and keeps its heartbeat below them.
    await startCluster(hosts, { systemConfig: HEALTH_CHECK })
    await waitFor(
      "both nodes alive",
      async () => ((await aliveNodes()) === 2 ? true : undefined),
      60_000,
      500
    )
  }, 240_000)
  afterAll(async () => {
    await hosts?.down()
  })

  it("the worker host has the Ray installation and none of the checkout", async () => {
    // A checkout's own .venv (a clean clone after scripts/setup-ray.sh) is the Ray installation: it stays.
    const r = await hosts.run("worker", [
      "sh",
      "-c",
      `test -x ${realRay} && echo ray; test -e ${projectRoot}/package.json && echo checkout; ls -A ${projectRoot} | grep -vx .venv | wc -l`
    ])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.deepStrictEqual(r.stdout.trim().split("\n"), ["ray", "0"])
  })

  it("a 2-rank group runs one rank per host; the rank on the worker host needs nothing of hyperloom", async () => {
    const r = await hosts.cli(
      groupRun(
        `echo "rank=$HYPERLOOM_RANK leader=$HYPERLOOM_LEADER_HOST"; test -e ${projectRoot}/package.json && echo sees-checkout || echo no-checkout`
      ),
      { timeoutMs: 150_000 }
    )
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(r.json.exit_code, 0)
    const nodes = (await status()).nodes
    const ip = (id: string) => nodes.find((n: any) => n.node_id === id)?.address
    assert.deepStrictEqual(
      r.json.group.ranks.map((k: any) => ip(k.node_id)),
      ["198.18.0.1", WORKER_IP],
      "rank 0 on the head host (hyperloom's), rank 1 on the worker host"
    )
    assert.include(r.stderr, "[rank 0] rank=0 leader=198.18.0.1")
    assert.include(r.stderr, "[rank 1] rank=1 leader=198.18.0.1")
    assert.include(r.stderr, "[rank 0] sees-checkout")
    assert.include(r.stderr, "[rank 1] no-checkout")
    await assertNothingHeld()
  })

  it("a rank gets a directory that exists on its node and, of the launching environment, only HYPERLOOM_* and --rank-env names", async () => {
    const show =
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell default (${NAME:-unset}), not JavaScript
      'echo "rank=$HYPERLOOM_RANK cwd=$(pwd) secret=${HL_TEST_SECRET:-unset} wanted=${HL_TEST_WANTED:-unset} path=$PATH"'
    const r = await hosts.cli(groupRun(show, { extra: ["--rank-env", "HL_TEST_WANTED"] }), {
      timeoutMs: 150_000,
      env: {
        HL_TEST_SECRET: "leaked",
        HL_TEST_WANTED: "yes",
        PATH: `/launcher-only/bin:${process.env.PATH}`
      }
    })
    assert.strictEqual(r.code, 0, r.stderr)
    for (const rank of [0, 1]) {
      const line = r.stderr.split("\n").find((l) => l.startsWith(`[rank ${rank}] rank=${rank}`))
      assert.isDefined(line, r.stderr)
      assert.include(line, " cwd=/tmp ", "the default rank directory, which every node has")
      assert.include(line, " secret=unset ", "a variable nobody listed stays on the launching host")
      assert.include(line, " wanted=yes ", "--rank-env names travel")
      assert.notInclude(line, "/launcher-only", "PATH is the node's own")
    }
    const cwd = await hosts.cli(groupLease("--rank-cwd", "/", "--", "sh", "-c", 'echo "in $(pwd)"'), {
      timeoutMs: 150_000
    })
    assert.strictEqual(cwd.code, 0, cwd.stderr)
    assert.include(cwd.stdout, "[rank 1] in /\n")
    await assertNothingHeld()
  })

  /** The stand-in engines and client (examples/), installed on both hosts at a path outside the checkout. */
  const installEngines = async () => {
    for (const host of ["head", "worker"] as const) {
      // Every stand-in file: they import one another (fake-engine.mjs its performance model).
      for (const f of fs.readdirSync(path.join(projectRoot, "examples")).filter((e) => e.endsWith(".mjs"))) {
        const text = fs.readFileSync(path.join(projectRoot, "examples", f), "utf8")
        await hosts.writeFile(host, `/tmp/hl-engine/${f}`, text, "755")
      }
    }
  }

  /** A group serving baseline of the installed stand-ins: `engine` and its flags as the server. */
  const servingBaseline = async (session: string, engine: string) => {
    await installEngines()
    return hosts.cli(
      [
        "baseline",
        "run",
        "--json",
        "--session",
        session,
        "--nodes",
        "2",
        "--gpus",
        "1",
        "--server",
        `${process.execPath} /tmp/hl-engine/${engine} --port $HYPERLOOM_PORT`,
        "--ready-timeout",
        "90",
        "--",
        process.execPath,
        "/tmp/hl-engine/fake-bench-client.mjs",
        "--num-prompts",
        "4",
        "--output-len",
        "8"
      ],
      { timeoutMs: 170_000 }
    )
  }

  /** A group serving baseline whose engine is the multi-node stand-in. */
  const recipe = (session: string, engineFlags: string) =>
    servingBaseline(session, `fake-multinode-engine.mjs ${engineFlags} --load-sec 1`)

  it("a group serving baseline with the stand-in engine installed on both hosts outside the checkout succeeds", async () => {
    const r = await servingBaseline("/tmp/hl-session-serving", "fake-engine.mjs --load-sec 0.5")
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(r.json.status, "succeeded")
    assert.isAbove(r.json.baseline_tput, 0)
    assert.match(r.stderr, /\[attempt 1\] \[rank 1\] .*vLLM API server version/)
    await assertNothingHeld()
  })

  it("vLLM's multiprocessing multi-node recipe: --nnodes --node-rank --master-addr --master-port, --headless above rank 0", async () => {
    const r = await recipe(
      "/tmp/hl-session-vllm-mp",
      '--nnodes $HYPERLOOM_WORLD_SIZE --node-rank $HYPERLOOM_RANK --master-addr $HYPERLOOM_LEADER_HOST --master-port $HYPERLOOM_LEADER_PORT $([ "$HYPERLOOM_RANK" = 0 ] || echo --headless)'
    )
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(r.json.status, "succeeded")
    assert.isAbove(r.json.baseline_tput, 0)
    assert.match(
      r.stderr,
      /\[attempt 1\] \[rank 1\] .*node rank 1 of 2, rendezvous 198\.18\.0\.1:\d+, headless/
    )
    assert.match(r.stderr, /\[attempt 1\] \[rank 1\] .*joined node rank 0 at 198\.18\.0\.1/)
    await assertNothingHeld()
  })

  it("SGLang's recipe: --nnodes --node-rank --dist-init-addr; readiness is rank 0's, whose peer answers /health 200 at once", async () => {
    const r = await recipe(
      "/tmp/hl-session-sglang",
      "--nnodes $HYPERLOOM_WORLD_SIZE --node-rank $HYPERLOOM_RANK --dist-init-addr $HYPERLOOM_LEADER_HOST:$HYPERLOOM_LEADER_PORT"
    )
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(r.json.status, "succeeded")
    assert.isAbove(r.json.baseline_tput, 0)
    const serve = await hosts.run("head", ["cat", "/tmp/hl-session-sglang/attempts/1/serve.json"])
    const server = JSON.parse(serve.stdout).server
    // Rank 0 was ready only after rank 1 joined it and its API server loaded (--load-sec 1).
    assert.isAbove(server.ready_sec, 1)
    await assertNothingHeld()
  })

  /** A 2-rank group running `sleep MARKER` (SECONDS long), once a rank runs on each host. */
  const sleepingGroup = async (seconds?: number) => {
    const marker = markerSleep(seconds)
    const run = hosts.startCli(groupLease("--", "sleep", marker))
    await waitFor(
      "a rank running on each host",
      () =>
        (sleepsOn(hosts, "head", marker).length === 1 && sleepsOn(hosts, "worker", marker).length === 1) ||
        undefined,
      120_000,
      200
    )
    return { marker, run }
  }

  it("SIGKILL of the CLI during a group leaves no rank running on either host and nothing held", async () => {
    const { marker, run } = await sleepingGroup()
    process.kill(await run.pid(), "SIGKILL")
    await run.exited
    await waitFor(
      "every rank's command gone",
      () => (pidsWithArg(marker).length === 0 ? true : undefined),
      30_000,
      100
    )
    await assertNothingHeld()
  })

  it("SIGKILL of the worker host's rank worker: its command dies, the head's rank is stopped, nothing held", async () => {
    const { marker, run } = await sleepingGroup()
    // sleep's parent is the rank's command supervisor, whose parent is the actor's worker.
    process.kill(ppidOf(ppidOf(sleepsOn(hosts, "worker", marker)[0]!)), "SIGKILL")
    await waitFor(
      "every rank's command gone",
      () => (pidsWithArg(marker).length === 0 ? true : undefined),
      30_000,
      100
    )
    const r = await run.exited
    assert.strictEqual(r.code, 125, r.stderr)
    assert.include(r.stderr, "(hyperloom exit code 9)")
    await assertNothingHeld()
  })
  it("started from a host that holds no bundle, rank 0 runs the serving runner on another node with that node's Python", async () => {
    // A second node on the worker host, and the head's slot held by a lease: the group's two
    // ranks go to the worker host, and the head host (hyperloom's) holds none, like a login node.
    const rayletsOnWorker = () =>
      fs
        .readdirSync("/proc")
        .filter((e) => /^\d+$/.test(e))
        .map(Number)
        .filter((pid) => {
          try {
            return (
              fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "raylet" && onHost(hosts, "worker", pid)
            )
          } catch {
            return false
          }
        })
    const before = rayletsOnWorker()
    const second = await hosts.run(
      "worker",
      [
        realRay,
        "start",
        `--address=${GCS}`,
        `--node-ip-address=${WORKER_IP}`,
        "--disable-usage-stats",
        "--num-gpus=1",
        "--num-cpus=1",
        '--resources={"serving_slot": 1}'
      ],
      { timeoutMs: 120_000 }
    )
    assert.strictEqual(second.code, 0, second.stderr)
    const extra = rayletsOnWorker().filter((pid) => !before.includes(pid))
    assert.strictEqual(extra.length, 1, "one more raylet on the worker host")
    const marker = markerSleep()
    const holder = hosts.startCli(["lease", "run", "--gpus", "1", "--", "sleep", marker])
    try {
      await waitFor(
        "the head's slot held",
        () => (sleepsOn(hosts, "head", marker).length === 1 ? true : undefined),
        120_000,
        200
      )
      // The session on a folder both hosts see (a shared file system), where rank 0 writes.
      const r = await servingBaseline("/tmp/shared/hl-session-login", "fake-engine.mjs --load-sec 0.5")
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(r.json.status, "succeeded")
      assert.isAbove(r.json.baseline_tput, 0)
      const headNode = (await status()).nodes
        .find((n: any) => n.address === "198.18.0.1")
        .node_id.slice(0, 12)
      const placed = /group of 2 ranks placed on nodes (\w+)…?, (\w+)/.exec(r.stderr)
      assert.isNotNull(placed, r.stderr)
      assert.notInclude([placed![1], placed![2]], headNode, "no rank on the launching host")
    } finally {
      for (const pid of sleepsOn(hosts, "head", marker)) process.kill(pid, "SIGTERM")
      await holder.exited
      process.kill(extra[0]!, "SIGTERM")
      await waitFor(
        "the second worker node gone",
        async () => ((await aliveNodes()) === 2 ? true : undefined),
        90_000,
        500
      )
    }
    await assertNothingHeld()
  })

  it("a cut Ray survives (shorter than the heartbeat timeout, past 40 % of the node-death time): the group runs on to its own end, nothing fenced", async () => {
    // Node death here is ~20 s (Ray's earliest 18 s): the heartbeat is 20 - 2 - 3 - 2 = 13 s. A
    // 10 s cut (11 s of silence at most, beats being a second apart) is one Ray survives, and so
    // must the run; the earlier heartbeat (40 % of the node-death time, 8 s) ended the group.
    const { marker, run } = await sleepingGroup(20)
    await hosts.cut()
    await sleep(10_000)
    await hosts.heal()
    await sleep(3_000)
    assert.strictEqual(sleepsOn(hosts, "worker", marker).length, 1, "the cut-off rank's command still runs")
    assert.strictEqual(sleepsOn(hosts, "head", marker).length, 1, "the head's rank's command still runs")
    const r = await run.exited
    assert.strictEqual(r.code, 0, r.stderr)
    assert.notInclude(r.stderr, "fenced")
    assert.strictEqual(await aliveNodes(), 2, "Ray kept both nodes")
    await assertNothingHeld()
  })

  it("a partition longer than Ray's node-death timeout: the cut-off rank stops its command before Ray frees its slot", async () => {
    const { marker, run } = await sleepingGroup()
    const workerNode = (await status()).nodes.find((n: any) => n.address === WORKER_IP).node_id
    const t0 = Date.now()
    await hosts.cut()
    let rankGoneSec: number | undefined
    let nodeDeadSec: number | undefined
    const look = () => {
      if (rankGoneSec === undefined && sleepsOn(hosts, "worker", marker).length === 0)
        rankGoneSec = (Date.now() - t0) / 1000
    }
    const deadline = t0 + (NODE_DEATH_SEC + 40) * 1000
    while (Date.now() < deadline && nodeDeadSec === undefined) {
      look()
      const s = await hosts.cli(["ray", "status", "--json"], { timeoutMs: 30_000 })
      if (s.json?.nodes.find((n: any) => n.node_id === workerNode)?.state === "DEAD")
        nodeDeadSec = (Date.now() - t0) / 1000
      else look()
    }
    process.stderr.write(
      `partition: the cut-off rank's command gone ${rankGoneSec ?? "never"} s after the cut, Ray declared its node dead after ${nodeDeadSec ?? "never"} s\n`
    )
    assert.isDefined(nodeDeadSec, "Ray declared the cut-off node dead")
    assert.isDefined(rankGoneSec, "the cut-off rank stopped its command")
    assert.isBelow(rankGoneSec!, nodeDeadSec!, "before its slot could be freed")
    assert.deepStrictEqual(sleepsOn(hosts, "worker", marker), [])
    const r = await run.exited
    assert.strictEqual(r.code, 125, r.stderr)
    await waitFor(
      "no rank running anywhere",
      () => (pidsWithArg(marker).length === 0 ? true : undefined),
      30_000,
      200
    )
    await hosts.heal()
  })
})
