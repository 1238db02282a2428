import { Effect, Either } from "effect"
import { INFEASIBLE_MARKER, type InfeasibleReason } from "../domain/Errors.js"
import { checkFeasibility, type LeaseRequest } from "../domain/Feasibility.js"
import type { GpuHolder } from "../domain/GpuHolders.js"
import { checkGroupFeasibility, slotHolders } from "../domain/Group.js"
import { adviseForHost, evaluateGuards, type GuardResult, repairAllowed } from "../domain/Guards.js"
import {
  availableResources,
  type ClusterSnapshot,
  type RayDaemon,
  totalResources
} from "../domain/Snapshot.js"
import { ClusterInspector, type ResolvedCluster } from "../services/ClusterInspector.js"
import * as Containment from "../services/Containment.js"
import { GpuScan, type GpuScanReport } from "../services/GpuScan.js"
import { ProcFs } from "../services/ProcFs.js"
import { Settings } from "../services/Settings.js"
import { WorkGate } from "../services/WorkGate.js"

/** The connected cluster and the host, read side by side. */
export interface Inspection {
  readonly resolved: ResolvedCluster
  readonly snapshot: ClusterSnapshot
  readonly daemons: Either.Either<ReadonlyArray<RayDaemon>, string>
  /** Why /proc may hide other users' processes (hidepid), undefined when it shows them all. */
  readonly procHidden: string | undefined
}

/** Resolves the cluster and reads it (GCS) and the host's daemons (/proc) concurrently. */
// Stryker disable next-line StringLiteral: span names are for traces only
export const inspect = Effect.fn("Inspect.inspect")(function* () {
  const inspector = yield* ClusterInspector
  const procFs = yield* ProcFs
  const resolved = yield* inspector.resolve
  const [snapshot, daemons, procHidden] = yield* Effect.all(
    [
      inspector.snapshot(resolved.gcsAddress),
      procFs.rayDaemons.pipe(
        Effect.mapError((e) => e.message),
        Effect.either
      ),
      procFs.hiddenReason
    ],
    // Stryker disable next-line ObjectLiteral: concurrency only saves time, the reads are independent
    { concurrency: 3 }
  )
  return { resolved, snapshot, daemons, procHidden } satisfies Inspection
})

/** Every guard, evaluated on an inspection with this process's own facts. */
// Stryker disable next-line StringLiteral: span names are for traces only
export const guardsFor = Effect.fn("Inspect.guardsFor")(function* (inspection: Inspection) {
  const settings = yield* Settings
  const gate = yield* WorkGate
  return evaluateGuards({
    address: settings.rayAddress,
    nodes: settings.nodes,
    gcsPort: inspection.resolved.port,
    snapshot: Either.right(inspection.snapshot),
    daemons: inspection.daemons,
    ownJobIds: yield* gate.ownJobIds,
    leaseSubmitted: yield* gate.leaseSubmitted,
    procHidden: inspection.procHidden
  })
})

/**
 * `hyperloom ray doctor`'s report; field names are the CLI contract
 * (docs/design.md#the-command-line).
 */
export interface DoctorReport {
  readonly cluster: {
    readonly address: string
    readonly explicit: boolean
    readonly source: ResolvedCluster["source"]
  }
  /** What was asked, in the contract's snake_case: GPUs per lease (or rank), and the slot. */
  readonly request: { readonly gpus: number; readonly serving_slot: boolean }
  readonly feasible: boolean
  readonly infeasible: {
    readonly marker: typeof INFEASIBLE_MARKER
    readonly reason: InfeasibleReason
    readonly message: string
  } | null
  readonly repair: {
    readonly allowed: boolean
    readonly guards: ReadonlyArray<GuardResult>
    /**
     * Why this process may not repair whatever the guards say (`hyperloom mcp` without
     * `--allow-repair`, docs/agents.md); absent where the guards alone decide.
     */
    readonly refused?: string
  }
  readonly warnings: ReadonlyArray<string>
  /**
   * For a group (--nodes N >= 2, docs/design.md#serving-groups-across-nodes): the nodes that can
   * hold a rank and what the others lack.
   */
  readonly group: {
    readonly nodes: number
    readonly eligible: ReadonlyArray<{ readonly node_id: string; readonly address: string }>
    readonly short: ReadonlyArray<{
      readonly node_id: string
      readonly address: string
      readonly lacks_serving_slot: boolean
      readonly gpus_short: number | null
    }>
  } | null
  /**
   * What stops a lease's processes (docs/design.md#contained): a cgroup per lease, or the subreaper
   * alone (and why).
   */
  readonly containment: Containment.Containment
  /**
   * Who holds this host's GPUs (docs/design.md#clean-gpus), per GPU index ("all": /dev/kfd, every AMD
   * GPU): what a lease's gate would wait for. `scanned` false: no GPU device file or vendor tool here.
   */
  readonly gpu_holders: {
    readonly scanned: boolean
    readonly by_gpu: Readonly<Record<string, ReadonlyArray<GpuHolder>>>
    readonly unreadable: number
    readonly error: string | null
  }
}

/** The doctor's `gpu_holders`: the scan's holders grouped per GPU. */
export const gpuHoldersReport = (scan: GpuScanReport): DoctorReport["gpu_holders"] => {
  const byGpu: Record<string, Array<GpuHolder>> = {}
  for (const h of scan.holders) {
    const key = h.gpu === null ? "all" : String(h.gpu)
    byGpu[key] = [...(byGpu[key] ?? []), h]
  }
  return { scanned: scan.scanned, by_gpu: byGpu, unreadable: scan.unreadable, error: scan.error }
}

