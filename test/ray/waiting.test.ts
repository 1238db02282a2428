/**
 * docs/design.md#waiting-is-not-failing on a real head, through the bundled CLI: a lease that waits
 * behind another holder of the slot is not timed out by `--attempt-timeout` / `--timeout`, which
 * count from the command's start. One head for the file; a holder lease keeps the slot busy for
 * HOLD_SEC while a baseline (attempt timeout 2 s) and a `lease run --timeout 2` wait behind it.
 * Before the fix the baseline spent three attempts waiting, each timed out, and stopped as
 * `baseline_failed`; the lease exited 124 without its command ever running.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer, ManagedRuntime } from "effect"
import { whoHolds } from "../../src/programs/Lease.js"
import * as ClusterInspector from "../../src/services/ClusterInspector.js"
import * as GcsClient from "../../src/services/GcsClient.js"
import * as ProcFs from "../../src/services/ProcFs.js"
import * as Settings from "../../src/services/Settings.js"
import { cleanEnv, cliPath, runCli } from "../support/cli.js"
import { markerSleep, pidsWithArg, waitGone } from "../support/lease.js"
import { prepareRay, projectRoot, runPython, startHead, teardownRay, waitFor } from "../support/ray.js"

const PORT = 6388
/** How long the holder keeps the slot: longer than three timed-out attempts took before the fix. */
const HOLD_SEC = 16

let session = ""

beforeAll(async () => {
  await prepareRay()
  // Two GPUs: the last test leaves one to another user's actor and one free.
  await startHead({ port: PORT, slot: true, numGpus: 2 })
  session = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-waiting-"))
})

afterAll(async () => {
  await teardownRay()
  if (session !== "") fs.rmSync(session, { recursive: true, force: true })
})

