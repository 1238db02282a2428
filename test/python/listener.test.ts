/**
 * The engine's port can be taken (issue 27 item 1): the serving runner picks a free port, and
 * until the engine binds it (vLLM: after its imports) any local process may bind it first and
 * answer the readiness path. Here the server sleeps before it starts the stand-in engine; a
 * squatter binds the runner's port meanwhile and answers /health 200. On main the runner called
 * the squatter "ready" and ran the client against it; now it refuses (exit 3, serve.json
 * `port_taken`) and server.log names the squatter's pid and user. Without Ray: the runner is run
 * directly, as in runner-flags.test.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import { LeasedCommand, readiness, runnerArgs } from "../../src/domain/Serving.js"
import { anyPython, pythonDir } from "../support/lease.js"

const work = fs.mkdtempSync(path.join(os.tmpdir(), "hl-listener-"))
const engine = path.join(import.meta.dirname, "..", "..", "examples", "fake-engine.mjs")
const children: Array<ChildProcess> = []
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL")
  fs.rmSync(work, { recursive: true, force: true })
})

describe("the serving runner and a squatter on the engine's port", () => {
  it("refuses the squatter (port_taken, naming its pid and user) instead of measuring it", async () => {
    const dir = path.join(work, "serve")
    const args = runnerArgs(
      LeasedCommand.Serving({
        // the engine binds only after 4 s (vLLM's imports); the squatter is quicker
        server: `sleep 4; exec node ${engine} --load-sec 0`,
        readiness: readiness("/health", 30),
        client: ["sh", "-c", "echo the client ran > $HYPERLOOM_RESULT_FILE.ran"],
        dir
      }),
      work
    )
    const runner = spawn(anyPython, ["-I", pythonDir, "serve", ...args], {
      env: { ...process.env, HYPERLOOM_RESULT_FILE: path.join(work, "result.json") },
      stdio: ["ignore", "pipe", "pipe"]
    })
    children.push(runner)
    let out = ""
    let squatting = false
    const squatter = new Promise<http.Server>((resolve, reject) => {
      const read = (d: Buffer) => {
        out += d.toString()
        const port = /port (\d+)\)/.exec(out)?.[1]
        if (port === undefined || squatting) return
        squatting = true
        const server = http.createServer((_req, res) => res.writeHead(200).end("{}"))
        server.once("error", reject)
        server.listen(Number(port), "127.0.0.1", () => resolve(server))
      }
      runner.stdout.on("data", read)
      runner.stderr.on("data", read)
    })
    const code = await new Promise<number | null>((resolve) => runner.on("exit", (c) => resolve(c)))
    const server = await squatter
    server.close()
    const status = JSON.parse(fs.readFileSync(path.join(dir, "serve.json"), "utf8"))
    const log = fs.readFileSync(path.join(dir, "server.log"), "utf8")
    assert.strictEqual(code, 3, out)
    assert.strictEqual(status.outcome, "port_taken", out)
    assert.include(log, `is served by pid ${process.pid} of user ${os.userInfo().username}`)
    assert.isFalse(fs.existsSync(path.join(work, "result.json.ran")), "the client ran against the squatter")
  }, 60_000)

  it("the lease's own engine on its port is ready as before (its socket is found in its process tree)", async () => {
    const dir = path.join(work, "own")
    const args = runnerArgs(
      LeasedCommand.Serving({
        server: `node ${engine} --load-sec 0.5`,
        readiness: readiness("/health", 30),
        client: ["true"],
        dir
      }),
      work
    )
    const runner = spawn(anyPython, ["-I", pythonDir, "serve", ...args], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    children.push(runner)
    let out = ""
    runner.stderr.on("data", (d: Buffer) => {
      out += d.toString()
    })
    const code = await new Promise<number | null>((resolve) => runner.on("exit", (c) => resolve(c)))
    assert.strictEqual(code, 0, out)
    assert.strictEqual(
      JSON.parse(fs.readFileSync(path.join(dir, "serve.json"), "utf8")).outcome,
      "client_exited"
    )
  }, 60_000)
})
