/**
 * `hyperloom baseline run` on real heads, through the bundled CLI, with the example benchmark
 * (examples/fake-serving-bench.mjs): every stop scenario of docs/design.md#stop-rules — infeasible
 * at the first attempt, the same failure twice, three different failures, two argument errors —
 * success, a missing command, an enablement command that fixes the failure, the deadline, a corrupt
 * state, and Ctrl-C mid-attempt. The scenarios that need a particular head (one without a slot) or
 * none own their setup and teardown; those that only lease from a slot head with one GPU (none of
 * them restarts or stops it) share one head, started in beforeAll, and each must leave no lease
 * actor behind. Ctrl-C keeps its own head: it checks that the next lease gets the slot at once.
 * Each test prints one `[baseline scenario]` line with its attempts and wall time.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, afterEach, assert, beforeAll, beforeEach, describe, it } from "@effect/vitest"
import { type CliRun, cleanEnv, cliPath, runCli } from "../support/cli.js"
import { closeGcs, pidsWithArg, waitGone, waitNoLeaseActor } from "../support/lease.js"
import {
  daemonPids,
  type Head,
  noRayRunning,
  prepareRay,
  projectRoot,
  startHead,
  teardownRay,
  waitFor
} from "../support/ray.js"

const PORT = 6396

const bench = [process.execPath, "examples/fake-serving-bench.mjs"]

let sessions: Array<string> = []
const newSession = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-baseline-"))
  sessions.push(dir)
  return dir
}

const readState = (dir: string) => JSON.parse(fs.readFileSync(path.join(dir, "state.json"), "utf8"))
const classes = (state: any): Array<string | null> => state.baseline_attempts.map((a: any) => a.error_class)

const report = (scenario: string, state: any, ms: number) => {
  console.log(
    `[baseline scenario] ${scenario}: ${state?.baseline_attempts?.length ?? "?"} attempt(s), ${state?.status ?? "?"}` +
      `${state?.stop_reason ? ` ${state.stop_reason}` : ""}, ${(ms / 1000).toFixed(1)} s`
  )
}

/** `baseline run --json` with the session and the command; stdout is the final state. */
const baseline = (
  session: string,
  args: ReadonlyArray<string>,
  cmd: ReadonlyArray<string>,
  env: Record<string, string> = {}
) =>
  runCli(
    [
      "baseline",
      "run",
      "--session",
      session,
      "--json",
      ...(args.includes("--gpus") ? [] : ["--gpus", "0"]),
      ...args,
      "--",
      ...cmd
    ],
    {
      env,
      timeoutMs: 170_000
    }
  )

const assertNoTrace = (r: CliRun) => {
  assert.notInclude(r.stderr, "internal error", r.stderr)
  assert.notMatch(r.stderr, /\n\s+at .+:\d+:\d+/, r.stderr)
}

