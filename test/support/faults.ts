/**
 * Fault injection for leases on a real head (docs/design.md#the-slot-means-the-gpus-are-free), shared
 * by test/ray/faults.test.ts (a few seeded iterations) and bench/faults.mjs (many).
 *
 * One iteration: a lease is taken through the bundled CLI (`hyperloom lease run --gpus 0`) for a
 * command that carries a unique marker in its environment (`HL_FAULT=<run>-<n>`, set by `env`
 * so only the command's process tree has it) and starts a child and a grandchild in its process
 * group and one escape of each kind (docs/design.md#contained: `setsid`, GNU `timeout`,
 * `start_new_session`, a double-forked daemon), all carrying the marker. At a seeded random moment
 * of one phase of the lease —
 *   waiting    (another lease holds the slot; ours is pending),
 *   starting   (the CLI runs, the command does not yet),
 *   running    (the command runs),
 *   releasing  (the CLI got SIGINT; the command ignores TERM, so the release spends its grace)
 * — one of {the CLI, the bridge, the actor's worker, the supervisor, its keeper, the command, the
 * command's whole process group, the guards (the supervisor's process group: it and its keeper
 * at once)} is SIGKILLed, or the actor is killed through the GCS
 * (`KillActorViaGcs`, force, no restart: what `ray.kill` sends; the Python API cannot get a
 * handle on another driver's unnamed actor); or one of them is SIGSTOPped (the group with
 * `kill -STOP -PGID`) and then the process whose death ends the lease is SIGKILLed while it stays
 * stopped (STOP_ENDER: the bridge, or the worker when the supervisor or the bridge is the one
 * stopped), and it is woken (SIGCONT) 1.5 s later. Then, within a bound:
 *   - sampled all along: whenever the GCS shows the slot free, no process of the command runs;
 *   - orphans: once the bound has passed, no process of the command is left;
 *   - the lease has ended: the CLI exited and the lease's actor is DEAD (or gone);
 *   - double holders: a probe lease taken right after the fault finds, when its own command
 *     starts, no other lease's command running beside it.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as grpc from "@grpc/grpc-js"
import * as protoLoader from "@grpc/proto-loader"
import { cleanEnv, cliPath } from "./cli.js"
import { anyPython, gcsActors, leaseOp, type RawBridge, runsPython, spawnBridge } from "./lease.js"
import { type Head, projectRoot, sleep } from "./ray.js"

/**
 * What can be hit: by pid (the group: the command's process group; the guards: the supervisor's
 * own process group, the supervisor and its keeper at once).
 */
export const TARGETS = [
  "cli",
  "bridge",
  "worker",
  "supervisor",
  "keeper",
  "command",
  "group",
  "guards"
] as const
export type Target = (typeof TARGETS)[number]
/** SIGKILL of a target, `ray.kill` of the actor, or SIGSTOP of a target (then its STOP_ENDER is SIGKILLed). */
export const KINDS = [
  "cli",
  "bridge",
  "supervisor",
  "worker",
  "ray_kill",
  "keeper",
  "command",
  "group",
  "guards",
  "stop:cli",
  "stop:bridge",
  "stop:worker",
  "stop:supervisor",
  "stop:keeper",
  "stop:command",
  "stop:group",
  "stop:guards",
  // The guards stopped, then the bridge SIGKILLed: the GCS ends a dead driver's job at once.
  "stop:guards>bridge"
] as const
export type Kind = (typeof KINDS)[number]
/** Who is SIGKILLed while the stopped one stays stopped: the lease's end, when it is hardest. */
export const STOP_ENDER: Record<Target, Target> = {
  cli: "bridge",
  bridge: "worker",
  worker: "bridge",
  supervisor: "worker",
  keeper: "bridge",
  command: "bridge",
  group: "bridge",
  guards: "worker"
}
/** The phases where a kind's target exists (the keeper, command and group only once CMD runs). */
export const phasesFor = (kind: Kind): ReadonlyArray<Phase> =>
  kind.startsWith("stop:") || kind === "keeper" || kind === "command" || kind === "group" || kind === "guards"
    ? ["running", "releasing"]
    : PHASES
export const PHASES = ["waiting", "starting", "running", "releasing"] as const
export type Phase = (typeof PHASES)[number]

