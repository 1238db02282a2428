/**
 * The `state show` and `baseline run` commands as an operator meets them, through the real
 * executable (bundled here into a temp folder), without Ray: `HYPERLOOM_RAY` points nowhere, so a
 * command that wrongly got as far as Ray would fail with exit 3 instead of touching a cluster.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { initialState, renderState, type SessionState } from "../../src/domain/State.js"
import { bundleCli, runBundled } from "../support/bundle.js"

let work: string
let cli: string

beforeAll(async () => {
  ;({ work, cli } = await bundleCli())
}, 180_000)

afterAll(() => {
  fs.rmSync(work, { recursive: true, force: true })
})

// HYPERLOOM_RAY points nowhere: a command that wrongly got as far as Ray fails with exit 3.
const run = (args: ReadonlyArray<string>) =>
  runBundled(cli, work, args, { HYPERLOOM_RAY: "/nonexistent/hyperloom-test/ray" })

const stderrLines = (stderr: string) => stderr.split("\n").filter((l) => l !== "")

const session = (name: string, state?: SessionState | string) => {
  const dir = path.join(work, name)
  fs.mkdirSync(dir, { recursive: true })
  if (state !== undefined) {
    fs.writeFileSync(path.join(dir, "state.json"), typeof state === "string" ? state : renderState(state))
  }
  return dir
}

const stopped: SessionState = {
  ...initialState(),
  status: "stopped",
  stop_reason: "baseline_failed",
  stop_ts: "2024-06-01T12:02:00.000Z",
  baseline_failure_streak: 2,
  baseline_total_failures: 2,
  baseline_last_failure_signature: "v1:RuntimeError: worker pid <n> lost its connection to <ip>",
  baseline_attempts: [1, 2].map((n) => ({
    number: n,
    started_at: `2024-06-01T12:0${n}:00.000Z`,
    ended_at: `2024-06-01T12:0${n}:04.000Z`,
    runtime_sec: 3.5,
    error_class: "subprocess_nonzero" as const,
    exit_code: 1,
    error: `fake-serving-bench: warmup 4/4\nRuntimeError: worker pid ${100 + n} lost its connection to 127.0.0.1:${4000 + n}`,
    signature:
      "v1:fake-serving-bench: warmup <n>/<n> RuntimeError: worker pid <n> lost its connection to <ip>",
    throughput: null,
    result_format: null,
    metrics: null
  }))
}

describe("hyperloom state show", () => {
  it("renders status, why it stopped, each attempt, the streaks, the signature and the enablement", () => {
    const dir = session("stopped", stopped)
    const r = run(["state", "show", "--session", dir])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.include(r.stdout, `session     ${dir}`)
    assert.include(r.stdout, "status      stopped: baseline_failed at 2024-06-01T12:02:00.000Z")
    assert.include(r.stdout, "why         attempt 2 failed the same way as attempt 1 (same signature)")
    assert.match(
      r.stdout,
      /#1 +subprocess_nonzero +exit 1 +3\.50 s +RuntimeError: worker pid 101 lost its connection/
    )
    assert.match(r.stdout, /#2 +subprocess_nonzero +exit 1 +3\.50 s +RuntimeError: worker pid 102/)
    assert.include(r.stdout, "streaks     failure 2, arg-error 0, total failures 2")
    assert.include(r.stdout, "signature   v1:RuntimeError: worker pid <n>")
    assert.include(r.stdout, "enablement  not engaged")
  })

  it("--json prints the state document itself", () => {
    const dir = session("json", stopped)
    const r = run(["state", "show", "--session", dir, "--json"])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(r.stdout, fs.readFileSync(path.join(dir, "state.json"), "utf8"))
    assert.deepStrictEqual(JSON.parse(r.stdout), JSON.parse(renderState(stopped)))
  })

  it("a success and an engaged enablement lane read as such", () => {
    const dir = session("succeeded", {
      ...initialState(),
      status: "succeeded",
      baseline_tput: 812.5,
      enablement: {
        attempts: 1,
        stall_streak: 0,
        inflight: false,
        launch_log_path: "/s/attempts/1/launch.log",
        succeeded: true
      },
      baseline_attempts: [
        { ...stopped.baseline_attempts[0]! },
        {
          number: 2,
          started_at: "2024-06-01T12:05:00.000Z",
          ended_at: "2024-06-01T12:05:02.000Z",
          runtime_sec: 2,
          error_class: null,
          exit_code: 0,
          error: null,
          signature: null,
          throughput: 812.5,
          result_format: "hyperloom" as const,
          metrics: null
        }
      ]
    })
    const r = run(["state", "show", "--session", dir])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.include(r.stdout, "status      succeeded")
    assert.include(
      r.stdout,
      "why         attempt 2 succeeded with throughput 812.50 tok/s (revalidation after enablement)"
    )
    assert.include(r.stdout, "throughput  812.50 tok/s")
    assert.match(r.stdout, /#2 +succeeded +exit 0 +2\.00 s +throughput 812\.50 tok\/s/)
    assert.include(
      r.stdout,
      "enablement  1 run(s), stall 0/5, revalidated, launch log /s/attempts/1/launch.log"
    )
  })

  it("no session: exit 8 and one line", () => {
    const dir = session("empty")
    const r = run(["state", "show", "--session", dir])
    assert.strictEqual(r.code, 8)
    assert.strictEqual(r.stdout, "")
    assert.deepStrictEqual(stderrLines(r.stderr).length, 1, r.stderr)
    assert.include(r.stderr, "no baseline session in")
  })

  it("a corrupt state: exit 8, one line, the file untouched; --json gives an error document", () => {
    const bytes = '{"schema_version": 2, "status": "runn'
    const dir = session("corrupt", bytes)
    const r = run(["state", "show", "--session", dir])
    assert.strictEqual(r.code, 8)
    assert.deepStrictEqual(stderrLines(r.stderr).length, 1, r.stderr)
    assert.include(r.stderr, "is unreadable")
    const j = run(["state", "show", "--session", dir, "--json"])
    assert.strictEqual(j.code, 8)
    assert.strictEqual(JSON.parse(j.stdout).error.tag, "StateCorrupt")
    assert.strictEqual(JSON.parse(j.stdout).error.exit_code, 8)
    assert.strictEqual(fs.readFileSync(path.join(dir, "state.json"), "utf8"), bytes)
    // baseline run refuses it too, before anything runs.
    const b = run(["baseline", "run", "--session", dir, "--gpus", "0", "--", "true"])
    assert.strictEqual(b.code, 8, b.stderr)
    assert.strictEqual(fs.readFileSync(path.join(dir, "state.json"), "utf8"), bytes)
    // Nothing but the state and the session's lock file (the lock is flock(2) on it).
    assert.deepStrictEqual(fs.readdirSync(dir).sort(), [".lock", "state.json"])
  })

  it("a state from a newer hyperloom: exit 8, one line", () => {
    const dir = session("future", JSON.stringify({ schema_version: 99 }))
    const r = run(["state", "show", "--session", dir])
    assert.strictEqual(r.code, 8)
    assert.deepStrictEqual(stderrLines(r.stderr).length, 1, r.stderr)
    assert.include(r.stderr, "schema_version 99")
  })
})

describe("hyperloom baseline run: bad option values", () => {
  const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>, string]> = [
    ["--gpus -1", ["--gpus", "-1"], "--gpus must be a whole number >= 0"],
    ["--gpus x", ["--gpus", "x"], "'x'"],
    ["--attempt-timeout 0", ["--attempt-timeout", "0"], "--attempt-timeout must be a positive number"],
    ["--deadline abc", ["--deadline", "abc"], "'abc'"],
    ["--deadline -5", ["--deadline", "-5"], "--deadline must be a positive number"],
    ["--nodes 0", ["--nodes", "0"], "--nodes must be a whole number >= 1"],
    ["--rank-env 1A", ["--nodes", "2", "--rank-env", "1A"], "--rank-env must name an environment variable"],
    ["--rank-cwd rel", ["--nodes", "2", "--rank-cwd", "rel/dir"], "--rank-cwd must be an absolute path"]
  ]
  for (const [name, args, expected] of cases) {
    it(`${name}: exit 2, one line, nothing created`, () => {
      const dir = path.join(work, `bad-${name.replace(/\W+/g, "_")}`)
      const r = run([
        "baseline",
        "run",
        "--session",
        dir,
        ...(args.includes("--gpus") ? [] : ["--gpus", "0"]),
        ...args,
        "--",
        "true"
      ])
      assert.strictEqual(r.code, 2, r.stderr)
      assert.strictEqual(r.stdout, "")
      const lines = stderrLines(r.stderr)
      assert.strictEqual(lines.length, 1, r.stderr)
      assert.include(lines[0], expected)
      assert.isFalse(fs.existsSync(dir))
    })
  }

  it("vLLM's --distributed-executor-backend ray: exit 2 before anything starts, one line naming the multiprocessing recipe", () => {
    const dir = path.join(work, "ray-backend")
    const r = run([
      "baseline",
      "run",
      "--session",
      dir,
      "--nodes",
      "2",
      "--gpus",
      "8",
      "--server",
      "vllm serve M --tensor-parallel-size 16 --distributed-executor-backend ray --port $HYPERLOOM_PORT",
      "--",
      "vllm",
      "bench",
      "serve"
    ])
    assert.strictEqual(r.code, 2, r.stderr)
    const lines = stderrLines(r.stderr)
    assert.strictEqual(lines.length, 1, r.stderr)
    assert.include(lines[0], "--distributed-executor-backend ray cannot run inside a hyperloom lease")
    assert.include(lines[0], "--master-addr $HYPERLOOM_LEADER_HOST")
    assert.isFalse(fs.existsSync(dir), "nothing was created")
    const lease = run([
      "lease",
      "run",
      "--gpus",
      "8",
      "--",
      "vllm",
      "serve",
      "M",
      "--distributed-executor-backend=ray"
    ])
    assert.strictEqual(lease.code, 2, lease.stderr)
    assert.include(lease.stderr, "multiprocessing multi-node recipe")
  })

  it("no command: exit 2, one line", () => {
    const r = run(["baseline", "run", "--session", path.join(work, "nocmd"), "--gpus", "0"])
    assert.strictEqual(r.code, 2, r.stderr)
    assert.strictEqual(stderrLines(r.stderr).length, 1, r.stderr)
    assert.include(r.stderr, "CMD")
  })

  it("no --session: exit 2, one line", () => {
    const r = run(["baseline", "run", "--gpus", "0", "--", "true"])
    assert.strictEqual(r.code, 2, r.stderr)
    assert.strictEqual(stderrLines(r.stderr).length, 1, r.stderr)
    assert.include(r.stderr, "--session")
  })

  it("--help lists the options and the exit codes", () => {
    const r = run(["baseline", "run", "--help"])
    assert.strictEqual(r.code, 0, r.stderr)
    for (const o of [
      "--session",
      "--attempt-timeout",
      "--deadline",
      "--enablement-cmd",
      "--no-serving-slot"
    ]) {
      assert.include(r.stdout, o)
    }
    assert.include(r.stdout, "/bin/sh -c")
    const top = run(["--help"])
    assert.include(top.stdout, "13   baseline stopped: session_time_exhausted")
  })
})
