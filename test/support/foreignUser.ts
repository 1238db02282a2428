/**
 * Another local user (uid 65534, "nobody" on most systems) for the tests of "locks and
 * queue that a foreign local user cannot squat or lie through" (docs/design.md#fair-queue). Only
 * root can switch to it here (setpriv from util-linux); elsewhere the tests that need it are
 * skipped.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"

export const FOREIGN_UID = 65534

/** Whether this process can run a command as FOREIGN_UID. */
export const canActAsForeignUser = (): boolean =>
  process.getuid?.() === 0 &&
  spawnSync("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "true"]).status === 0

/** Runs `node -e script ...args` as FOREIGN_UID, stdout piped; killed by the caller (by its pid). */
export const spawnAsForeignUser = (script: string, args: ReadonlyArray<string> = []): ChildProcess =>
  spawn(
    "setpriv",
    ["--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, "-e", script, ...args],
    { stdio: ["ignore", "pipe", "inherit"] }
  )

/**
 * A squatter as FOREIGN_UID: binds each abstract socket name in `names` (what the abstract-socket
 * locks were) and answers every waiter with a made-up holder, and tries to open and flock each
 * path in `files` without creating anything. Prints one JSON line of what it managed
 * (`bound <name>`, `locked <file>`, or why not), then stays until killed.
 */
export const squatterScript = `
const net = require("node:net"), fs = require("node:fs"), cp = require("node:child_process")
const [names, files] = [JSON.parse(process.argv[1]), JSON.parse(process.argv[2])]
const got = []
let pending = names.length
const done = () => { if (--pending <= 0) { tryFiles(); console.log(JSON.stringify(got)) } }
const tryFiles = () => {
  for (const f of files) {
    try {
      const fd = fs.openSync(f, "r")
      const r = cp.spawnSync("flock", ["-n", "-x", "3"], { stdio: ["ignore", "ignore", "ignore", fd] })
      got.push(r.status === 0 ? "locked " + f : "flock refused " + f)
    } catch (e) { got.push("open " + e.code + " " + f) }
  }
}
for (const n of names) {
  const server = net.createServer((s) => { s.on("error", () => {}); s.end(JSON.stringify({ pid: 1, what: "made-up story" }) + "\\n") })
  server.on("error", (e) => { got.push("bind " + e.code + " " + n); done() })
  server.listen({ path: "\\0" + n, exclusive: true }, () => { got.push("bound " + n); done() })
}
if (names.length === 0) { pending = 1; done() }
setTimeout(() => {}, 600000)
`

/** Starts the squatter and resolves once it said what it got; `child.kill` ends it. */
export const startSquatter = (names: ReadonlyArray<string>, files: ReadonlyArray<string> = []) =>
  new Promise<{ child: ChildProcess; got: ReadonlyArray<string> }>((resolve, reject) => {
    const child = spawnAsForeignUser(squatterScript, [JSON.stringify(names), JSON.stringify(files)])
    let out = ""
    child.stdout!.setEncoding("utf8")
    child.stdout!.on("data", (d: string) => {
      out += d
      if (out.includes("\n")) resolve({ child, got: JSON.parse(out.split("\n")[0]!) })
    })
    child.once("exit", (code) => reject(new Error(`the squatter exited with ${code}: ${out}`)))
  })
