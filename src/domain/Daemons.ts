/**
 * Recognising Ray's `gcs_server` and `raylet` daemons among the host's processes
 * (docs/design.md#addresses-and-the-host). Pure: works on processes already read from a /proc tree.
 *
 * Flags are matched as WHOLE argv elements: the raylet's `--python_worker_command=…` and
 * `--dashboard_agent_command=…` elements themselves contain `--node-id=`, `--gcs-address=` and
 * ` --head`, so a substring search over the joined command line gives false matches.
 */
import type { GcsServerDaemon, ProcessInfo, RayDaemon, RayletDaemon, ResourceMap } from "./Snapshot.js"

const basename = (p: string): string => p.slice(p.lastIndexOf("/") + 1)

/** The value of the first `--name=value` argv element (after argv[0]), if any. */
export const flagValue = (argv: ReadonlyArray<string>, name: string): string | undefined => {
  const prefix = `${name}=`
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i]!
    if (a.startsWith(prefix)) return a.slice(prefix.length)
  }
  return undefined
}

/** Whether a bare flag (e.g. `--head`) is one of the argv elements after argv[0]. */
export const hasFlag = (argv: ReadonlyArray<string>, name: string): boolean => argv.slice(1).includes(name)

/** The process is the named executable, by its comm or by argv[0]'s basename. */
const isExecutable = (p: ProcessInfo, name: string): boolean =>
  p.comm === name || (p.argv.length > 0 && basename(p.argv[0]!) === name)

const nonEmpty = (v: string | undefined): string | undefined => (v === undefined || v === "" ? undefined : v)

/** A port as Ray writes it: a canonical decimal integer from 1 to 65535. */
const parsePort = (v: string | undefined): number | undefined => {
  const n = Number(v)
  return String(n) === v && Number.isInteger(n) && n >= 1 && n <= 65535 ? n : undefined
}

/** `--static_resource_list=k,v,k,v…` → `{ k: v }` (pairs whose value is not a number are skipped). */
export const parseStaticResourceList = (value: string | undefined): ResourceMap => {
  const out: Record<string, number> = {}
  if (value === undefined) return out
  const parts = value.split(",")
  while (parts.length >= 2) {
    const [key, v] = parts.splice(0, 2) as [string, string]
    const n = Number(v)
    if (key !== "" && v !== "" && Number.isFinite(n)) out[key] = n
  }
  return out
}

/** A zombie (or dead) process is no live daemon, whatever its comm says. */
const isDead = (p: ProcessInfo): boolean => p.state === "Z" || p.state === "X" || p.state === "x"

/** Recognises a `gcs_server` or `raylet` process and parses its flags; anything else is `undefined`. */
export const parseRayDaemon = (p: ProcessInfo): RayDaemon | undefined => {
  if (isDead(p)) return undefined
  if (isExecutable(p, "gcs_server")) {
    const daemon: GcsServerDaemon = {
      kind: "gcs_server",
      pid: p.pid,
      port: parsePort(flagValue(p.argv, "--gcs_server_port")),
      sessionName: nonEmpty(flagValue(p.argv, "--session-name")),
      nodeIp: nonEmpty(flagValue(p.argv, "--node-ip-address"))
    }
    return daemon
  }
  if (isExecutable(p, "raylet")) {
    const nodeId = nonEmpty(flagValue(p.argv, "--node_id"))
    const daemon: RayletDaemon = {
      kind: "raylet",
      pid: p.pid,
      nodeId: nodeId?.toLowerCase(),
      gcsAddress: nonEmpty(flagValue(p.argv, "--gcs-address")),
      isHead: hasFlag(p.argv, "--head"),
      sessionName: nonEmpty(flagValue(p.argv, "--session-name")),
      staticResources: parseStaticResourceList(flagValue(p.argv, "--static_resource_list"))
    }
    return daemon
  }
  return undefined
}

/** Every Ray daemon among the processes, in pid order. */
export const parseRayDaemons = (processes: ReadonlyArray<ProcessInfo>): ReadonlyArray<RayDaemon> => {
  const out: Array<RayDaemon> = []
  for (const p of processes) {
    const d = parseRayDaemon(p)
    if (d !== undefined) out.push(d)
  }
  return out.sort((a, b) => a.pid - b.pid)
}

