/**
 * `sweep run --parallel` on a real cluster (docs/design.md#sweeps-at-cluster-scale), through the
 * bundled CLI: ONE cluster for the file, of several Ray nodes on this host (a head and two worker
 * raylets, each declaring serving_slot and one GPU; the last test joins a node of two GPUs).
 * Several nodes on one host share its disk and checkout: what this file proves is the scheduling
 * through Ray (each combination under its own lease on a node no other holds, the sweep's leases
 * from one host not serialised, the hardware class, Ctrl-C); hosts that share nothing but Ray are
 * test/ray/sweep-remote.test.ts's (scripts/hosts.sh).
 *
 * The stand-in engine's model (examples/engine-model.mjs): with n = 16 output tokens and the SLO
 * p99_ttft_ms<=1000 the largest passing concurrency of a combination is its --max-num-seqs.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { cleanEnv, cliPath, runCli } from "../support/cli.js"
import { closeGcs, pidsWithArg, waitGone, waitNoLeaseActor } from "../support/lease.js"
import {
  type Head,
  prepareRay,
  projectRoot,
  startHead,
  startWorker,
  teardownRay,
  waitFor
} from "../support/ray.js"

const PORT = 6401
const SLO = "p99_ttft_ms<=1000"
const engine = (tag: string) =>
  `${process.execPath} ${path.join(projectRoot, "examples/fake-engine.mjs")} --load-sec 0.2 --queue-ms 1500 --tag=${tag} --max-num-seqs {seqs}`
const client = [
  process.execPath,
  "examples/fake-bench-client.mjs",
  "--num-prompts",
  "9",
  "--max-concurrency",
  "{c}",
  "--output-len",
  "16"
]

const sessions: Array<string> = []
const newSession = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-sweep-cluster-"))
  sessions.push(dir)
  return dir
}
let tagN = 0
const newTag = () => `hl-sweep-cluster-${process.pid}-${Date.now()}-${tagN++}`
const readSweep = (dir: string) => JSON.parse(fs.readFileSync(path.join(dir, "sweep.json"), "utf8"))

const args = (session: string, tag: string, seqs: string, extra: ReadonlyArray<string>) => [
  "sweep",
  "run",
  "--session",
  session,
  "--gpus",
  "1",
  "--server",
  engine(tag),
  "--param",
  `seqs=${seqs}`,
  "--load",
  "c=2,4,8",
  "--slo",
  SLO,
  ...extra,
  "--",
  ...client
]

const parentOf = (pid: number): number | undefined => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
  } catch {
    return undefined
  }
}
const isRaylet = (pid: number) => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")[0]!.endsWith("raylet")
  } catch {
    return false
  }
}
/** The raylet (the node) an engine runs under: its lease's worker is that raylet's child. */
const rayletOf = (pid: number): number | undefined => {
  for (let p: number | undefined = pid, i = 0; p !== undefined && p > 1 && i < 30; p = parentOf(p), i++)
    if (isRaylet(p)) return p
  return undefined
}

/**
 * Samples the engines of `tag` every 100 ms until stopped: the most seen on one node at once and
 * the nodes seen running one.
 */
const sampleEngines = (tag: string) => {
  let most = 0
  const nodes = new Set<number>()
  const timer = setInterval(() => {
    const perNode = new Map<number, number>()
    for (const pid of pidsWithArg(`--tag=${tag}`)) {
      const node = rayletOf(pid)
      if (node === undefined) continue
      nodes.add(node)
      perNode.set(node, (perNode.get(node) ?? 0) + 1)
    }
    for (const n of perNode.values()) most = Math.max(most, n)
  }, 100)
  return {
    stop: () => {
      clearInterval(timer)
      return { most, nodes: nodes.size }
    }
  }
}

/** Every lease of the sweep released: no lease actor left (closeGcs after the file). */
const assertSlotsFree = () => waitNoLeaseActor(head, 10_000)

const aliveNodes = async () => {
  const r = await runCli(["ray", "status", "--json"], { timeoutMs: 60_000 })
  return r.code === 0 ? JSON.parse(r.stdout).nodes.filter((x: any) => x.state === "ALIVE").length : 0
}

let head: Head

