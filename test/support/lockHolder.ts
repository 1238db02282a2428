import { type ChildProcess, spawn } from "node:child_process"
import { Effect } from "effect"

/**
 * Another process holding the lock file at `path` the way LockFile.ts holds it (flock(2) on its
 * own descriptor, placed by `flock -n 3`, its holder record `{"pid","what","since"}` written into
 * the file), for the scope of the test; killed (by its own pid) at the end. `child.pid` is the
 * holder's pid.
 */
export const lockHolderProcess = (path: string, what = "a test holder") =>
  Effect.acquireRelease(
    Effect.async<ChildProcess, Error>((resume) => {
      const script = `
        const fs = require("node:fs"), cp = require("node:child_process")
        const fd = fs.openSync(process.argv[1], fs.constants.O_RDWR | fs.constants.O_CREAT, 0o600)
        const r = cp.spawnSync("flock", ["-n", "-x", "3"], { stdio: ["ignore", "ignore", "inherit", fd] })
        if (r.status !== 0) { console.log("error flock " + r.status); process.exit(3) }
        fs.ftruncateSync(fd, 0)
        fs.writeSync(fd, JSON.stringify({ pid: process.pid, what: ${JSON.stringify(what)}, since: Date.now() }) + "\\n", 0)
        console.log("ready")
        setTimeout(() => {}, 600000)`
      const child = spawn(process.execPath, ["-e", script, path], {
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
