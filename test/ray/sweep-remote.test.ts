/**
 * Sweeps on three hosts of their own that share nothing but Ray (SPEC §14, scripts/hosts.sh): the
 * head host runs Ray's head and hyperloom from the checkout and declares no GPU, so every
 * combination runs on another host (worker, worker2); those have the Ray installation and the
 * stand-in engine and client installed outside any checkout (STAND_INS), nothing of hyperloom and
 * no folder shared with the head. The three hosts and their cluster are started ONCE for the file;
 * Ray's health checks are shortened so that a node is declared dead in ~NODE_DEATH_SEC.
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
import { projectRoot, waitFor } from "../support/ray.js"

/** Ray declares a node dead after 5 health checks that each fail: ~5 × (1 s + 1 s). */
export const HEALTH_CHECK = { health_check_period_ms: 1000, health_check_timeout_ms: 1000 }

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
})
