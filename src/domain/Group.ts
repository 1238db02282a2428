/**
 * Serving groups (docs/design.md#serving-groups-across-nodes): one placement group of N bundles
 * `{"GPU": G, "serving_slot": 1}`, STRICT_SPREAD, one rank per node. The pure parts: whether a
 * cluster can ever place such a group (decided from each alive node's declared totals, like single
 * leases), who holds each node's slot right now, and the exit code of a group from its ranks'
 * exits.
 */
import { RayClusterInfeasible } from "./Errors.js"
import { RESOURCE_EPSILON, SERVING_SLOT } from "./Feasibility.js"
import type { ActorInfo, ClusterSnapshot, JobInfo, NodeInfo, ResourceMap } from "./Snapshot.js"
import { shortId } from "./Text.js"

/** What a serving group asks of the cluster: `nodes` bundles of `gpus` GPUs (and the slot) each. */
export interface GroupRequest {
  readonly nodes: number
  readonly gpus: number
  readonly servingSlot: boolean
}

/** One bundle of the group's placement group, as Ray takes it (zero amounts left out: Ray refuses them). */
export const groupBundle = (request: GroupRequest): ResourceMap => {
  const bundle: Record<string, number> = {}
  if (request.gpus > 0) bundle.GPU = request.gpus
  if (request.servingSlot) bundle[SERVING_SLOT] = 1
  return bundle
}

/** What a node lacks for one rank, when it lacks anything. */
export interface NodeShortfall {
  readonly node: NodeInfo
  readonly lacksSlot: boolean
  /** The node's declared GPUs when they are fewer than a rank needs; undefined when enough. */
  readonly gpusShort: number | undefined
}

export interface GroupVerdict {
  readonly feasible: boolean
  /** Present exactly when `feasible` is false (reason `insufficient_nodes`). */
  readonly infeasible: RayClusterInfeasible | undefined
  /** Alive nodes that can hold one rank. */
  readonly eligible: ReadonlyArray<NodeInfo>
  /** Alive nodes that cannot, with what each lacks. */
  readonly short: ReadonlyArray<NodeShortfall>
  readonly warnings: ReadonlyArray<string>
}

/** A node as an operator finds it: short id, address, head or worker. */
export const describeNode = (n: NodeInfo): string =>
  `${shortId(n.nodeId)} (${n.address || "?"}${n.isHead ? ", head" : ""})`

/**
 * A node's declared totals: its node record (what its raylet was started with), else its row in
 * the resource table. Only these keys count: a placement group adds `GPU_group_…` keys there.
 */
export const nodeTotals = (snapshot: ClusterSnapshot, n: NodeInfo): ResourceMap => {
  if (Object.keys(n.resourcesTotal).length > 0) return n.resourcesTotal
  return snapshot.resources.find((r) => r.nodeId === n.nodeId)?.total ?? {}
}