export interface FaultOutcome {
  readonly n: number
  readonly phase: Phase
  readonly kind: Kind
  /** When the fault was injected, relative to the phase's start (ms). */
  readonly atMs: number
  /** What the target was when it was hit. */
  readonly target: string
  /** Processes of the command found alive while the GCS showed the slot free. */
  readonly slotFreeWhileRunning: number
  /** Processes of the command still alive after the bound. */
  readonly orphans: number
  /** The probe lease found another lease's command running beside it. */
  readonly doubleHolders: number
  readonly leaseEnded: boolean
  /** Time from the fault until nothing of the command was left (ms; -1 if never, or if the lease survived). */
  readonly goneMs: number
  /** The fault did not end the lease (a replaced keeper or spare bridge): ended with SIGINT after the bound. */
  readonly survived: boolean
  readonly cliExit: string
  readonly notes: ReadonlyArray<string>
}

/** A small seeded PRNG (mulberry32): the same seed gives the same faults. */
export const rng = (seed: number) => {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return {
    next,
    between: (lo: number, hi: number) => lo + next() * (hi - lo),
    pick: <A>(xs: ReadonlyArray<A>): A => xs[Math.floor(next() * xs.length)]!
  }
}

// ---- the leased command ------------------------------------------------------------------------

/**
 * The command: prints the other leases' markers it sees running (`others=…`), then (unless it is
 * a probe) starts a child and a grandchild in its group and holds on; `stubborn` ignores TERM.
 */
const COMMAND = String.raw`
import os, signal, subprocess, sys, time
me = os.environ.get("HL_FAULT", "")
mode = sys.argv[1]
others = set()
for e in os.listdir("/proc"):
    if not e.isdigit():
        continue
    try:
        with open("/proc/%s/stat" % e, "rb") as f:
            st = f.read()
        with open("/proc/%s/environ" % e, "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        continue
    if st[st.rfind(b")") + 2:st.rfind(b")") + 3] == b"Z":
        continue
    for kv in env:
        if kv.startswith(b"HL_FAULT="):
            v = kv[9:].decode("ascii", "replace")
            if v != me:
                others.add(v)
print("others=" + ",".join(sorted(others)), flush=True)
if mode == "probe":
    sys.exit(0)
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
trap = "trap '' TERM; " if mode == "stubborn" else ""
subprocess.Popen(["sh", "-c", trap + "sleep 600 & sleep 600; wait"])
# One escape of each kind (docs/design.md#contained), each out of this process group.
subprocess.Popen(["setsid", "sleep", "600"])
subprocess.Popen(["timeout", "600", "sleep", "600"])
subprocess.Popen(["sleep", "600"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "600"])
    os._exit(0)
print("holding", flush=True)
while True:
    time.sleep(1)
`

export const commandArgv = (mark: string, mode: "hold" | "stubborn" | "probe") => [
  "env",
  `HL_FAULT=${mark}`,
  anyPython,
  "-c",
  COMMAND,
  mode
]

// ---- /proc -----------------------------------------------------------------------------------

interface ProcInfo {
  readonly pid: number
  readonly ppid: number
  readonly pgid: number
  readonly mark: string | undefined
  readonly argv: ReadonlyArray<string>
}

const readProc = (pid: number): ProcInfo | undefined => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    if (fields[0] === "Z") return undefined
    let mark: string | undefined
    try {
      const env = fs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0")
      const kv = env.find((e) => e.startsWith("HL_FAULT="))
      if (kv !== undefined) mark = kv.slice("HL_FAULT=".length)
    } catch {
      // not readable: not ours
    }
    const argv = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
    return { pid, ppid: Number(fields[1]), pgid: Number(fields[2]), mark, argv }
  } catch {
    return undefined
  }
}

export const processes = (): ProcInfo[] => {
  const out: ProcInfo[] = []
  for (const e of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue
    const p = readProc(Number(e))
    if (p !== undefined) out.push(p)
  }
  return out
}

/** Live processes carrying the marker. */
export const marked = (mark: string) => processes().filter((p) => p.mark === mark)

// ---- the GCS: the slot, the actors, KillActorViaGcs --------------------------------------------

const KILL_PROTO = `syntax = "proto3";
package ray.rpc;
message GcsStatus { int32 code = 1; string message = 2; }
message KillActorViaGcsRequest { bytes actor_id = 1; bool force_kill = 2; bool no_restart = 3; }
message KillActorViaGcsReply { GcsStatus status = 1; }
service ActorInfoGcsService { rpc KillActorViaGcs(KillActorViaGcsRequest) returns (KillActorViaGcsReply); }
`

