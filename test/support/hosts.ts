/**
 * Hosts of their own (scripts/hosts.sh): a head host running hyperloom from the checkout and one or
 * more hosts (worker, worker2) that have the Ray installation and none of the checkout, joined by
 * a switch whose addresses exist only inside the hosts' network namespaces. Every host has the
 * stand-in engine and client installed outside any checkout (STAND_INS). `shared: false` gives
 * hosts that share nothing but the network (no /tmp/shared). The test process stays outside them
 * all and sees every process of each in its /proc (their PID namespaces are children of its own),
 * which is how tests check that nothing is left. Start them once per test file.
 */
import { type ChildProcess, execFile, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { promisify } from "node:util"
import { projectRoot, rayBin, sleep, waitFor } from "./ray.js"

const execFileP = promisify(execFile)
const script = path.join(projectRoot, "scripts", "hosts.sh")

export const HEAD_IP = "198.18.0.1"
export const WORKER_IP = "198.18.0.2"
export const WORKER2_IP = "198.18.0.3"
export const WORKER3_IP = "198.18.0.4"
export const GCS_PORT = 6379
export const GCS = `${HEAD_IP}:${GCS_PORT}`

/** The `ray` executable by its real path: the worker host does not see the checkout's `.venv` link. */
export const realRay = fs.realpathSync(rayBin)

export type HostName = "head" | "worker" | "worker2" | "worker3"

/** Each host's address (on the switch). */
export const IP: Readonly<Record<HostName, string>> = {
  head: HEAD_IP,
  worker: WORKER_IP,
  worker2: WORKER2_IP,
  worker3: WORKER3_IP
}

/** Where every host has the stand-ins installed (the same path on each, outside any checkout). */
export const STAND_INS = "/srv/hyperloom-stand-ins"
export const STAND_IN_ENGINE = `${STAND_INS}/fake-engine.mjs`
export const STAND_IN_CLIENT = `${STAND_INS}/fake-bench-client.mjs`
/** A folder for PATH holding the commands `fake-engine` and `fake-bench-client` (`exec node …mjs`). */
export const STAND_IN_BIN = `${STAND_INS}/bin`

/** Why two hosts cannot be made here, or undefined when they can. */
export const whyNoHosts = (): string | undefined => {
  const r = spawnSync("bash", [script, "check"], { encoding: "utf8" })
  if (r.status === 0) return undefined
  return `${(r.stderr || r.error?.message || `exit ${r.status}`).trim().split("\n")[0]}`
}

export interface Run {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
  /** stdout as JSON, when it is. */
  readonly json: any
}

export interface Started {
  readonly child: ChildProcess
  readonly out: { stdout: string; stderr: string }
  readonly exited: Promise<Run>
  /** The command's own pid (nsenter's child), once it runs. */
  readonly pid: () => Promise<number>
}

const childrenOf = (pid: number): number[] => {
  try {
    return fs
      .readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .filter((s) => s !== "")
      .map(Number)
  } catch {
    return []
  }
}

const isNsenter = (pid: number): boolean => {
  try {
    return path.basename(fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")[0] ?? "") === "nsenter"
  } catch {
    return false
  }
}

export interface Hosts {
  readonly dir: string
  /** The hosts made, head first. */
  readonly names: ReadonlyArray<HostName>
  /** The pid (as seen here) of each host's init: the processes of a host are its descendants. */
  readonly initPid: (host: HostName) => number
  /** Starts CMD on a host (the head runs it in the checkout, the others in /). */
  readonly start: (host: HostName, argv: ReadonlyArray<string>, env?: Record<string, string>) => Started
  /** Runs CMD on a host to its end. */
  readonly run: (
    host: HostName,
    argv: ReadonlyArray<string>,
    opts?: { env?: Record<string, string>; timeoutMs?: number }
  ) => Promise<Run>
  /** Runs the bundled CLI on the head host. */
  readonly cli: (
    args: ReadonlyArray<string>,
    opts?: { env?: Record<string, string>; timeoutMs?: number }
  ) => Promise<Run>
  readonly startCli: (args: ReadonlyArray<string>, env?: Record<string, string>) => Started
  /** Where this process sees a host's file (through its init's root: a host's /tmp is its own). */
  readonly pathOn: (host: HostName, file: string) => string
  /** Writes a file on a host (its own /tmp is its own). */
  readonly writeFile: (host: HostName, file: string, text: string, mode?: string) => Promise<void>
  /** Takes a host's cable (default: the worker's) down (a network partition) or up again. */
  readonly cut: (host?: Exclude<HostName, "head">) => Promise<void>
  readonly heal: (host?: Exclude<HostName, "head">) => Promise<void>
  /** Ends every host: every process in them is killed. */
  readonly down: () => Promise<void>
}

/** The environment a host's commands get: this one's PATH and locale, the real `ray`, nothing of Ray's. */
const hostEnv = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const k of ["PATH", "HOME", "LANG", "LC_ALL", "TERM"])
    if (process.env[k] !== undefined) env[k] = process.env[k]
  return { ...env, RAY_USAGE_STATS_ENABLED: "0", HYPERLOOM_RAY: realRay, ...extra }
}

