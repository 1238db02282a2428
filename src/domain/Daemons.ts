/**
 * Recognising Ray's `gcs_server` and `raylet` daemons among the host's processes (SPEC §2,
 * RAY.md "/proc"). Pure: works on processes already read from a /proc tree.
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
export const hasFlag = (argv: ReadonlyArray<string>, name: string): boolean => argv.indexOf(name, 1) >= 0

/** The process is the named executable, by its comm or by argv[0]'s basename. */
const isExecutable = (p: ProcessInfo, name: string): boolean =>
  p.comm === name || (p.argv.length > 0 && basename(p.argv[0]!) === name)

const nonEmpty = (v: string | undefined): string | undefined => (v === undefined || v === "" ? undefined : v)

const parsePort = (v: string | undefined): number | undefined => {
  if (v === undefined || !/^\d{1,5}$/.test(v)) return undefined
  const n = Number(v)
  return n >= 1 && n <= 65535 ? n : undefined
}

/** `--static_resource_list=k,v,k,v…` → `{ k: v }` (pairs whose value is not a number are skipped). */
export const parseStaticResourceList = (value: string | undefined): ResourceMap => {
  const out: Record<string, number> = {}
  if (value === undefined || value === "") return out
  const parts = value.split(",")
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const key = parts[i]!
    const n = Number(parts[i + 1])
    if (key !== "" && parts[i + 1] !== "" && Number.isFinite(n)) out[key] = n
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
