/**
 * Sweeps on hosts of their own that share nothing but Ray (docs/design.md#sweeps-at-cluster-scale,
 * scripts/hosts.sh): the head host runs Ray's head and hyperloom from the checkout; the other hosts
 * (worker, worker2) have the Ray installation and the stand-in engine and client installed outside
 * any checkout (STAND_INS), nothing of hyperloom and no folder shared with the head. Each of the
 * three declares the slot and one GPU, so `--parallel 3` runs one combination on each. A fourth
 * host (worker3) joins only for the last test, declaring two GPUs: another hardware class. The
 * hosts and their cluster are started ONCE for the file; Ray's health checks are shortened so that
 * a node is declared dead in ~10 s.
 *
 * The stand-in engine's model (examples/engine-model.mjs): with n = 16 output tokens and the SLO
 * p99_ttft_ms<=1000 the largest passing concurrency of a combination is its --max-num-seqs.
 */
import * as fs from "node:fs"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { rayStatus, waitNothingHeld } from "../support/groups.js"
import {
  type HostName,
  type Hosts,
  IP,
  leaseProcsOn,
  makeHosts,
  onHost,
  realRay,
  STAND_IN_BIN,
  STAND_INS,
  startCluster,
  startNode,
  whyNoHosts
} from "../support/hosts.js"
import { pidsWithArg, waitGone } from "../support/lease.js"
import { projectRoot, waitFor } from "../support/ray.js"
import { sweepArgs } from "../support/sweepOnHead.js"

/** Ray declares a node dead after 5 health checks that each fail: ~5 × (1 s + 1 s). */
export const HEALTH_CHECK = { health_check_period_ms: 1000, health_check_timeout_ms: 1000 }

const SLO = "p99_ttft_ms<=1000"
/** The CLI's PATH on the head: the stand-ins' commands first (every node has them there). */
const withStandIns = { PATH: `${STAND_IN_BIN}:${process.env.PATH}` }
let tagN = 0
const newTag = () => `hl-remote-${process.pid}-${tagN++}`
/** The stand-in engine (examples/engine-model.mjs: the largest passing concurrency is B = --max-num-seqs). */
const engine = (tag: string) =>
  `fake-engine --load-sec 0.2 --queue-ms 1500 --tag=${tag} --max-num-seqs {seqs}`
const client = ["fake-bench-client", "--num-prompts", "8", "--max-concurrency", "{c}", "--output-len", "16"]
let sessionN = 0
/** A session folder on the head host (its /tmp is its own). */
const newSession = () => `/tmp/hl-sweep-remote-${sessionN++}`

const args = (
  session: string,
  tag: string,
  seqs: string,
  loads: string,
  extra: ReadonlyArray<string>
): Array<string> =>
  // no warm-up (sweepArgs): the stand-in has no cold start
  sweepArgs(
    session,
    engine(tag),
    ["--param", `seqs=${seqs}`, "--load", `c=${loads}`, "--slo", SLO, ...extra],
    client
  )

const why = whyNoHosts()
if (why !== undefined)
  process.stderr.write(`sweep-remote tests skipped: cannot make namespaces here (${why})\n`)

