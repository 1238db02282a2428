/**
 * The guarded repair working on real heads, on demand and through a lease, and leases on a real
 * head: the command sees its GPU, its exit code comes back, the slot is free afterwards, and
 * Ctrl-C or SIGKILL of hyperloom leave no actor and no command process behind.
 */

import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, afterEach, assert, beforeAll, beforeEach, describe, it } from "@effect/vitest"
import { cleanEnv, cliPath, runCli } from "../support/cli.js"
import {
  daemonPids,
  prepareRay,
  projectRoot,
  rayBin,
  rayPython,
  startHead,
  teardownRay,
  waitFor
} from "../support/ray.js"

const PORT = 6392
const REPAIR_LOG = "Ray head has no serving_slot resource; restarting the local head with it"

const status = async () => {
  const r = await runCli(["ray", "status", "--json"])
  assert.strictEqual(r.code, 0, r.stderr)
  return r.json
}

/** Pids of processes whose argv contains `marker`, other than hyperloom itself (the test's command). */
const pidsWith = (marker: string) =>
  fs
    .readdirSync("/proc")
    .filter((e) => /^\d+$/.test(e))
    .filter((pid) => {
      try {
        const argv = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
        return argv.includes(marker) && !argv.includes("lease")
      } catch {
        return false
      }
    })

const liveActors = (s: any) => s.actors.filter((a: any) => a.state !== "DEAD")

