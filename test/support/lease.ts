/**
 * Helpers for the lease bridge tests: the bridge over raw stdio, /proc scans for a command's
 * processes, and the GCS actor table read over gRPC (independent of the services under test).
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as grpc from "@grpc/grpc-js"
import * as protoLoader from "@grpc/proto-loader"
import { DEFAULT_GPU_CLEAN_TIMEOUT_SEC } from "../../src/domain/GpuHolders.js"
import { DEFAULT_STOP_GRACE_SEC } from "../../src/services/BridgeProcess.js"
import { type Head, projectRoot, rayPython, sleep, waitFor } from "./ray.js"

/** PYDIR: the folder a Python runs as `python PYDIR COMMAND` (python/__main__.py). */
export const pythonDir = path.join(projectRoot, "python")

/**
 * The supervisor's argv after the interpreter, as the lease actor starts it: the grace is hyperloom's
 * (the supervisor has no default of its own); a later `--grace` in a test's arguments wins.
 */
export const supervisorArgv = [
  "-I",
  pythonDir,
  "supervise",
  "--grace",
  String(DEFAULT_STOP_GRACE_SEC)
] as const

/** True when `argv` (a process's) runs the Python side's `command` ("bridge", "group", "supervise"…). */
export const runsPython = (argv: ReadonlyArray<string>, command: string): boolean =>
  argv.some((a, i) => a === pythonDir && argv[i + 1] === command)

/** Live pids running the Python side's `command` (see `runsPython`). */
export const pidsRunning = (command: string): number[] =>
  pidsWithArg(pythonDir).filter((pid) => {
    try {
      return runsPython(fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0"), command)
    } catch {
      return false
    }
  })

/** A Python for stdlib-only work (the supervisor): Ray's when installed, else python3. */
export const anyPython = fs.existsSync(rayPython) ? rayPython : "python3"

/** A unique `sleep` duration: doubles as a marker to find the process in /proc. */
export const markerSleep = (seconds = 300): string => `${seconds}.${Math.floor(Math.random() * 1e9)}`

/**
 * Shell lines that leave the command's process group (docs/design.md#contained), one of each kind:
 * `setsid`, GNU `timeout` (a group of its own), `start_new_session=True`, a double-forked daemon
 * (fork, setsid, fork again, the middle one exits). Each ends up running `sleep MARKER` (m[0] …
 * m[3]).
 */
export const escapingLines = (m: ReadonlyArray<string>): string =>
  [
    `setsid sleep ${m[0]} &`,
    `timeout 300 sleep ${m[1]} &`,
    `python3 -c 'import subprocess, sys; subprocess.Popen(["sleep", sys.argv[1]], start_new_session=True)' ${m[2]}`,
    `python3 -c 'import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", sys.argv[1]])
    os._exit(0)' ${m[3]}`
  ].join("\n")

/**
 * A Python command that ignores `sig` (so does its child, `sleep MARKER`), sends it to its own
 * process group (`kill -SIG 0`), waits `holdSec` and prints "survived": its supervision must
 * outlive that (docs/design.md#contained), and nothing of it may outlive the lease.
 */
export const selfSignalCode = (sig: string, holdSec: number): string =>
  [
    "import os, signal, subprocess, sys, time",
    `s = getattr(signal, "${sig}")`,
    "signal.signal(s, signal.SIG_IGN)",
    "child = subprocess.Popen(['sleep', sys.argv[1]])",
    "os.killpg(0, s)",
    `time.sleep(${holdSec})`,
    "print('survived', flush=True)",
    "child.kill()"
  ].join("\n")

/** Pids whose argv has an element equal to `marker` (zombies excluded). */
export const pidsWithArg = (marker: string): number[] => {
  const out: number[] = []
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const argv = fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0")
      if (!argv.includes(marker)) continue
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8")
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue
      out.push(Number(entry))
    } catch {
      // vanished
    }
  }
  return out
}

/** Live (not zombie) pids whose process group is `pgid`. */
export const pidsInGroup = (pgid: number): number[] => {
  const out: number[] = []
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      if (fields[0] !== "Z" && Number(fields[2]) === pgid) out.push(Number(entry))
    } catch {
      // vanished
    }
  }
  return out
}

export const isAlive = (pid: number): boolean => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return !stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")
  } catch {
    return false
  }
}

export const waitGone = (what: string, probe: () => number[], timeoutMs = 10_000) =>
  waitFor(what, () => (probe().length === 0 ? true : undefined), timeoutMs, 100)

// ---- the bridge over raw stdio ----------------------------------------------------------------

export interface BridgeEvent {
  readonly event: string
  readonly [k: string]: any
}

export interface RawBridge {
  readonly child: ChildProcess
  readonly events: BridgeEvent[]
  /** stdout lines that were not JSON objects (must stay empty). */
  readonly junk: string[]
  readonly stderr: () => string
  readonly send: (msg: object) => void
  readonly closeStdin: () => void
  readonly waitEvent: (pred: (e: BridgeEvent) => boolean, timeoutMs?: number) => Promise<BridgeEvent>
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** Milliseconds since spawn. */
  readonly since: () => number
}

const spawned: ChildProcess[] = []

