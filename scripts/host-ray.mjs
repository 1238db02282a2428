// Which Ray processes run on this host, read from /proc: what `ray stop --force` would kill.
// `npm test` (scripts/test.mjs) refuses to start when it finds any, unless told the host is a
// disposable test host (HYPERLOOM_TEST_DISPOSABLE_HOST=1, set by .ci/run).
import * as fs from "node:fs"
import * as path from "node:path"

/** Ray's daemons and workers by their executable or process name. */
const DAEMONS = new Set(["raylet", "gcs_server", "plasma_store", "redis-server"])

/** Ray's Python daemons (monitor.py, log_monitor.py, dashboard.py, agent.py, …) by their script. */
const RAY_SCRIPT = /(^|\/)ray\/(_private|autoscaler|dashboard)\/.*\.py$/

/** What a process is, when it is one of Ray's; undefined otherwise. */
export const rayProcessKind = (comm, argv) => {
  const exe = argv.length > 0 ? path.basename(argv[0]) : ""
  if (DAEMONS.has(comm) || DAEMONS.has(exe)) return DAEMONS.has(comm) ? comm : exe
  // Ray workers and agents rename themselves `ray::<what>`.
  if (comm.startsWith("ray::")) return comm
  if (argv.length > 0 && argv[0].startsWith("ray::")) return argv[0].split(" ")[0]
  const script = argv.find((a) => RAY_SCRIPT.test(a))
  return script === undefined ? undefined : path.basename(script)
}

/** Every live Ray process under `procRoot` (zombies are already dead: skipped), as `{ pid, kind }`. */
export const rayProcesses = (procRoot = "/proc") => {
  const found = []
  let entries
  try {
    entries = fs.readdirSync(procRoot)
  } catch {
    return found
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const dir = path.join(procRoot, entry)
      const stat = fs.readFileSync(path.join(dir, "stat"), "utf8")
      const state = stat.slice(stat.lastIndexOf(")") + 1).trim()[0]
      if (state === "Z" || state === "X") continue
      const comm = fs.readFileSync(path.join(dir, "comm"), "utf8").replace(/\n$/, "")
      const argv = fs
        .readFileSync(path.join(dir, "cmdline"), "utf8")
        .split("\0")
        .filter((a) => a !== "")
      const kind = rayProcessKind(comm, argv)
      if (kind !== undefined) found.push({ pid: Number(entry), kind })
    } catch {
      // vanished while we read it
    }
  }
  return found.sort((a, b) => a.pid - b.pid)
}

/**
 * The one line `npm test` prints when it refuses to run on this host, or undefined when it may
 * run: Ray processes it did not start are running and the host is not declared disposable.
 */
export const refusal = (env, procRoot = "/proc") => {
  if (env.HYPERLOOM_TEST_DISPOSABLE_HOST === "1") return undefined
  const found = rayProcesses(procRoot)
  if (found.length === 0) return undefined
  const shown = found
    .slice(0, 5)
    .map((p) => `${p.kind} pid ${p.pid}`)
    .join(", ")
  const more = found.length > 5 ? ` and ${found.length - 5} more` : ""
  return (
    `npm test: refusing to run: Ray processes it did not start are running on this host (${shown}${more}); ` +
    "the real-Ray tests run `ray stop --force`, which would kill them. Stop them, or set " +
    "HYPERLOOM_TEST_DISPOSABLE_HOST=1 if this host is a disposable test host."
  )
}
