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
import { projectRoot, sleep } from "../support/ray.js"

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

  it("the sweep runner: the client runs to its end and the answer is written", {
    timeout: 70_000
  }, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-enospc-sweep-"))
    dirs.push(dir)
    const runDir = path.join(dir, "run1")
    fullLog(runDir)
    const control = path.join(dir, "control")
    const put = (name: string, doc: unknown) => {
      fs.mkdirSync(control, { recursive: true })
      fs.writeFileSync(path.join(control, `${name}.tmp`), JSON.stringify(doc))
      fs.renameSync(path.join(control, `${name}.tmp`), path.join(control, name))
    }
    const ask = async () => {
      put("1.json", { argv: chatty, dir: runDir, env: {}, between: null, timeout_sec: null })
      const answer = path.join(control, "1.done.json")
      const deadline = Date.now() + 50_000
      while (!fs.existsSync(answer) && Date.now() < deadline) await sleep(100)
      put("2.json", { stop: true })
    }
    const engineCommand = LeasedCommand.Engine({ server: engine, readiness: readiness(), dir })
    const r = await run(["sweep", ...runnerArgs(engineCommand, dir)], 60_000, ask)
    assert.strictEqual(r.code, 0, r.stderr.slice(-2000))
    const done = JSON.parse(fs.readFileSync(path.join(control, "1.done.json"), "utf8"))
    assert.strictEqual(done.exit_code, 0)
    assert.strictEqual(r.stdoutLines, 40000)
    assert.match(r.stderr, /client\.log: .*(No space left|ENOSPC)/)
  })
})