describe("baseline run on real heads", () => {
  beforeEach(async () => {
    await prepareRay()
    sessions = []
  })
  afterEach(async () => {
    await teardownRay()
    for (const s of sessions) fs.rmSync(s, { recursive: true, force: true })
  })

  it("an unrepairable infeasible head (explicit RAY_ADDRESS, no slot): 1 attempt, baseline_failed, no enablement, no launch log", async () => {
    const head = await startHead({ port: PORT })
    const session = newSession()
    const fixed = path.join(session, "fixed-by-enablement")
    const before = daemonPids()
    const r = await baseline(session, ["--enablement-cmd", `touch '${fixed}'`], [...bench], {
      RAY_ADDRESS: head.gcsAddress
    })
    report("infeasible", r.json, r.ms)
    assert.strictEqual(r.code, 10, r.stderr)
    assertNoTrace(r)
    const state = readState(session)
    assert.deepStrictEqual(r.json, state)
    assert.strictEqual(state.status, "stopped")
    assert.strictEqual(state.stop_reason, "baseline_failed")
    assert.deepStrictEqual(classes(state), ["ray_cluster_infeasible"])
    const error: string = state.baseline_attempts[0].error
    assert.isTrue(
      error.startsWith("ray_cluster_infeasible: existing Ray head has no serving_slot resource"),
      error
    )
    assert.include(error, "not restarting it automatically")
    assert.strictEqual(state.enablement.attempts, 0)
    assert.isNull(state.enablement.launch_log_path)
    assert.isFalse(fs.existsSync(fixed), "the enablement command must not run")
    assert.isFalse(fs.existsSync(path.join(session, "attempts", "1", "launch.log")))
    assert.deepStrictEqual(daemonPids(), before, "no Ray process may be killed")
    assert.include(r.stderr, "next: stop (baseline_failed)")
  })

  it("a corrupt state file is refused (exit 8) and left byte-identical; no Ray is started", async () => {
    const session = newSession()
    const bytes = '{"schema_version": 2, "status": "running", "baseline_attempts": [ {"number": 1,'
    fs.writeFileSync(path.join(session, "state.json"), bytes)
    const r = await baseline(session, [], [...bench])
    report("corrupt state", undefined, r.ms)
    assert.strictEqual(r.code, 8, r.stderr)
    assert.strictEqual(r.json.error.tag, "StateCorrupt")
    assert.strictEqual(fs.readFileSync(path.join(session, "state.json"), "utf8"), bytes)
    // Nothing but the state and the session's lock file (the lock is flock(2) on it).
    assert.deepStrictEqual(fs.readdirSync(session).sort(), [".lock", "state.json"])
    assert.isTrue(noRayRunning())
  })

  it("Ctrl-C mid-attempt: cancelled / orchestrator_cancelled, the slot free again, no leftover command", async () => {
    await startHead({ port: PORT, slot: true, numGpus: 1 })
    const session = newSession()
    const tag = `hl-sigint-${process.pid}-${Date.now()}`
    const t0 = Date.now()
    const child: ChildProcess = spawn(
      process.execPath,
      [
        cliPath,
        "baseline",
        "run",
        "--session",
        session,
        "--json",
        "--gpus",
        "1",
        "--",
        ...bench,
        "--sleep=300",
        `--tag=${tag}`
      ],
      { cwd: projectRoot, env: cleanEnv(), stdio: ["ignore", "pipe", "pipe"] }
    )
    let stdout = ""
    let stderr = ""
    child.stdout!.on("data", (d) => (stdout += d))
    child.stderr!.on("data", (d) => (stderr += d))
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
    try {
      await waitFor(
        "the benchmark to run",
        () => stderr.includes("[attempt 1] fake-serving-bench: loading model") || undefined,
        90_000
      )
      assert.isAbove(pidsWithArg(`--tag=${tag}`).length, 0)
      const sigint = Date.now()
      child.kill("SIGINT")
      const code = await Promise.race([
        exited,
        new Promise<"hung">((r) => setTimeout(() => r("hung"), 30_000))
      ])
      const ms = Date.now() - t0
      assert.strictEqual(code, 130, stderr)
      const state = readState(session)
      report("ctrl-c", state, ms)
      console.log(`[baseline scenario] ctrl-c: exit ${Date.now() - sigint} ms after SIGINT`)
      assert.deepStrictEqual(JSON.parse(stdout), state)
      assert.strictEqual(state.status, "cancelled")
      assert.strictEqual(state.stop_reason, "orchestrator_cancelled")
      assert.deepStrictEqual(classes(state), ["orchestrator_cancelled"])
      assert.isNotNull(state.baseline_attempts[0].ended_at)
      assert.strictEqual(state.baseline_total_failures, 0)
      // The session's lock is free again (flock(2) on <session>/.lock: the file stays, the lock goes).
      assert.strictEqual(spawnSync("flock", ["-n", path.join(session, ".lock"), "true"]).status, 0)
      await waitGone("the benchmark process", () => pidsWithArg(`--tag=${tag}`), 10_000)
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL")
    }
    // The slot is free: the next baseline gets its lease at once.
    const next = newSession()
    const r = await baseline(next, [], [...bench, "--sleep=0.1"])
    report("after ctrl-c", r.json, r.ms)
    assert.strictEqual(r.code, 0, r.stderr)
    assert.notInclude(r.stderr, "waiting for serving_slot")
    assert.isBelow(r.ms, 30_000)
  })
})