describe("waiting for a busy slot is not charged (real head)", () => {
  it("a baseline and a lease wait behind a holder past their timeouts, then run and succeed", async () => {
    const marker = markerSleep(HOLD_SEC)
    const holder: ChildProcess = spawn(
      process.execPath,
      [cliPath, "lease", "run", "--gpus", "0", "--", "sh", "-c", `echo holding; exec sleep ${marker}`],
      { cwd: projectRoot, env: cleanEnv(), stdio: ["ignore", "pipe", "pipe"] }
    )
    let holderOut = ""
    let holderErr = ""
    holder.stdout!.on("data", (d) => (holderOut += d))
    holder.stderr!.on("data", (d) => (holderErr += d))
    try {
      await waitFor(
        `the holder's command to run (${holderErr.slice(-300)})`,
        () => (holderOut.includes("holding") ? true : undefined),
        90_000
      )
      const heldFrom = Date.now()
      const report = `{"throughput": 7}`
      const [base, lease] = await Promise.all([
        runCli(
          [
            "baseline",
            "run",
            "--session",
            session,
            "--json",
            "--gpus",
            "0",
            "--attempt-timeout",
            "2",
            "--",
            "sh",
            "-c",
            `printf '%s' '${report}' > "$HYPERLOOM_RESULT_FILE"`
          ],
          { timeoutMs: 150_000 }
        ),
        runCli(["lease", "run", "--json", "--gpus", "0", "--timeout", "2", "--", "sh", "-c", "echo ran"], {
          timeoutMs: 150_000
        })
      ])
      const waitedMs = Date.now() - heldFrom
      console.log(
        `[waiting] baseline: exit ${base.code}, ${base.json?.baseline_attempts?.length ?? "?"} attempt(s), ${base.json?.status}; lease: exit ${lease.code}, waited ${lease.json?.waited_sec} s; ${waitedMs} ms after the holder started`
      )
      // Both waited for the holder (longer than their timeouts) …
      assert.isAbove(waitedMs, (HOLD_SEC - 4) * 1000)
      assert.isAbove(lease.json?.waited_sec ?? 0, 2)
      // … and were not charged for it.
      assert.strictEqual(base.code, 0, base.stderr)
      assert.strictEqual(base.json.status, "succeeded")
      assert.strictEqual(base.json.baseline_tput, 7)
      assert.strictEqual(base.json.baseline_attempts.length, 1)
      assert.strictEqual(base.json.baseline_total_failures, 0)
      assert.isBelow(base.json.baseline_attempts[0].runtime_sec, 2)
      // whichever of the two arrived second waits in the host's queue, the other in Ray
      assert.match(base.stderr, /waiting for (serving_slot|the serving slot in the host's queue)/)
      assert.strictEqual(lease.code, 0, lease.stderr)
      assert.strictEqual(lease.json.timed_out, false)
      assert.strictEqual(lease.json.exit_code, 0)
      assert.include(lease.stderr, "ran")
    } finally {
      if (holder.exitCode === null) holder.kill("SIGINT")
    }
    await waitGone("the holder's command", () => pidsWithArg(marker), 30_000)
  })

  it("--attempt-timeout still bounds the command itself once it runs", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-waiting-"))
    try {
      const marker = markerSleep(60)
      const r = await runCli(
        [
          "baseline",
          "run",
          "--session",
          dir,
          "--json",
          "--gpus",
          "0",
          "--attempt-timeout",
          "1",
          "--",
          "sleep",
          marker
        ],
        { timeoutMs: 150_000 }
      )
      assert.strictEqual(r.json?.status, "stopped", r.stderr)
      assert.deepStrictEqual(
        r.json.baseline_attempts.map((a: { error_class: string }) => a.error_class),
        ["timeout", "timeout", "timeout"]
      )
      assert.deepStrictEqual(pidsWithArg(marker), [])
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe("a busy lease's holder is named by its command, user, GPUs and since when (issue 15)", () => {
  it("the waiting line, lease_wait_expired and ray status name the lease, not make_actor_class.<locals>.HyperloomLease", async () => {
    const marker = markerSleep(120)
    const user = os.userInfo().username
    // Off the slot (so not through the host's queue): the waiter meets the holder in Ray itself.
    const holder = spawn(
      process.execPath,
      [cliPath, "lease", "run", "--no-serving-slot", "--gpus", "2", "--", "sleep", marker],
      { cwd: projectRoot, env: cleanEnv(), stdio: ["ignore", "ignore", "pipe"] }
    )
    try {
      // The command itself (the CLI's and the supervisor's argv hold the marker too).
      const sleeping = () =>
        pidsWithArg(marker).filter((pid) =>
          fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").startsWith("sleep\0")
        )
      await waitFor("the holder's command to run", () => (sleeping().length > 0 ? true : undefined), 90_000)
      const waiter = await runCli(
        ["lease", "run", "--no-serving-slot", "--gpus", "1", "--wait", "8", "--", "true"],
        {
          timeoutMs: 90_000
        }
      )
      const named = new RegExp(
        `lease \`sleep ${marker.replace(".", "\\.")}\` of ${user}, 2 GPUs, since \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC`
      )
      assert.strictEqual(waiter.code, 125, waiter.stderr)
      assert.match(waiter.stderr, new RegExp(`waiting for 1 GPU\\(s\\): held by .*${named.source}`))
      assert.match(waiter.stderr.split("\n").find((l) => l.includes("not granted within")) ?? "", named)
      assert.notInclude(waiter.stderr, "<locals>")
      const status = await runCli(["ray", "status", "--json"], {
        env: { RAY_ADDRESS: `127.0.0.1:${PORT}` },
        timeoutMs: 60_000
      })
      const actor = status.json?.actors?.find((a: { name: string }) => a.name.includes(marker))
      assert.isDefined(actor, status.stdout)
      assert.match(actor.name, named)
      assert.strictEqual(actor.class_name, "HyperloomLease")
    } finally {
      holder.kill("SIGINT")
    }
    await waitGone("the holder's command", () => pidsWithArg(marker), 30_000)
  })
})

describe("who a waiting lease names, from a real head's snapshot", () => {
  /** A detached actor named `name` holding `resources` (and `gpus` GPUs), left alive for the test. */
  const detachedActor = async (name: string, gpus: number, resources: Record<string, number>) => {
    const p = await runPython(
      `import ray\nray.init(address="127.0.0.1:${PORT}", logging_level="ERROR", namespace="hl")\n@ray.remote(num_cpus=0)\nclass Held:\n    def ping(self):\n        return 1\na = Held.options(name=${JSON.stringify(name)}, lifetime="detached", num_gpus=${gpus}, resources=${JSON.stringify(resources)}).remote()\nray.get(a.ping.remote())\nprint("ready", flush=True)\n`
    )
    await waitFor(`${name}'s driver to exit`, () => p.child.exitCode !== null || undefined, 60_000)
  }

  it("another user's GPU actor beside a free slot and a free GPU is no holder; the slot's holder is, alone", async () => {
    const rt = ManagedRuntime.make(
      ClusterInspector.layer.pipe(
        Layer.provide(GcsClient.layer),
        Layer.provide(Layer.merge(Settings.layerTest({}), ProcFs.layer))
      )
    )
    try {
      const snapshot = () =>
        rt.runPromise(
          Effect.flatMap(ClusterInspector.ClusterInspector, (ci) => ci.snapshot(`127.0.0.1:${PORT}`))
        )
      const request = { gpus: 1, servingSlot: true }
      await detachedActor("other_users_model", 1, {})
      assert.isUndefined(whoHolds(await snapshot(), request, ""), "one GPU and the slot are free")
      await detachedActor("slot_holder", 0, { serving_slot: 1 })
      const named = whoHolds(await snapshot(), request, "")
      assert.match(named ?? "", /^actor slot_holder \(pid \d+, job [0-9a-f]+\)$/)
    } finally {
      await rt.dispose()
    }
  })
})
