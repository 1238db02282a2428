/**
 * `hyperloom queue` and `--wait` on the command line (docs/design.md#fair-queue), without Ray: the
 * unit bundle has a host queue of its own name (test/support/bundle.ts), so it is empty here. The
 * queue with leases in it is tested on a real head (test/ray/queue.test.ts).
 */
import * as fs from "node:fs"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { bundleCli, runBundled } from "../support/bundle.js"

let work = ""
let cli = ""
beforeAll(async () => {
  ;({ work, cli } = await bundleCli())
}, 120_000)
afterAll(() => {
  if (work !== "") fs.rmSync(work, { recursive: true, force: true })
})

describe("hyperloom queue", () => {
  it("--json: nobody holds or waits; the document's fields are there", () => {
    const r = runBundled(cli, work, ["queue", "--json"])
    assert.strictEqual(r.code, 0, r.stderr)
    const j = JSON.parse(r.stdout)
    assert.deepStrictEqual([j.holders, j.waiters, j.typical_lease_sec, j.recent_leases], [[], [], null, 0])
    // Shared by the host's users in /tmp (root's and sticky here), under the unit bundle's own name.
    assert.match(j.queue, /^\/tmp\/\.hyperloom-queue\.hyperloom-unit-tests-\d+\.\*$/)
    assert.isTrue(j.shared)
  })

  it("readable: says nobody holds or waits", () => {
    const r = runBundled(cli, work, ["queue"])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.include(r.stdout, "0 holding, 0 waiting")
    assert.include(r.stdout, "nobody holds or waits for the serving slot")
  })

  it("--wait must be a positive number of seconds (exit 2, nothing runs); --help and the exit table list it", () => {
    for (const bad of ["0", "-1", "x"]) {
      const r = runBundled(cli, work, ["lease", "run", "--gpus", "0", "--wait", bad, "--", "true"])
      assert.strictEqual(r.code, 2, `${bad}: ${r.stderr}`)
    }
    const help = runBundled(cli, work, ["lease", "run", "--help"])
    assert.include(help.stdout, "--wait")
    const root = runBundled(cli, work, ["--help"])
    assert.include(root.stdout, "15   lease_wait_expired")
    assert.include(root.stdout, "queue")
    assert.include(runBundled(cli, work, ["baseline", "run", "--help"]).stdout, "--wait")
    assert.include(runBundled(cli, work, ["sweep", "run", "--help"]).stdout, "--wait")
    const sweep = (wait: string) =>
      runBundled(cli, work, [
        "sweep",
        "run",
        "--session",
        `${work}/sweep-wait`,
        "--gpus",
        "0",
        "--wait",
        wait,
        "--server",
        "engine --max-num-seqs {s}",
        "--param",
        "s=1",
        "--load",
        "c=1",
        "--",
        "client",
        "{c}"
      ])
    const bad = sweep("0")
    assert.strictEqual(bad.code, 2, bad.stderr)
    assert.include(bad.stderr, "--wait")
  }, 120_000)
})
