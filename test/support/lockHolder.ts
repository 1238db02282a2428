import { type ChildProcess, spawn } from "node:child_process"
import { Effect } from "effect"
import { abstractName } from "../../src/services/LockFile.js"

/**
 * Another process holding the kernel-released lock `name` the way LockFile.ts holds it (an abstract
 * Unix socket that answers `{"pid","what"}`), for the scope of the test; killed (by its own pid)
 * at the end. `child.pid` is the holder's pid.
 */
export const lockHolderProcess = (name: string, what = "a test holder") =>
  Effect.acquireRelease(
    Effect.async<ChildProcess, Error>((resume) => {
      const script = `
        const net = require("node:net")
        const server = net.createServer((s) => { s.on("error", () => {}); s.end(JSON.stringify({ pid: process.pid, what: ${JSON.stringify(what)} }) + "\\n") })
        server.on("error", (e) => { console.log("error " + e.code); process.exit(3) })
        server.listen({ path: "\\0" + process.argv[1], exclusive: true }, () => console.log("ready"))
        setTimeout(() => {}, 600000)`
      const child = spawn(process.execPath, ["-e", script, abstractName(name)], {
        stdio: ["ignore", "pipe", "inherit"]
      })
      child.stdout!.setEncoding("utf8")
      child.stdout!.once("data", (line: string) =>
        line.startsWith("ready") ? resume(Effect.succeed(child)) : resume(Effect.fail(new Error(line)))
      )
      child.once("exit", (code) => resume(Effect.fail(new Error(`lock holder exited with ${code}`))))
    }),
    (child) => Effect.sync(() => child.kill("SIGKILL"))
  )
