/**
 * A cluster sweep survives its faults (docs/design.md#sweeps-at-cluster-scale "Faults",
 * docs/multi-node.md "Sweeping on a cluster"), on three hosts of their own that share nothing but
 * Ray (scripts/hosts.sh), started ONCE for the file with Ray's health checks shortened (a node is
 * declared dead ~10 s after it goes silent) and one GPU and the serving slot on every host, so three
 * combinations run at once, one per host:
 * - a host without the stand-in engine: that combination's start fails naming the node, and the
 *   combination runs elsewhere;
 * - SIGKILL of `sweep run` with three combinations in flight: the same command resumes them all;
 * - a worker's raylet SIGKILLed mid-combination, and a worker cut off past the node-death time:
 *   the run in flight is interrupted, the combination runs again from its first point not done on
 *   another node; the sweep completes with the right best, no point measured twice. The cut-off
 *   worker's engine is gone within Ray's node-death time of the cut (the lease's heartbeat fence,
 *   docs/multi-node.md "Fencing …": heartbeat 10 − 1 − 3 − 2 = 4 s here).
 * The sweep: seqs = 1, 2, 4 (the stand-in's batch limit B), c = 2, 4, p99 TTFT <= 1000 ms with a
 * 1500 ms queue cost: a point passes when c <= B, so the best is seqs=4 at c=4.
 */
import * as fs from "node:fs"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { rayStatus } from "../support/groups.js"
import {
  argvOf,
  type HostName,
  type Hosts,
  killRaylet,
  makeHosts,
  onHost,
  rayletOn,
  STAND_IN_BIN,
  startCluster,
  startNode,
  whyNoHosts
} from "../support/hosts.js"
import { pidsWithArg } from "../support/lease.js"
import { sleep, waitFor } from "../support/ray.js"
import { sweepArgs } from "../support/sweepOnHead.js"

/** Ray declares a node dead after 5 health checks that each fail: ~5 × (1 s + 1 s). */
const HEALTH_CHECK = { health_check_period_ms: 1000, health_check_timeout_ms: 1000 }
const NODE_DEATH_SEC = 10

const withStandIns = { PATH: `${STAND_IN_BIN}:${process.env.PATH}` }
let n = 0
const newTag = () => `hl-faults-${process.pid}-${n}`
const newSession = () => `/tmp/hl-sweep-faults-${n++}`

/** `sweep run` for the file's sweep: 3 combinations × 2 loads, all at once; runs of a few seconds (4 prompts: at c <= B one wave, past it up to 4 that each pay the queue cost); no warm-up (sweepArgs). */
const sweepRunArgs = (session: string, tag: string) =>
  sweepArgs(
    session,
    `fake-engine --load-sec 0.2 --queue-ms 1500 --tag=${tag} --max-num-seqs {seqs}`,
    ["--parallel", "3", "--param", "seqs=1,2,4", "--load", "c=2,4", "--slo", "p99_ttft_ms<=1000"],
    ["fake-bench-client", "--num-prompts", "4", "--max-concurrency", "{c}", "--output-len", "96"]
  )

const why = whyNoHosts()
if (why !== undefined)
  process.stderr.write(`sweep-faults tests skipped: cannot make namespaces here (${why})\n`)