export const gcsServers = (daemons: ReadonlyArray<RayDaemon>): ReadonlyArray<GcsServerDaemon> =>
  daemons.filter((d): d is GcsServerDaemon => d.kind === "gcs_server")

export const raylets = (daemons: ReadonlyArray<RayDaemon>): ReadonlyArray<RayletDaemon> =>
  daemons.filter((d): d is RayletDaemon => d.kind === "raylet")

/** The distinct `--gcs-address` values of the live raylets, sorted: one per local cluster. */
export const rayletGcsAddresses = (daemons: ReadonlyArray<RayDaemon>): ReadonlyArray<string> => {
  const set = new Set<string>()
  for (const r of raylets(daemons)) if (r.gcsAddress !== undefined) set.add(r.gcsAddress)
  return [...set].sort()
}

// ---- whether /proc shows every process ------------------------------------------------------

/** CAP_SYS_PTRACE: with it, `hidepid` hides nothing (the kernel's ptrace_may_access check passes). */
export const CAP_SYS_PTRACE = 19

export interface ProcVisibilityInput {
  /** The text of /proc/self/mountinfo. */
  readonly mountinfo: string
  /** The mount point of the /proc tree that is read (`/proc`). */
  readonly root: string
  /** The effective capability set (`CapEff:` of /proc/self/status), undefined when unknown. */
  readonly capEff: bigint | undefined
  /** This process's group ids (effective and supplementary). */
  readonly groups: ReadonlyArray<number>
}

/** mountinfo escapes space, tab, newline and backslash in paths as octal (`\040`). */
const unescapeMountPath = (p: string): string =>
  p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)))

/**
 * Why the /proc mounted at `root` may hide other users' processes from this process, or undefined
 * when it shows every process (docs/design.md#rays-own-view-of-the-host). A proc mount with `hidepid`
 * other than 0/off (1 noaccess, 2 invisible, 4 ptraceable) hides the processes of other users
 * unless this process may ptrace them (CAP_SYS_PTRACE) or belongs to the mount's `gid=` group.
 * `subset=pid` only hides /proc's non-process entries, not processes. The topmost proc mount at
 * `root` (the last in mountinfo) is the one a reader sees; a tree that is not a proc mount (a
 * recorded fixture) hides nothing it recorded.
 */
export const procHiddenReason = (input: ProcVisibilityInput): string | undefined => {
  let options: ReadonlyArray<string> | undefined
  for (const line of input.mountinfo.split("\n")) {
    const [left, right] = line.split(" - ")
    if (left === undefined || right === undefined) continue
    const mountPoint = left.split(" ")[4]
    const [fsType, , superOptions = ""] = right.split(" ")
    if (mountPoint === undefined || unescapeMountPath(mountPoint) !== input.root) continue
    // A later mount at the same point covers the earlier ones.
    options = fsType === "proc" ? superOptions.split(",") : undefined
  }
  if (options === undefined) return undefined
  const value = (name: string) => options.find((o) => o.startsWith(`${name}=`))?.slice(name.length + 1)
  const hidepid = value("hidepid")
  if (hidepid === undefined || hidepid === "0" || hidepid === "off") return undefined
  if (input.capEff !== undefined && ((input.capEff >> BigInt(CAP_SYS_PTRACE)) & 1n) === 1n) return undefined
  const gid = value("gid")
  if (gid !== undefined && input.groups.includes(Number(gid))) return undefined
  return `${input.root} is mounted with hidepid=${hidepid} and this process has neither CAP_SYS_PTRACE${gid !== undefined ? ` nor group ${gid}` : ""}: other users' Ray daemons would be invisible (run hyperloom as root or with CAP_SYS_PTRACE)`
}

/** `CapEff:` of a /proc/<pid>/status text, undefined when absent or malformed. */
export const parseCapEff = (status: string): bigint | undefined => {
  const m = /^CapEff:\s*([0-9a-fA-F]+)\s*$/m.exec(status)
  return m === null ? undefined : BigInt(`0x${m[1]}`)
}