const clients = new Map<string, { client: grpc.Client; kill: any; available: any }>()

const clientFor = (head: Head) => {
  let c = clients.get(head.gcsAddress)
  if (c === undefined) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-faults-proto-"))
    fs.writeFileSync(path.join(dir, "kill.proto"), KILL_PROTO)
    const opts = { keepCase: true, enums: String, longs: Number, defaults: true }
    const killDef = protoLoader.loadSync(path.join(dir, "kill.proto"), opts)
    fs.rmSync(dir, { recursive: true, force: true })
    const gcsDef = protoLoader.loadSync(path.join(projectRoot, "proto", "gcs.proto"), opts)
    const kill = (killDef["ray.rpc.ActorInfoGcsService"] as protoLoader.ServiceDefinition).KillActorViaGcs
    const available = (gcsDef["ray.rpc.NodeResourceInfoGcsService"] as protoLoader.ServiceDefinition)
      .GetAllAvailableResources
    c = { client: new grpc.Client(head.gcsAddress, grpc.credentials.createInsecure()), kill, available }
    clients.set(head.gcsAddress, c)
  }
  return c
}

const unary = (head: Head, which: "kill" | "available", request: object): Promise<any> => {
  const c = clientFor(head)
  const m = c[which]
  return new Promise((resolve, reject) =>
    c.client.makeUnaryRequest(
      m.path,
      m.requestSerialize,
      m.responseDeserialize,
      request,
      new grpc.Metadata(),
      { deadline: Date.now() + 5_000 },
      (e: unknown, r: unknown) => (e ? reject(e) : resolve(r))
    )
  )
}

/** The slot the GCS shows free right now (sum over nodes). */
export const slotAvailable = async (head: Head): Promise<number> => {
  const r = await unary(head, "available", {})
  let sum = 0
  for (const n of r.resources_list ?? []) sum += Number(n.resources_available?.serving_slot ?? 0)
  return sum
}

/** What `ray.kill(actor, no_restart=True)` sends to the GCS. */
export const killActorViaGcs = async (head: Head, actorIdHex: string) => {
  const r = await unary(head, "kill", {
    actor_id: Buffer.from(actorIdHex, "hex"),
    force_kill: true,
    no_restart: true
  })
  if (r.status && r.status.code !== 0) throw new Error(`KillActorViaGcs: ${r.status.message}`)
}

export const closeFaultClients = () => {
  for (const c of clients.values()) c.client.close()
  clients.clear()
}

// ---- a lease through the CLI -------------------------------------------------------------------

export interface CliLease {
  readonly child: ChildProcess
  readonly mark: string
  readonly out: () => string
  readonly err: () => string
  readonly exited: Promise<string>
  readonly done: () => boolean
}

export const startCliLease = (mark: string, mode: "hold" | "stubborn" | "probe"): CliLease => {
  const child = spawn(
    process.execPath,
    [cliPath, "lease", "run", "--gpus", "0", "--", ...commandArgv(mark, mode)],
    {
      cwd: projectRoot,
      env: cleanEnv({ HYPERLOOM_LOG_LEVEL: "info" }),
      stdio: ["ignore", "pipe", "pipe"]
    }
  )
  let out = ""
  let err = ""
  child.stdout!.on("data", (d) => (out += d))
  child.stderr!.on("data", (d) => {
    err += d
    if (err.length > 100_000) err = err.slice(-50_000)
  })
  let finished = false
  const exited = new Promise<string>((resolve) =>
    child.on("exit", (code, signal) => {
      finished = true
      resolve(signal !== null ? signal : String(code))
    })
  )
  return { child, mark, out: () => out, err: () => err, exited, done: () => finished }
}

/** A lease held through the bridge directly (the blocker and the probe: quicker than the CLI). */
const startBridgeLease = (head: Head, mark: string, mode: "hold" | "probe"): RawBridge => {
  const b = spawnBridge(cleanEnv())
  b.send(
    leaseOp(head, {
      argv: commandArgv(mark, mode),
      gpus: 0,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }
    })
  )
  return b
}

const outputLines = (b: RawBridge) => b.events.filter((e) => e.event === "output").map((e) => String(e.line))

const until = async <A>(what: string, probe: () => A | undefined | Promise<A | undefined>, ms: number) => {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await probe()
    if (v !== undefined) return v
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await sleep(25)
  }
}

const leaseActors = async (head: Head) =>
  (await gcsActors(head)).filter((a) => a.className.includes("HyperloomLease"))