describe.skipIf(why !== undefined)("a cluster sweep survives its faults (three hosts of their own)", () => {
  let hosts: Hosts
  const alive = async () => (await rayStatus(hosts.cli)).nodes.filter((x: any) => x.state === "ALIVE").length
  const threeAlive = () =>
    waitFor("three nodes alive", async () => ((await alive()) === 3 ? true : undefined), 90_000, 500)

  beforeAll(async () => {
    hosts = await makeHosts({ count: 3, shared: false })
    await startCluster(hosts, { gpus: 1, systemConfig: HEALTH_CHECK })
    await threeAlive()
  }, 240_000)
  afterAll(async () => {
    await hosts?.down()
  })

  const docOf = (session: string): any => {
    try {
      return JSON.parse(fs.readFileSync(hosts.pathOn("head", `${session}/sweep.json`), "utf8"))
    } catch {
      return undefined
    }
  }
  /** The host whose raylet is Ray's node `id`. */
  const hostOf = (id: string | null | undefined): HostName | undefined =>
    hosts.names.find((h) => {
      const pid = rayletOn(hosts, h)
      return pid !== undefined && (argvOf(pid) ?? []).includes(`--node_id=${id}`)
    })
  /**
   * A combination on a worker host with a run finished and its next run in flight (the point at
   * which a fault loses a measurement in flight and must keep the one before).
   */
  const midCombination = (
    session: string
  ): { index: number; host: Exclude<HostName, "head"> } | undefined => {
    for (const c of docOf(session)?.combinations ?? []) {
      const start = c.engine_starts.at(-1)
      if (start === undefined || start.outcome !== "ready" || start.ended_at !== null) continue
      const runs = c.points.flatMap((p: any) => p.runs)
      if (!runs.some((r: any) => r.ended_at !== null) || !runs.some((r: any) => r.ended_at === null)) continue
      const host = hostOf(start.node?.node_id)
      if (host !== undefined && host !== "head") return { index: c.index, host }
    }
    return undefined
  }
  /** The whole sweep as it must end: the right best, every point measured exactly once. */
  const assertComplete = (doc: any) => {
    assert.strictEqual(doc.status, "done")
    assert.strictEqual(doc.summary.best?.label, "seqs=4")
    assert.strictEqual(doc.summary.best?.load, "4")
    assert.deepStrictEqual(
      doc.combinations.map(
        (c: any) => `${c.status}:${c.points.map((p: any) => `${p.status}/${p.runs.length}`).join(",")}`
      ),
      ["done:slo_failed/1,slo_failed/1", "done:ok/1,slo_failed/1", "done:ok/1,ok/1"]
    )
  }
  const interrupted = (doc: any) => ({
    starts: doc.combinations.flatMap((c: any) =>
      c.engine_starts.filter((s: any) => s.outcome === "interrupted").map(() => c.index)
    ),
    runs: doc.combinations.flatMap((c: any) =>
      c.points.flatMap((p: any) => p.interrupted_runs.map(() => `${c.index}/${p.load}`))
    )
  })

  /**
   * The sweep ended complete after a node was lost under combination `index`: that one start and
   * its one run in flight interrupted, nothing else.
   */
  const endedRequeued = async (
    cli: { exited: Promise<{ code: number | null; stderr: string }> },
    session: string,
    index: number
  ) => {
    const r = await cli.exited
    assert.strictEqual(r.code, 0, r.stderr.slice(-3000))
    assertComplete(docOf(session))
    const lost = interrupted(docOf(session))
    assert.deepStrictEqual(lost.starts, [index])
    assert.deepStrictEqual(lost.runs.length, 1)
    return r
  }

  it("a host without the stand-in engine: its start fails naming the node, the combination runs elsewhere", async () => {
    const off = ["mv", `${STAND_IN_BIN}/fake-engine`, `${STAND_IN_BIN}/fake-engine.off`]
    assert.strictEqual((await hosts.run("worker2", off)).code, 0)
    try {
      const session = newSession()
      const tag = newTag()
      const r = await hosts.cli(sweepRunArgs(session, tag), { env: withStandIns, timeoutMs: 180_000 })
      assert.strictEqual(r.code, 0, r.stderr.slice(-3000))
      const doc = docOf(session)
      assertComplete(doc)
      // the start on worker2 is named and interrupted (not charged); that combination ran on another node
      const missed = doc.combinations.filter((c: any) =>
        c.engine_starts.some((s: any) => hostOf(s.node?.node_id) === "worker2")
      )
      assert.isAtLeast(missed.length, 1)
      for (const c of missed) {
        const [first, ...rest] = c.engine_starts
        assert.strictEqual(first.outcome, "interrupted")
        assert.match(first.error, /the engine is not installed on node .*fake-engine: not found/)
        assert.strictEqual(rest.at(-1).outcome, "ready")
        assert.notStrictEqual(hostOf(rest.at(-1).node?.node_id), "worker2")
      }
      assert.match(r.stderr, /the engine is not installed on node [^;]+; .*goes back to the queue/)
      assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [])
    } finally {
      await hosts.run("worker2", ["mv", `${STAND_IN_BIN}/fake-engine.off`, `${STAND_IN_BIN}/fake-engine`])
    }
  })

  it("SIGKILL of `sweep run` with three combinations in flight: the same command resumes them all, no point twice", async () => {
    const session = newSession()
    const tag = newTag()
    const args = sweepRunArgs(session, tag)
    const first = hosts.startCli(args, withStandIns)
    const pid = await first.pid()
    await waitFor(
      "three combinations each with a run in flight",
      () => {
        const doc = docOf(session)
        const busy = (doc?.combinations ?? []).filter((c: any) =>
          c.points.some((p: any) => p.runs.some((r: any) => r.ended_at === null))
        )
        return busy.length === 3 ? true : undefined
      },
      120_000,
      100
    )
    process.kill(pid, "SIGKILL")
    await first.exited
    // the leases go with their bridges: no engine of this sweep stays on any host
    await waitFor(
      "the engines gone",
      () => (pidsWithArg(`--tag=${tag}`).length === 0 ? true : undefined),
      30_000
    )
    const r = await hosts.cli(args, { env: withStandIns, timeoutMs: 180_000 })
    assert.strictEqual(r.code, 0, r.stderr.slice(-3000))
    assert.match(r.stderr, /[1-9]\d* run\(s\)\/engine start\(s\) were in flight/)
    const doc = docOf(session)
    assertComplete(doc)
    const lost = interrupted(doc)
    assert.deepStrictEqual([...new Set(lost.starts)].sort(), [0, 1, 2])
    assert.strictEqual(lost.runs.length, 3)
  })

  it("a worker's raylet SIGKILLed mid-combination: its run is interrupted, the combination runs again elsewhere; right best, no point twice", async () => {
    const session = newSession()
    const tag = newTag()
    const cli = hosts.startCli(sweepRunArgs(session, tag), withStandIns)
    const hit = await waitFor("a combination mid-way on a worker", () => midCombination(session), 120_000, 50)
    killRaylet(hosts, hit.host)
    const r = await endedRequeued(cli, session, hit.index)
    assert.match(r.stderr, /was lost while the combination ran/)
    assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [])
    // the node back for the next test
    await waitFor(
      "the killed node's processes gone",
      () => (rayletOn(hosts, hit.host) === undefined ? true : undefined),
      30_000
    )
    await startNode(hosts, hit.host, { gpus: 1 })
    await threeAlive()
  })

  it("a worker cut off past Ray's node-death time: its run is interrupted, the combination runs again elsewhere; right best, no point twice", async () => {
    const session = newSession()
    const tag = newTag()
    const cli = hosts.startCli(sweepRunArgs(session, tag), withStandIns)
    const hit = await waitFor("a combination mid-way on a worker", () => midCombination(session), 120_000, 50)
    const engineThere = () => pidsWithArg(`--tag=${tag}`).filter((pid) => onHost(hosts, hit.host, pid))
    assert.isNotEmpty(engineThere(), "an engine runs on the worker to be cut off")
    const t0 = Date.now()
    await hosts.cut(hit.host)
    // During the cut: the worker's process table every 100 ms (the heartbeat fence stops its engine
    // before Ray can declare the node dead, ~NODE_DEATH_SEC after the cut, and grant its slot again).
    let engineGoneSec: number | undefined
    try {
      while (Date.now() < t0 + (NODE_DEATH_SEC + 5) * 1000) {
        if (engineGoneSec === undefined && engineThere().length === 0)
          engineGoneSec = (Date.now() - t0) / 1000
        await sleep(100)
      }
    } finally {
      await hosts.heal(hit.host)
    }
    process.stderr.write(
      `cut: the cut-off worker's engine gone ${engineGoneSec ?? "never"} s after the cut\n`
    )
    assert.isDefined(engineGoneSec, "the cut-off worker's engine stopped during the cut")
    assert.isBelow(engineGoneSec!, NODE_DEATH_SEC, "within Ray's node-death time of the cut")
    await endedRequeued(cli, session, hit.index)
    // nothing of the sweep's engines is left anywhere
    await waitFor(
      "the engines gone",
      () => (pidsWithArg(`--tag=${tag}`).length === 0 ? true : undefined),
      60_000,
      500
    )
  })
})
