/**
 * Failures that need the host's Ray to be ours (no other Ray running): nothing running, and a
 * `ray` that hangs. Each is one clear line and a documented exit code; a hung `ray` is killed
 * with its whole process tree.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach, assert, beforeEach, describe, it } from "@effect/vitest"
import { runCli } from "../support/cli.js"
import { prepareRay, startHead, teardownRay, waitFor } from "../support/ray.js"

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe("failures with the host's Ray to ourselves", () => {
  let dir: string
  beforeEach(async () => {
    await prepareRay()
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-fake-ray-"))
  })
  afterEach(async () => {
    fs.rmSync(dir, { recursive: true, force: true })
    await teardownRay()
  })

  /** A fake `ray`: `status` answers "no cluster"; `start` ignores SIGTERM and hangs, with a child. */
  const hangingRay = () => {
    const script = path.join(dir, "ray")
    fs.writeFileSync(
      script,
      `#!/bin/sh\necho $$ >> "${dir}/pids"\ncase "$1" in\n  status) exit 1 ;;\n  start) trap '' TERM; sleep 300 & echo $! >> "${dir}/pids"; wait ;;\nesac\n`,
      { mode: 0o755 }
    )
    return script
  }

  it("Ray not running: status and doctor say so in one line, exit 4", async () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-raytmp-"))
    try {
      // RAY_TMPDIR without a current-cluster file, and no raylet on the host
      const r = await runCli(["ray", "doctor"], { env: { RAY_TMPDIR: empty } })
      assert.strictEqual(r.code, 4, r.stderr)
      assert.include(r.stderr, "Ray is not running")
      assert.strictEqual(r.stderr.trim().split("\n").length, 1)
    } finally {
      fs.rmSync(empty, { recursive: true, force: true })
    }
  })

  it("a `ray start` that hangs (and ignores SIGTERM) is killed with its children at its timeout: exit 5", async () => {
    const ray = hangingRay()
    const r = await runCli(["ray", "ensure"], {
      env: { HYPERLOOM_RAY: ray, HYPERLOOM_RAY_START_TIMEOUT_SEC: "2", HL_RAY_HEAD_PORT: "6399" }
    })
    assert.strictEqual(r.code, 5, r.stderr)
    assert.include(r.stderr, "did not finish within 2 s and was killed")
    assert.isBelow(r.ms, 15_000)
    const pids = fs.readFileSync(path.join(dir, "pids"), "utf8").trim().split("\n").map(Number)
    assert.isAtLeast(pids.length, 3, "status, start and start's child")
    await waitFor(
      "the hung ray and its child to be gone",
      () => (pids.every((p) => !alive(p)) ? true : undefined),
      5_000
    )
  })

  it("a `ray status` that hangs is bounded by HYPERLOOM_RAY_STATUS_TIMEOUT_SEC", async () => {
    const ray = path.join(dir, "ray")
    fs.writeFileSync(ray, `#!/bin/sh\necho $$ >> "${dir}/pids"\nsleep 300\n`, { mode: 0o755 })
    const r = await runCli(["ray", "ensure"], {
      env: { HYPERLOOM_RAY: ray, HYPERLOOM_RAY_STATUS_TIMEOUT_SEC: "1", RAY_ADDRESS: "127.0.0.1:6399" }
    })
    assert.strictEqual(r.code, 6, r.stderr)
    assert.include(r.stderr, "`ray status` did not answer within 1 s")
    assert.include(r.stderr, "RAY_ADDRESS=127.0.0.1:6399")
    assert.isBelow(r.ms, 10_000)
    const pid = Number(fs.readFileSync(path.join(dir, "pids"), "utf8").trim())
    await waitFor("the hung ray status to be gone", () => (!alive(pid) ? true : undefined), 5_000)
  })
})

describe("a lease repeats what ray ensure warns of (real head)", () => {
  beforeEach(() => prepareRay())
  afterEach(() => teardownRay())

  it("a head declaring serving_slot 2: lease run warns that two serving runs can overlap, then runs", async () => {
    await startHead({ port: 6393, resources: { serving_slot: 2 } })
    const r = await runCli(["lease", "run", "--gpus", "0", "--", "true"])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.match(
      r.stderr,
      /serving_slot total is 2 on node [0-9a-f]+… \(head\); it should be 1 per node, or two serving runs can overlap/
    )
  })
})
