/**
 * The cluster as read from Ray's GCS, plus the host's Ray daemons as read from /proc.
 * Pure data: ids are lowercase hex strings, resource maps are plain records.
 */

export type ResourceMap = Readonly<Record<string, number>>

export type NodeState = "ALIVE" | "DEAD"

export interface NodeInfo {
  readonly nodeId: string
  readonly address: string
  readonly hostname: string
  readonly nodeName: string
  readonly state: NodeState
  readonly isHead: boolean
  readonly resourcesTotal: ResourceMap
  readonly startTimeMs: number
  readonly endTimeMs: number
}

export type ActorState = "DEPENDENCIES_UNREADY" | "PENDING_CREATION" | "ALIVE" | "RESTARTING" | "DEAD"

export interface ActorInfo {
  readonly actorId: string
  readonly jobId: string
  readonly state: ActorState
  readonly isDetached: boolean
  readonly name: string
  readonly className: string
  readonly pid: number
  readonly nodeId: string
  readonly requiredResources: ResourceMap
}

export interface JobInfo {
  readonly jobId: string
  readonly isDead: boolean
  readonly driverPid: number
  readonly driverIp: string
  readonly entrypoint: string
}

export interface NodeResources {
  readonly nodeId: string
  readonly total: ResourceMap
  /** A fully held resource is absent here: held = total - (available ?? 0). */
  readonly available: ResourceMap
}

export interface ResourceDemand {
  readonly shape: ResourceMap
  readonly readyQueued: number
  readonly infeasibleQueued: number
}

export type PlacementGroupState = "PENDING" | "PREPARED" | "CREATED" | "REMOVED" | "RESCHEDULING"

export interface PlacementGroupBundle {
  readonly index: number
  readonly resources: ResourceMap
  /** The node the bundle is placed on; "" while it is not placed. */
  readonly nodeId: string
}

export interface PlacementGroupInfo {
  readonly groupId: string
  readonly name: string
  readonly state: PlacementGroupState
  readonly strategy: string
  readonly isDetached: boolean
  readonly creatorJobId: string
  readonly creatorJobDead: boolean
  readonly bundles: ReadonlyArray<PlacementGroupBundle>
}

export interface ClusterSnapshot {
  /** The GCS address that was read, `host:port`. */
  readonly gcsAddress: string
  readonly clusterId: string
  readonly nodes: ReadonlyArray<NodeInfo>
  readonly actors: ReadonlyArray<ActorInfo>
  readonly jobs: ReadonlyArray<JobInfo>
  readonly resources: ReadonlyArray<NodeResources>
  readonly demands: ReadonlyArray<ResourceDemand>
  /**
   * Placement groups, every state (REMOVED ones included, as the GCS lists them). A pending group
   * holds nothing yet a restart drops it: the guards read them.
   */
  readonly placementGroups: ReadonlyArray<PlacementGroupInfo>
  /** The cluster's Ray version (from the GCS CheckAlive reply), when it could be read. */
  readonly rayVersion?: string | undefined
}

/** A Ray daemon seen in /proc. */
export interface GcsServerDaemon {
  readonly kind: "gcs_server"
  readonly pid: number
  readonly port: number | undefined
  readonly sessionName: string | undefined
  readonly nodeIp: string | undefined
}

export interface RayletDaemon {
  readonly kind: "raylet"
  readonly pid: number
  readonly nodeId: string | undefined
  readonly gcsAddress: string | undefined
  readonly isHead: boolean
  readonly sessionName: string | undefined
  readonly staticResources: ResourceMap
}

export type RayDaemon = GcsServerDaemon | RayletDaemon

/** A process as read from a /proc tree. */
export interface ProcessInfo {
  readonly pid: number
  readonly ppid: number
  /** /proc/<pid>/comm, without the trailing newline. */
  readonly comm: string
  /** /proc/<pid>/cmdline split on NUL. */
  readonly argv: ReadonlyArray<string>
  /** The state letter from /proc/<pid>/stat (`R`, `S`, `Z` for a zombie…), when known. */
  readonly state?: string | undefined
}

const addInto = (acc: Record<string, number>, map: ResourceMap) => {
  for (const [k, v] of Object.entries(map)) acc[k] = (acc[k] ?? 0) + v
}

/** Sum of resource totals over the alive nodes (from the resource table, else node records). */
export const totalResources = (snapshot: ClusterSnapshot): ResourceMap => {
  const acc: Record<string, number> = {}
  if (snapshot.resources.length > 0) {
    for (const r of snapshot.resources) addInto(acc, r.total)
  } else {
    for (const n of snapshot.nodes) if (n.state === "ALIVE") addInto(acc, n.resourcesTotal)
  }
  return acc
}

export const availableResources = (snapshot: ClusterSnapshot): ResourceMap => {
  const acc: Record<string, number> = {}
  for (const r of snapshot.resources) addInto(acc, r.available)
  return acc
}

/** Resources held right now, per node: total - (available ?? 0), only the positive ones. */
export const heldResources = (
  snapshot: ClusterSnapshot
): ReadonlyArray<{ readonly nodeId: string; readonly resource: string; readonly held: number }> => {
  const out: Array<{ nodeId: string; resource: string; held: number }> = []
  for (const r of snapshot.resources) {
    for (const [k, total] of Object.entries(r.total)) {
      const held = total - (r.available[k] ?? 0)
      if (held > 1e-9) out.push({ nodeId: r.nodeId, resource: k, held })
    }
  }
  return out
}

export const aliveNodes = (snapshot: ClusterSnapshot) => snapshot.nodes.filter((n) => n.state === "ALIVE")
