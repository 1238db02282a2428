import { describeGpuHolder } from "../domain/GpuHolders.js"
import { shortId } from "../domain/Text.js"
import type { EnsureOutcome, RepairOutcome } from "../programs/Cluster.js"
import type { DoctorReport, StatusReport } from "../programs/Inspect.js"

const amount = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(2))

const bytes = (n: number) => {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"]
  let i = 0
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024
    i++
  }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`
}

const isMemory = (name: string) => name === "memory" || name === "object_store_memory"

/** `name used/total`, as `ray status` prints them, for the resources an operator cares about (node:… markers left out). */
export const renderResources = (total: Record<string, number>, available: Record<string, number>) =>
  Object.keys(total)
    // node:… markers, and the per-placement-group resources Ray adds (`GPU_group_0_<pg>`…)
    .filter((k) => !k.startsWith("node:") && !/_group_(\d+_)?[0-9a-f]{16,}$/.test(k))
    .sort((a, b) => (a === "CPU" ? -1 : b === "CPU" ? 1 : a.localeCompare(b)))
    .map((k) => {
      const f = isMemory(k) ? bytes : amount
      const all = total[k] ?? 0
      return `${k} ${f(Math.max(0, all - (available[k] ?? 0)))}/${f(all)}`
    })
    .join(", ")

type NodeSlotReport = NonNullable<StatusReport["nodes"][number]["serving_slot"]>

/** A node's slot: none, free, or who holds it (an actor, a group's rank, a bare group reservation). */
export const renderSlot = (s: NodeSlotReport): string => {
  if (s.declared <= 0) return "no serving_slot"
  if (s.held <= 0 && s.holders.length === 0) return "serving_slot free"
  const holders = s.holders.map(
    (h) =>
      `actor ${h.name || h.class_name || shortId(h.actor_id)} pid ${h.pid} job ${h.job_id}` +
      (h.driver_pid !== null ? ` driver pid ${h.driver_pid}` : "") +
      (h.placement_group !== null ? ` (group ${shortId(h.placement_group)} rank bundle ${h.bundle})` : "")
  )
  if (holders.length > 0) return `serving_slot held by ${holders.join(", ")}`
  if (s.placement_groups.length > 0)
    return `serving_slot reserved by placement group ${s.placement_groups.map(shortId).join(", ")} (no rank running yet)`
  return "serving_slot held (holder not visible)"
}

export const renderStatus = (r: StatusReport): string => {
  const lines: string[] = []
  lines.push(`cluster    ${r.address} (${r.explicit ? "RAY_ADDRESS" : r.source.replaceAll("_", " ")})`)
  lines.push(`cluster id ${shortId(r.cluster_id)}${r.ray_version ? `   Ray ${r.ray_version}` : ""}`)
  const alive = r.nodes.filter((n) => n.state === "ALIVE")
  lines.push(`nodes      ${alive.length} alive, ${r.nodes.length - alive.length} dead`)
  for (const n of r.nodes) {
    const slot = n.serving_slot === null ? "" : `   ${renderSlot(n.serving_slot)}`
    lines.push(`  ${shortId(n.node_id)} ${n.state}${n.is_head ? " head" : ""} ${n.address}${slot}`)
  }
  lines.push(
    `resources  ${renderResources(r.resources.total, r.resources.available) || "none"}   (used/total)`
  )
  const liveActors = r.actors.filter((a) => a.state !== "DEAD")
  lines.push(`actors     ${liveActors.length} live, ${r.actors.length - liveActors.length} dead`)
  for (const a of liveActors) {
    lines.push(
      `  ${a.name || a.class_name || shortId(a.actor_id)} ${a.state}${a.detached ? " detached" : ""} pid ${a.pid} job ${a.job_id}`
    )
  }
  const liveJobs = r.jobs.filter((j) => !j.is_dead)
  lines.push(`jobs       ${liveJobs.length} live driver(s), ${r.jobs.length - liveJobs.length} finished`)
  for (const j of liveJobs) lines.push(`  job ${j.job_id} driver pid ${j.driver_pid} on ${j.driver_ip}`)
  for (const d of r.demands) {
    if (d.infeasible_queued > 0 || d.ready_queued > 0) {
      lines.push(
        `demand     ${JSON.stringify(d.shape)}: ${d.ready_queued} waiting, ${d.infeasible_queued} infeasible`
      )
    }
  }
  if (r.daemons.error !== null) {
    lines.push(`daemons    could not read /proc: ${r.daemons.error}`)
  } else {
    lines.push(`daemons    ${r.daemons.processes.length} on this host`)
    for (const d of r.daemons.processes) {
      lines.push(
        d.kind === "gcs_server"
          ? `  gcs_server pid ${d.pid} port ${d.port ?? "?"}`
          : `  raylet     pid ${d.pid} node ${shortId(d.nodeId ?? "?")} GCS ${d.gcsAddress ?? "?"}${d.isHead ? " head" : ""}`
      )
    }
  }
  return lines.join("\n")
}

const renderGuards = (guards: DoctorReport["repair"]["guards"]) =>
  guards.map((g) => `  ${g.ok ? "ok  " : "FAIL"} ${g.id}${g.ok ? "" : `: ${g.reason}`}`)

export const renderDoctor = (r: DoctorReport): string => {
  const lines: string[] = []
  const perRank = `${r.request.gpus} GPU(s)${r.request.serving_slot ? " + serving_slot" : ""}`
  const want =
    r.group === null ? perRank : `a group of ${r.group.nodes} ranks, each ${perRank} on its own node`
  lines.push(`cluster  ${r.cluster.address}${r.cluster.explicit ? " (explicit RAY_ADDRESS)" : ""}`)
  lines.push(
    r.feasible ? `lease    feasible (${want})` : `lease    INFEASIBLE (${want}): ${r.infeasible?.message}`
  )
  if (r.group !== null) {
    lines.push(
      `nodes    ${r.group.eligible.length} can hold a rank${r.group.eligible.length > 0 ? `: ${r.group.eligible.map((n) => `${shortId(n.node_id)} ${n.address}`).join(", ")}` : ""}`
    )
  }
  lines.push(
    `repair   ${r.repair.allowed ? "allowed: every guard holds" : "refused: hyperloom will not restart this head"}`
  )
  lines.push(...renderGuards(r.repair.guards))
  lines.push(
    r.containment.mode === "cgroup"
      ? "contain  a cgroup per lease (cgroup.kill) and the supervisor as subreaper"
      : `contain  the supervisor as subreaper only (no cgroup: ${r.containment.reason})`
  )
  lines.push(...renderGpuHolders(r.gpu_holders))
  for (const w of r.warnings) lines.push(`warning  ${w}`)
  return lines.join("\n")
}

/** Doctor's `gpus` lines: the holders of this host's GPUs, per GPU (docs/design.md#clean-gpus). */
const renderGpuHolders = (g: DoctorReport["gpu_holders"]): ReadonlyArray<string> => {
  if (g.error !== null) return [`gpus     could not tell who holds this host's GPUs: ${g.error}`]
  if (!g.scanned) return ["gpus     no GPU device file or vendor tool on this host"]
  const holders = Object.values(g.by_gpu).flat()
  const hidden = g.unreadable > 0 ? ` (${g.unreadable} process(es) of other users unreadable)` : ""
  if (holders.length === 0) return [`gpus     no process holds a GPU of this host${hidden}`]
  return [`gpus     held${hidden}:`, ...holders.map((h) => `  ${describeGpuHolder(h)}`)]
}