/**
 * Makes the hosts (fails with the script's one line when it cannot): by default two (head, worker)
 * with a shared /tmp/shared; `{ count: 3, shared: false }` for three sharing nothing but the network
 * (4 adds worker3).
 */
export const makeHosts = async (opts: { count?: 2 | 3 | 4; shared?: boolean } = {}): Promise<Hosts> => {
  const count = opts.count ?? 2
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-hosts-"))
  await execFileP(
    "bash",
    [script, "up", dir, "--hosts", String(count), ...(opts.shared === false ? ["--no-shared"] : [])],
    { timeout: 60_000 }
  )
  const names = (["head", "worker", "worker2", "worker3"] as const).slice(0, count)
  const initPid = (host: HostName) => Number(fs.readFileSync(path.join(dir, `${host}.pid`), "utf8").trim())

  const start = (host: HostName, argv: ReadonlyArray<string>, env: Record<string, string> = {}): Started => {
    const child = spawn("bash", [script, "run", dir, host, ...argv], {
      cwd: projectRoot,
      env: hostEnv(env),
      stdio: ["ignore", "pipe", "pipe"]
    })
    const out = { stdout: "", stderr: "" }
    child.stdout!.on("data", (d) => (out.stdout += d))
    child.stderr!.on("data", (d) => (out.stderr += d))
    const exited = new Promise<Run>((resolve) =>
      child.on("exit", (code, signal) => {
        let json: any
        try {
          json = JSON.parse(out.stdout)
        } catch {
          json = undefined
        }
        resolve({ code, signal, stdout: out.stdout, stderr: out.stderr, json })
      })
    )
    // `two-hosts.sh run` execs nsenter, which forks the command into the host's PID namespace
    // (before that exec, the script's child is a `cat` of its command substitution).
    const pid = () =>
      waitFor(
        "the command started on its host",
        () => (isNsenter(child.pid!) ? childrenOf(child.pid!)[0] : undefined),
        30_000,
        50
      )
    return { child, out, exited, pid }
  }

  const run = async (
    host: HostName,
    argv: ReadonlyArray<string>,
    opts: { env?: Record<string, string>; timeoutMs?: number } = {}
  ) => {
    const s = start(host, argv, opts.env)
    const timer = setTimeout(() => {
      for (const p of childrenOf(s.child.pid!)) process.kill(p, "SIGKILL")
      s.child.kill("SIGKILL")
    }, opts.timeoutMs ?? 120_000)
    const r = await s.exited
    clearTimeout(timer)
    return r
  }

  const cliArgv = (args: ReadonlyArray<string>) => [
    process.execPath,
    path.join(projectRoot, "dist/hyperloom.mjs"),
    ...args
  ]

  return {
    dir,
    names,
    initPid,
    start,
    run,
    cli: (args, opts) => run("head", cliArgv(args), opts),
    startCli: (args, env) => start("head", cliArgv(args), env),
    pathOn: (host, file) => `/proc/${initPid(host)}/root${file}`,
    writeFile: async (host, file, text, mode = "644") => {
      const b64 = Buffer.from(text).toString("base64")
      const r = await run(host, [
        "sh",
        "-c",
        `mkdir -p "$(dirname "$1")" && echo "$2" | base64 -d > "$1" && chmod "$3" "$1"`,
        "sh",
        file,
        b64,
        mode
      ])
      if (r.code !== 0) throw new Error(`writing ${file} on the ${host} host failed: ${r.stderr}`)
    },
    cut: async (host = "worker") => {
      await execFileP("bash", [script, "cut", dir, host])
    },
    heal: async (host = "worker") => {
      await execFileP("bash", [script, "heal", dir, host])
    },
    down: async () => {
      await execFileP("bash", [script, "down", dir]).catch(() => undefined)
      await sleep(200)
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** What a host's Ray node declares: GPUs (default 1), one CPU, the slot. */
const nodeArgs = (gpus: number) => [
  "--disable-usage-stats",
  `--num-gpus=${gpus}`,
  "--num-cpus=1",
  '--resources={"serving_slot": 1}'
]

/**
 * `ray start`'s environment: on a loaded machine (two cores, several test files at once) a raylet
 * was seen to miss Ray's default wait for its registration ("The node registration may not be
 * complete yet before the timeout"); give it a minute.
 */
const startEnv = { RAY_raylet_start_wait_time_s: "60" }

const gpusOf = (gpus: number | Partial<Record<HostName, number>> | undefined, host: HostName) =>
  typeof gpus === "number" ? gpus : (gpus?.[host] ?? 1)

/** Starts (or starts again, after its raylet was killed) a non-head host's Ray node, joined to the head. */
export const startNode = async (
  hosts: Hosts,
  host: Exclude<HostName, "head">,
  opts: { gpus?: number | Partial<Record<HostName, number>> } = {}
) => {
  const r = await hosts.run(
    host,
    [
      realRay,
      "start",
      `--address=${GCS}`,
      `--node-ip-address=${IP[host]}`,
      ...nodeArgs(gpusOf(opts.gpus, host))
    ],
    { timeoutMs: 120_000, env: startEnv }
  )
  if (r.code !== 0) throw new Error(`ray start on the ${host} host failed: ${r.stderr.slice(-2000)}`)
}

/**
 * Starts Ray on every host: the head and one node per other host, each declaring the slot and
 * `gpus` GPUs (a number for all, or per host). `systemConfig` goes to the head (`ray start
 * --system-config`), which hands it to every node and driver: e.g. shorter health checks, so that
 * a partition test need not wait Ray's default ~65 s. The other hosts join one at a time; `nodes`
 * names the ones that join now (default: every other host; the rest can join later, startNode).
 */
export const startCluster = async (
  hosts: Hosts,
  opts: {
    gpus?: number | Partial<Record<HostName, number>>
    systemConfig?: Record<string, number>
    nodes?: ReadonlyArray<Exclude<HostName, "head">>
  } = {}
) => {
  const config =
    opts.systemConfig !== undefined ? [`--system-config=${JSON.stringify(opts.systemConfig)}`] : []
  const startHead = () =>
    hosts.run(
      "head",
      [
        realRay,
        "start",
        "--head",
        `--port=${GCS_PORT}`,
        `--node-ip-address=${HEAD_IP}`,
        "--include-dashboard=false",
        ...config,
        ...nodeArgs(gpusOf(opts.gpus, "head"))
      ],
      { timeoutMs: 120_000, env: startEnv }
    )
  let head = await startHead()
  // On a loaded machine (load average ~20 on two cores) the head was seen to time out in its own
  // start ("The current node timed out during startup … the GCS has become overloaded"): once
  // more, after a `ray stop` in that host (its own Ray only).
  if (head.code !== 0 && head.stderr.includes("timed out during startup")) {
    await hosts.run("head", [realRay, "stop", "--force"], { timeoutMs: 120_000 })
    head = await startHead()
  }
  if (head.code !== 0)
    throw new Error(`ray start --head failed on the head host: ${head.stderr.slice(-2000)}`)
  // One after the other: two raylets registering at once on a loaded machine were seen to time
  // out ("GCS cannot find the node … registration may not be complete").
  for (const h of hosts.names)
    if (h !== "head" && (opts.nodes === undefined || opts.nodes.includes(h))) await startNode(hosts, h, opts)
}

/** The pid of a host's raylet (as seen here), or undefined when it runs none. */
export const rayletOn = (hosts: Hosts, host: HostName): number | undefined =>
  fs
    .readdirSync("/proc")
    .filter((e) => /^\d+$/.test(e))
    .map(Number)
    .find((pid) => onHost(hosts, host, pid) && path.basename(argvOf(pid)?.[0] ?? "") === "raylet")

/** SIGKILLs a host's raylet (Ray then declares its node dead; its workers die with it). */
export const killRaylet = (hosts: Hosts, host: HostName): number => {
  const pid = rayletOn(hosts, host)
  if (pid === undefined) throw new Error(`no raylet runs on the ${host} host`)
  process.kill(pid, "SIGKILL")
  return pid
}

/** Is `pid` a process of that host (in its PID namespace)? */
export const onHost = (hosts: Hosts, host: HostName, pid: number): boolean => {
  try {
    return fs.readlinkSync(`/proc/${pid}/ns/pid`) === fs.readlinkSync(`/proc/${hosts.initPid(host)}/ns/pid`)
  } catch {
    return false
  }
}

/** A process's argv, or undefined once it is gone. */
export const argvOf = (pid: number): string[] | undefined => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
  } catch {
    return undefined
  }
}

/**
 * The lease's own processes left on a host: supervisors and their keepers (`… supervise
 * --status-fd …`, from the package or from the copy a node without it runs) and rank actors'
 * workers (Ray names their process after the actor class).
 */
export const leaseProcsOn = (hosts: Hosts, host: HostName): string[] =>
  fs
    .readdirSync("/proc")
    .filter((e) => /^\d+$/.test(e))
    .map(Number)
    .filter((pid) => onHost(hosts, host, pid))
    .flatMap((pid) => {
      const argv = argvOf(pid) ?? []
      const ours =
        (argv.includes("supervise") && argv.includes("--status-fd")) ||
        argv.some((a) => a.includes("HyperloomGroupRank") || a.includes("HyperloomLease"))
      return ours ? [`${pid}: ${argv.join(" ").slice(0, 160)}`] : []
    })
