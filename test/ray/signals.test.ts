/**
 * Cancelling (issue 13 item 6), on a real head, with signals sent to the CLI's whole process group
 * as a terminal sends them (Ctrl-C, the terminal closing):
 * - SIGHUP is handled as Ctrl-C: the command stopped, the lease released, exit 129; `baseline run`
 *   records the session as cancelled (it stayed "in flight": the CLI died at once);
 * - a second Ctrl-C while the lease is being released does not end the CLI before the lease is
 *   free (it did: the command still ran, the slot held, behind a gone CLI);
 * - Ctrl-C says on stderr what it stopped and released (it ended silently).
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { cleanEnv, cliPath, runCli } from "../support/cli.js"
import { markerSleep, pidsWithArg, waitGone } from "../support/lease.js"
import { prepareRay, projectRoot, startHead, teardownRay, waitFor } from "../support/ray.js"

beforeAll(async () => {
  await prepareRay()
  await startHead({ port: 6425, numCpus: 2, slot: true })
})

afterAll(() => teardownRay())

interface Cli {
  readonly child: ChildProcess
  readonly stderr: () => string
  readonly stdout: () => string
  readonly exited: Promise<number | null>
  /** Sends `signal` to the CLI's process group (the CLI and its bridge), as a terminal does. */
  readonly signal: (signal: NodeJS.Signals) => void
}

const start = (args: ReadonlyArray<string>): Cli => {
  const child = spawn(process.execPath, [cliPath, ...args], {
    env: cleanEnv(),
    cwd: projectRoot,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true // a process group of its own, as a shell's job
  })
  let stdout = ""
  let stderr = ""
  child.stdout!.on("data", (d) => (stdout += d))
  child.stderr!.on("data", (d) => (stderr += d))
  return {
    child,
    stderr: () => stderr,
    stdout: () => stdout,
    exited: new Promise((resolve) =>
      child.on("exit", (code, signal) => resolve(code ?? (signal ? -1 : null)))
    ),
    signal: (s) => process.kill(-child.pid!, s)
  }
}

const within = <A>(p: Promise<A>, ms: number, what: string) =>
  Promise.race([
    p,
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms))
  ])

/** The slot is free: a lease runs without waiting for it. */
const slotIsFree = async () => {
  const r = await runCli(["lease", "run", "--gpus", "0", "--", "true"], { timeoutMs: 60_000 })
  assert.strictEqual(r.code, 0, r.stderr)
  assert.notInclude(r.stderr, "waiting for serving_slot", r.stderr)
}

/** The command's own processes (not the CLI's or the supervisor's, whose argv holds it too). */
const commandPids = (marker: string, names: ReadonlyArray<string>) =>
  pidsWithArg(marker).filter((pid) => {
    try {
      return names.includes(
        path.basename(fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")[0] ?? "")
      )
    } catch {
      return false
    }
  })

const NAMES = ["sleep", "sh"]

/**
 * The command runs, and the CLI knows it: the host's queue shows its lease holding (marked once
 * the bridge's `started` reached the CLI, which names the stopped command only after that; the
 * command's exec comes a relay earlier, and a signal in between is a cancel before the start).
 */
const commandRuns = async (marker: string) => {
  await waitFor(
    "the command to run",
    () => (commandPids(marker, NAMES).length > 0 ? true : undefined),
    90_000
  )
  await waitFor(
    "the CLI to know it started",
    async () => {
      const q = await runCli(["queue", "--json"], { timeoutMs: 30_000 })
      return q.code === 0 && JSON.parse(q.stdout).holders.length > 0 ? true : undefined
    },
    60_000,
    100
  )
}

const kill = (cli: Cli) => {
  if (cli.child.exitCode === null) cli.child.kill("SIGKILL")
}

describe("lease run on a signal", () => {
  it("SIGHUP (the terminal closed): the command stopped, the lease released, one line, exit 129", async () => {
    const marker = markerSleep()
    const cli = start(["lease", "run", "--gpus", "0", "--", "sleep", marker])
    try {
      await commandRuns(marker)
      cli.signal("SIGHUP")
      assert.strictEqual(await within(cli.exited, 30_000, "exit after SIGHUP"), 129, cli.stderr())
      assert.deepStrictEqual(commandPids(marker, NAMES), [])
      assert.match(
        cli.stderr(),
        /hyperloom: cancelled \(SIGHUP\): stopped sleep \(pid \d+\) and released the lease/
      )
    } finally {
      kill(cli)
    }
    await slotIsFree()
  })

  it("Ctrl-C, then Ctrl-C again during the release: the CLI ends only once the command is gone and the lease free", async () => {
    const marker = `slow-stop-${Math.floor(Math.random() * 1e9)}`
    // The command takes ~2 s to stop on TERM, so that the second Ctrl-C comes during the release.
    const script = 'trap "sleep 2; exit 0" TERM; while :; do sleep 0.2; done'
    const cli = start(["lease", "run", "--gpus", "0", "--", "sh", "-c", script, marker])
    try {
      await commandRuns(marker)
      cli.signal("SIGINT")
      await new Promise((r) => setTimeout(r, 500))
      cli.signal("SIGINT")
      const code = await within(cli.exited, 30_000, "exit after the second Ctrl-C")
      // When the CLI is gone, nothing of its lease runs any more.
      assert.deepStrictEqual(commandPids(marker, NAMES), [], "the command outlived the CLI")
      assert.strictEqual(code, 130, cli.stderr())
      assert.include(cli.stderr(), "still releasing the lease")
      assert.match(
        cli.stderr(),
        /hyperloom: cancelled \(SIGINT\): stopped sh \(pid \d+\) and released the lease/
      )
    } finally {
      kill(cli)
    }
    await slotIsFree()
  })
})

describe("baseline run on SIGHUP", () => {
  it("the attempt is recorded as cancelled (not left in flight), the lease released, exit 129", async () => {
    const session = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-signals-"))
    const marker = markerSleep()
    const cli = start(["baseline", "run", "--session", session, "--gpus", "0", "--", "sleep", marker])
    try {
      await commandRuns(marker)
      cli.signal("SIGHUP")
      assert.strictEqual(await within(cli.exited, 30_000, "exit after SIGHUP"), 129, cli.stderr())
      await waitGone("the command", () => commandPids(marker, NAMES), 5_000)
      const state = JSON.parse(fs.readFileSync(path.join(session, "state.json"), "utf8"))
      assert.strictEqual(state.status, "cancelled", JSON.stringify(state))
      assert.strictEqual(state.stop_reason, "orchestrator_cancelled")
      assert.isNotNull(state.baseline_attempts[0].ended_at)
      // The session's lock is free again (flock(2) on <session>/.lock: the file stays, the lock goes).
      assert.strictEqual(spawnSync("flock", ["-n", path.join(session, ".lock"), "true"]).status, 0)
    } finally {
      kill(cli)
      fs.rmSync(session, { recursive: true, force: true })
    }
    await slotIsFree()
  })
})
