import * as fs from "node:fs"
import * as path from "node:path"
import { Context, Data, Effect, Layer } from "effect"
import { parseCapEff, parseRayDaemons, procHiddenReason } from "../domain/Daemons.js"
import type { ProcessInfo, RayDaemon } from "../domain/Snapshot.js"

/** The /proc root itself could not be listed (a vanished process is never an error). */
export class ProcUnreadable extends Data.TaggedError("ProcUnreadable")<{
  readonly root: string
  readonly detail: string
}> {
  override get message(): string {
    return `cannot read the process table at ${this.root}: ${this.detail}`
  }
}

export interface ProcFsShape {
  /** Every process readable under the root; processes that vanish mid-scan are skipped. */
  readonly processes: Effect.Effect<ReadonlyArray<ProcessInfo>, ProcUnreadable>
  /** The host's `gcs_server` and `raylet` daemons with their flags parsed. */
  readonly rayDaemons: Effect.Effect<ReadonlyArray<RayDaemon>, ProcUnreadable>
  /**
   * Why this tree may hide other users' processes from this process (`hidepid` without
   * CAP_SYS_PTRACE), or undefined when it shows every process. The daemons read are then only
   * those visible: never proof that no other Ray runs on the host.
   */
  readonly hiddenReason: Effect.Effect<string | undefined>
}

export class ProcFs extends Context.Tag("hyperloom/services/ProcFs")<ProcFs, ProcFsShape>() {}

// ---- reading a /proc tree ----------------------------------------------------------------

/**
 * Errors that mean "this process is gone (or hidden from us)": it exited between the directory
 * listing and the reads (ENOENT), is being torn down (ESRCH), or belongs to a user we may not look
 * at (EACCES/EPERM, as a hidden process would not even be listed).
 */
const VANISHED = new Set(["ENOENT", "ESRCH", "EACCES", "EPERM"])

/** Only node:fs throws here, and its errors carry their code (also at the head of their message). */
const vanished = (e: unknown): boolean => VANISHED.has(String((e as NodeJS.ErrnoException).code))

const describe = (e: unknown): string => (e instanceof Error ? e.message : String(e))

/** `/proc/<pid>/cmdline` → argv: split on NUL, without the trailing NUL (and setproctitle's padding). */
export const parseCmdline = (raw: string): ReadonlyArray<string> => {
  const argv = raw.split("\0")
  while (argv[argv.length - 1] === "") argv.pop()
  return argv
}

/**
 * `/proc/<pid>/stat` → state and ppid. The comm field sits in parentheses and may itself contain
 * spaces and parentheses, so the fields are read after the LAST `)`.
 */
export const parseStat = (raw: string): { readonly state: string; readonly ppid: number } | undefined => {
  const close = raw.lastIndexOf(")")
  if (close < 0) return undefined
  // split always yields a first field; a ppid that parses means the state before it is non-empty
  const [state = "", ppidField] = raw
    .slice(close + 1)
    .trim()
    .split(/\s+/)
  const ppid = Number(ppidField)
  return Number.isInteger(ppid) ? { state, ppid } : undefined
}

/**
 * One process, or `undefined` when it vanished. Synchronous reads on purpose: procfs answers from
 * memory, and a scan of ~100 processes takes ~1 ms this way against ~12 ms through the libuv
 * thread pool.
 */
const readProcess = (root: string, entry: string): ProcessInfo | undefined => {
  const dir = path.join(root, entry)
  try {
    const cmdline = fs.readFileSync(path.join(dir, "cmdline"), "utf8")
    const comm = fs.readFileSync(path.join(dir, "comm"), "utf8")
    const stat = fs.readFileSync(path.join(dir, "stat"), "utf8")
    // An empty stat means the process was reaped while we read it.
    const parsed = parseStat(stat)
    if (parsed === undefined) return undefined
    return {
      pid: Number(entry),
      ppid: parsed.ppid,
      comm: comm.replace(/\n$/, ""),
      argv: parseCmdline(cmdline),
      state: parsed.state
    }
  } catch (e) {
    if (vanished(e)) return undefined
    throw e
  }
}

