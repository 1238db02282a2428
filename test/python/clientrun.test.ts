/**
 * The one client loop (python/hyperloom/clientrun.py) that both runners use: the serving runner
 * (`python PYDIR serve`, one attempt) and the sweep runner (`python PYDIR sweep`, many runs
 * against one engine). They each had their own copy and drifted: only the sweep's checked, right
 * before the client started, that nothing but the lease's engine listened on the engine's port
 * (issue 27 item 1), and only the sweep's had a timeout. Here a squatter holds the port when the
 * client is about to run: on the previous main the serving runner ran its client against it (its
 * numbers would have been measured as the engine's). And the loop's seam for a sampler (started
 * with the client, stopped after it, its observations in the run's answer). Without Ray: the
 * runners' Python is run directly.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach, assert, describe, it } from "@effect/vitest"
import { anyPython, pythonDir } from "../support/lease.js"

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true })
})

/** Runs `code` with the package importable and `work` (a fresh folder) set; its stdout's last line as JSON. */
const py = (code: string) => {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "hl-clientrun-"))
  dirs.push(work)
  const r = spawnSync(
    anyPython,
    [
      "-I",
      "-c",
      `import os, sys, json, socket; sys.path.insert(0, sys.argv[1]); work = sys.argv[2]\n${code}`,
      pythonDir,
      work
    ],
    { encoding: "utf8", timeout: 60_000 }
  )
  assert.strictEqual(r.status, 0, r.stderr)
  return { out: JSON.parse(r.stdout.trim().split("\n").pop()!), stderr: r.stderr, work }
}

/** An engine that never binds its port (`sleep`), and a squatter of this Python process on it. */
const squatted = `
from hyperloom import engine
def squat(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(1)
    return s
`

describe("the serving runner's client run", () => {
  it("refuses a squatter on the engine's port before the client starts (port_taken, exit 3), as the sweep's does", () => {
    const { out, stderr, work } = py(`${squatted}
from hyperloom import serve
a = engine.parse("python PYDIR serve", ["--server", "exec sleep 30", "--dir", work, "--cwd", work,
    "--ready-path", "/health", "--ready-timeout", "10", "--stop-grace", "0.5", "--progress-every", "5", "--check", "", "--warmup", "0",
    "--", "sh", "-c", "touch %s/ran" % work], client=True)
r = serve.Runner(a)
env = r.engine.environment()
r.engine.start(env)
sq = squat(r.engine.port)
try:
    r.run_client(env)
finally:
    sq.close()
    r.engine.stop(0.5)
print(json.dumps({"exit": r.client_exit, "ran": os.path.exists(os.path.join(work, "ran"))}))
`)
    assert.isFalse(out.ran, `the client ran against the squatter: ${stderr}`)
    assert.strictEqual(out.exit, 3, stderr)
    assert.include(fs.readFileSync(path.join(work, "client.log"), "utf8"), "port_taken: port ")
    assert.include(fs.readFileSync(path.join(work, "server.log"), "utf8"), "port_taken: port ")
  })
})

describe("the one client loop (hyperloom.clientrun)", () => {
  const loop = (client: string, extra = "") => `${squatted}
import threading
from hyperloom import clientrun
eng = engine.Engine("exec sleep 30", work, os.path.join(work, "server.log"), "engine", lambda m: None)
env = eng.environment()
eng.start(env)
class Sampler:
    def __init__(self): self.calls = []
    def start(self, pid): self.calls.append(("start", pid is not None))
    def stop(self): self.calls.append(("stop",)); return {"samples": 2}
sampler = Sampler()
${extra}
try:
    res = clientrun.run(${client}, env, work, work, eng, threading.Event(), 0.5, lambda m: None,
                        samplers=[("gpu", sampler)], **kw)
finally:
    eng.stop(0.5)
print(json.dumps({"exit": res.exit_code, "timed_out": res.timed_out, "runtime": res.runtime_sec,
                  "observations": res.observations, "calls": sampler.calls, "port_taken": res.port_taken}))
`

  it("a sampler is started with the client and stopped after it; its observations join the run's answer", () => {
    const { out } = py(loop(`["sh", "-c", "exit 5"]`, "kw = {}"))
    assert.strictEqual(out.exit, 5)
    assert.isFalse(out.timed_out)
    assert.isNull(out.port_taken)
    assert.deepStrictEqual(out.calls, [["start", true], ["stop"]])
    assert.deepStrictEqual(out.observations, { gpu: { samples: 2 } })
  })

  it("a client past its timeout is stopped (timed_out, no exit code)", () => {
    const { out } = py(loop(`["sleep", "30"]`, "kw = {'timeout': 0.5}"))
    assert.isTrue(out.timed_out)
    assert.isNull(out.exit)
    assert.isBelow(out.runtime, 10)
  })
})