describe("sweep run --parallel on a cluster of several nodes", () => {
  beforeAll(async () => {
    await prepareRay()
    head = await startHead({ port: PORT, slot: true, numGpus: 1, numCpus: 1 })
    await startWorker(head, { numCpus: 1, numGpus: 1, resources: { serving_slot: 1 } })
    await startWorker(head, { numCpus: 1, numGpus: 1, resources: { serving_slot: 1 } })
    await waitFor(
      "three nodes with a serving slot",
      async () => ((await aliveNodes()) === 3 ? true : undefined),
      60_000,
      1000
    )
  }, 240_000)
  afterAll(async () => {
    closeGcs()
    await teardownRay()
    for (const s of sessions) fs.rmSync(s, { recursive: true, force: true })
  }, 120_000)

  it("--parallel 3: the points and best of --parallel 1, three nodes at once, never two engines on one node", async () => {
    const one = newSession()
    const r1 = await runCli(args(one, newTag(), "2,4,8", ["--parallel", "1"]), { timeoutMs: 300_000 })
    assert.strictEqual(r1.code, 0, r1.stderr)
    const three = newSession()
    const tag3 = newTag()
    const sampler = sampleEngines(tag3)
    const r3 = await runCli(args(three, tag3, "2,4,8", ["--parallel", "3"]), { timeoutMs: 300_000 })
    const seen = sampler.stop()
    assert.strictEqual(r3.code, 0, r3.stderr)
    assert.strictEqual(seen.most, 1, "two engines on one node at a sample")
    assert.isAtLeast(seen.nodes, 2)
    console.log(
      `[sweep-cluster] --parallel 1: ${(r1.ms / 1000).toFixed(1)} s, --parallel 3: ${(r3.ms / 1000).toFixed(1)} s`
    )
    const a = readSweep(one)
    const b = readSweep(three)
    const shape = (doc: any) =>
      doc.combinations.map((c: any) => c.points.map((p: any) => `${p.load}:${p.status}`))
    assert.deepStrictEqual(shape(b), shape(a))
    assert.deepStrictEqual(
      b.summary.combinations.map((c: any) => c.largest_passing_load),
      ["2", "4", "8"]
    )
    assert.strictEqual(b.summary.best.label, a.summary.best.label)
    assert.strictEqual(b.summary.best.load, a.summary.best.load)
    // one engine start per combination, each on a node of its own while it ran
    assert.deepStrictEqual(
      b.combinations.map((c: any) => c.engine_starts.length),
      [1, 1, 1]
    )
    assert.strictEqual(new Set(b.combinations.map((c: any) => c.engine_starts[0].node.node_id)).size, 3)
    assert.deepStrictEqual(b.hardware_class, { gpu_count: 1, gpu_model: null, cpu_model: null })
    // every progress line of a point names its node; sweep show names each combination's node
    assert.match(r3.stderr, /combination #\d \(seqs=\d\) on \S+, c=\d/)
    const show = await runCli(["sweep", "show", "--session", three])
    assert.include(show.stdout, "node(s)")
    await assertSlotsFree()
  })

  it("Ctrl-C with three engines up: every engine stopped and every lease released within 10 s, exit 130", async () => {
    const session = newSession()
    const tag = newTag()
    // --between holds each combination between its engine's readiness and its first client run
    const child: ChildProcess = spawn(
      process.execPath,
      [cliPath, ...args(session, tag, "2,4,8", ["--parallel", "3", "--between", "sleep 60"])],
      { cwd: projectRoot, env: cleanEnv(), stdio: ["ignore", "pipe", "pipe"] }
    )
    let stderr = ""
    child.stderr!.on("data", (d) => (stderr += d))
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
    await waitFor(
      "three engines ready",
      async () => {
        if (!fs.existsSync(path.join(session, "sweep.json"))) return undefined
        const doc = readSweep(session)
        return doc.combinations.filter((c: any) => c.engine_starts.at(-1)?.outcome === "ready").length === 3
          ? true
          : undefined
      },
      120_000,
      500
    )
    assert.lengthOf(pidsWithArg(`--tag=${tag}`), 3, "three engines up")
    const t = Date.now()
    child.kill("SIGINT")
    const code = await Promise.race([exited, new Promise<"hung">((r) => setTimeout(() => r("hung"), 30_000))])
    const ms = Date.now() - t
    console.log(`[sweep-cluster] ctrl-c with three engines up: exit ${code} ${ms} ms after SIGINT`)
    assert.strictEqual(code, 130, stderr)
    assert.isBelow(ms, 10_000)
    await waitGone("the engines", () => pidsWithArg(`--tag=${tag}`), 2_000)
    const doc = readSweep(session)
    assert.strictEqual(doc.status, "cancelled")
    assert.isTrue(doc.combinations.every((c: any) => c.status === "pending"))
    await assertSlotsFree()
  })

  it("a node whose GPU count differs is left alone and named once; the sweep completes on the others", async () => {
    await startWorker(head, { numCpus: 1, numGpus: 2, resources: { serving_slot: 1 } })
    await waitFor("four nodes", async () => ((await aliveNodes()) === 4 ? true : undefined), 60_000, 1000)
    const session = newSession()
    const tag = newTag()
    const sampler = sampleEngines(tag)
    // four leases at once on four slots: one lands on the two-GPU node
    const r = await runCli(args(session, tag, "2,3,4,8", ["--parallel", "4"]), { timeoutMs: 300_000 })
    assert.strictEqual(sampler.stop().most, 1, "two engines on one node at a sample")
    assert.strictEqual(r.code, 0, r.stderr)
    const doc = readSweep(session)
    // the class is the first node granted's: a one-GPU node's (the others left alone: the two-GPU
    // node), or, should the two-GPU node's engine have been ready first, the two-GPU one
    const cls = doc.hardware_class.gpu_count
    assert.include([1, 2], cls)
    assert.isAtLeast(doc.left_alone.length, 1)
    for (const n of doc.left_alone) {
      assert.notStrictEqual(n.gpu_count, cls)
      // named once each
      assert.lengthOf(r.stderr.split(`(${n.node_id}) alone`), 2, r.stderr)
    }
    // every combination finished, each on a node of the class
    for (const c of doc.combinations) {
      assert.strictEqual(c.status, "done")
      const ran = c.engine_starts.filter((s: any) => s.outcome === "ready")
      assert.lengthOf(ran, 1)
      assert.strictEqual(ran[0].node.gpu_count, cls)
      assert.isFalse(doc.left_alone.some((n: any) => n.node_id === ran[0].node.node_id))
    }
    console.log(`[sweep-cluster] class: ${cls} GPU(s) per node; left alone: ${doc.left_alone.length} node(s)`)
    await assertSlotsFree()
  })
})