describe("baseline run on one shared slot head (1 GPU)", () => {
  let head: Head
  beforeAll(async () => {
    await prepareRay()
    head = await startHead({ port: PORT, slot: true, numGpus: 1 })
  })
  beforeEach(() => {
    sessions = []
  })
  // Each scenario releases its lease: none may leave a lease actor holding the slot for the next.
  afterEach(async () => {
    for (const s of sessions) fs.rmSync(s, { recursive: true, force: true })
    await waitNoLeaseActor(head, 15_000)
  })
  afterAll(async () => {
    closeGcs()
    await teardownRay()
  })

  it("the same crash with changing pids, ports and hex ids: stops at 2 with a v2 signature", async () => {
    const session = newSession()
    const r = await baseline(session, ["--gpus", "1"], [...bench, "--fail=crash", "--sleep=0.2"])
    report("same failure twice", r.json, r.ms)
    assert.strictEqual(r.code, 10, r.stderr)
    assertNoTrace(r)
    const state = readState(session)
    assert.strictEqual(state.stop_reason, "baseline_failed")
    assert.deepStrictEqual(
      classes(state),
      ["subprocess_nonzero", "subprocess_nonzero"],
      JSON.stringify(
        state.baseline_attempts.map((a: any) => ({ error: a.error, signature: a.signature })),
        null,
        1
      )
    )
    const [a1, a2] = state.baseline_attempts
    assert.notStrictEqual(a1.error, a2.error, "the raw errors differ (pids, ports, ids)")
    assert.strictEqual(a1.signature, a2.signature)
    // v1:<sha-256>: the digest of the whole output, folded line by line
    // (docs/design.md#failure-signatures)
    assert.match(state.baseline_last_failure_signature, /^v1:[0-9a-f]{64}$/)
    // Live output, prefixed, with the lease's GPU.
    assert.include(r.stderr, "[attempt 1] fake-serving-bench: attempt 1; CUDA_VISIBLE_DEVICES=0")
    assert.include(r.stderr, "[attempt 2] RuntimeError: worker pid")
    assert.include(r.stderr, "the same way as the previous failure")
  })

  it("really different failures: stops at 3", async () => {
    const session = newSession()
    const r = await baseline(session, [], [...bench, "--fail=random", "--sleep=0.2"])
    report("three different failures", r.json, r.ms)
    assert.strictEqual(r.code, 10, r.stderr)
    const state = readState(session)
    assert.strictEqual(state.stop_reason, "baseline_failed")
    assert.deepStrictEqual(classes(state), ["subprocess_nonzero", "subprocess_nonzero", "subprocess_nonzero"])
    const signatures = new Set(state.baseline_attempts.map((a: any) => a.signature))
    assert.strictEqual(signatures.size, 3)
    assert.strictEqual(state.baseline_total_failures, 3)
  })

  it("two argument errors: baseline_arg_error", async () => {
    const session = newSession()
    const r = await baseline(session, [], [...bench, "--fail=arg-error"])
    report("two argument errors", r.json, r.ms)
    assert.strictEqual(r.code, 11, r.stderr)
    const state = readState(session)
    assert.strictEqual(state.stop_reason, "baseline_arg_error")
    assert.deepStrictEqual(classes(state), ["fast_exit_arg_error", "fast_exit_arg_error"])
    assert.include(state.baseline_attempts[0].error, "unrecognized arguments: --bogus")
    assert.strictEqual(state.baseline_attempts[0].exit_code, 2)
  })

  it("success records the throughput; state show renders it", async () => {
    const session = newSession()
    const r = await baseline(session, ["--gpus", "1"], [...bench, "--throughput=812.5"])
    report("success", r.json, r.ms)
    assert.strictEqual(r.code, 0, r.stderr)
    const state = readState(session)
    assert.strictEqual(state.status, "succeeded")
    assert.strictEqual(state.baseline_tput, 812.5)
    assert.deepStrictEqual(classes(state), [null])
    assert.deepStrictEqual(
      JSON.parse(fs.readFileSync(path.join(session, "attempts/1/result.json"), "utf8")),
      {
        throughput: 812.5
      }
    )
    const show = await runCli(["state", "show", "--session", session])
    assert.strictEqual(show.code, 0, show.stderr)
    assert.include(show.stdout, "status      succeeded")
    assert.include(show.stdout, "throughput  812.5")
    // Running the same command again on a finished session runs nothing and repeats its outcome.
    const again = await baseline(session, ["--gpus", "1"], [...bench, "--throughput=812.5"])
    assert.strictEqual(again.code, 0, again.stderr)
    assert.strictEqual(readState(session).baseline_attempts.length, 1)
    // Other arguments are another experiment: refused (exit 2) naming what differs, nothing runs.
    const other = await baseline(session, [], [...bench])
    assert.strictEqual(other.code, 2, other.stderr)
    assert.include(other.stderr, "--gpus (session: 1; now: 0)")
    assert.include(other.stderr, "the command (session:")
    assert.strictEqual(readState(session).baseline_attempts.length, 1)
  })

  it("a baseline command that does not exist: a clear attempt failure (exit 127), stops at 2", async () => {
    const session = newSession()
    const r = await baseline(session, [], ["/nonexistent/hyperloom-bench", "--model", "m"])
    report("missing command", r.json, r.ms)
    assert.strictEqual(r.code, 10, r.stderr)
    assertNoTrace(r)
    const state = readState(session)
    assert.deepStrictEqual(classes(state), ["subprocess_nonzero", "subprocess_nonzero"])
    assert.strictEqual(state.baseline_attempts[0].exit_code, 127)
    assert.include(state.baseline_attempts[0].error, "command not found: /nonexistent/hyperloom-bench")
  })

  it("an enablement command that fixes the failure: a successful revalidation", async () => {
    const session = newSession()
    const marker = path.join(session, "fixed")
    const r = await baseline(
      session,
      ["--enablement-cmd", `test -s "$HYPERLOOM_LAUNCH_LOG" && touch '${marker}'`],
      [...bench, `--fail-until=${marker}`, "--sleep=0.2"]
    )
    report("enablement fixes it", r.json, r.ms)
    assert.strictEqual(r.code, 0, r.stderr)
    const state = readState(session)
    assert.strictEqual(state.status, "succeeded")
    assert.deepStrictEqual(classes(state), ["subprocess_nonzero", null])
    assert.isTrue(state.enablement.succeeded)
    assert.strictEqual(state.enablement.attempts, 1)
    const launchLog = path.join(session, "attempts/1/launch.log")
    assert.strictEqual(state.enablement.launch_log_path, launchLog)
    assert.include(fs.readFileSync(launchLog, "utf8"), "is missing")
    assert.isTrue(fs.existsSync(marker))
  })

  it("--deadline mid-attempt: session_time_exhausted, not charged, the command gone", async () => {
    const session = newSession()
    const tag = `hl-deadline-${process.pid}-${Date.now()}`
    const r = await baseline(session, ["--deadline", "10"], [...bench, "--sleep=300", `--tag=${tag}`])
    report("deadline", r.json, r.ms)
    assert.strictEqual(r.code, 13, r.stderr)
    const state = readState(session)
    assert.strictEqual(state.stop_reason, "session_time_exhausted")
    assert.deepStrictEqual(classes(state), ["session_time_exhausted"])
    assert.strictEqual(state.baseline_total_failures, 0)
    await waitGone("the benchmark process", () => pidsWithArg(`--tag=${tag}`), 10_000)
  })
})