describe.skipIf(why !== undefined)("sweeps on hosts of their own that share nothing but Ray", () => {
  let hosts: Hosts
  const status = () => rayStatus(hosts.cli)
  const local = (f: string) => hosts.pathOn("head", f)
  const readSweep = (session: string) => JSON.parse(fs.readFileSync(local(`${session}/sweep.json`), "utf8"))
  const alive = async () => (await status()).nodes.filter((n: any) => n.state === "ALIVE")
  /** Ray's node id → the host it runs on (by its address on the switch). */
  const hostOfNode = async (): Promise<Map<string, HostName>> => {
    const byIp = new Map(Object.entries(IP).map(([h, ip]) => [ip, h as HostName]))
    return new Map((await alive()).map((n: any) => [n.node_id, byIp.get(n.address)!]))
  }
  /** The engines of `tag` on each host now (each host runs one raylet: one node). */
  const enginesByHost = (tag: string) => {
    const by = new Map<HostName, number>()
    for (const pid of pidsWithArg(`--tag=${tag}`)) {
      const host = hosts.names.find((h) => onHost(hosts, h, pid))
      if (host !== undefined) by.set(host, (by.get(host) ?? 0) + 1)
    }
    return by
  }
  /**
   * Samples each host's process tree every 200 ms until stopped: the most engines of `tag` seen on
   * one host at once, and the hosts seen running one.
   */
  const sampleEngines = (tag: string) => {
    let most = 0
    const seen = new Set<HostName>()
    const timer = setInterval(() => {
      for (const [host, n] of enginesByHost(tag)) {
        seen.add(host)
        most = Math.max(most, n)
      }
    }, 200)
    return {
      stop: () => {
        clearInterval(timer)
        return { most, hosts: [...seen].sort() }
      }
    }
  }
  /** Nothing of the sweep's leases left: no lease actor, no slot held, no supervisor on any host. */
  const assertReleased = async (timeoutMs: number) => {
    await waitNothingHeld(status, timeoutMs)
    for (const host of hosts.names) assert.deepStrictEqual(leaseProcsOn(hosts, host), [], host)
  }
  /** Every file of a finished sweep on the head, none of it (and no runner's folder) on any host. */
  const assertFilesOnHead = (session: string) => {
    const doc = readSweep(session)
    for (const c of doc.combinations) {
      const ran = c.engine_starts.filter((s: any) => s.outcome === "ready")
      assert.lengthOf(ran, 1)
      // the stand-in's startup line (vLLM's api_server), as the engine wrote it on its node
      assert.include(fs.readFileSync(local(`${ran[0].dir}/server.log`), "utf8"), "api_server.py")
      for (const p of c.points)
        for (const run of p.runs) {
          assert.isTrue(fs.existsSync(local(`${run.dir}/client.log`)))
          const result = JSON.parse(fs.readFileSync(local(`${run.dir}/result.json`), "utf8"))
          assert.isAbove(result.output_throughput, 0)
          assert.include(fs.readFileSync(local(`${run.dir}/between.log`), "utf8"), "between-ran")
        }
    }
    for (const host of hosts.names) {
      if (host !== "head")
        assert.isFalse(fs.existsSync(hosts.pathOn(host, session)), `${host} has the session folder`)
      // the runner's private folder is removed when it ends (on the head too)
      assert.deepStrictEqual(
        fs.readdirSync(hosts.pathOn(host, "/tmp")).filter((f) => f.startsWith("hyperloom-sweep-")),
        [],
        host
      )
    }
  }

  beforeAll(async () => {
    hosts = await makeHosts({ count: 4, shared: false })
    await startCluster(hosts, {
      gpus: { head: 1, worker: 1, worker2: 1, worker3: 2 },
      systemConfig: HEALTH_CHECK,
      nodes: ["worker", "worker2"]
    })
    await waitFor(
      "three nodes alive",
      async () => ((await alive()).length === 3 ? true : undefined),
      60_000,
      500
    )
  }, 240_000)
  afterAll(async () => {
    await hosts?.down()
  })

  it("only the head host has the checkout; every host has Ray and the stand-ins outside it; nothing is shared", async () => {
    for (const host of ["worker", "worker2"] as const) {
      const r = await hosts.run(host, [
        "sh",
        "-c",
        `test -x ${realRay} && echo ray; ls ${STAND_INS}; PATH=${STAND_IN_BIN}:$PATH fake-engine --help >/dev/null && echo engine-runs; test -e ${projectRoot}/package.json && echo checkout; test -e /tmp/shared && echo shared; hostname -I 2>/dev/null || true`
      ])
      assert.strictEqual(r.code, 0, r.stderr)
      const lines = r.stdout.trim().split("\n")
      assert.deepStrictEqual(lines.slice(0, 7), [
        "ray",
        "bin",
        "client-formats.mjs",
        "engine-model.mjs",
        "fake-bench-client.mjs",
        "fake-engine.mjs",
        "engine-runs"
      ])
      assert.notInclude(lines, "checkout")
      assert.notInclude(lines, "shared")
    }
    // A file one host writes in its /tmp is not on another.
    await hosts.writeFile("worker", "/tmp/hl-mine", "worker's\n")
    assert.isTrue(fs.existsSync(hosts.pathOn("worker", "/tmp/hl-mine")))
    assert.isFalse(fs.existsSync(hosts.pathOn("head", "/tmp/hl-mine")))
    assert.isFalse(fs.existsSync(hosts.pathOn("worker2", "/tmp/hl-mine")))
    // The cluster: three nodes, one per host, one GPU each.
    const nodes = await alive()
    assert.deepStrictEqual(nodes.map((n: any) => n.address).sort(), [IP.head, IP.worker, IP.worker2])
    assert.deepStrictEqual(
      nodes.map((n: any) => n.resources_total.GPU),
      [1, 1, 1]
    )
  })

  it("--parallel 3: the points and best of --parallel 1, one engine per host at most, every file back on the head", async () => {
    const between = ["--between", "echo between-ran"]
    const one = newSession()
    const tag1 = newTag()
    // two loads: at c = 8 only seqs=8 passes (the one best: B = 8 at c = 8), at c = 2 every one
    const r1 = await hosts.cli(args(one, tag1, "2,4,8", "2,8", ["--parallel", "1", ...between]), {
      env: withStandIns,
      timeoutMs: 240_000
    })
    assert.strictEqual(r1.code, 0, r1.stderr)
    const three = newSession()
    const tag3 = newTag()
    const sampler = sampleEngines(tag3)
    const r3 = await hosts.cli(args(three, tag3, "2,4,8", "2,8", ["--parallel", "3", ...between]), {
      env: withStandIns,
      timeoutMs: 240_000
    })
    const seen = sampler.stop()
    assert.strictEqual(r3.code, 0, r3.stderr)
    console.log(`[sweep-remote] --parallel 3 engines seen on: ${seen.hosts.join(", ")}`)
    // never two engines of the sweep on one host (one node) at any sample
    assert.strictEqual(seen.most, 1, "two engines on one host at a sample")
    // no engine of either sweep left on any host
    assert.deepStrictEqual(pidsWithArg(`--tag=${tag1}`), [])
    assert.deepStrictEqual(pidsWithArg(`--tag=${tag3}`), [])
    const a = readSweep(one)
    const b = readSweep(three)
    const shape = (doc: any) =>
      doc.combinations.map((c: any) => c.points.map((p: any) => `${p.load}:${p.status}:${p.runs.length}`))
    assert.deepStrictEqual(shape(b), shape(a))
    // the model's answer: B = --max-num-seqs
    for (const doc of [a, b]) {
      assert.strictEqual(doc.summary.verdict, "best")
      assert.deepStrictEqual(
        doc.summary.combinations.map((c: any) => c.largest_passing_load),
        ["2", "2", "8"]
      )
    }
    assert.strictEqual(b.summary.best.label, "seqs=8")
    assert.strictEqual(b.summary.best.load, "8")
    assert.strictEqual(b.summary.best.label, a.summary.best.label)
    assert.strictEqual(b.summary.best.load, a.summary.best.load)
    // one engine start per combination, each on a host of its own: all three hosts at once
    assert.deepStrictEqual(
      b.combinations.map((c: any) => c.engine_starts.length),
      [1, 1, 1]
    )
    const hostOf = await hostOfNode()
    assert.deepStrictEqual(
      b.combinations.map((c: any) => hostOf.get(c.engine_starts[0].node.node_id)).sort(),
      ["head", "worker", "worker2"]
    )
    assert.deepStrictEqual(seen.hosts, ["head", "worker", "worker2"])
    assert.deepStrictEqual(b.hardware_class, { gpu_count: 1, gpu_model: null, cpu_model: null })
    assert.deepStrictEqual(b.left_alone ?? [], [])
    // every progress line of a point names its node; sweep show names each combination's node
    assert.match(r3.stderr, /combination #\d \(seqs=\d\) on \S+, c=\d/)
    const show = await hosts.cli(["sweep", "show", "--session", three], { timeoutMs: 60_000 })
    assert.include(show.stdout, "node(s)")
    // every file of both sweeps on the head, whichever host ran it; nothing left on the others
    assertFilesOnHead(one)
    assertFilesOnHead(three)
    await assertReleased(10_000)
  })

  it("adaptive --parallel 3 (issue 33 item 2): three candidates at once, one per host, the serial search's best with no more than its engine starts", async () => {
    // at c = 8 only seqs=8 passes the SLO: the serial search starts at 4 (the upper middle),
    // compares 8 and 2, moves to 8 and settles there, 3 engine starts; seqs=1 is never started.
    // (The serial search against --parallel 3 side by side is test/programs/SweepAdaptive.test.ts's
    // and bench/sweep-hosts.mjs's: here the same three starts, at once, one per host.)
    const session = newSession()
    const tag = newTag()
    const sampler = sampleEngines(tag)
    const t = Date.now()
    const r = await hosts.cli(
      args(session, tag, "1,2,4,8", "8", ["--strategy", "adaptive", "--parallel", "3"]),
      { env: withStandIns, timeoutMs: 240_000 }
    )
    const seen = sampler.stop()
    assert.strictEqual(r.code, 0, r.stderr)
    assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [])
    const doc = readSweep(session)
    const starts = doc.combinations.reduce((n: number, c: any) => n + c.engine_starts.length, 0)
    console.log(
      `[sweep-remote] adaptive --parallel 3: ${starts} engine starts in ${Date.now() - t} ms on ${seen.hosts.join(", ")}`
    )
    assert.strictEqual(doc.summary.best.label, "seqs=8")
    assert.strictEqual(doc.summary.best.load, "8")
    assert.strictEqual(starts, 3, "the serial search's 3 engine starts, no more")
    // the three candidates at once, one engine per host
    assert.strictEqual(seen.most, 1, "two engines on one host at a sample")
    assert.deepStrictEqual(seen.hosts, ["head", "worker", "worker2"])
    assert.deepStrictEqual(
      doc.combinations.map((c: any) => c.status),
      ["skipped", "done", "done", "done"]
    )
    await assertReleased(10_000)
  })

  it("Ctrl-C with three engines up, one per host: every engine stopped and every lease released within 10 s, exit 130", async () => {
    const session = newSession()
    const tag = newTag()
    // --between holds each combination between its engine's readiness and its first client run
    const run = hosts.startCli(
      args(session, tag, "2,4,8", "2,4,8", ["--parallel", "3", "--between", "sleep 60"]),
      withStandIns
    )
    const ready = () => {
      if (!fs.existsSync(local(`${session}/sweep.json`))) return 0
      try {
        return readSweep(session).combinations.filter((c: any) => c.engine_starts.at(-1)?.outcome === "ready")
          .length
      } catch {
        return 0 // between two writes
      }
    }
    await waitFor("three engines ready", () => (ready() === 3 ? true : undefined), 120_000, 500)
    assert.deepStrictEqual(
      [...enginesByHost(tag)].sort(),
      [
        ["head", 1],
        ["worker", 1],
        ["worker2", 1]
      ],
      "one engine up on each host"
    )
    const t = Date.now()
    process.kill(await run.pid(), "SIGINT")
    const r = await Promise.race([
      run.exited,
      new Promise<"hung">((resolve) => setTimeout(() => resolve("hung"), 30_000))
    ])
    const ms = Date.now() - t
    assert.notStrictEqual(r, "hung", "the CLI did not exit within 30 s of SIGINT")
    if (r === "hung") return
    console.log(`[sweep-remote] ctrl-c with three engines up: exit ${r.code} ${ms} ms after SIGINT`)
    assert.strictEqual(r.code, 130, r.stderr)
    assert.isBelow(ms, 10_000)
    await waitGone("the engines", () => pidsWithArg(`--tag=${tag}`), 2_000)
    const doc = readSweep(session)
    assert.strictEqual(doc.status, "cancelled")
    assert.isTrue(doc.combinations.every((c: any) => c.status === "pending"))
    // every lease released within 10 s of the Ctrl-C: nothing held on any node, no supervisor left
    await assertReleased(Math.max(1_000, 10_000 - (Date.now() - t)))
  })

  it("a node whose GPU count differs is left alone from the first lease (issue 33 item 3): no engine start on it at all, named once; the sweep completes on the others", async () => {
    await startNode(hosts, "worker3", { gpus: 2 })
    await waitFor("four nodes", async () => ((await alive()).length === 4 ? true : undefined), 60_000, 500)
    const session = newSession()
    const tag = newTag()
    const sampler = sampleEngines(tag)
    // four at once asked; only the three one-GPU nodes serve
    const r = await hosts.cli(args(session, tag, "2,3,4,8", "2", ["--parallel", "4"]), {
      env: withStandIns,
      timeoutMs: 240_000
    })
    const seen = sampler.stop()
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(seen.most, 1, "two engines on one host at a sample")
    // decided before the first lease: three one-GPU nodes against one two-GPU node
    assert.notInclude(seen.hosts, "worker3", "an engine ran on the node of another class")
    const doc = readSweep(session)
    const hostOf = await hostOfNode()
    assert.deepStrictEqual(doc.hardware_class, { gpu_count: 1, gpu_model: null, cpu_model: null })
    assert.deepStrictEqual(
      doc.left_alone.map((n: any) => hostOf.get(n.node_id)),
      ["worker3"]
    )
    // the engine starts on it, counted: none (no start left alone after the fact either)
    const starts = doc.combinations.flatMap((c: any) => c.engine_starts)
    assert.deepStrictEqual(
      starts.filter((s: any) => hostOf.get(s.node?.node_id) === "worker3"),
      []
    )
    assert.isTrue(starts.every((s: any) => s.outcome !== "left_alone"))
    // stated once, before the first start, naming the other class's node
    assert.lengthOf(
      r.stderr.split("left alone (another class): 2 × GPU (model not told) per node"),
      2,
      r.stderr
    )
    const cls = 1
    // every combination finished, each on a node of the class, with the model's answer
    for (const c of doc.combinations) {
      assert.strictEqual(c.status, "done")
      const ran = c.engine_starts.filter((s: any) => s.outcome === "ready")
      assert.lengthOf(ran, 1)
      assert.strictEqual(ran[0].node.gpu_count, cls)
      assert.isFalse(doc.left_alone.some((n: any) => n.node_id === ran[0].node.node_id))
      assert.deepStrictEqual(
        c.points.map((p: any) => p.status),
        ["ok"]
      )
    }
    console.log(`[sweep-remote] class: ${cls} GPU(s) per node; left alone: ${doc.left_alone.length} node(s)`)
    await assertReleased(10_000)
  })
})
