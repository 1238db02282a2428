/**
 * hyperloom.gone: what is left of a lease on its host, found by the lease's token alone (in the
 * supervisor's and its keeper's argv, and in the name of the lease's cgroup), and ending it. The
 * lease's placement group is removed only once this finds nothing (python/hyperloom/bridge.py).
 */
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, assert, describe, it } from "@effect/vitest"
import { anyPython, isAlive, pythonDir } from "../support/lease.js"

const started: number[] = []
afterEach(() => {
  for (const pid of started.splice(0)) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // gone
    }
  }
})

const token = () =>
  `hl-${Math.floor(Math.random() * 2 ** 48)
    .toString(16)
    .padStart(12, "0")}test`

/** Runs `code` with hyperloom.gone imported as `gone` and `token` set; its stdout's last line as JSON. */
const py = (tok: string, code: string) => {
  // The token through the environment: in this process's argv, it would be one of the lease's.
  const r = spawnSync(
    anyPython,
    [
      "-I",
      "-c",
      `import os, sys, json; sys.path.insert(0, sys.argv[1]); from hyperloom import gone; token = os.environ["TOKEN"]\n${code}`,
      pythonDir
    ],
    { encoding: "utf8", timeout: 60_000, env: { ...process.env, TOKEN: tok } }
  )
  assert.strictEqual(r.status, 0, r.stderr)
  return JSON.parse(r.stdout.trim().split("\n").pop()!)
}

/** A process whose argv carries `tok` as one word, as the supervisor's does (`--lease-token TOK`). */
const withToken = (tok: string, detached = true) => {
  const child = spawn(anyPython, ["-c", "import time; time.sleep(300)", "--lease-token", tok], {
    stdio: "ignore",
    detached
  })
  started.push(child.pid!)
  return child
}

const waitFor = async (what: string, ok: () => boolean, ms = 10_000) => {
  const deadline = Date.now() + ms
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}
const hasArgv = (pid: number) => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("--lease-token")
  } catch {
    return false
  }
}

/** Where cgroup v2 is mounted and the cgroup this test runs in, or undefined. */
const cgroupHere = (() => {
  let mount: string | undefined
  for (const line of fs.readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const parts = line.split(" ")
    const sep = parts.indexOf("-")
    if (sep > 0 && parts[sep + 1] === "cgroup2") mount = parts[4]
  }
  const own = fs
    .readFileSync("/proc/self/cgroup", "utf8")
    .split("\n")
    .find((l) => l.startsWith("0::"))
    ?.slice(3)
  if (mount === undefined || own === undefined) return undefined
  const dir = path.join(mount, own)
  try {
    fs.accessSync(dir, fs.constants.W_OK)
  } catch {
    return undefined
  }
  return dir
})()

describe("hyperloom.gone", () => {
  it("finds a live process by the token in its argv, and nothing once it is a zombie or gone", async () => {
    const tok = token()
    // Not detached and never waited for: once killed, it stays a zombie until this test ends.
    const child = withToken(tok, false)
    await waitFor("its argv", () => hasArgv(child.pid!))
    assert.deepStrictEqual(py(tok, "print(json.dumps(gone.leftovers(token)))"), [
      `pid ${child.pid} (its supervisor or keeper)`
    ])
    assert.deepStrictEqual(
      py(token(), "print(json.dumps(gone.leftovers(token)))"),
      [],
      "another token finds nothing"
    )
    process.kill(child.pid!, "SIGKILL")
    await waitFor("the kill", () => !isAlive(child.pid!))
    assert.deepStrictEqual(py(tok, "print(json.dumps(gone.leftovers(token)))"), [])
  })

  it("end: waits its patience for the keepers, then SIGKILLs what is left itself, a frozen process too", async () => {
    const tok = token()
    const frozen = withToken(tok)
    await waitFor("its argv", () => hasArgv(frozen.pid!))
    process.kill(frozen.pid!, "SIGSTOP")
    const r = py(
      tok,
      "import time; t = time.monotonic(); left = gone.end(token, 0.5, 10); print(json.dumps([left, time.monotonic() - t]))"
    )
    assert.deepStrictEqual(r[0], [], "nothing is left")
    assert.isAtLeast(r[1], 0.5, "it waited its patience first")
    assert.isFalse(isAlive(frozen.pid!), "the frozen process was killed")
  })

  it.skipIf(cgroupHere === undefined)(
    "end: the lease's cgroup (by name, wherever it is) is killed as one, stopped members too, and removed",
    async () => {
      const tok = token()
      const dir = path.join(cgroupHere!, `hyperloom-lease-${tok}`)
      fs.mkdirSync(dir)
      try {
        // A process that left the supervisor's argv behind (it is the command), in the cgroup, stopped.
        const cmd = spawn("sleep", ["300"], { stdio: "ignore", detached: true })
        started.push(cmd.pid!)
        fs.writeFileSync(path.join(dir, "cgroup.procs"), String(cmd.pid))
        process.kill(cmd.pid!, "SIGSTOP")
        assert.deepStrictEqual(py(tok, "print(json.dumps(gone.leftovers(token)))"), [`cgroup ${dir}`])
        assert.deepStrictEqual(py(tok, "print(json.dumps(gone.end(token, 0.2, 10)))"), [])
        assert.isFalse(isAlive(cmd.pid!), "the command was killed")
        assert.isFalse(fs.existsSync(dir), "the cgroup was removed")
      } finally {
        if (fs.existsSync(dir)) fs.rmdirSync(dir)
      }
    }
  )
})