const shellQuote = (text: string): string => `'${text.replaceAll("'", `'\\''`)}'`

/** The command that brings a node back with the slot (and enough GPUs), joined to the same head. */
export const nodeSlotFix = (snapshot: ClusterSnapshot, n: NodeInfo, request: GroupRequest): string => {
  const totals = nodeTotals(snapshot, n)
  const gpus = Math.max(totals.GPU ?? 0, request.gpus)
  const port = /:(\d+)$/.exec(snapshot.gcsAddress)?.[1] ?? "<port>"
  const resources = shellQuote(`{"${SERVING_SLOT}": 1}`)
  const gpuFlag = gpus > 0 ? ` --num-gpus=${gpus}` : ""
  return n.isHead
    ? `on the head: ray stop && ray start --head --port=${port}${gpuFlag} --resources=${resources} ` +
        "(stopping the head ends the whole cluster: every worker must join again)"
    : `on that node: ray stop && ray start --address=${snapshot.gcsAddress}${gpuFlag} --resources=${resources}`
}

const lackOf = (snapshot: ClusterSnapshot, s: NodeShortfall, request: GroupRequest): string => {
  const parts: string[] = []
  if (s.lacksSlot) parts.push(`no ${SERVING_SLOT}`)
  if (s.gpusShort !== undefined) parts.push(`${s.gpusShort} GPU(s), ${request.gpus} needed`)
  return `node ${describeNode(s.node)} has ${parts.join(" and ")}; fix ${nodeSlotFix(snapshot, s.node, request)}`
}

/**
 * Whether the cluster can ever place the group (docs/design.md#group-feasibility): count the alive
 * nodes whose declared totals have the slot (when asked) and at least G GPUs; fewer than N →
 * `insufficient_nodes`, naming each node and what it lacks, with the command that fixes it. Never a
 * repair: a multi-node cluster is restarted by its operator only.
 */
export const checkGroupFeasibility = (snapshot: ClusterSnapshot, request: GroupRequest): GroupVerdict => {
  const alive = snapshot.nodes.filter((n) => n.state === "ALIVE")
  const eligible: NodeInfo[] = []
  const short: NodeShortfall[] = []
  const warnings: string[] = []
  for (const n of alive) {
    const totals = nodeTotals(snapshot, n)
    const slots = totals[SERVING_SLOT]
    if (slots !== undefined && Math.abs(slots - 1) >= RESOURCE_EPSILON) {
      warnings.push(
        `node ${describeNode(n)} declares ${SERVING_SLOT} ${slots}; it should be 1 per node, or two serving runs can overlap there`
      )
    }
    const lacksSlot = request.servingSlot && (slots ?? 0) < 1 - RESOURCE_EPSILON
    const gpus = totals.GPU ?? 0
    const gpusShort = gpus < request.gpus - RESOURCE_EPSILON ? gpus : undefined
    if (lacksSlot || gpusShort !== undefined) short.push({ node: n, lacksSlot, gpusShort })
    else eligible.push(n)
  }
  if (eligible.length >= request.nodes) {
    return { feasible: true, infeasible: undefined, eligible, short, warnings }
  }
  const per = `${request.servingSlot ? `${SERVING_SLOT} and ` : ""}${request.gpus} GPU(s)`
  const dead = snapshot.nodes.length - alive.length
  const missing = request.nodes - alive.length
  const detail = [
    `cluster has ${eligible.length} node(s) with ${per}, ${request.nodes} needed (one rank per node)` +
      (dead > 0 ? ` (${dead} dead node record(s) not counted)` : ""),
    ...short.map((s) => lackOf(snapshot, s, request)),
    ...(missing > 0
      ? [
          `only ${alive.length} node(s) are alive: join ${missing} more with ray start --address=${snapshot.gcsAddress}` +
            `${request.gpus > 0 ? ` --num-gpus=${request.gpus}` : ""} --resources=${shellQuote(`{"${SERVING_SLOT}": 1}`)}`
        ]
      : [])
  ].join("; ")
  return {
    feasible: false,
    infeasible: new RayClusterInfeasible({
      reason: "insufficient_nodes",
      detail,
      refusals: [],
      restartFailure: undefined
    }),
    eligible,
    short,
    warnings
  }
}

// ---------------------------------------------------------------------------------------------
// Who holds each node's slot

/** `serving_slot`, or the names Ray gives it inside a placement group (`serving_slot_group_[i_]<pg>`). */
export const isSlotResource = (name: string): boolean =>
  name === SERVING_SLOT || name.startsWith(`${SERVING_SLOT}_group_`)

/** The placement group id in a `serving_slot_group_[i_]<pg>` resource name. */
const groupOf = (name: string): { readonly pg: string; readonly bundle: number | undefined } | undefined => {
  const m = new RegExp(`^${SERVING_SLOT}_group_(?:(\\d+)_)?([0-9a-f]+)$`).exec(name)
  return m === null ? undefined : { pg: m[2]!, bundle: m[1] === undefined ? undefined : Number(m[1]) }
}

/** The placement groups (hex ids) whose bundles an actor draws on. */
export const placementGroupsOf = (a: ActorInfo): ReadonlyArray<string> => [
  ...new Set(Object.keys(a.requiredResources).flatMap((k) => groupOf(k)?.pg ?? []))
]

/** Whether an actor asks for a slot, directly or through a placement group bundle. */
export const wantsSlot = (a: ActorInfo): boolean =>
  Object.entries(a.requiredResources).some(([k, v]) => v > 0 && isSlotResource(k))

export interface SlotHolder {
  readonly actorId: string
  readonly name: string
  readonly className: string
  readonly pid: number
  readonly jobId: string
  /** The live driver of the holder's job, when there is one. */
  readonly driverPid: number | null
  /** The placement group (hex) the holder runs in, and its bundle, when it is a group's rank. */
  readonly placementGroup: string | null
  readonly bundle: number | null
}

export interface NodeSlot {
  readonly nodeId: string
  readonly address: string
  readonly isHead: boolean
  /** The node's declared `serving_slot` (0 when it has none). */
  readonly declared: number
  /** How much of it is taken now (by an actor, or reserved by a placement group). */
  readonly held: number
  /** Live actors on the node holding it. */
  readonly holders: ReadonlyArray<SlotHolder>
  /** Placement groups (hex ids) that reserved it on this node, with or without an actor yet. */
  readonly placementGroups: ReadonlyArray<string>
}

const driverOf = (jobs: ReadonlyArray<JobInfo>, jobId: string): number | null => {
  const j = jobs.find((x) => x.jobId === jobId)
  return j !== undefined && !j.isDead ? j.driverPid : null
}

/**
 * An actor as the holder of what it asked for: its job's live driver, and its group's bundle when
 * it is a rank of a group of several bundles (a single lease's placement group of one bundle is
 * how it holds its resources, not a group it is part of).
 */
export const holderOf = (
  a: ActorInfo,
  snapshot: Pick<ClusterSnapshot, "jobs" | "placementGroups">
): SlotHolder => {
  const grouped = Object.keys(a.requiredResources)
    .map(groupOf)
    .find((g) => g !== undefined && g.bundle !== undefined)
  const group =
    grouped === undefined ? undefined : snapshot.placementGroups.find((g) => g.groupId === grouped.pg)
  const rank = grouped !== undefined && (group === undefined || group.bundles.length > 1)
  return {
    actorId: a.actorId,
    name: a.name,
    className: a.className,
    pid: a.pid,
    jobId: a.jobId,
    driverPid: driverOf(snapshot.jobs, a.jobId),
    placementGroup: rank ? grouped.pg : null,
    bundle: rank ? (grouped.bundle ?? null) : null
  }
}

/**
 * Per alive node: its declared slot, how much of it is held, which live actors hold it (directly
 * or as a group's rank) and which placement groups reserved it. The raw `serving_slot` a
 * placement group reserves disappears from the node's available resources; its ranks then take
 * `serving_slot_group_<bundle>_<pg>` instead.
 */
export const slotHolders = (snapshot: ClusterSnapshot): ReadonlyArray<NodeSlot> =>
  snapshot.nodes
    .filter((n) => n.state === "ALIVE")
    .map((n) => {
      const declared = nodeTotals(snapshot, n)[SERVING_SLOT] ?? 0
      const row = snapshot.resources.find((r) => r.nodeId === n.nodeId)
      const held =
        row === undefined
          ? 0
          : Math.max(0, (row.total[SERVING_SLOT] ?? declared) - (row.available[SERVING_SLOT] ?? 0))
      const placementGroups = new Set<string>()
      for (const k of Object.keys(row?.total ?? {})) {
        const g = groupOf(k)
        if (g !== undefined) placementGroups.add(g.pg)
      }
      const holders = snapshot.actors
        .filter(
          (a) => a.nodeId === n.nodeId && (a.state === "ALIVE" || a.state === "RESTARTING") && wantsSlot(a)
        )
        .map((a) => holderOf(a, snapshot))
      return {
        nodeId: n.nodeId,
        address: n.address,
        isHead: n.isHead,
        declared,
        held: held < RESOURCE_EPSILON ? 0 : held,
        holders,
        placementGroups: [...placementGroups].sort()
      }
    })

/** A slot holder as an operator reads it. */
export const describeHolder = (h: SlotHolder): string =>
  `actor ${h.name || h.className || shortId(h.actorId)} (pid ${h.pid}, job ${h.jobId}` +
  (h.driverPid !== null ? `, driver pid ${h.driverPid}` : "") +
  (h.placementGroup !== null ? `, placement group ${shortId(h.placementGroup)} bundle ${h.bundle}` : "") +
  ")"

// ---------------------------------------------------------------------------------------------
// The group's exit code

export interface RankExit {
  readonly rank: number
  readonly code: number
}

/**
 * The group's exit code from its ranks' exits in the order they came: the first failing rank's
 * code (the others were stopped because of it, so their codes say nothing), else 0.
 */
export const groupExitCode = (exits: ReadonlyArray<RankExit>): number =>
  exits.find((e) => e.code !== 0)?.code ?? 0

/** The first failing rank, if any. */
export const firstFailingRank = (exits: ReadonlyArray<RankExit>): RankExit | undefined =>
  exits.find((e) => e.code !== 0)

/**
 * Where a rank's command runs unless `--rank-cwd` says otherwise: a directory every node has (the
 * launching process's own directory may not exist on another node,
 * docs/design.md#what-each-node-is-given).
 */
export const DEFAULT_RANK_CWD = "/tmp"

/**
 * What a rank is sent of the launching process's environment
 * (docs/design.md#what-each-node-is-given): the `HYPERLOOM_*` variables and the names the user
 * lists (`--rank-env NAME`), nothing else. The rank lays these over its own node's environment (its
 * PATH, its libraries), and its device variables over both.
 */
export const rankEnvironment = (
  env: Readonly<Record<string, string | undefined>>,
  names: ReadonlyArray<string>
): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(env)) {
    if (v !== undefined && (k.startsWith("HYPERLOOM_") || names.includes(k))) out[k] = v
  }
  return out
}

/** A `--rank-env` name: an environment variable's name (letters, digits, underscores, not a digit first). */
export const isEnvName = (name: string): boolean => /^[A-Za-z_][A-Za-z0-9_]*$/.test(name)

/**
 * vLLM's `--distributed-executor-backend ray` in a serving command line
 * (docs/design.md#serving-engines-in-a-group): such an engine becomes a Ray driver of its own and
 * asks Ray for a placement group of GPUs the lease already holds, so it either fails at once or
 * waits for ever. The one line hyperloom says before starting anything, or undefined when the
 * command does not ask for it.
 */
export const rayExecutorBackendRefusal = (command: string): string | undefined =>
  /(^|[\s'"])--distributed-executor-backend(=|\s+)['"]?ray['"]?(?=$|[\s'"])/.test(command)
    ? "vLLM's --distributed-executor-backend ray cannot run inside a hyperloom lease (it becomes a Ray driver of its own and asks Ray for the GPUs the lease already holds); use vLLM's multiprocessing multi-node recipe: --nnodes $HYPERLOOM_WORLD_SIZE --node-rank $HYPERLOOM_RANK --master-addr $HYPERLOOM_LEADER_HOST --master-port $HYPERLOOM_LEADER_PORT, --headless on ranks above 0 (docs/multi-node.md)"
    : undefined
