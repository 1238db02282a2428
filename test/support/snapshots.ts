/**
 * Builders for cluster snapshots, /proc daemons and guard inputs. Every builder returns plain data
 * and takes overrides, so a test states only what it is about:
 *
 *   const snapshot = withActor(idleHeadSnapshot({ resources: { CPU: 2, GPU: 2 } }), { name: "x" })
 *   evaluateGuards(guardInput({ snapshot: Either.right(snapshot) }))
 */
import { Either } from "effect"
import type { GuardInput } from "../../src/domain/Guards.js"
import type {
  ActorInfo,
  ClusterSnapshot,
  GcsServerDaemon,
  JobInfo,
  NodeInfo,
  NodeResources,
  PlacementGroupInfo,
  RayDaemon,
  RayletDaemon,
  ResourceMap
} from "../../src/domain/Snapshot.js"

export const HEAD_PORT = 6379
export const HEAD_IP = "10.0.0.5"

/** A 56-hex node id (28 bytes, as the GCS reports them), distinct per seed. */
export const nodeId = (seed: number): string => seed.toString(16).padStart(8, "0").repeat(7)
/** A 32-hex actor id (16 bytes). */
export const actorId = (seed: number): string => seed.toString(16).padStart(8, "0").repeat(4)
/** An 8-hex job id (4 bytes), e.g. 01000000 for job 1 as Ray prints it. */
export const jobId = (seed: number): string => seed.toString(16).padStart(2, "0").padEnd(8, "0")

export const HEAD_NODE_ID = nodeId(0xab12cd34)

/** The resources a bare `ray start --head --num-gpus=2 --resources='{"serving_slot": 1}'` declares. */
export const HEAD_RESOURCES: ResourceMap = {
  CPU: 2,
  GPU: 2,
  memory: 4_000_000_000,
  object_store_memory: 1_000_000_000,
  serving_slot: 1,
  [`node:${HEAD_IP}`]: 1,
  "node:__internal_head__": 1
}

export const node = (overrides: Partial<NodeInfo> = {}): NodeInfo => ({
  nodeId: HEAD_NODE_ID,
  address: HEAD_IP,
  hostname: "gpu-host",
  nodeName: HEAD_IP,
  state: "ALIVE",
  isHead: true,
  resourcesTotal: HEAD_RESOURCES,
  startTimeMs: 1_700_000_000_000,
  endTimeMs: 0,
  ...overrides
})

export const actor = (overrides: Partial<ActorInfo> = {}): ActorInfo => ({
  actorId: actorId(1),
  jobId: jobId(2),
  state: "ALIVE",
  isDetached: false,
  name: "",
  className: "LeaseHolder",
  pid: 4321,
  nodeId: HEAD_NODE_ID,
  requiredResources: { GPU: 1, serving_slot: 1 },
  ...overrides
})

/** A 36-hex placement group id (18 bytes). */
export const PLACEMENT_GROUP_ID = "00112233445566778899aabbccddeeff0011"

export const placementGroup = (overrides: Partial<PlacementGroupInfo> = {}): PlacementGroupInfo => ({
  groupId: PLACEMENT_GROUP_ID,
  name: "pg",
  state: "CREATED",
  strategy: "PACK",
  isDetached: false,
  creatorJobId: jobId(3),
  creatorJobDead: false,
  bundles: [{ index: 0, resources: { CPU: 1 }, nodeId: HEAD_NODE_ID }],
  ...overrides
})

export const withGroup = (
  snapshot: ClusterSnapshot,
  overrides: Partial<PlacementGroupInfo> = {}
): ClusterSnapshot => ({
  ...snapshot,
  placementGroups: [...snapshot.placementGroups, placementGroup(overrides)]
})

export const job = (overrides: Partial<JobInfo> = {}): JobInfo => ({
  jobId: jobId(2),
  isDead: false,
  driverPid: 1234,
  driverIp: HEAD_IP,
  entrypoint: "python bench.py",
  ...overrides
})

export const nodeResources = (overrides: Partial<NodeResources> = {}): NodeResources => ({
  nodeId: HEAD_NODE_ID,
  total: HEAD_RESOURCES,
  available: HEAD_RESOURCES,
  ...overrides
})

export interface HeadOptions {
  readonly port?: number
  readonly ip?: string
  readonly nodeId?: string
  /** The head's declared totals; all of it is available (the head is idle). */
  readonly resources?: ResourceMap
}

