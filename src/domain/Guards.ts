import { Either } from "effect"
import type { RayAddress } from "./Address.js"
import { rayletGcsAddresses } from "./Daemons.js"
import { RayClusterInfeasible } from "./Errors.js"
import { headStartArgv, noSlotDetail, RESOURCE_EPSILON } from "./Feasibility.js"
import type { ActorInfo, ClusterSnapshot, JobInfo, PlacementGroupInfo, RayDaemon } from "./Snapshot.js"
import { shortId } from "./Text.js"

/** The repair guards' stable ids (docs/design.md#the-repair-guards), in report order. */
export const GUARD_IDS = [
  "address_not_explicit",
  "single_node_run",
  "one_local_node",
  "only_our_daemons",
  "no_resources_held",
  "no_live_actors",
  "no_other_drivers",
  "no_lease_submitted",
  "cluster_inspectable"
] as const

export type GuardId = (typeof GUARD_IDS)[number]

export interface GuardResult {
  readonly id: GuardId
  readonly ok: boolean
  /** Why the guard failed, as an operator should read it; null when it holds. */
  readonly reason: string | null
}

export interface GuardInput {
  readonly address: RayAddress
  /** Node count of the run (HYPERLOOM_NODES / --nodes), 1 unless multi-node. */
  readonly nodes: number
  /** The connected cluster's GCS port. */
  readonly gcsPort: number
  /** The cluster as read from the GCS, or why it could not be read. */
  readonly snapshot: Either.Either<ClusterSnapshot, string>
  /** The host's Ray daemons as read from /proc, or why they could not be read. */
  readonly daemons: Either.Either<ReadonlyArray<RayDaemon>, string>
  /** Job ids (hex) of this process's own Ray drivers. */
  readonly ownJobIds: ReadonlyArray<string>
  /** Whether this process has already submitted a lease actor. */
  readonly leaseSubmitted: boolean
  /**
   * Why /proc may hide other users' processes from this process (a `hidepid` mount and no
   * CAP_SYS_PTRACE), or undefined when it shows every process. A hidden foreign daemon would make
   * `only_our_daemons` pass on a host it must refuse.
   */
  readonly procHidden: string | undefined
}

// ---------------------------------------------------------------------------------------------
// Rendering. Reasons are joined with "; " into the infeasibility message, so none contains one.

/** How many items a reason names before it says "and N more". */
const MAX_LISTED = 5

const sameHex = (a: string | undefined, b: string): boolean =>
  a !== undefined && a.toLowerCase() === b.toLowerCase()

const listed = (items: ReadonlyArray<string>): string => {
  const shown = items.slice(0, MAX_LISTED).join(", ")
  const rest = items.length - MAX_LISTED
  return rest > 0 ? `${shown} and ${rest} more` : shown
}

/** The port of a `host:port` (IPv6 in brackets), if there is one; an unread address has none. */
const portOf = (hostPort: string | undefined): number | undefined => {
  const m = /:(\d+)$/.exec(String(hostPort))
  return m === null ? undefined : Number(m[1])
}

const UNINSPECTABLE = "cannot tell: cluster not inspectable"

const cannotTell = (what: string): string => `${UNINSPECTABLE} (needed to check ${what})`

// ---------------------------------------------------------------------------------------------
// The guards: each returns null when it holds, else the reason it fails.

type Guard = (input: GuardInput) => string | null

const addressNotExplicit: Guard = ({ address }) => {
  switch (address._tag) {
    case "Auto":
      return null
    case "Local":
      return `RAY_ADDRESS=${address.raw} is an explicit address chosen by an operator (reconnecting after a restart would start a new cluster)`
    case "HostPort":
    case "RayClient":
      return `RAY_ADDRESS=${address.raw} is an explicit address chosen by an operator`
  }
}

const singleNodeRun: Guard = ({ nodes }) =>
  nodes < 2
    ? null
    : `this is a multi-node run (${nodes} nodes requested by HYPERLOOM_NODES or --nodes): restarting the head would drop the other nodes`

const describeNode = (n: { readonly nodeId: string; readonly state: string }) =>
  `${shortId(n.nodeId)} ${n.state}`

const oneLocalNode: Guard = ({ snapshot, daemons }) => {
  if (Either.isLeft(snapshot) || Either.isLeft(daemons)) return cannotTell("the node records")
  const nodes = snapshot.right.nodes
  if (nodes.length !== 1) {
    return `cluster has ${nodes.length} node records${nodes.length > 0 ? ` (${listed(nodes.map(describeNode))})` : ""}`
  }
  const node = nodes[0]!
  if (node.state !== "ALIVE") return `the cluster's only node record (${describeNode(node)}) is not alive`
  const raylets = daemons.right.filter((d) => d.kind === "raylet")
  if (raylets.some((d) => sameHex(d.nodeId, node.nodeId))) return null
  const seen = raylets.map((d) => `pid ${d.pid} node ${d.nodeId === undefined ? "?" : shortId(d.nodeId)}`)
  return (
    `no raylet on this host runs the cluster's node ${shortId(node.nodeId)}` +
    (seen.length > 0 ? ` (raylets seen: ${listed(seen)})` : " (no raylet process seen)")
  )
}

