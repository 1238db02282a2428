import { RayClusterInfeasible } from "./Errors.js"
import { aliveNodes, type ClusterSnapshot, type ResourceMap, totalResources } from "./Snapshot.js"

/** The custom resource that makes a serving lease a whole-machine mutex (docs/design.md#the-problem). */
export const SERVING_SLOT = "serving_slot"

/** What a serving lease asks of the cluster. */
export interface LeaseRequest {
  readonly gpus: number
  readonly servingSlot: boolean
  /**
   * Before the command starts, how long to wait for holders outside the lease to free its GPUs
   * (`--gpu-clean-timeout`, docs/design.md#clean-gpus).
   */
  readonly gpuCleanTimeoutSec?: number | undefined
  /**
   * Ray node ids the lease must not be granted on (a sweep's nodes of another hardware class,
   * docs/design.md#sweeps-at-cluster-scale): the lease's placement group carries Ray's own label
   * selector against them.
   */
  readonly avoidNodes?: ReadonlyArray<string> | undefined
}

export interface FeasibilityVerdict {
  readonly feasible: boolean
  /** Present exactly when `feasible` is false. */
  readonly infeasible: RayClusterInfeasible | undefined
  readonly warnings: ReadonlyArray<string>
}

/**
 * Ray keeps resource quantities in 1e-4 fixed point: differences below about 1e-6 are floating-point
 * rounding, not a resource. (A power of two, so that values at the boundary are exact.)
 */
export const RESOURCE_EPSILON = 2 ** -20

/** Resources Ray declares by itself; everything else on a head was given with `--resources`. */
export const isBuiltinResource = (name: string): boolean =>
  name === "CPU" ||
  name === "GPU" ||
  name === "memory" ||
  name === "object_store_memory" ||
  name.startsWith("node:") ||
  name.startsWith("accelerator_type:")

/** The port of a `host:port` (IPv6 in brackets), if there is one. */
const portOf = (hostPort: string): string | undefined => /:(\d+)$/.exec(hostPort)?.[1]

