/**
 * `npm test` protects the host too (docs/design.md#the-test-suite-protects-the-host-too): it
 * refuses, in one line, to run `ray stop --force` on a host where Ray processes it did not start
 * are running, unless the host is declared disposable (HYPERLOOM_TEST_DISPOSABLE_HOST=1).
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { rayProcesses, rayProcessKind, refusal } from "../../scripts/host-ray.mjs"

const root = path.resolve(import.meta.dirname, "../..")
const tree = (name: string) => path.join(root, "test/fixtures/proc", name)

/** An empty /proc-like tree (no processes). */
const made: Array<string> = []
const emptyTree = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-proc-"))
  made.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true })
})

describe("the host's Ray processes", () => {
  it("recognises Ray's daemons, workers and Python daemons, and nothing else", () => {
    assert.strictEqual(
      rayProcessKind("raylet", ["/x/ray/core/src/ray/raylet/raylet", "--node_id=ab"]),
      "raylet"
    )
    assert.strictEqual(rayProcessKind("gcs_server", ["/x/gcs_server"]), "gcs_server")
    assert.strictEqual(rayProcessKind("ray::IDLE", ["ray::IDLE"]), "ray::IDLE")
    assert.strictEqual(rayProcessKind("python3", ["ray::LeaseHolder.run"]), "ray::LeaseHolder.run")
    assert.strictEqual(
      rayProcessKind("python3", ["/usr/bin/python3", "-u", "/venv/lib/ray/_private/log_monitor.py", "--x"]),
      "log_monitor.py"
    )
    assert.strictEqual(
      rayProcessKind("python3", ["python3", "/venv/lib/ray/autoscaler/_private/monitor.py"]),
      "monitor.py"
    )
    assert.isUndefined(rayProcessKind("python3", ["python3", "bench.py", "--ray-address=x"]))
    assert.isUndefined(rayProcessKind("node", ["node", "dist/hyperloom.mjs", "ray", "status"]))
  })

  it("reads a recorded /proc: the lone head's daemons are Ray processes", () => {
    const kinds = rayProcesses(tree("lone-head")).map((p) => p.kind)
    assert.includeMembers(kinds, ["gcs_server", "raylet"])
    assert.notInclude(kinds, "my (odd) proc")
    assert.deepStrictEqual(rayProcesses(emptyTree()), [])
  })

  it("refuses in one line naming them, unless the host is declared disposable", () => {
    const line = refusal({}, tree("lone-head"))
    assert.isDefined(line)
    assert.notInclude(line!, "\n")
    assert.match(
      line!,
      /^npm test: refusing to run: Ray processes it did not start are running on this host \(/
    )
    assert.include(line!, "HYPERLOOM_TEST_DISPOSABLE_HOST=1")
    assert.isUndefined(refusal({ HYPERLOOM_TEST_DISPOSABLE_HOST: "1" }, tree("lone-head")))
    assert.isDefined(refusal({ HYPERLOOM_TEST_DISPOSABLE_HOST: "yes" }, tree("lone-head")))
    assert.isUndefined(refusal({}, emptyTree()))
  })

  it("`npm test` itself stops before doing anything (exit 3, one line on stderr)", () => {
    const r = spawnSync(process.execPath, ["scripts/test.mjs"], {
      cwd: root,
      env: {
        ...process.env,
        HYPERLOOM_TEST_PROC_ROOT: tree("lone-head"),
        HYPERLOOM_TEST_DISPOSABLE_HOST: ""
      },
      encoding: "utf8",
      timeout: 20_000
    })
    assert.strictEqual(r.status, 3, r.stderr)
    assert.strictEqual(r.stdout, "")
    assert.lengthOf(r.stderr.trim().split("\n"), 1)
    assert.include(r.stderr, "refusing to run")
  })

  it(".ci/run declares its host disposable", () => {
    assert.match(
      fs.readFileSync(path.join(root, ".ci/run"), "utf8"),
      /^export HYPERLOOM_TEST_DISPOSABLE_HOST=1$/m
    )
  })
})

describe("a host of its own (scripts/own-host.sh, where npm test runs each real-Ray file)", () => {
  const ownHost = (script: string) =>
    spawnSync("bash", ["scripts/own-host.sh", "sh", "-c", script], {
      cwd: root,
      encoding: "utf8",
      timeout: 20_000,
      env: { ...process.env, TMPDIR: root, RAY_TMPDIR: root }
    })
  const available = ownHost("true").status === 0

  it("sees only its own processes, an empty /tmp (its temp dir, whatever TMPDIR said) and /dev/shm, loopback only; passes the exit code", (ctx) => {
    if (!available) ctx.skip()
    const r = ownHost(
      'echo "$' +
        "{TMPDIR-unset} $" +
        '{RAY_TMPDIR-unset} $(ls -d /proc/[0-9]* | wc -l) $(ls -A /tmp | wc -l) $(ls -A /dev/shm | wc -l) $(tail -n +3 /proc/net/dev | cut -d: -f1)"; exit 7'
    )
    assert.strictEqual(r.status, 7, r.stderr)
    const [tmpdir, rayTmpdir, procs, tmp, shm, ...nets] = r.stdout.trim().split(/\s+/)
    // The host's temp dir is not this host's: Ray keeps its current-cluster file there.
    assert.deepStrictEqual([tmpdir, rayTmpdir], ["unset", "unset"])
    // bash (the namespace's init), sh, and the short-lived ls/wc of the command substitutions.
    assert.isAtMost(Number(procs), 6, r.stdout)
    // Empty but for the way to the working directory when that is under /tmp (a clone in /tmp/x).
    assert.strictEqual(tmp, root.startsWith("/tmp/") ? "1" : "0")
    assert.strictEqual(shm, "0")
    assert.deepStrictEqual(nets, ["lo"])
  })

  it("runs in a working directory under /tmp (a clone in /tmp/x): reads and writes it there, sees no other part of the host's /tmp", (ctx) => {
    if (!available) ctx.skip()
    const dir = fs.mkdtempSync("/tmp/hyperloom-own-host-")
    made.push(dir)
    fs.writeFileSync(path.join(dir, "in"), "from the host\n")
    const r = spawnSync(
      "bash",
      [path.join(root, "scripts/own-host.sh"), "sh", "-c", "pwd; cat in; ls -A /tmp; echo back > out"],
      {
        cwd: dir,
        encoding: "utf8",
        timeout: 20_000
      }
    )
    assert.strictEqual(r.status, 0, r.stderr)
    assert.deepStrictEqual(r.stdout.trim().split("\n"), [dir, "from the host", path.basename(dir)])
    assert.strictEqual(fs.readFileSync(path.join(dir, "out"), "utf8"), "back\n")
  })

  it("kills what was left running inside when the command ends", (ctx) => {
    if (!available) ctx.skip()
    const marker = `${(process.pid % 1000) + 7}.25`
    const r = ownHost(`sleep ${marker} & echo $!`)
    assert.strictEqual(r.status, 0, r.stderr)
    const leftovers = fs
      .readdirSync("/proc")
      .filter((e) => /^\d+$/.test(e))
      .filter((e) => {
        try {
          return fs.readFileSync(`/proc/${e}/cmdline`, "utf8") === `sleep\0${marker}\0`
        } catch {
          return false
        }
      })
    assert.deepStrictEqual(leftovers, [])
  })
})
