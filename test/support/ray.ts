/**
 * Real-Ray test harness. Each real-Ray test arranges its own cluster with these helpers and tears
 * it down with `teardownRay()` (ray stop --force, kill what it started by pid, remove the session
 * folders it created). Tests run serially: `ray stop --force` kills every Ray process on the host.
 * A block whose tests can share one head uses test/support/sharedHead.ts (`useSharedHead`).
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { promisify } from "node:util"

const execFileP = promisify(execFile)

export const projectRoot = path.resolve(import.meta.dirname, "../..")
export const rayBin = process.env.HYPERLOOM_RAY ?? path.join(projectRoot, ".venv/bin/ray")

/** The Python of the Ray installation: the interpreter named in the `ray` script's shebang. */
export const rayPython = (() => {
  if (process.env.HYPERLOOM_RAY_PYTHON) return process.env.HYPERLOOM_RAY_PYTHON
  try {
    const first = fs.readFileSync(rayBin, "utf8").split("\n", 1)[0] ?? ""
    if (first.startsWith("#!")) return first.slice(2).trim().split(/\s+/)[0]!
  } catch {
    // fall through
  }
  return path.join(projectRoot, ".venv/bin/python")
})()

export const RAY_TMP = "/tmp/ray"

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

export const waitFor = async <A>(
  what: string,
  probe: () => Promise<A | undefined> | A | undefined,
  timeoutMs = 30_000,
  everyMs = 200
): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  let lastError: unknown
  for (;;) {
    try {
      const v = await probe()
      if (v !== undefined && v !== false) return v
    } catch (e) {
      lastError = e
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ""}`
      )
    }
    await sleep(everyMs)
  }
}

/** Runs `ray …` with a timeout; rejects on non-zero exit. */
export const ray = async (
  args: ReadonlyArray<string>,
  opts: { timeoutMs?: number; env?: NodeJS.ProcessEnv } = {}
) => {
  const { stdout, stderr } = await execFileP(rayBin, [...args], {
    timeout: opts.timeoutMs ?? 60_000,
    killSignal: "SIGKILL",
    env: { ...process.env, RAY_USAGE_STATS_ENABLED: "0", ...opts.env },
    maxBuffer: 16 * 1024 * 1024
  })
  return stdout + stderr
}

export interface DaemonPids {
  readonly gcsServers: ReadonlyArray<number>
  readonly raylets: ReadonlyArray<number>
}

/** gcs_server and raylet pids on the host, read from /proc/<pid>/comm. */
export const daemonPids = (): DaemonPids => {
  const gcsServers: number[] = []
  const raylets: number[] = []
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    let comm: string
    try {
      comm = fs.readFileSync(`/proc/${entry}/comm`, "utf8").trim()
      // A zombie is dead (its parent has not reaped it yet, e.g. a PID 1 that never reaps).
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8")
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue
    } catch {
      continue
    }
    if (comm === "gcs_server") gcsServers.push(Number(entry))
    else if (comm === "raylet") raylets.push(Number(entry))
  }
  return { gcsServers: gcsServers.sort((a, b) => a - b), raylets: raylets.sort((a, b) => a - b) }
}

export const noRayRunning = () => {
  const d = daemonPids()
  return d.gcsServers.length === 0 && d.raylets.length === 0
}

const sessionsBefore = new Set<string>()
const started: ChildProcess[] = []

const listSessions = () => {
  try {
    return fs.readdirSync(RAY_TMP).filter((e) => e.startsWith("session_2"))
  } catch {
    return []
  }
}

/** Call first in a real-Ray test: refuses to run over a Ray that something else left running. */
export const prepareRay = async () => {
  if (!noRayRunning()) {
    // A head left behind by an earlier test of ours (or by a crash): stop it, as the suite owns the host's Ray.
    await ray(["stop", "--force"], { timeoutMs: 60_000 })
  }
  for (const s of listSessions()) sessionsBefore.add(s)
}

export interface HeadOptions {
  readonly port?: number
  readonly numGpus?: number
  readonly numCpus?: number
  readonly resources?: Readonly<Record<string, number>>
  /** Declare serving_slot: 1 (default false: a hand-started head from an old recipe). */
  readonly slot?: boolean
}

export interface Head {
  readonly port: number
  readonly gcsAddress: string
  readonly host: string
}

const nodeIp = () => {
  try {
    return fs.readFileSync(path.join(RAY_TMP, "ray_current_cluster"), "utf8").trim().split(":")[0]!
  } catch {
    return "127.0.0.1"
  }
}

/**
 * The test heads' and workers' flags besides their resources: no log monitor, the Python process
 * that streams workers' log files to drivers. hyperloom's drivers never ask for them
 * (log_to_driver=False), and nothing else of hyperloom reads them. Without it a head's start took 5.5-5.8 s of the
 * quiet 2-core machine's CPU, with it 6.4-7.9 s: CI's dozens of head starts pay that while other
 * files run beside them.
 */
const TEST_NODE_FLAGS = ["--disable-usage-stats", "--include-log-monitor=false"] as const

export const startHead = async (opts: HeadOptions = {}): Promise<Head> => {
  const port = opts.port ?? 6379
  const resources = { ...(opts.resources ?? {}), ...(opts.slot ? { serving_slot: 1 } : {}) }
  const args = [
    "start",
    "--head",
    `--port=${port}`,
    ...TEST_NODE_FLAGS,
    "--include-dashboard=false",
    ...(opts.numGpus !== undefined ? [`--num-gpus=${opts.numGpus}`] : []),
    ...(opts.numCpus !== undefined ? [`--num-cpus=${opts.numCpus}`] : []),
    ...(Object.keys(resources).length > 0 ? [`--resources=${JSON.stringify(resources)}`] : [])
  ]
  await ray(args, { timeoutMs: 90_000 })
  const host = nodeIp()
  return { port, host, gcsAddress: `${host}:${port}` }
}

/** Joins a worker raylet on this host to a head. */
export const startWorker = async (
  head: Head,
  opts: { resources?: Record<string, number>; numCpus?: number; numGpus?: number } = {}
) => {
  await ray(
    [
      "start",
      `--address=${head.gcsAddress}`,
      ...TEST_NODE_FLAGS,
      ...(opts.numCpus !== undefined ? [`--num-cpus=${opts.numCpus}`] : []),
      ...(opts.numGpus !== undefined ? [`--num-gpus=${opts.numGpus}`] : []),
      ...(opts.resources ? [`--resources=${JSON.stringify(opts.resources)}`] : [])
    ],
    { timeoutMs: 90_000 }
  )
}

export interface PyProcess {
  readonly child: ChildProcess
  readonly pid: number
  /** The first line the script printed (e.g. "ready <job id hex>"). */
  readonly ready: string
  kill(): void
}

/**
 * Runs a Python snippet with the Ray installation's Python; resolves once it prints its first
 * line. `keepAlive` snippets stay connected until killed.
 */
export const runPython = async (code: string, opts: { timeoutMs?: number } = {}): Promise<PyProcess> => {
  const child = spawn(rayPython, ["-c", code], {
    stdio: ["pipe", "pipe", "pipe"],
    env: { ...process.env, RAY_USAGE_STATS_ENABLED: "0", PYTHONUNBUFFERED: "1" }
  })
  started.push(child)
  let err = ""
  child.stderr!.on("data", (d) => {
    err += d
    if (err.length > 20_000) err = err.slice(-10_000)
  })
  const ready = await new Promise<string>((resolve, reject) => {
    let out = ""
    const timer = setTimeout(
      () => reject(new Error(`python snippet not ready: ${err.slice(-2000)}`)),
      opts.timeoutMs ?? 60_000
    )
    child.stdout!.on("data", (d) => {
      out += d
      const nl = out.indexOf("\n")
      if (nl >= 0) {
        clearTimeout(timer)
        resolve(out.slice(0, nl))
      }
    })
    child.on("exit", (code) => {
      clearTimeout(timer)
      reject(new Error(`python snippet exited with ${code}: ${err.slice(-2000)}`))
    })
  })
  return {
    child,
    pid: child.pid!,
    ready,
    kill: () => {
      if (child.exitCode === null) child.kill("SIGKILL")
    }
  }
}

/** A live driver connected to the cluster (a job with is_dead=false). */
export const startDriver = (head: Head) =>
  runPython(
    `import ray, sys\nray.init(address=${JSON.stringify(head.gcsAddress)}, logging_level="ERROR")\nprint("ready", ray.get_runtime_context().get_job_id(), flush=True)\nsys.stdin.read()\n`
  )

/** A detached actor that outlives the driver that created it. */
export const startDetachedActor = async (head: Head, name = "hl_test_detached") => {
  const p = await runPython(
    `import ray\nray.init(address=${JSON.stringify(head.gcsAddress)}, logging_level="ERROR", namespace="hl")\n@ray.remote(num_cpus=0)\nclass Keeper:\n    def ping(self):\n        return 1\na = Keeper.options(name=${JSON.stringify(name)}, lifetime="detached").remote()\nray.get(a.ping.remote())\nprint("ready", flush=True)\n`
  )
  await waitFor("detached actor driver to exit", () => p.child.exitCode !== null || undefined, 60_000)
  return name
}

/** A detached placement group holding resources with no actor. */
export const startDetachedPlacementGroup = async (
  head: Head,
  bundle: Record<string, number> = { CPU: 1 }
) => {
  const p = await runPython(
    `import ray\nfrom ray.util.placement_group import placement_group\nray.init(address=${JSON.stringify(head.gcsAddress)}, logging_level="ERROR")\npg = placement_group([${JSON.stringify(bundle)}], lifetime="detached")\nray.get(pg.ready(), timeout=90)\nprint("ready", flush=True)\n`,
    // A loaded host can take long to place the group and to let the driver go: bounded, not tight.
    { timeoutMs: 120_000 }
  )
  await waitFor("placement group driver to exit", () => p.child.exitCode !== null || undefined, 60_000)
}

/**
 * What `ray stop` looks for (Ray's RAY_PROCESSES, autoscaler/_private/constants.py): a keyword in
 * the process's name (its comm, 15 characters on Linux) or in its whole command line.
 */
const RAY_PROCESS_NAMES = ["raylet", "plasma_store", "ray::", "gcs_server"] as const
const RAY_PROCESS_ARGS = [
  "monitor.py",
  "ray.util.client.server",
  "default_worker.py",
  "setup_worker.py",
  "io.ray.runtime.runner.worker.DefaultWorker",
  "log_monitor.py",
  "ray::DashboardAgent",
  "dashboard/dashboard.py",
  "ray::RuntimeEnvAgent",
  "ray_process_reaper.py"
] as const

/** The current-cluster file `ray stop` removes (Ray's get_default_system_temp_dir, Linux). */
const rayAddressFile = () =>
  path.join(process.env.RAY_TMPDIR ?? process.env.TMPDIR ?? "/tmp", "ray", "ray_current_cluster")

/** Is any process on the host one that `ray stop` would stop? (zombies are dead already) */
export const rayProcessesRunning = (): boolean => {
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8")
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue
      const comm = fs.readFileSync(`/proc/${entry}/comm`, "utf8").trim()
      if (RAY_PROCESS_NAMES.some((k) => comm.includes(k))) return true
      const args = fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").join(" ")
      if (RAY_PROCESS_ARGS.some((k) => args.includes(k))) return true
    } catch {
      // gone meanwhile
    }
  }
  return false
}

/**
 * Stops every Ray process, kills what the harness started and removes the sessions it created.
 * When no process is one `ray stop --force` would stop (a test that started no Ray, or stopped it
 * itself), it does what that `ray stop` would do, remove the current-cluster file, without starting
 * Ray's Python for it (~1 s of CPU each, dozens of times a run).
 */
export const teardownRay = async () => {
  for (const c of started.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL")
  }
  if (rayProcessesRunning()) await ray(["stop", "--force"], { timeoutMs: 90_000 }).catch(() => undefined)
  else fs.rmSync(rayAddressFile(), { force: true })
  await waitFor("Ray daemons to exit", () => noRayRunning() || undefined, 30_000)
  for (const s of listSessions()) {
    if (!sessionsBefore.has(s)) fs.rmSync(path.join(RAY_TMP, s), { recursive: true, force: true })
  }
}
