/**
 * The CLI's JSON documents that are not a program's own result, beside the renderers that print
 * the same outcomes as text.
 */
import type { EnsureOutcome, RepairOutcome } from "../programs/Cluster.js"
import type { GroupRunResult } from "../programs/Group.js"
import type { LeaseRunResult } from "../programs/Lease.js"

/**
 * The JSON document of `lease run --json`: CMD's exit and times, where it ran, and for a group
 * (`group`, given when the result is one: --nodes N >= 2, docs/design.md#serving-groups-across-nodes)
 * its placement group and every rank.
 */
export const leaseRunReport = (r: LeaseRunResult, group: GroupRunResult | undefined) => ({
  exit_code: r.exitCode,
  timed_out: r.timedOut,
  runtime_sec: Number(r.runtimeSec.toFixed(3)),
  waited_sec: Number(r.waitedSec.toFixed(3)),
  command_sec: Number(r.commandSec.toFixed(3)),
  address: r.gcsAddress,
  pid: r.started?.pid ?? null,
  node_id: r.started?.nodeId ?? null,
  cuda_visible_devices: r.started?.cudaVisibleDevices ?? null,
  group:
    group === undefined
      ? null
      : {
          nodes: group.nodes,
          placement_group_id: group.placementGroupId,
          leader_host: group.group?.leaderHost ?? null,
          leader_port: group.group?.leaderPort ?? null,
          failed_rank: group.failedRank ?? null,
          ranks: (group.group?.ranks ?? []).map((k) => ({
            rank: k.rank,
            node_id: k.nodeId,
            pid: k.pid ?? null,
            actor_id: k.actorId,
            cuda_visible_devices: k.cudaVisibleDevices ?? null,
            exit_code: group.exits.find((e) => e.rank === k.rank)?.code ?? null
          }))
        }
})

/** The JSON documents of ensure and repair (`ray ensure --json`, `ray repair --json`), in the CLI contract's snake_case. */
export const ensureReport = (r: EnsureOutcome) => ({
  action: r.action,
  address: r.gcsAddress,
  feasible: r.verdict.feasible,
  warnings: r.verdict.warnings,
  guards: r.guards
})

export const repairReport = (r: RepairOutcome) => ({
  action: r.action,
  address: r.gcsAddress,
  feasible: r.verdict.feasible,
  infeasible:
    r.verdict.infeasible === undefined
      ? null
      : {
          marker: r.verdict.infeasible.marker,
          reason: r.verdict.infeasible.reason,
          message: r.verdict.infeasible.message
        },
  plan:
    r.plan === null
      ? null
      : {
          port: r.plan.port,
          num_cpus: r.plan.numCpus ?? null,
          num_gpus: r.plan.numGpus ?? null,
          resources: r.plan.resources
        },
  repair: { allowed: r.action !== "none" || r.guards.every((g) => g.ok), guards: r.guards },
  warnings: r.verdict.warnings
})