const onlyOurDaemons: Guard = ({ snapshot, daemons, gcsPort, procHidden }) => {
  if (Either.isLeft(snapshot) || Either.isLeft(daemons)) return cannotTell("the host's Ray daemons")
  // What /proc does not show cannot be told clean.
  if (procHidden !== undefined) return `cannot tell: /proc may hide other users' processes (${procHidden})`
  const nodeIds = snapshot.right.nodes.map((n) => n.nodeId)
  const foreign: Array<string> = []
  // One gcs_server can serve the connected port; a second one claiming it (another network
  // namespace sharing this /proc) is not ours to stop.
  let seenOurGcs = false
  for (const d of daemons.right) {
    if (d.kind === "gcs_server") {
      if (d.port === gcsPort && !seenOurGcs) {
        seenOurGcs = true
      } else {
        foreign.push(`gcs_server (pid ${d.pid}, port ${d.port ?? "?"})`)
      }
    } else {
      const ours = nodeIds.some((id) => sameHex(d.nodeId, id)) && portOf(d.gcsAddress) === gcsPort
      if (!ours) {
        foreign.push(
          `raylet (pid ${d.pid}, node ${d.nodeId === undefined ? "?" : shortId(d.nodeId)}, gcs-address ${d.gcsAddress ?? "?"})`
        )
      }
    }
  }
  if (foreign.length === 0) return null
  return foreign.length === 1
    ? `another ${foreign[0]} runs on this host`
    : `other Ray daemons run on this host: ${listed(foreign)}`
}

/** Placement groups a restart would drop: every state but REMOVED (a pending one holds nothing). */
const KEPT_GROUP_STATES: ReadonlySet<string> = new Set(["PENDING", "PREPARED", "CREATED", "RESCHEDULING"])

const describeGroup = (g: PlacementGroupInfo): string => {
  const facts = [
    `id ${shortId(g.groupId)}`,
    g.state,
    ...(g.isDetached ? ["detached"] : []),
    ...(g.creatorJobId === "" ? [] : [`job ${g.creatorJobId}`])
  ]
  return `${g.name === "" ? "(unnamed)" : g.name} (${facts.join(", ")})`
}

/**
 * Held resources, and placement groups that are pending or created (detached or not): both are
 * work a restart would drop. A pending group holds nothing and has no actor, so neither the
 * resource table nor the actor table shows it; it refuses the repair like held resources.
 */
const noResourcesHeld: Guard = ({ snapshot }) => {
  if (Either.isLeft(snapshot)) return cannotTell("the resources")
  const { nodes, resources } = snapshot.right
  const held: Array<string> = []
  for (const r of resources) {
    for (const [name, total] of Object.entries(r.total)) {
      const taken = total - (r.available[name] ?? 0)
      if (taken > RESOURCE_EPSILON) held.push(`${name} ${taken}/${total} on node ${shortId(r.nodeId)}`)
    }
  }
  // A live node the resource table does not report on could hold anything.
  const unreported = nodes
    .filter((n) => n.state === "ALIVE" && !resources.some((r) => sameHex(r.nodeId, n.nodeId)))
    .map((n) => shortId(n.nodeId))
  const groups = snapshot.right.placementGroups.filter((g) => KEPT_GROUP_STATES.has(g.state))
  const parts = [
    ...(held.length > 0 ? [`resources are held: ${listed(held)}`] : []),
    ...(unreported.length > 0 ? [`no resource report for alive node(s) ${listed(unreported)}`] : []),
    ...(groups.length === 1
      ? [`placement group ${describeGroup(groups[0]!)} would be dropped by a restart`]
      : []),
    ...(groups.length > 1
      ? [
          `${groups.length} placement groups would be dropped by a restart: ${listed(groups.map(describeGroup))}`
        ]
      : [])
  ]
  return parts.length === 0 ? null : parts.join(", ")
}

const describeActor = (a: ActorInfo): string => {
  const facts = [
    `class ${a.className}`,
    `id ${shortId(a.actorId)}`,
    `job ${a.jobId}`,
    ...(a.pid > 0 ? [`pid ${a.pid}`] : []),
    a.state,
    ...(a.isDetached ? ["detached"] : [])
  ]
  return `${a.name === "" ? "(unnamed)" : a.name} (${facts.join(", ")})`
}

const noLiveActors: Guard = ({ snapshot }) => {
  if (Either.isLeft(snapshot)) return cannotTell("the actors")
  const live = snapshot.right.actors.filter((a) => a.state !== "DEAD")
  if (live.length === 0) return null
  return live.length === 1
    ? `actor ${describeActor(live[0]!)} is alive`
    : `${live.length} actors are alive: ${listed(live.map(describeActor))}`
}

const ENTRYPOINT_SHOWN = 80