/** Reads every `<root>/<pid>/{cmdline,comm,stat}`, in pid order. */
export const readProcesses = (root: string): Effect.Effect<ReadonlyArray<ProcessInfo>, ProcUnreadable> =>
  Effect.gen(function* () {
    const entries = yield* Effect.try({
      try: () => fs.readdirSync(root),
      catch: (e) => new ProcUnreadable({ root, detail: describe(e) })
    })
    const pids = entries.filter((e) => /^\d+$/.test(e))
    const read = yield* Effect.try({
      try: () => pids.map((entry) => readProcess(root, entry)),
      catch: (e) => new ProcUnreadable({ root, detail: `reading a process: ${describe(e)}` })
    })
    return read.filter((p): p is ProcessInfo => p !== undefined).sort((a, b) => a.pid - b.pid)
  })

/** Where this process's own mount table and status are read (injectable for tests). */
export interface SelfFiles {
  readonly mountinfo: string
  readonly status: string
}

const HOST_SELF: SelfFiles = { mountinfo: "/proc/self/mountinfo", status: "/proc/self/status" }

/** Whether the proc mount at `root` hides processes from this process (see `procHiddenReason`). */
export const readHiddenReason = (
  root: string,
  self: SelfFiles = HOST_SELF
): Effect.Effect<string | undefined> =>
  Effect.sync(() => {
    let mountinfo: string
    try {
      mountinfo = fs.readFileSync(self.mountinfo, "utf8")
    } catch (e) {
      return `cannot read ${self.mountinfo} to tell whether ${root} hides processes (${describe(e)})`
    }
    // Stryker disable next-line StringLiteral: any text without a CapEff line reads as no capability
    let status = ""
    try {
      status = String(fs.readFileSync(self.status))
    } catch {
      // an unreadable status shows no capability: the mount's hidepid decides alone
    }
    const capEff = parseCapEff(status)
    // /proc means Linux, where both exist
    const groups = [process.getegid!(), ...process.getgroups!()]
    return procHiddenReason({ mountinfo, root: path.resolve(root), capEff, groups })
  })

/** The ProcFs service over a /proc tree at `root` (the host's, or a recorded one). */
export const make = (root: string, self: SelfFiles = HOST_SELF): ProcFsShape => {
  // Stryker disable next-line StringLiteral,ObjectLiteral: span names and attributes are for traces only
  const processes = readProcesses(root).pipe(Effect.withSpan("ProcFs.processes", { attributes: { root } }))
  return {
    processes,
    rayDaemons: Effect.map(readProcesses(root), parseRayDaemons).pipe(
      // Stryker disable next-line StringLiteral,ObjectLiteral: span names and attributes are for traces only
      Effect.withSpan("ProcFs.rayDaemons", { attributes: { root } })
    ),
    hiddenReason: readHiddenReason(root, self)
  }
}

/** The live layer: reads the host's /proc. */
export const layer: Layer.Layer<ProcFs> = Layer.sync(ProcFs, () => make("/proc"))

/** The live code over another /proc tree, e.g. a recorded one (`test/fixtures/proc/<scenario>`). */
export const layerWith = (options: { readonly root: string }): Layer.Layer<ProcFs> =>
  Layer.sync(ProcFs, () => make(options.root))

/**
 * A test layer serving these processes (daemons parsed from them as the live layer does), or
 * failing every read with a ProcUnreadable; `hiddenReason` makes it a /proc that may hide other
 * users' processes.
 */
export const layerTest = (
  processes: ReadonlyArray<ProcessInfo> | ProcUnreadable = [],
  options: { readonly hiddenReason?: string } = {}
): Layer.Layer<ProcFs> =>
  Layer.succeed(
    ProcFs,
    processes instanceof ProcUnreadable
      ? {
          processes: Effect.fail(processes),
          rayDaemons: Effect.fail(processes),
          hiddenReason: Effect.succeed(options.hiddenReason)
        }
      : {
          processes: Effect.succeed(processes),
          rayDaemons: Effect.sync(() => parseRayDaemons(processes)),
          hiddenReason: Effect.succeed(options.hiddenReason)
        }
  )