const shellQuote = (text: string): string => `'${text.replaceAll("'", `'\\''`)}'`

/** `{"a": 1, "serving_slot": 1}`, in the shape the installer's command line uses. */
const resourcesJson = (resources: ResourceMap): string =>
  `{${Object.entries(resources)
    .map(([k, v]) => `${JSON.stringify(k)}: ${v}`)
    .join(", ")}}`

/**
 * What a head without the slot is restarted with so nothing it offered is lost
 * (docs/design.md#the-repair-itself): the alive head's CPU count, its declared GPUs (no GPU key: 0,
 * never Ray's detection, which would hand every GPU of the host to a head that declared none) and
 * its custom resources, plus the slot at 1. The automatic repair (Restart.ts `restartPlan`) and the
 * manual fix printed in the `no_serving_slot` message both start the head from this.
 */
export const headRestartResources = (
  snapshot: ClusterSnapshot
): { readonly numCpus: number | undefined; readonly numGpus: number; readonly resources: ResourceMap } => {
  const head = snapshot.nodes.find((n) => n.isHead && n.state === "ALIVE") ?? snapshot.nodes[0]
  // The resource table is what feasibility reads; the node record is the fallback.
  const totals: ResourceMap =
    head === undefined
      ? {}
      : (snapshot.resources.find((r) => r.nodeId === head.nodeId)?.total ?? head.resourcesTotal)
  const custom: Record<string, number> = {}
  for (const [name, amount] of Object.entries(totals)) {
    if (!isBuiltinResource(name) && name !== SERVING_SLOT) custom[name] = amount
  }
  custom[SERVING_SLOT] = 1 // whatever the old head had: one per host
  const cpus = totals.CPU
  return {
    numCpus: cpus !== undefined ? Math.round(cpus) : undefined,
    numGpus: Math.round(totals.GPU ?? 0),
    resources: custom
  }
}

/**
 * The manual fix for a head without the slot: the installer's command, on the same port, with the
 * CPUs, GPUs and custom resources the automatic repair would keep (`headRestartResources`).
 */
export const manualSlotFix = (snapshot: ClusterSnapshot): string =>
  `restart it with: ray stop --force && ${headStartArgv(snapshot).join(" ")} ` +
  "(ray stop --force kills every Ray process on this host)"

/** The text of a `no_serving_slot` infeasibility: what is missing, then the fix. */
export const noSlotDetail = (fix: string): string =>
  `existing Ray head has no ${SERVING_SLOT} resource; ${fix}`

/** `ray start --head …` for this head's resources plus the slot, on its port (or `port`). */
export const headStartArgv = (snapshot: ClusterSnapshot, port?: string): Array<string> => {
  const { numCpus, numGpus, resources } = headRestartResources(snapshot)
  return [
    "ray start --head",
    `--port=${port ?? portOf(snapshot.gcsAddress) ?? "<port>"}`,
    ...(numCpus !== undefined ? [`--num-cpus=${numCpus}`] : []),
    `--num-gpus=${numGpus}`,
    `--resources=${shellQuote(resourcesJson(resources))}`,
    "--disable-usage-stats"
  ]
}

const ID_SHOWN = 12

/**
 * The slot is a per-node mutex (docs/design.md#feasibility): every node that declares
 * `serving_slot` must declare exactly 1. Checked node by node (a cluster-wide sum hides two slots
 * on one node and none on another); a node without the slot serves nothing and is not a warning
 * (group feasibility reports what a node lacks). Dead node records are history, not nodes.
 */
const slotWarnings = (snapshot: ClusterSnapshot): ReadonlyArray<string> => {
  const alive = aliveNodes(snapshot)
  const perNode: ReadonlyArray<{ readonly nodeId: string; readonly total: ResourceMap }> =
    snapshot.resources.length > 0
      ? snapshot.resources.filter(
          (r) => !snapshot.nodes.some((n) => n.nodeId === r.nodeId && n.state !== "ALIVE")
        )
      : alive.map((n) => ({ nodeId: n.nodeId, total: n.resourcesTotal }))
  const warnings: Array<string> = []
  for (const r of perNode) {
    const slots = r.total[SERVING_SLOT]
    if (slots === undefined || Math.abs(slots - 1) < RESOURCE_EPSILON) continue
    const isHead = alive.some((n) => n.nodeId === r.nodeId && n.isHead)
    const id = r.nodeId.length > ID_SHOWN ? `${r.nodeId.slice(0, ID_SHOWN)}…` : r.nodeId
    warnings.push(
      `${SERVING_SLOT} total is ${slots} on node ${id}${isHead ? " (head)" : ""}; it should be 1 per node, or two serving runs can overlap`
    )
  }
  return warnings
}

const infeasible = (
  reason: RayClusterInfeasible["reason"],
  detail: string,
  warnings: ReadonlyArray<string>
): FeasibilityVerdict => ({
  feasible: false,
  infeasible: new RayClusterInfeasible({ reason, detail, refusals: [], restartFailure: undefined }),
  warnings
})

/**
 * Whether a serving lease can ever be granted by the cluster as it is (docs/design.md#feasibility):
 * decided from the resource totals, never from what is free now (contention waits, infeasibility
 * fails). The slot is checked before the GPUs so that a hand-started head short of both still
 * reaches the repair.
 */
export const checkFeasibility = (snapshot: ClusterSnapshot, request: LeaseRequest): FeasibilityVerdict => {
  const totals = totalResources(snapshot)
  const warnings = slotWarnings(snapshot)
  if (request.servingSlot && (totals[SERVING_SLOT] ?? 0) < 1 - RESOURCE_EPSILON) {
    return infeasible("no_serving_slot", noSlotDetail(manualSlotFix(snapshot)), warnings)
  }
  const gpus = totals["GPU"] ?? 0
  if (gpus < request.gpus - RESOURCE_EPSILON) {
    return infeasible(
      "insufficient_gpus",
      `cluster has ${gpus} GPU(s), ${request.gpus} requested; ` +
        `request at most ${gpus} with --gpus, or start the head with --num-gpus=${request.gpus} ` +
        "on a host that has them (the GPU count is fixed when the head starts)",
      warnings
    )
  }
  return { feasible: true, infeasible: undefined, warnings }
}
