/**
 * The runners' client output when its log cannot be written (issue 13 item 5: a session disk
 * that fills). The serving runner (`python PYDIR serve`) and the sweep runner (`python PYDIR
 * sweep`) copy the client's stdout and stderr to their own and to client.log through one copy
 * loop (python/hyperloom/tee.py). Here client.log is /dev/full (every write fails with ENOSPC,
 * as on a full disk): the client must still be drained to its end, so it exits and the runner
 * exits, with the client's bytes on the runner's stdout. On the previous main the copy thread
 * died on the first failed write, the client blocked on its full pipe and the runner with it.
 * Without Ray: the runners are run directly, with the stand-in engine.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach, assert, describe, it } from "@effect/vitest"
import { LeasedCommand, readiness, runnerArgs } from "../../src/domain/Serving.js"
import { anyPython, pythonDir } from "../support/lease.js"
import { projectRoot } from "../support/ray.js"
import { runSweepRunner } from "../support/sweepRunner.js"

const engine = `${process.execPath} ${path.join(projectRoot, "examples/fake-engine.mjs")} --load-sec 0`
/** ~4 MB on stdout and some on stderr: far more than a pipe holds. */
const chatty = [
  "sh",
  "-c",
  "i=0; while [ $i -lt 40000 ]; do echo line $i of a chatty benchmark client....; i=$((i+1)); done; echo done >&2"
]

const dirs: string[] = []
const pids: number[] = []
afterEach(() => {
  for (const pid of pids.splice(0)) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {}
  }
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true })
})

interface Ran {
  readonly code: number | null
  readonly stdoutLines: number
  readonly stderr: string
}

const run = (args: ReadonlyArray<string>, timeoutMs: number, during?: () => Promise<void>) =>
  new Promise<Ran>((resolve) => {
    const child = spawn(anyPython, [pythonDir, ...args], { stdio: ["ignore", "pipe", "pipe"] })
    pids.push(child.pid!)
    let lines = 0
    let stderr = ""
    child.stdout.on("data", (d: Buffer) => {
      for (const b of d) if (b === 10) lines++
    })
    child.stderr.on("data", (d) => (stderr += d))
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs)
    child.on("exit", (code) => {
      clearTimeout(timer)
      resolve({ code, stdoutLines: lines, stderr })
    })
    void during?.()
  })

const fullLog = (dir: string) => {
  fs.mkdirSync(dir, { recursive: true })
  fs.symlinkSync("/dev/full", path.join(dir, "client.log"))
}

describe("a client whose log disk is full is still drained (ENOSPC)", () => {
  it("the serving runner: the client runs to its end, the runner exits with its code", {
    timeout: 70_000
  }, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-enospc-serve-"))
    dirs.push(dir)
    fullLog(dir)
    const serving = LeasedCommand.Serving({ server: engine, readiness: readiness(), client: chatty, dir })
    const r = await run(["serve", ...runnerArgs(serving, dir)], 60_000)
    assert.strictEqual(r.code, 0, r.stderr.slice(-2000))
    assert.strictEqual(r.stdoutLines, 40000, "every line of the client reached the runner's stdout")
    assert.match(r.stderr, /client\.log: .*(No space left|ENOSPC)/, "one line says the log stopped")
    assert.match(r.stderr, /done/)
  })

  it("the sweep runner: the client runs to its end and the answer is sent", {
    timeout: 70_000
  }, async () => {
    // The runner keeps a run's files in a folder of its own (under TMPDIR) and sends their bytes:
    // its client.log is made /dev/full once that folder is there, before the request.
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "hl-enospc-sweep-"))
    dirs.push(tmp)
    const r = await runSweepRunner({
      server: engine,
      dir: "/elsewhere/engine",
      env: { TMPDIR: tmp },
      requests: [{ seq: 1, argv: chatty, dir: "/elsewhere/run1", env: {}, between: null, timeout_sec: null }],
      beforeFirst: () => {
        const [work] = fs.readdirSync(tmp).filter((f) => f.startsWith("hyperloom-sweep-"))
        fullLog(path.join(tmp, work!, "runs", "1"))
      }
    })
    assert.strictEqual(r.code, 0, r.stderr.slice(-2000))
    assert.strictEqual(r.done.get(1)?.exit_code, 0)
    assert.strictEqual(r.outputLines, 40000)
    assert.match(r.stderr, /client\.log: .*(No space left|ENOSPC)/)
    // a device is no file to send: client.log is not sent at all, the rest is
    assert.notProperty(r.files, "/elsewhere/run1/client.log")
    assert.deepStrictEqual(fs.readdirSync(tmp), [], "the runner's own folder is removed at its end")
  })
})