export const doctorReport = (
  inspection: Inspection,
  request: LeaseRequest,
  guards: ReadonlyArray<GuardResult>,
  nodes = 1,
  containment: Containment.Containment = { mode: "subreaper", reason: "not probed" },
  gpuScan: GpuScanReport = { scanned: false, holders: [], unreadable: 0, error: null }
) => {
  const group = nodes >= 2 ? checkGroupFeasibility(inspection.snapshot, { ...request, nodes }) : undefined
  const verdict = group ?? checkFeasibility(inspection.snapshot, request)
  const warnings = [...verdict.warnings]
  const infeasible =
    verdict.infeasible === undefined
      ? undefined
      : adviseForHost(verdict.infeasible, inspection.snapshot, guards, inspection.daemons)
  if (Either.isLeft(inspection.daemons))
    warnings.push(`could not read the host's processes: ${inspection.daemons.left}`)
  return {
    cluster: {
      address: inspection.resolved.gcsAddress,
      explicit: inspection.resolved.explicit,
      source: inspection.resolved.source
    },
    request: { gpus: request.gpus, serving_slot: request.servingSlot },
    feasible: verdict.feasible,
    infeasible:
      infeasible === undefined
        ? null
        : { marker: INFEASIBLE_MARKER, reason: infeasible.reason, message: infeasible.message },
    repair: { allowed: repairAllowed(guards), guards },
    warnings,
    group:
      group === undefined
        ? null
        : {
            nodes,
            eligible: group.eligible.map((n) => ({ node_id: n.nodeId, address: n.address })),
            short: group.short.map((s) => ({
              node_id: s.node.nodeId,
              address: s.node.address,
              lacks_serving_slot: s.lacksSlot,
              gpus_short: s.gpusShort ?? null
            }))
          },
    containment,
    gpu_holders: gpuHoldersReport(gpuScan)
  } satisfies DoctorReport
}

/** Feasibility of a lease and the repair verdict with every guard, without changing anything. */
export const doctor = Effect.fn("Inspect.doctor")(function* (request: LeaseRequest) {
  const settings = yield* Settings
  const gpus = yield* GpuScan
  // The host's GPU holders beside the cluster's inspection (no scan without GPU device files).
  const [inspection, gpuScan] = yield* Effect.all([inspect(), gpus.scan], { concurrency: 2 })
  const guards = yield* guardsFor(inspection)
  const report = doctorReport(
    inspection,
    request,
    guards,
    settings.nodes,
    yield* Containment.probe(),
    gpuScan
  )
  return settings.repairRefused === undefined
    ? report
    : ({
        ...report,
        repair: { ...report.repair, allowed: false, refused: settings.repairRefused }
      } satisfies DoctorReport)
})

/** `hyperloom ray status`: the cluster snapshot and the host's daemons. */
export const status = Effect.fn("Inspect.status")(function* () {
  const inspection = yield* inspect()
  const { snapshot } = inspection
  const slots = slotHolders(snapshot)
  return {
    address: inspection.resolved.gcsAddress,
    explicit: inspection.resolved.explicit,
    source: inspection.resolved.source,
    cluster_id: snapshot.clusterId,
    ray_version: snapshot.rayVersion ?? null,
    nodes: snapshot.nodes.map((n) => {
      const slot = slots.find((x) => x.nodeId === n.nodeId)
      return {
        node_id: n.nodeId,
        state: n.state,
        is_head: n.isHead,
        address: n.address,
        hostname: n.hostname,
        resources_total: n.resourcesTotal,
        serving_slot:
          slot === undefined
            ? null
            : {
                declared: slot.declared,
                held: slot.held,
                holders: slot.holders.map((h) => ({
                  actor_id: h.actorId,
                  name: h.name,
                  class_name: h.className,
                  pid: h.pid,
                  job_id: h.jobId,
                  driver_pid: h.driverPid,
                  placement_group: h.placementGroup,
                  bundle: h.bundle
                })),
                placement_groups: slot.placementGroups
              }
      }
    }),
    resources: { total: totalResources(snapshot), available: availableResources(snapshot) },
    resources_by_node: snapshot.resources.map((r) => ({
      node_id: r.nodeId,
      total: r.total,
      available: r.available
    })),
    demands: snapshot.demands.map((d) => ({
      shape: d.shape,
      ready_queued: d.readyQueued,
      infeasible_queued: d.infeasibleQueued
    })),
    actors: snapshot.actors.map((a) => ({
      actor_id: a.actorId,
      job_id: a.jobId,
      state: a.state,
      name: a.name,
      class_name: a.className,
      pid: a.pid,
      detached: a.isDetached,
      required_resources: a.requiredResources
    })),
    jobs: snapshot.jobs.map((j) => ({
      job_id: j.jobId,
      is_dead: j.isDead,
      driver_pid: j.driverPid,
      driver_ip: j.driverIp,
      entrypoint: j.entrypoint
    })),
    daemons: Either.match(inspection.daemons, {
      onLeft: (error) => ({
        error,
        hidden: inspection.procHidden ?? null,
        processes: [] as ReadonlyArray<RayDaemon>
      }),
      onRight: (processes) => ({ error: null, hidden: inspection.procHidden ?? null, processes })
    }),
    placement_groups: snapshot.placementGroups.map((g) => ({
      placement_group_id: g.groupId,
      name: g.name,
      state: g.state,
      strategy: g.strategy,
      detached: g.isDetached,
      creator_job_id: g.creatorJobId,
      bundles: g.bundles.map((b) => ({ index: b.index, resources: b.resources, node_id: b.nodeId }))
    }))
  }
})

export type StatusReport = Effect.Effect.Success<ReturnType<typeof status>>