const describeJob = (j: JobInfo): string => {
  const entry =
    j.entrypoint.length > ENTRYPOINT_SHOWN ? `${j.entrypoint.slice(0, ENTRYPOINT_SHOWN)}…` : j.entrypoint
  const facts = [
    `job ${j.jobId}`,
    `pid ${j.driverPid}`,
    ...(j.driverIp === "" ? [] : [`ip ${j.driverIp}`]),
    ...(entry === "" ? [] : [`entrypoint ${entry}`])
  ]
  return `(${facts.join(", ")})`
}

const noOtherDrivers: Guard = ({ snapshot, ownJobIds }) => {
  if (Either.isLeft(snapshot)) return cannotTell("the drivers")
  const others = snapshot.right.jobs.filter(
    (j) => !j.isDead && !ownJobIds.some((own) => sameHex(own, j.jobId))
  )
  if (others.length === 0) return null
  return others.length === 1
    ? `a live driver ${describeJob(others[0]!)} is connected`
    : `${others.length} live drivers are connected: ${listed(others.map(describeJob))}`
}

const noLeaseSubmitted: Guard = ({ leaseSubmitted }) =>
  leaseSubmitted ? "this process already submitted a lease actor (actor creation is asynchronous)" : null

const clusterInspectable: Guard = ({ snapshot, daemons, procHidden }) => {
  const why = [
    ...(Either.isLeft(snapshot) ? [`GCS read failed: ${snapshot.left}`] : []),
    ...(Either.isLeft(daemons) ? [`/proc read failed: ${daemons.left}`] : []),
    ...(Either.isRight(daemons) && procHidden !== undefined
      ? [`/proc may hide other users' processes: ${procHidden}`]
      : [])
  ]
  return why.length === 0 ? null : `cluster could not be fully inspected: ${why.join(", ")}`
}

const GUARDS: { readonly [K in GuardId]: Guard } = {
  address_not_explicit: addressNotExplicit,
  single_node_run: singleNodeRun,
  one_local_node: oneLocalNode,
  only_our_daemons: onlyOurDaemons,
  no_resources_held: noResourcesHeld,
  no_live_actors: noLiveActors,
  no_other_drivers: noOtherDrivers,
  no_lease_submitted: noLeaseSubmitted,
  cluster_inspectable: clusterInspectable
}

/** Every guard (docs/design.md#the-repair-guards), always all of them, in `GUARD_IDS` order. */
export const evaluateGuards = (input: GuardInput): ReadonlyArray<GuardResult> =>
  GUARD_IDS.map((id) => {
    const reason = GUARDS[id](input)
    return { id, ok: reason === null, reason }
  })

/** The repair is allowed only when every one of the nine guards was evaluated and holds. */
export const repairAllowed = (results: ReadonlyArray<GuardResult>): boolean =>
  GUARD_IDS.every((id) => results.some((r) => r.id === id)) && results.every((r) => r.ok)

/** The failed guards' reasons, in order: appended to the infeasibility error when the repair is refused. */
export const refusalReasons = (results: ReadonlyArray<GuardResult>): Array<string> =>
  results.filter((r) => !r.ok).map((r) => r.reason ?? `guard ${r.id} failed`)

/** The guards that say every Ray process on this host is the connected cluster's, and visible. */
const HOST_IS_OURS: ReadonlyArray<GuardId> = ["one_local_node", "only_our_daemons", "cluster_inspectable"]

/**
 * A head without the slot, advised as far as is safe on this host. The installer's fix
 * (`ray stop --force`, then `ray start`) kills every Ray process on the host: it is suggested only
 * when the guards show that every Ray process here is the connected cluster's. Otherwise (other
 * clusters, daemons of other PID namespaces, processes /proc hides) nothing that stops Ray is
 * suggested: with several clusters the message names them and asks for RAY_ADDRESS, else it
 * offers a head of the user's own on a free port.
 */
export const adviseForHost = (
  infeasible: RayClusterInfeasible,
  snapshot: ClusterSnapshot,
  guards: ReadonlyArray<GuardResult>,
  daemons: Either.Either<ReadonlyArray<RayDaemon>, string>
): RayClusterInfeasible => {
  if (infeasible.reason !== "no_serving_slot") return infeasible
  if (HOST_IS_OURS.every((id) => guards.some((g) => g.id === id && g.ok))) return infeasible
  const clusters = Either.isRight(daemons) ? rayletGcsAddresses(daemons.right) : []
  const start = headStartArgv(snapshot, "<free port>").join(" ")
  const fix =
    clusters.length > 1
      ? `this host runs several Ray clusters (GCS ${clusters.join(", ")}) and hyperloom read the one at ` +
        `${snapshot.gcsAddress}; set RAY_ADDRESS to the GCS host:port of the one to use (its head must ` +
        "declare serving_slot); stopping Ray here would stop all of them"
      : "other Ray processes run on this host, or hyperloom cannot see them all, and stopping Ray here " +
        `would stop them too: start a head of your own with the slot (${start}) and set RAY_ADDRESS to ` +
        "it, or ask whoever runs this head to restart it with serving_slot"
  return new RayClusterInfeasible({
    reason: infeasible.reason,
    detail: noSlotDetail(fix),
    refusals: infeasible.refusals,
    restartFailure: infeasible.restartFailure
  })
}