// ---- one iteration ---------------------------------------------------------------------------

export interface IterationOptions {
  readonly head: Head
  readonly run: string
  readonly n: number
  readonly phase: Phase
  readonly random: ReturnType<typeof rng>
  /** The bound within which the command must be gone and the lease ended (ms). */
  readonly boundMs?: number
  readonly log?: (line: string) => void
  /** Only these kinds (default: all that apply). */
  readonly kinds?: ReadonlyArray<Kind>
}

interface Targets {
  readonly cli?: number
  readonly bridge?: number
  readonly supervisor?: number
  readonly worker?: number
  readonly keeper?: number
  readonly command?: number
  readonly group?: number
  readonly guards?: number
  readonly actorId?: string
}

const targetsOf = async (head: Head, lease: CliLease, known: ReadonlySet<string>): Promise<Targets> => {
  const procs = processes()
  const bridge = procs.find((p) => p.ppid === lease.child.pid && runsPython(p.argv, "bridge"))?.pid
  // CMD: the lease's first process (the escapes and children come after it); it leads a group of
  // its own, and its parent is the supervisor, whose other child running the same argv is its keeper.
  const cmd = procs.filter((p) => p.mark === lease.mark).sort((x, y) => x.pid - y.pid)[0]
  const supervisor = cmd !== undefined ? procs.find((p) => p.pid === cmd.ppid) : undefined
  const keeper =
    supervisor !== undefined
      ? procs.find(
          (p) =>
            p.ppid === supervisor.pid &&
            p.mark === undefined &&
            p.argv.join("\0") === supervisor.argv.join("\0")
        )?.pid
      : undefined
  const ours = (await leaseActors(head)).filter((a) => !known.has(a.actorId) && a.state !== "DEAD")
  return {
    cli: lease.done() ? undefined : lease.child.pid,
    bridge,
    supervisor: supervisor?.pid,
    worker: supervisor?.ppid,
    keeper,
    command: cmd?.pid,
    group: cmd?.pgid,
    guards: supervisor?.pid,
    actorId: ours[0]?.actorId
  }
}

const targetOf = (kind: Kind): Target | undefined =>
  kind === "ray_kill"
    ? undefined
    : ((kind.startsWith("stop:") ? kind.slice(5) : kind).split(">")[0] as Target)

/** Whom a stop kind SIGKILLs while its target stays stopped: STOP_ENDER, or the one after `>`. */
const enderOf = (kind: Kind): Target =>
  (kind.split(">")[1] as Target | undefined) ?? STOP_ENDER[targetOf(kind)!]

const pidOf = (t: Targets, target: Target) => t[target]

const applies = (t: Targets, kind: Kind) => {
  if (kind === "ray_kill") return t.actorId !== undefined
  const target = targetOf(kind)!
  if (pidOf(t, target) === undefined) return false
  return !kind.startsWith("stop:") || pidOf(t, enderOf(kind)) !== undefined
}

const isGroup = (target: Target) => target === "group" || target === "guards"

/** Sends `signal` to the target (the whole group for "group"); a description of what was hit. */
const hit = (t: Targets, target: Target, signal: NodeJS.Signals) => {
  const pid = pidOf(t, target)!
  process.kill(isGroup(target) ? -pid : pid, signal)
  return `${target} ${isGroup(target) ? "pgid" : "pid"} ${pid}`
}

