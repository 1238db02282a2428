/**
 * Sweeps on three hosts of their own that share nothing but Ray
 * (docs/design.md#sweeps-at-cluster-scale, scripts/hosts.sh): the head host runs Ray's head and
 * hyperloom from the checkout and declares no GPU, so every combination runs on another host
 * (worker, worker2); those have the Ray installation and the stand-in engine and client installed
 * outside any checkout (STAND_INS), nothing of hyperloom and no folder shared with the head. The
 * three hosts and their cluster are started ONCE for the file; Ray's health checks are shortened so
 * that a node is declared dead in ~NODE_DEATH_SEC.
 */
import * as fs from "node:fs"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { rayStatus } from "../support/groups.js"
import {
  type Hosts,
  IP,
  makeHosts,
  realRay,
  STAND_IN_BIN,
  STAND_INS,
  startCluster,
  whyNoHosts
} from "../support/hosts.js"
import { pidsWithArg } from "../support/lease.js"
import { projectRoot, waitFor } from "../support/ray.js"

/** Ray declares a node dead after 5 health checks that each fail: ~5 × (1 s + 1 s). */
export const HEALTH_CHECK = { health_check_period_ms: 1000, health_check_timeout_ms: 1000 }

const SLO = "p99_ttft_ms<=1000"
/** The CLI's PATH on the head: the stand-ins' commands first (every node has them there). */
const withStandIns = { PATH: `${STAND_IN_BIN}:${process.env.PATH}` }
let tagN = 0
const newTag = () => `hl-remote-${process.pid}-${tagN++}`
/** The stand-in engine (examples/engine-model.mjs: the largest passing concurrency is B = --max-num-seqs). */
const engine = (tag: string, extra = "") =>
  `fake-engine --load-sec 0.2 --queue-ms 1500 --tag=${tag} ${extra}`.trim()
const client = (prompts: number) => [
  "fake-bench-client",
  "--num-prompts",
  String(prompts),
  "--max-concurrency",
  "{c}",
  "--output-len",
  "16"
]
let sessionN = 0
/** A session folder on the head host (its /tmp is its own). */
const newSession = () => `/tmp/hl-sweep-remote-${sessionN++}`

const why = whyNoHosts()
if (why !== undefined)
  process.stderr.write(`sweep-remote tests skipped: cannot make namespaces here (${why})\n`)

describe.skipIf(why !== undefined)("sweeps on three hosts that share nothing but Ray", () => {
  let hosts: Hosts
  const status = () => rayStatus(hosts.cli)

  beforeAll(async () => {
    hosts = await makeHosts({ count: 3, shared: false })
    await startCluster(hosts, { gpus: { head: 0, worker: 1, worker2: 1 }, systemConfig: HEALTH_CHECK })
    await waitFor(
      "three nodes alive",
      async () =>
        (await status()).nodes.filter((n: any) => n.state === "ALIVE").length === 3 ? true : undefined,
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
      assert.deepStrictEqual(lines.slice(0, 6), [
        "ray",
        "bin",
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
    // The cluster: three nodes, one per host, GPUs only off the head.
    const nodes = (await status()).nodes.filter((n: any) => n.state === "ALIVE")
    assert.deepStrictEqual(nodes.map((n: any) => n.address).sort(), [IP.head, IP.worker, IP.worker2])
  })

  it("a sweep launched on the head runs its engines on the other hosts; every file comes back to the head's session folder", async () => {
    const session = newSession()
    const tag = newTag()
    const r = await hosts.cli(
      [
        "sweep",
        "run",
        "--session",
        session,
        "--gpus",
        "1",
        "--server",
        engine(tag, "--max-num-seqs {seqs}"),
        "--param",
        "seqs=2,4",
        "--load",
        "c=2,4",
        "--slo",
        SLO,
        "--between",
        "echo between-ran",
        "--",
        ...client(8)
      ],
      { env: withStandIns, timeoutMs: 240_000 }
    )
    assert.strictEqual(r.code, 0, r.stderr)
    // no engine of this sweep left on any host
    assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [])
    const local = (f: string) => hosts.pathOn("head", f)
    const doc = JSON.parse(fs.readFileSync(local(`${session}/sweep.json`), "utf8"))
    // the model's answer: B = 4 at c = 4; B = 2 passes c = 2 only
    assert.strictEqual(doc.summary.verdict, "best")
    assert.strictEqual(doc.summary.best.label, "seqs=4")
    assert.strictEqual(doc.summary.best.load, "4")
    assert.deepStrictEqual(
      doc.summary.combinations.map((c: any) => c.largest_passing_load),
      ["2", "4"]
    )
    for (const c of doc.combinations) {
      const engineDir = c.engine_starts[0].dir
      // the stand-in's startup line (vLLM's api_server), as the engine wrote it on its node
      assert.include(fs.readFileSync(local(`${engineDir}/server.log`), "utf8"), "api_server.py")
      for (const p of c.points)
        for (const run of p.runs) {
          assert.isTrue(fs.existsSync(local(`${run.dir}/client.log`)))
          const result = JSON.parse(fs.readFileSync(local(`${run.dir}/result.json`), "utf8"))
          assert.isAbove(result.output_throughput, 0)
          assert.include(fs.readFileSync(local(`${run.dir}/between.log`), "utf8"), "between-ran")
        }
    }
    // nothing of the session on the hosts that ran the engines, nothing left in their /tmp
    for (const host of ["worker", "worker2"] as const) {
      assert.isFalse(fs.existsSync(hosts.pathOn(host, session)), `${host} has the session folder`)
      assert.deepStrictEqual(
        fs.readdirSync(hosts.pathOn(host, "/tmp")).filter((f) => f.startsWith("hyperloom-sweep-")),
        []
      )
    }
  })
})