describe("the repair and leases on real heads", () => {
  beforeEach(async () => {
    await prepareRay()
  })
  afterEach(async () => {
    await teardownRay()
  })

  it("repairs a lone idle head without the slot: same port, GPUs and custom resources kept, slot added", async () => {
    const head = await startHead({ port: PORT, numGpus: 2, numCpus: 2, resources: { foo: 3 } })
    const before = daemonPids()
    const r = await runCli(["ray", "repair", "--json"])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(r.json.action, "repaired")
    assert.include(r.stderr, REPAIR_LOG)
    const after = daemonPids()
    assert.notDeepEqual(after.gcsServers, before.gcsServers, "the head was restarted")
    const s = await status()
    assert.strictEqual(s.address, head.gcsAddress, "same port")
    assert.strictEqual(s.resources.total.GPU, 2)
    assert.strictEqual(s.resources.total.CPU, 2)
    assert.strictEqual(s.resources.total.foo, 3)
    assert.strictEqual(s.resources.total.serving_slot, 1)
    const again = await runCli(["ray", "doctor", "--json", "--gpus", "2"])
    assert.strictEqual(again.code, 0)
    assert.isTrue(again.json.feasible)
  })

  it("a head declared with 0 GPUs (no GPU key) comes back with 0: the restart passes --num-gpus=0", async () => {
    // No GPU here, so Ray's detection would also find 0: the `ray` the repair runs records its argv.
    await startHead({ port: PORT, numGpus: 0, numCpus: 2 })
    assert.notProperty((await status()).resources.total, "GPU")
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-ray-argv-"))
    const log = path.join(dir, "argv.log")
    const wrapper = path.join(dir, "ray")
    fs.writeFileSync(wrapper, `#!/bin/sh\nprintf '%s\\n' "$*" >> '${log}'\nexec '${rayBin}' "$@"\n`, {
      mode: 0o755
    })
    try {
      const r = await runCli(["ray", "repair", "--json"], {
        env: { HYPERLOOM_RAY: wrapper, HYPERLOOM_RAY_PYTHON: rayPython }
      })
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(r.json.action, "repaired")
      assert.strictEqual(r.json.plan.num_gpus, 0)
      const starts = fs
        .readFileSync(log, "utf8")
        .split("\n")
        .filter((l) => l.startsWith("start "))
      assert.lengthOf(starts, 1)
      assert.include(starts[0]!, " --num-gpus=0 ")
      const s = await status()
      assert.notProperty(s.resources.total, "GPU")
      assert.strictEqual(s.resources.total.CPU, 2)
      assert.strictEqual(s.resources.total.serving_slot, 1)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("a lease repairs the head end to end and runs the command with its GPU, returning its exit code", async () => {
    await startHead({ port: PORT, numGpus: 1 })
    const r = await runCli(
      ["lease", "run", "--gpus", "1", "--", "sh", "-c", 'echo "cvd=$CUDA_VISIBLE_DEVICES"; exit 42'],
      {
        env: { CUDA_VISIBLE_DEVICES: "" }
      }
    )
    assert.strictEqual(r.code, 42, r.stderr)
    assert.include(r.stderr, REPAIR_LOG)
    assert.match(r.stdout, /^cvd=0$/m)
    const s = await status()
    assert.strictEqual(s.resources.total.serving_slot, 1)
    await waitFor(
      "the slot to be free",
      async () => ((await status()).resources.available.serving_slot === 1 ? true : undefined),
      15_000
    )
    assert.deepStrictEqual(liveActors(await status()), [])
    // CMD not found / not executable: 127 / 126, as env and timeout report them.
    const missing = await runCli(["lease", "run", "--gpus", "0", "--", "/nonexistent/hyperloom-cmd"])
    assert.strictEqual(missing.code, 127, missing.stderr)
    assert.include(missing.stderr, "command not found: /nonexistent/hyperloom-cmd")
    const script = path.join(os.tmpdir(), `hl-not-executable-${process.pid}`)
    fs.writeFileSync(script, "#!/bin/sh\necho hi\n", { mode: 0o644 })
    try {
      const notExec = await runCli(["lease", "run", "--gpus", "0", "--", script])
      assert.strictEqual(notExec.code, 126, notExec.stderr)
      assert.include(notExec.stderr, "cannot execute")
    } finally {
      fs.rmSync(script, { force: true })
    }
  })

  it("a head short of both the slot and the GPUs reaches the repair first, then reports insufficient_gpus", async () => {
    await startHead({ port: PORT, numGpus: 1 })
    const r = await runCli(["lease", "run", "--gpus", "2", "--", "true"])
    // lease run's own failures exit 125 (like env/timeout); the precise code stays in the line.
    assert.strictEqual(r.code, 125, r.stderr)
    assert.include(r.stderr, "(hyperloom exit code 7)")
    assert.include(r.stderr, REPAIR_LOG)
    assert.include(r.stderr, "ray_cluster_infeasible: cluster has 1 GPU(s), 2 requested; ")
    assert.strictEqual((await status()).resources.total.serving_slot, 1, "the slot was added on the way")
  })

  it("two hyperloom processes at once on a slot-less head: one repair, both leases run", async () => {
    await startHead({ port: PORT })
    const before = daemonPids()
    const [a, b] = await Promise.all([
      runCli(["lease", "run", "--gpus", "0", "--", "sh", "-c", "sleep 1; echo A"]),
      runCli(["lease", "run", "--gpus", "0", "--", "sh", "-c", "sleep 1; echo B"])
    ])
    assert.strictEqual(a.code, 0, a.stderr)
    assert.strictEqual(b.code, 0, b.stderr)
    assert.include(a.stdout, "A")
    assert.include(b.stdout, "B")
    const repairs = `${a.stderr}${b.stderr}`.split(REPAIR_LOG).length - 1
    assert.strictEqual(repairs, 1, `${a.stderr}\n---\n${b.stderr}`)
    const after = daemonPids()
    assert.strictEqual(after.gcsServers.length, 1)
    assert.notDeepEqual(after.gcsServers, before.gcsServers)
  })
})

/**
 * The leases that need a head with the slot and change nothing of it (no repair) share one: each
 * starts on the same head with no live actor and the slot free, and leaves it so (checked).
 */
describe("leases on one shared slot head", () => {
  let daemons: ReturnType<typeof daemonPids>
  beforeAll(async () => {
    await prepareRay()
    await startHead({ port: PORT, slot: true })
    daemons = daemonPids()
  })
  const idle = () =>
    waitFor(
      "no live actor and a free slot",
      async () => {
        const s = await status()
        return liveActors(s).length === 0 && s.resources.available.serving_slot === 1 ? true : undefined
      },
      20_000
    )
  beforeEach(async () => {
    assert.deepStrictEqual(daemonPids(), daemons, "the shared head is the one started for these tests")
    await idle()
  })
  afterAll(async () => {
    await teardownRay()
  })

  it("a second lease waits while the slot is held, says for whom, and starts once it is free", async () => {
    // The holder runs until the waiter has said whom it waits for: on a loaded host a timed holder
    // (`sleep 6`) could end before the waiter reached the GCS, and the waiter would not wait at all.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-lease-release-"))
    const release = path.join(dir, "release")
    try {
      const holder = runCli(
        ["lease", "run", "--gpus", "0", "--", "sh", "-c", `while [ ! -e '${release}' ]; do sleep 0.2; done`],
        { timeoutMs: 240_000 }
      )
      await waitFor(
        "the first lease to hold the slot",
        async () => ((await status()).resources.available.serving_slot ?? 0) === 0 || undefined,
        60_000
      )
      const child = spawn(
        process.execPath,
        [cliPath, "lease", "run", "--gpus", "0", "--", "echo", "second"],
        {
          env: cleanEnv(),
          cwd: projectRoot,
          stdio: ["ignore", "pipe", "pipe"]
        }
      )
      let stdout = ""
      let stderr = ""
      child.stdout.on("data", (d) => (stdout += d))
      child.stderr.on("data", (d) => (stderr += d))
      const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
      await waitFor(
        "the second lease to say it waits",
        () => (stderr.includes("waiting for serving_slot") ? true : undefined),
        90_000,
        200
      )
      fs.writeFileSync(release, "")
      const first = await holder
      const code = await exited
      assert.strictEqual(first.code, 0, first.stderr)
      assert.strictEqual(code, 0, stderr)
      assert.match(
        stderr,
        // the holder is named by its lease (its command, user, GPUs, since when), then Ray's ids
        /waiting for serving_slot: held by actor lease `.+` of \S+, \d+ GPUs?, since [\d-]+ [\d:]+ UTC \(bridge [^)]+\) \(pid \d+, job [0-9a-f]+, driver pid \d+\)/,
        stderr
      )
      assert.include(stdout, "second")
    } finally {
      fs.writeFileSync(release, "")
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  for (const signal of ["SIGINT", "SIGKILL"] as const) {
    it(`${signal} to hyperloom during a lease leaves no actor and no command process`, async () => {
      const marker = `hyperloom-test-${signal}-${Date.now()}`
      const child = spawn(
        process.execPath,
        [cliPath, "lease", "run", "--gpus", "0", "--", "node", "-e", "setTimeout(() => {}, 300000)", marker],
        {
          env: cleanEnv(),
          cwd: projectRoot,
          stdio: ["ignore", "pipe", "pipe"]
        }
      )
      let stderr = ""
      child.stderr.on("data", (d) => (stderr += d))
      await waitFor("the command to run", () => (pidsWith(marker).length > 0 ? true : undefined), 30_000)
      const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
      child.kill(signal)
      const code = await exited
      if (signal === "SIGINT") assert.strictEqual(code, 130, stderr)
      await waitFor(
        "the command to be gone",
        () => (pidsWith(marker).length === 0 ? true : undefined),
        15_000
      )
      await waitFor(
        "no live actor and a free slot",
        async () => {
          const s = await status()
          return liveActors(s).length === 0 && s.resources.available.serving_slot === 1 ? true : undefined
        },
        20_000
      )
    })
  }
})