export const runIteration = async (o: IterationOptions): Promise<FaultOutcome> => {
  const { head, random } = o
  const log = o.log ?? (() => undefined)
  const bound = o.boundMs ?? 10_000
  const mark = `${o.run}-${o.n}`
  const notes: string[] = []
  const known = new Set((await leaseActors(head)).map((a) => a.actorId))

  let blocker: RawBridge | undefined
  if (o.phase === "waiting") {
    blocker = startBridgeLease(head, `${mark}-blocker`, "hold")
    await blocker.waitEvent((e) => e.event === "output" && e.line === "holding", 60_000)
    for (const a of await leaseActors(head)) known.add(a.actorId)
  }

  const lease = startCliLease(mark, o.phase === "releasing" ? "stubborn" : "hold")
  let phaseStart = Date.now()
  if (o.phase === "waiting") {
    await until(
      "our lease to be pending",
      async () =>
        (await leaseActors(head)).some((a) => !known.has(a.actorId) && a.state === "PENDING_CREATION")
          ? true
          : undefined,
      60_000
    )
    phaseStart = Date.now()
    await sleep(random.between(0, 1_500))
  } else if (o.phase === "starting") {
    // The CLI's start-up, ensure, the bridge's start and connect, the actor's creation, the
    // command's start: somewhere in the first ~2.5 s, before "holding" is printed.
    await sleep(random.between(300, 2_500))
  } else {
    await until("the command to run", () => (lease.out().includes("holding") ? true : undefined), 60_000)
    phaseStart = Date.now()
    if (o.phase === "running") await sleep(random.between(0, 1_000))
    else {
      lease.child.kill("SIGINT") // the release starts: TERM to the group, which ignores it
      await sleep(random.between(50, 2_500))
    }
  }

  const targets = await targetsOf(head, lease, known)
  // What the lease was really doing when it was hit.
  const phase: Phase = o.phase === "starting" && marked(mark).length > 0 ? "running" : o.phase
  const applicable = (o.kinds ?? KINDS).filter((k) => applies(targets, k))
  const kind: Kind = applicable.length > 0 ? random.pick(applicable) : "cli"
  const atMs = Date.now() - phaseStart
  let target = "nothing to hit"
  let faultAt = Date.now()
  let stopped: { readonly target: Target; readonly pid: number } | undefined
  try {
    if (kind === "ray_kill") {
      target = `actor ${targets.actorId}`
      await killActorViaGcs(head, targets.actorId!)
    } else if (kind.startsWith("stop:")) {
      const which = targetOf(kind)!
      if (applies(targets, kind)) {
        target = `SIGSTOP ${hit(targets, which, "SIGSTOP")}`
        stopped = { target: which, pid: pidOf(targets, which)! }
        await sleep(random.between(50, 500))
        faultAt = Date.now()
        target += `, then SIGKILL ${hit(targets, enderOf(kind), "SIGKILL")}`
      }
    } else {
      const which = targetOf(kind)!
      if (pidOf(targets, which) !== undefined) target = hit(targets, which, "SIGKILL")
    }
  } catch (e) {
    notes.push(`fault: ${String(e)}`)
  }
  log(`[fault ${o.n}] phase ${phase} +${atMs} ms: ${kind} (${target})`)
  // What was stopped is woken 1.5 s after the kill (it could otherwise hold the lease forever,
  // as a stopped process does: the invariant is sampled meanwhile).
  const wake =
    stopped === undefined
      ? undefined
      : setTimeout(() => {
          try {
            process.kill(isGroup(stopped.target) ? -stopped.pid : stopped.pid, "SIGCONT")
          } catch {
            // gone: killed with the lease
          }
        }, 1_500)

  // The probe: a lease taken right after the fault. When it gets the slot, its command says
  // which other leases' commands it sees running.
  const probe = startBridgeLease(head, `${mark}-probe`, "probe")
  if (blocker !== undefined) {
    await sleep(300)
    blocker.send({ op: "release" })
  }

  // Sample: slot free ⇒ nothing of the command runs; until the command is gone and the lease ended.
  let slotFreeWhileRunning = 0
  let goneMs = -1
  let deadline = faultAt + bound
  let survived = false
  for (;;) {
    if (Date.now() >= deadline) {
      if (survived || !(await survives(head, lease, known, mark))) break
      // The fault did not end the lease, as it need not: a SIGKILLed keeper is replaced by its
      // supervisor, a SIGKILLed spare bridge (started ahead of the lease) by a new one. Its CLI
      // still holds it: it is ended as a user would (Ctrl-C), and checked as any other.
      survived = true
      notes.push("the lease survived the fault: ended with SIGINT")
      lease.child.kill("SIGINT")
      deadline = Date.now() + bound
    }
    let free = 0
    try {
      free = await slotAvailable(head)
    } catch {
      free = 0
    }
    const alive = marked(mark)
    if (free > 0 && alive.length > 0) {
      slotFreeWhileRunning = Math.max(slotFreeWhileRunning, alive.length)
      notes.push(
        `slot free while ${alive.length} process(es) of the command ran: ${alive.map((p) => p.argv.join(" ").slice(0, 60)).join("; ")}`
      )
    }
    if (alive.length === 0 && goneMs < 0 && !survived) goneMs = Date.now() - faultAt
    if (alive.length === 0 && lease.done()) break
    await sleep(50)
  }
  if (wake !== undefined) {
    clearTimeout(wake)
    try {
      process.kill(isGroup(stopped!.target) ? -stopped!.pid : stopped!.pid, "SIGCONT")
    } catch {
      // gone
    }
  }
  const left = marked(mark)
  const orphans = left.length
  if (orphans > 0) {
    notes.push(`orphans: ${left.map((p) => `${p.pid} ${p.argv.join(" ").slice(0, 60)}`).join("; ")}`)
    for (const p of left) {
      try {
        process.kill(p.pid, "SIGKILL")
      } catch {
        // gone
      }
    }
  }
  const cliExitedInBound = lease.done()
  if (!cliExitedInBound) {
    notes.push("the CLI did not exit within the bound")
    lease.child.kill("SIGKILL")
  }
  const cliExit = await lease.exited

  // The probe's verdict.
  let doubleHolders = 0
  try {
    await probe.waitEvent((e) => e.event === "exit", 90_000)
    const line = outputLines(probe).find((l) => l.startsWith("others="))
    if (line === undefined) notes.push(`probe: no answer: ${probe.stderr().slice(-300)}`)
    else {
      const others = line
        .slice("others=".length)
        .split(",")
        .filter((v) => v !== "")
      doubleHolders = others.length
      if (others.length > 0)
        notes.push(`the probe's command saw other leases' commands running: ${others.join(",")}`)
    }
  } catch (e) {
    notes.push(`probe: ${String(e)}`)
  }
  probe.send({ op: "release" })
  await Promise.race([probe.exited, sleep(20_000)])
  if (blocker !== undefined) {
    await Promise.race([blocker.exited, sleep(20_000)])
    if (blocker.child.exitCode === null) notes.push("the blocker did not end")
    for (const p of marked(`${mark}-blocker`)) {
      notes.push(`blocker orphan ${p.pid}`)
      try {
        process.kill(p.pid, "SIGKILL")
      } catch {
        // gone
      }
    }
  }
  // The lease has ended: its CLI exited within the bound, and (the probe and the blocker having
  // ended too) no lease actor is left alive or pending.
  let leaseEnded = cliExitedInBound
  try {
    await until(
      "no live lease actor",
      async () => ((await leaseActors(head)).some((a) => a.state !== "DEAD") ? undefined : true),
      bound
    )
  } catch {
    leaseEnded = false
    notes.push(
      `live lease actors: ${JSON.stringify((await leaseActors(head)).filter((a) => a.state !== "DEAD"))}`
    )
  }
  return {
    n: o.n,
    phase,
    kind,
    atMs,
    target,
    slotFreeWhileRunning,
    orphans,
    doubleHolders,
    leaseEnded,
    goneMs,
    survived,
    cliExit,
    notes
  }
}

