/**
 * What the real-Ray group tests (test/ray/group.test.ts on one host's raylets, and
 * test/ray/two-hosts.test.ts and two-hosts-contained.test.ts across two hosts of their own) ask
 * of a group: the `lease run` line of an N-rank group, the `sleep MARKER` processes its ranks
 * run, a process's parent, the cluster's `ray status --json`, and that nothing of a group is
 * left held.
 */
import { readFileSync } from "node:fs"
import { assert } from "@effect/vitest"
import { pidsWithArg } from "./lease.js"
import { waitFor } from "./ray.js"

/** The options of an N-rank group of one GPU per rank: `--nodes N --gpus 1`. */
const groupOf = (nodes: number) => ["--nodes", String(nodes), "--gpus", "1"]

/** `hyperloom lease run --nodes 2 --gpus 1 ARGS…`: a 2-rank group; ARGS are the other options, `--` and CMD. */
export const groupLease = (...args: ReadonlyArray<string>): Array<string> => [
  "lease",
  "run",
  ...groupOf(2),
  ...args
]

/** `hyperloom lease run --json --nodes N --gpus 1 [OPTIONS…] -- sh -c SCRIPT`: a group whose ranks each run SCRIPT. */
export const groupRun = (
  script: string,
  options: { readonly nodes?: number; readonly extra?: ReadonlyArray<string> } = {}
): Array<string> => [
  "lease",
  "run",
  "--json",
  ...groupOf(options.nodes ?? 2),
  ...(options.extra ?? []),
  "--",
  "sh",
  "-c",
  script
]

/** The `sleep` processes carrying `marker` (not the supervisors, whose argv holds it too), of those `where` keeps. */
export const markedSleeps = (marker: string, where: (pid: number) => boolean = () => true): Array<number> =>
  pidsWithArg(marker).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "sleep" && where(pid)
    } catch {
      return false
    }
  })

/** A process's /proc/PID/stat fields after its name: [state, ppid, pgrp, …]. */
const statFields = (pid: number): Array<string> => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")
}

/** The parent pid of a process, from /proc. */
export const ppidOf = (pid: number): number => Number(statFields(pid)[1])

/** The process group of a process, from /proc. */
export const pgidOf = (pid: number): number => Number(statFields(pid)[2])

interface CliResult {
  readonly code: number | null
  readonly stderr: string
  readonly json: any
}

/** `ray status --json` through a CLI runner (this host's, or the head host's of two). */
export const rayStatus = async (
  cli: (args: ReadonlyArray<string>, opts: { timeoutMs: number }) => Promise<CliResult>
): Promise<any> => {
  const r = await cli(["ray", "status", "--json"], { timeoutMs: 60_000 })
  assert.strictEqual(r.code, 0, r.stderr)
  return r.json
}

const GROUP_RESOURCE = /_group_(\d+_)?[0-9a-f]{16,}$/

/** Placement group resources Ray still shows on any node (a removed group leaves none). */
export const groupResources = (s: any): Array<string> =>
  s.resources_by_node.flatMap((r: any) => Object.keys(r.total).filter((k) => GROUP_RESOURCE.test(k)))

/**
 * Waits until nothing of a group is left in `status()`: no live hyperloom actor (lease or rank),
 * no placement group resource, no alive node's slot held. Returns that status.
 */
export const waitNothingHeld = (status: () => Promise<any>, timeoutMs = 30_000): Promise<any> =>
  waitFor(
    "no live rank actor, no placement group, every slot free",
    async () => {
      const s = await status()
      const actors = s.actors.filter((a: any) => a.class_name.includes("Hyperloom") && a.state !== "DEAD")
      const held = s.nodes.some(
        (n: any) => n.state === "ALIVE" && n.serving_slot !== null && n.serving_slot.held > 0
      )
      return actors.length === 0 && !held && groupResources(s).length === 0 ? s : undefined
    },
    timeoutMs,
    500
  )
