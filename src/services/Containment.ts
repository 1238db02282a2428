/**
 * Which containment a lease gets on this host (docs/design.md#contained), as `ray doctor` reports it. The
 * supervisor (python/hyperloom/supervisor.py) is always a child subreaper; where cgroup v2 is
 * mounted, its cgroup is writable and the kernel has `cgroup.kill`, each lease also gets a cgroup
 * of its own. Read-only: judged from hyperloom's own cgroup (the lease's is made beside the Ray
 * worker's, which on one host is under the same rules).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect } from "effect"

export interface Containment {
  readonly mode: "cgroup" | "subreaper"
  /** Why not a cgroup, when not. */
  readonly reason: string | null
}

const cgroup2Mount = (mountinfo: string): string | undefined => {
  for (const line of mountinfo.split("\n")) {
    const parts = line.split(" ")
    const sep = parts.indexOf("-")
    if (sep >= 0 && parts[sep + 1] === "cgroup2") return parts[4]?.replaceAll("\\040", " ")
  }
  return undefined
}

const killSupported = (dir: string): boolean => {
  if (fs.existsSync(path.join(dir, "cgroup.kill"))) return true
  // The root cgroup never has cgroup.kill: the kernel's version tells (Linux 5.14).
  const [major = 0, minor = 0] = os
    .release()
    .split(".")
    .map((n) => Number.parseInt(n, 10))
  return major > 5 || (major === 5 && minor >= 14)
}

/** The containment in force, from /proc (`root` for tests). */
export const probe = (root = "/proc"): Effect.Effect<Containment> =>
  Effect.sync((): Containment => {
    try {
      const mount = cgroup2Mount(fs.readFileSync(path.join(root, "self/mountinfo"), "utf8"))
      const own = fs
        .readFileSync(path.join(root, "self/cgroup"), "utf8")
        .split("\n")
        .find((l) => l.startsWith("0::"))
        ?.slice(3)
        .trim()
      if (mount === undefined || own === undefined)
        return { mode: "subreaper", reason: "no cgroup v2 hierarchy" }
      const dir = path.join(mount, own)
      try {
        fs.accessSync(dir, fs.constants.W_OK)
      } catch {
        return { mode: "subreaper", reason: `cgroup ${dir} is not writable` }
      }
      if (!killSupported(dir))
        return { mode: "subreaper", reason: "this kernel's cgroups have no cgroup.kill" }
      return { mode: "cgroup", reason: null }
    } catch (e) {
      return { mode: "subreaper", reason: `cannot read the cgroups: ${(e as Error).message}` }
    }
  })