export const renderEnsure = (r: EnsureOutcome): string => {
  const what = {
    reused: "reused the running head",
    repaired: "repaired the head: restarted it with serving_slot",
    started: "started a local head with serving_slot"
  }[r.action]
  return [`${what} at ${r.gcsAddress}`, ...r.verdict.warnings.map((w) => `warning  ${w}`)].join("\n")
}

export const renderRepair = (r: RepairOutcome): string => {
  const lines: string[] = []
  if (r.action === "none") {
    lines.push(
      r.verdict.feasible
        ? `nothing to repair: the head at ${r.gcsAddress} declares serving_slot`
        : `not a slot problem, nothing to repair: ${r.verdict.infeasible?.message}`
    )
  } else if (r.action === "would_repair") {
    lines.push(`dry run: every guard holds; would restart the head at ${r.gcsAddress} with:`)
  } else {
    lines.push(`repaired: the head at ${r.gcsAddress} was restarted with:`)
  }
  if (r.plan !== null) {
    lines.push(
      `  ray start --head --port=${r.plan.port}${r.plan.numCpus !== undefined ? ` --num-cpus=${r.plan.numCpus}` : ""} --num-gpus=${r.plan.numGpus} --resources='${JSON.stringify(r.plan.resources)}'`
    )
  }
  if (r.action !== "none") lines.push(...renderGuards(r.guards))
  for (const w of r.verdict.warnings) lines.push(`warning  ${w}`)
  return lines.join("\n")
}