export const spawnBridge = (
  env: NodeJS.ProcessEnv = process.env,
  command: "bridge" | "group" = "bridge"
): RawBridge => {
  const t0 = Date.now()
  const child = spawn(rayPython, [pythonDir, command], { stdio: ["pipe", "pipe", "pipe"], env })
  spawned.push(child)
  const events: BridgeEvent[] = []
  const junk: string[] = []
  let err = ""
  let buf = ""
  const waiters = new Set<() => void>()
  child.stdout!.on("data", (d) => {
    buf += d
    let nl = buf.indexOf("\n")
    while (nl >= 0) {
      const line = buf.slice(0, nl)
      buf = buf.slice(nl + 1)
      try {
        const ev = JSON.parse(line)
        if (ev !== null && typeof ev === "object" && typeof ev.event === "string")
          events.push({ ...ev, at: Date.now() - t0 })
        else junk.push(line)
      } catch {
        junk.push(line)
      }
      nl = buf.indexOf("\n")
    }
    for (const w of waiters) w()
  })
  child.stderr!.on("data", (d) => {
    err += d
    if (err.length > 200_000) err = err.slice(-100_000)
  })
  child.stdin!.on("error", () => undefined)
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => {
      for (const w of waiters) w()
      resolve({ code, signal })
    })
  )
  const waitEvent = (pred: (e: BridgeEvent) => boolean, timeoutMs = 60_000) =>
    new Promise<BridgeEvent>((resolve, reject) => {
      const check = () => {
        const found = events.find(pred)
        if (found) {
          cleanup()
          resolve(found)
        } else if (child.exitCode !== null || child.signalCode !== null) {
          cleanup()
          reject(
            new Error(
              `bridge exited before the event; events ${JSON.stringify(events)}; stderr ${err.slice(-2000)}`
            )
          )
        }
      }
      const timer = setTimeout(() => {
        cleanup()
        reject(
          new Error(
            `timed out waiting for an event; events ${JSON.stringify(events)}; stderr ${err.slice(-2000)}`
          )
        )
      }, timeoutMs)
      const cleanup = () => {
        clearTimeout(timer)
        waiters.delete(check)
      }
      waiters.add(check)
      check()
    })
  return {
    child,
    events,
    junk,
    stderr: () => err,
    send: (msg) => child.stdin!.write(`${JSON.stringify(msg)}\n`),
    closeStdin: () => child.stdin!.end(),
    waitEvent,
    exited,
    since: () => Date.now() - t0
  }
}

/** SIGKILLs every bridge this module spawned that is still running. */
export const killBridges = () => {
  for (const c of spawned.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL")
}

export const leaseOp = (head: Head, fields: Record<string, unknown>) => ({
  op: "lease",
  address: head.gcsAddress,
  gpus: 1,
  serving_slot: true,
  env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
  cwd: projectRoot,
  // hyperloom's values, which the bridge requires (it keeps no default of its own)
  stop_grace_sec: DEFAULT_STOP_GRACE_SEC,
  gpu_clean_timeout_sec: DEFAULT_GPU_CLEAN_TIMEOUT_SEC,
  ...fields
})

// ---- the GCS actor table ----------------------------------------------------------------------

export interface GcsActor {
  readonly actorId: string
  readonly state: string
  readonly name: string
  readonly className: string
  readonly pid: number
}

let actorClient:
  | { address: string; client: grpc.Client; method: protoLoader.MethodDefinition<any, any> }
  | undefined

/** The actors of the cluster (non-dead jobs), read from the GCS over gRPC. */
export const gcsActors = async (head: Head): Promise<GcsActor[]> => {
  if (actorClient === undefined || actorClient.address !== head.gcsAddress) {
    actorClient?.client.close()
    const def = protoLoader.loadSync(path.join(projectRoot, "proto", "gcs.proto"), {
      keepCase: true,
      enums: String,
      longs: Number,
      defaults: true
    })
    const method = (def["ray.rpc.ActorInfoGcsService"] as protoLoader.ServiceDefinition)
      .GetAllActorInfo as protoLoader.MethodDefinition<any, any>
    const client = new grpc.Client(head.gcsAddress, grpc.credentials.createInsecure())
    actorClient = { address: head.gcsAddress, client, method }
  }
  const { client, method } = actorClient
  const reply: any = await new Promise((resolve, reject) =>
    client.makeUnaryRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      { show_dead_jobs: false },
      new grpc.Metadata(),
      { deadline: Date.now() + 5_000 },
      (e: unknown, r: unknown) => (e ? reject(e) : resolve(r))
    )
  )
  return (reply.actor_table_data ?? []).map((a: any) => ({
    actorId: Buffer.from(a.actor_id ?? []).toString("hex"),
    state: String(a.state),
    name: String(a.name ?? ""),
    className: String(a.class_name ?? ""),
    pid: Number(a.pid ?? 0)
  }))
}

export const closeGcs = () => {
  actorClient?.client.close()
  actorClient = undefined
}

/** Waits until no actor of ours (class HyperloomLease) is ALIVE or pending in the GCS. */
export const waitNoLeaseActor = (head: Head, timeoutMs = 10_000) =>
  waitFor(
    "no live HyperloomLease actor in the GCS",
    async () => {
      const live = (await gcsActors(head)).filter(
        (a) => a.className.includes("HyperloomLease") && a.state !== "DEAD"
      )
      return live.length === 0 ? true : undefined
    },
    timeoutMs,
    200
  )

export { sleep }