/**
 * The lease is still held after its fault's bound: its CLI runs, its actor is alive and its
 * command runs (with the slot held: a free slot would have been sampled as a violation).
 */
const survives = async (head: Head, lease: CliLease, known: ReadonlySet<string>, mark: string) =>
  !lease.done() &&
  marked(mark).length > 0 &&
  (await leaseActors(head)).some((a) => !known.has(a.actorId) && a.state === "ALIVE")

/** Counts per kind and phase, and the invariants' totals. */
export const summarize = (outcomes: ReadonlyArray<FaultOutcome>) => {
  const byKind: Record<string, number> = {}
  const byPhase: Record<string, number> = {}
  for (const o of outcomes) {
    byKind[o.kind] = (byKind[o.kind] ?? 0) + 1
    byPhase[o.phase] = (byPhase[o.phase] ?? 0) + 1
  }
  const held = outcomes.filter(
    (o) => o.orphans === 0 && o.doubleHolders === 0 && o.slotFreeWhileRunning === 0 && o.leaseEnded
  ).length
  const gone = outcomes.map((o) => o.goneMs).filter((ms) => ms >= 0)
  return {
    faults: outcomes.length,
    byKind,
    byPhase,
    invariantsHeld: held,
    orphans: outcomes.reduce((s, o) => s + o.orphans, 0),
    doubleHolders: outcomes.reduce((s, o) => s + o.doubleHolders, 0),
    slotFreeWhileRunning: outcomes.reduce((s, o) => s + o.slotFreeWhileRunning, 0),
    leasesNotEnded: outcomes.filter((o) => !o.leaseEnded).length,
    survived: outcomes.filter((o) => o.survived).length,
    maxGoneMs: gone.length > 0 ? Math.max(...gone) : -1
  }
}