/** One alive head node, nothing running on it: the cluster a repair may restart. */
export const idleHeadSnapshot = (options: HeadOptions = {}): ClusterSnapshot => {
  const ip = options.ip ?? HEAD_IP
  const id = options.nodeId ?? HEAD_NODE_ID
  const resources = options.resources ?? HEAD_RESOURCES
  return {
    gcsAddress: `${ip}:${options.port ?? HEAD_PORT}`,
    clusterId: nodeId(0xc1c1c1c1),
    nodes: [node({ nodeId: id, address: ip, nodeName: ip, resourcesTotal: resources })],
    actors: [],
    jobs: [],
    resources: [nodeResources({ nodeId: id, total: resources, available: resources })],
    demands: [],
    placementGroups: []
  }
}

export const gcsServer = (overrides: Partial<GcsServerDaemon> = {}): GcsServerDaemon => ({
  kind: "gcs_server",
  pid: 100,
  port: HEAD_PORT,
  sessionName: "session_2026-01-01_00-00-00_000000_1",
  nodeIp: HEAD_IP,
  ...overrides
})

export const raylet = (overrides: Partial<RayletDaemon> = {}): RayletDaemon => ({
  kind: "raylet",
  pid: 101,
  nodeId: HEAD_NODE_ID,
  gcsAddress: `${HEAD_IP}:${HEAD_PORT}`,
  isHead: true,
  sessionName: "session_2026-01-01_00-00-00_000000_1",
  staticResources: HEAD_RESOURCES,
  ...overrides
})

/** The head's own daemons as /proc shows them: its gcs_server and its raylet. */
export const headDaemons = (options: Omit<HeadOptions, "resources"> = {}): ReadonlyArray<RayDaemon> => {
  const ip = options.ip ?? HEAD_IP
  const port = options.port ?? HEAD_PORT
  return [
    gcsServer({ port, nodeIp: ip }),
    raylet({ nodeId: options.nodeId ?? HEAD_NODE_ID, gcsAddress: `${ip}:${port}` })
  ]
}

/** Every guard holds for this input: an idle lone head reached through `auto`. */
export const guardInput = (overrides: Partial<GuardInput> = {}): GuardInput => ({
  address: { _tag: "Auto" },
  nodes: 1,
  gcsPort: HEAD_PORT,
  snapshot: Either.right(idleHeadSnapshot()),
  daemons: Either.right(headDaemons()),
  ownJobIds: [],
  leaseSubmitted: false,
  procHidden: undefined,
  ...overrides
})

/** The snapshot of a guard input (which must have one), changed by `f`. */
export const mapSnapshot = (input: GuardInput, f: (s: ClusterSnapshot) => ClusterSnapshot): GuardInput => ({
  ...input,
  snapshot: Either.map(input.snapshot, f)
})

export const withActor = (
  snapshot: ClusterSnapshot,
  overrides: Partial<ActorInfo> = {}
): ClusterSnapshot => ({
  ...snapshot,
  actors: [...snapshot.actors, actor(overrides)]
})

export const withJob = (snapshot: ClusterSnapshot, overrides: Partial<JobInfo> = {}): ClusterSnapshot => ({
  ...snapshot,
  jobs: [...snapshot.jobs, job(overrides)]
})

export const withNode = (snapshot: ClusterSnapshot, overrides: Partial<NodeInfo> = {}): ClusterSnapshot => ({
  ...snapshot,
  nodes: [...snapshot.nodes, node(overrides)]
})

/**
 * `amounts` of a node's resources taken (as a lease or an actor would); a resource taken whole
 * disappears from `available`, as the GCS reports it.
 */
export const withHeld = (
  snapshot: ClusterSnapshot,
  amounts: ResourceMap,
  onNode: string = snapshot.resources[0]?.nodeId ?? HEAD_NODE_ID
): ClusterSnapshot => ({
  ...snapshot,
  resources: snapshot.resources.map((r) => {
    if (r.nodeId !== onNode) return r
    const available: Record<string, number> = { ...r.available }
    for (const [k, v] of Object.entries(amounts)) {
      const left = (available[k] ?? 0) - v
      if (left > 0) available[k] = left
      else delete available[k]
    }
    return { ...r, available }
  })
})
