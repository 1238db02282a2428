import { assert, describe, it } from "@effect/vitest"
import { Either, FastCheck as fc } from "effect"
import { RayClusterInfeasible } from "../../src/domain/Errors.js"
import { RESOURCE_EPSILON } from "../../src/domain/Feasibility.js"
import {
  evaluateGuards,
  GUARD_IDS,
  type GuardId,
  type GuardInput,
  type GuardResult,
  refusalReasons,
  repairAllowed
} from "../../src/domain/Guards.js"
import type { ActorState, ClusterSnapshot } from "../../src/domain/Snapshot.js"
import {
  actorId,
  gcsServer,
  guardInput,
  HEAD_NODE_ID,
  headDaemons,
  idleHeadSnapshot,
  jobId,
  mapSnapshot,
  nodeId,
  nodeResources,
  PLACEMENT_GROUP_ID,
  raylet,
  withActor,
  withGroup,
  withHeld,
  withJob,
  withNode
} from "../support/snapshots.js"

/** The nine ids, spelled out here so that a change to GUARD_IDS itself shows. */
const EXPECTED_IDS: ReadonlyArray<GuardId> = [
  "address_not_explicit",
  "single_node_run",
  "one_local_node",
  "only_our_daemons",
  "no_resources_held",
  "no_live_actors",
  "no_other_drivers",
  "no_lease_submitted",
  "cluster_inspectable"
]

const HEAD = "ab12cd34ab12…"
const PG = `${PLACEMENT_GROUP_ID.slice(0, 12)}…`
const UNINSPECTABLE = "cannot tell: cluster not inspectable"

const failedIds = (results: ReadonlyArray<GuardResult>): ReadonlyArray<GuardId> =>
  results.filter((r) => !r.ok).map((r) => r.id)

const resultOf = (results: ReadonlyArray<GuardResult>, id: GuardId): GuardResult => {
  const found = results.find((r) => r.id === id)
  assert.isDefined(found, id)
  return found!
}

const snap = (input: GuardInput): ClusterSnapshot => Either.getOrThrow(input.snapshot)
const withSnapshot = (snapshot: ClusterSnapshot, overrides: Partial<GuardInput> = {}): GuardInput =>
  guardInput({ snapshot: Either.right(snapshot), ...overrides })

interface Case {
  readonly name: string
  readonly input: GuardInput
  /** Exactly the guards that fail, in report order. */
  readonly fails: ReadonlyArray<GuardId>
  /** The reason of the guard under test: exact text, or a prefix (`startsWith`). */
  readonly reason?: string
  readonly reasonPrefix?: string
}

/**
 * One table per guard. Each case starts from the idle lone head (where every guard holds) and
 * changes one thing; the table states exactly which guards then fail, and the guard's reason.
 */
const tables: Record<GuardId, ReadonlyArray<Case>> = {
  address_not_explicit: [
    { name: "holds for auto", input: guardInput({ address: { _tag: "Auto" } }), fails: [] },
    {
      name: "refuses local: reconnecting would start a new cluster",
      input: guardInput({ address: { _tag: "Local", raw: "local" } }),
      fails: ["address_not_explicit"],
      reason:
        "RAY_ADDRESS=local is an explicit address chosen by an operator (reconnecting after a restart would start a new cluster)"
    },
    {
      name: "refuses host:port",
      input: guardInput({
        address: { _tag: "HostPort", raw: "10.0.0.5:6379", host: "10.0.0.5", port: 6379 }
      }),
      fails: ["address_not_explicit"],
      reason: "RAY_ADDRESS=10.0.0.5:6379 is an explicit address chosen by an operator"
    },
    {
      name: "refuses a Ray Client URL",
      input: guardInput({ address: { _tag: "RayClient", raw: "ray://10.0.0.5:10001" } }),
      fails: ["address_not_explicit"],
      reason: "RAY_ADDRESS=ray://10.0.0.5:10001 is an explicit address chosen by an operator"
    }
  ],
  single_node_run: [
    { name: "holds for one node", input: guardInput({ nodes: 1 }), fails: [] },
    {
      name: "refuses two nodes",
      input: guardInput({ nodes: 2 }),
      fails: ["single_node_run"],
      reason:
        "this is a multi-node run (2 nodes requested by HYPERLOOM_NODES or --nodes): restarting the head would drop the other nodes"
    },
    {
      name: "refuses a node count that is not a number",
      input: guardInput({ nodes: Number.NaN }),
      fails: ["single_node_run"],
      reasonPrefix: "this is a multi-node run (NaN nodes"
    }
  ],
  one_local_node: [
    {
      name: "holds when the raylet's node id differs only in case",
      input: guardInput({ daemons: Either.right(headDaemons({ nodeId: HEAD_NODE_ID.toUpperCase() })) }),
      fails: []
    },
    {
      name: "holds when the GCS's node id differs only in case",
      input: guardInput({ snapshot: Either.right(idleHeadSnapshot({ nodeId: HEAD_NODE_ID.toUpperCase() })) }),
      fails: []
    },
    {
      name: "counts a dead node record",
      input: withSnapshot(withNode(idleHeadSnapshot(), { nodeId: nodeId(7), state: "DEAD" })),
      fails: ["one_local_node"],
      reason: `cluster has 2 node records (${HEAD} ALIVE, 000000070000… DEAD)`
    },
    {
      name: "refuses a cluster without node records",
      input: withSnapshot({ ...idleHeadSnapshot(), nodes: [] }),
      // the head's raylet now runs a node the cluster does not know: foreign too
      fails: ["one_local_node", "only_our_daemons"],
      reason: "cluster has 0 node records"
    },
    {
      name: "refuses a lone dead node record",
      input: withSnapshot({
        ...idleHeadSnapshot(),
        nodes: [{ ...snap(guardInput()).nodes[0]!, state: "DEAD" }]
      }),
      fails: ["one_local_node"],
      reason: `the cluster's only node record (${HEAD} DEAD) is not alive`
    },
    {
      name: "refuses when no raylet runs on this host",
      input: guardInput({ daemons: Either.right([gcsServer()]) }),
      fails: ["one_local_node"],
      reason: `no raylet on this host runs the cluster's node ${HEAD} (no raylet process seen)`
    },
    {
      name: "refuses when the host's raylet runs another node (the cluster's node is elsewhere)",
      input: guardInput({ daemons: Either.right([gcsServer(), raylet({ pid: 55, nodeId: nodeId(9) })]) }),
      fails: ["one_local_node", "only_our_daemons"],
      reason: `no raylet on this host runs the cluster's node ${HEAD} (raylets seen: pid 55 node 000000090000…)`
    },
    {
      name: "refuses when the host's raylet has no readable node id",
      input: guardInput({ daemons: Either.right([gcsServer(), raylet({ pid: 56, nodeId: undefined })]) }),
      fails: ["one_local_node", "only_our_daemons"],
      reason: `no raylet on this host runs the cluster's node ${HEAD} (raylets seen: pid 56 node ?)`
    },
    {
      name: "does not take a gcs_server for a raylet",
      input: guardInput({
        daemons: Either.right([gcsServer(), { ...gcsServer({ pid: 57 }), nodeId: HEAD_NODE_ID } as never])
      }),
      fails: ["one_local_node", "only_our_daemons"],
      reasonPrefix: `no raylet on this host runs the cluster's node ${HEAD} (no raylet process seen)`
    },
    {
      name: "cannot tell without /proc",
      input: guardInput({ daemons: Either.left("EACCES") }),
      fails: ["one_local_node", "only_our_daemons", "cluster_inspectable"],
      reason: `${UNINSPECTABLE} (needed to check the node records)`
    }
  ],
  only_our_daemons: [
    {
      name: "cannot tell when /proc may hide other users' processes (hidepid): not clean",
      input: guardInput({ procHidden: "/proc is mounted with hidepid=2" }),
      fails: ["only_our_daemons", "cluster_inspectable"],
      reason: "cannot tell: /proc may hide other users' processes (/proc is mounted with hidepid=2)"
    },
    {
      name: "holds for a worker raylet joined to our head (that is one_local_node's business)",
      input: guardInput({
        snapshot: Either.right({
          ...withNode(idleHeadSnapshot(), { nodeId: nodeId(8), isHead: false }),
          resources: [nodeResources(), nodeResources({ nodeId: nodeId(8) })]
        }),
        daemons: Either.right([
          ...headDaemons(),
          raylet({ pid: 300, nodeId: nodeId(8).toUpperCase(), isHead: false })
        ])
      }),
      fails: ["one_local_node"]
    },
    {
      name: "refuses a second head on another port",
      input: guardInput({ daemons: Either.right([...headDaemons(), gcsServer({ pid: 99, port: 6380 })]) }),
      fails: ["only_our_daemons"],
      reason: "another gcs_server (pid 99, port 6380) runs on this host"
    },
    {
      name: "refuses a gcs_server whose port could not be read",
      input: guardInput({
        daemons: Either.right([...headDaemons(), gcsServer({ pid: 98, port: undefined })])
      }),
      fails: ["only_our_daemons"],
      reason: "another gcs_server (pid 98, port ?) runs on this host"
    },
    {
      name: "refuses a second gcs_server claiming our port",
      input: guardInput({ daemons: Either.right([...headDaemons(), gcsServer({ pid: 97 })]) }),
      fails: ["only_our_daemons"],
      reason: "another gcs_server (pid 97, port 6379) runs on this host"
    },
    {
      name: "refuses a raylet of another cluster",
      input: guardInput({
        daemons: Either.right([
          ...headDaemons(),
          raylet({ pid: 201, nodeId: nodeId(9), gcsAddress: "10.0.0.5:6380" })
        ])
      }),
      fails: ["only_our_daemons"],
      reason: "another raylet (pid 201, node 000000090000…, gcs-address 10.0.0.5:6380) runs on this host"
    },
    {
      name: "refuses a raylet with our node id but another GCS port",
      input: guardInput({
        daemons: Either.right([...headDaemons(), raylet({ pid: 202, gcsAddress: "10.0.0.5:6380" })])
      }),
      fails: ["only_our_daemons"],
      reason: `another raylet (pid 202, node ${HEAD}, gcs-address 10.0.0.5:6380) runs on this host`
    },
    {
      name: "refuses a raylet whose GCS address could not be read",
      input: guardInput({
        daemons: Either.right([...headDaemons(), raylet({ pid: 203, gcsAddress: undefined })])
      }),
      fails: ["only_our_daemons"],
      reason: `another raylet (pid 203, node ${HEAD}, gcs-address ?) runs on this host`
    },
    {
      name: "refuses a raylet whose GCS address has no port",
      input: guardInput({
        daemons: Either.right([...headDaemons(), raylet({ pid: 204, gcsAddress: "10.0.0.5" })])
      }),
      fails: ["only_our_daemons"],
      reason: `another raylet (pid 204, node ${HEAD}, gcs-address 10.0.0.5) runs on this host`
    },
    {
      name: "refuses a raylet whose node id could not be read",
      input: guardInput({
        daemons: Either.right([...headDaemons(), raylet({ pid: 205, nodeId: undefined })])
      }),
      fails: ["only_our_daemons"],
      reason: "another raylet (pid 205, node ?, gcs-address 10.0.0.5:6379) runs on this host"
    },
    {
      name: "refuses daemons that all run on another port than the connected one",
      input: guardInput({ gcsPort: 6390 }),
      fails: ["only_our_daemons"],
      reason: `other Ray daemons run on this host: gcs_server (pid 100, port 6379), raylet (pid 101, node ${HEAD}, gcs-address 10.0.0.5:6379)`
    },
    {
      name: "holds for a raylet whose GCS address is IPv6",
      input: guardInput({ daemons: Either.right([gcsServer(), raylet({ gcsAddress: "[fd00::5]:6379" })]) }),
      fails: []
    },
    {
      name: "refuses a raylet whose IPv6 GCS address has another port",
      input: guardInput({
        daemons: Either.right([...headDaemons(), raylet({ pid: 206, gcsAddress: "[fd00::5]:6380" })])
      }),
      fails: ["only_our_daemons"],
      reason: `another raylet (pid 206, node ${HEAD}, gcs-address [fd00::5]:6380) runs on this host`
    },
    {
      name: "shows node ids of twelve characters or fewer whole",
      input: guardInput({
        daemons: Either.right([
          ...headDaemons(),
          raylet({ pid: 207, nodeId: "0123456789ab" }),
          raylet({ pid: 208, nodeId: "abc" }),
          raylet({ pid: 209, nodeId: "0123456789abc" })
        ])
      }),
      fails: ["only_our_daemons"],
      reason:
        "other Ray daemons run on this host: raylet (pid 207, node 0123456789ab, gcs-address 10.0.0.5:6379), " +
        "raylet (pid 208, node abc, gcs-address 10.0.0.5:6379), raylet (pid 209, node 0123456789ab…, gcs-address 10.0.0.5:6379)"
    },
    {
      name: "names five foreign daemons whole",
      input: guardInput({
        daemons: Either.right([
          ...headDaemons(),
          ...[1, 2, 3, 4, 5].map((i) => gcsServer({ pid: i, port: 7000 + i }))
        ])
      }),
      fails: ["only_our_daemons"],
      reason:
        "other Ray daemons run on this host: gcs_server (pid 1, port 7001), gcs_server (pid 2, port 7002), " +
        "gcs_server (pid 3, port 7003), gcs_server (pid 4, port 7004), gcs_server (pid 5, port 7005)"
    },
    {
      name: "names five foreign daemons and counts the rest",
      input: guardInput({
        daemons: Either.right([
          ...headDaemons(),
          ...[1, 2, 3, 4, 5, 6, 7].map((i) => gcsServer({ pid: i, port: 7000 + i }))
        ])
      }),
      fails: ["only_our_daemons"],
      reason:
        "other Ray daemons run on this host: gcs_server (pid 1, port 7001), gcs_server (pid 2, port 7002), " +
        "gcs_server (pid 3, port 7003), gcs_server (pid 4, port 7004), gcs_server (pid 5, port 7005) and 2 more"
    },
    {
      name: "cannot tell without the cluster",
      input: guardInput({ snapshot: Either.left("UNAVAILABLE") }),
      fails: [
        "one_local_node",
        "only_our_daemons",
        "no_resources_held",
        "no_live_actors",
        "no_other_drivers",
        "cluster_inspectable"
      ],
      reason: `${UNINSPECTABLE} (needed to check the host's Ray daemons)`
    },
    {
      name: "cannot tell without /proc",
      input: guardInput({ daemons: Either.left("EACCES") }),
      fails: ["one_local_node", "only_our_daemons", "cluster_inspectable"],
      reason: `${UNINSPECTABLE} (needed to check the host's Ray daemons)`
    }
  ],
  no_resources_held: [
    {
      name: "holds when a dead node has no resource report",
      input: withSnapshot(withNode(idleHeadSnapshot(), { nodeId: nodeId(7), state: "DEAD" })),
      fails: ["one_local_node"]
    },
    {
      name: "holds when the resource report's node id differs only in case",
      input: withSnapshot({
        ...idleHeadSnapshot(),
        resources: [nodeResources({ nodeId: HEAD_NODE_ID.toUpperCase() })]
      }),
      fails: []
    },
    {
      name: "holds when available differs from total by rounding only",
      input: withSnapshot({
        ...idleHeadSnapshot(),
        resources: [nodeResources({ total: { GPU: 2 }, available: { GPU: 2 - 1e-9 } })]
      }),
      fails: []
    },
    {
      name: "holds when exactly the rounding tolerance is missing",
      input: withSnapshot({
        ...idleHeadSnapshot(),
        resources: [nodeResources({ total: { GPU: 2 }, available: { GPU: 2 - RESOURCE_EPSILON } })]
      }),
      fails: []
    },
    {
      name: "refuses twice the rounding tolerance held",
      input: withSnapshot({
        ...idleHeadSnapshot(),
        resources: [nodeResources({ total: { GPU: 2 }, available: { GPU: 2 - 2 * RESOURCE_EPSILON } })]
      }),
      fails: ["no_resources_held"],
      reasonPrefix: "resources are held: GPU "
    },
    {
      name: "refuses a GPU held",
      input: withSnapshot(withHeld(idleHeadSnapshot(), { GPU: 1 })),
      fails: ["no_resources_held"],
      reason: `resources are held: GPU 1/2 on node ${HEAD}`
    },
    {
      name: "refuses a resource held whole, absent from available",
      input: withSnapshot({
        ...idleHeadSnapshot(),
        resources: [nodeResources({ total: { CPU: 2, serving_slot: 1 }, available: { CPU: 2 } })]
      }),
      fails: ["no_resources_held"],
      reason: `resources are held: serving_slot 1/1 on node ${HEAD}`
    },
    {
      name: "refuses a tenth of a CPU held",
      input: withSnapshot(withHeld(idleHeadSnapshot(), { CPU: 0.1 })),
      fails: ["no_resources_held"],
      reasonPrefix: "resources are held: CPU "
    },
    {
      name: "refuses an alive node the resource table does not report",
      input: withSnapshot({ ...idleHeadSnapshot(), resources: [] }),
      fails: ["no_resources_held"],
      reason: `no resource report for alive node(s) ${HEAD}`
    },
    {
      name: "names what is held and what is unreported",
      input: withSnapshot({
        ...withNode(idleHeadSnapshot(), { nodeId: nodeId(8), isHead: false }),
        resources: [nodeResources({ total: { GPU: 2 }, available: { GPU: 1 } })]
      }),
      fails: ["one_local_node", "no_resources_held"],
      reason: `resources are held: GPU 1/2 on node ${HEAD}, no resource report for alive node(s) 000000080000…`
    },
    {
      name: "refuses a pending detached placement group that holds nothing (a restart would drop it)",
      input: withSnapshot(
        withGroup(idleHeadSnapshot(), { name: "big_pg", state: "PENDING", isDetached: true, bundles: [] })
      ),
      fails: ["no_resources_held"],
      reason: `placement group big_pg (id ${PG}, PENDING, detached, job 03000000) would be dropped by a restart`
    },
    {
      name: "refuses a created placement group, naming it and its creator",
      input: withSnapshot(withGroup(idleHeadSnapshot(), { name: "", state: "CREATED" })),
      fails: ["no_resources_held"],
      reason: `placement group (unnamed) (id ${PG}, CREATED, job 03000000) would be dropped by a restart`
    },
    {
      name: "refuses prepared and rescheduling groups too, and lists them with what is held",
      input: withSnapshot(
        withGroup(withGroup(withHeld(idleHeadSnapshot(), { CPU: 1 }), { name: "a", state: "PREPARED" }), {
          name: "b",
          state: "RESCHEDULING"
        })
      ),
      fails: ["no_resources_held"],
      reason:
        `resources are held: CPU 1/2 on node ${HEAD}, ` +
        `2 placement groups would be dropped by a restart: a (id ${PG}, PREPARED, job 03000000), b (id ${PG}, RESCHEDULING, job 03000000)`
    },
    {
      name: "holds with a removed placement group (history, like a dead actor)",
      input: withSnapshot(withGroup(idleHeadSnapshot(), { state: "REMOVED" })),
      fails: []
    },
    {
      name: "cannot tell without the cluster",
      input: guardInput({ snapshot: Either.left("UNAVAILABLE") }),
      fails: [
        "one_local_node",
        "only_our_daemons",
        "no_resources_held",
        "no_live_actors",
        "no_other_drivers",
        "cluster_inspectable"
      ],
      reason: `${UNINSPECTABLE} (needed to check the resources)`
    }
  ],
  no_live_actors: [
    {
      name: "holds when every actor record is dead",
      input: withSnapshot(withActor(withActor(idleHeadSnapshot(), { state: "DEAD" }), { state: "DEAD" })),
      fails: []
    },
    ...(["ALIVE", "PENDING_CREATION", "RESTARTING", "DEPENDENCIES_UNREADY"] as const).map(
      (state: ActorState): Case => ({
        name: `refuses an actor in state ${state}`,
        input: withSnapshot(withActor(idleHeadSnapshot(), { state, name: "", pid: 0 })),
        fails: ["no_live_actors"],
        reason: `actor (unnamed) (class LeaseHolder, id 000000010000…, job 02000000, ${state}) is alive`
      })
    ),
    {
      name: "names a detached actor that outlived its job",
      input: withSnapshot(withActor(idleHeadSnapshot(), { name: "holder", isDetached: true, pid: 4321 })),
      fails: ["no_live_actors"],
      reason:
        "actor holder (class LeaseHolder, id 000000010000…, job 02000000, pid 4321, ALIVE, detached) is alive"
    },
    {
      name: "names only the live one next to a dead one",
      input: withSnapshot(
        withActor(withActor(idleHeadSnapshot(), { name: "a" }), {
          name: "b",
          actorId: actorId(2),
          state: "DEAD"
        })
      ),
      fails: ["no_live_actors"],
      reasonPrefix: "actor a ("
    },
    {
      name: "names several",
      input: withSnapshot(
        withActor(withActor(idleHeadSnapshot(), { name: "a" }), { name: "b", actorId: actorId(2) })
      ),
      fails: ["no_live_actors"],
      reason:
        "2 actors are alive: a (class LeaseHolder, id 000000010000…, job 02000000, pid 4321, ALIVE), " +
        "b (class LeaseHolder, id 000000020000…, job 02000000, pid 4321, ALIVE)"
    },
    {
      name: "cannot tell without the cluster",
      input: guardInput({ snapshot: Either.left("UNAVAILABLE") }),
      fails: [
        "one_local_node",
        "only_our_daemons",
        "no_resources_held",
        "no_live_actors",
        "no_other_drivers",
        "cluster_inspectable"
      ],
      reason: `${UNINSPECTABLE} (needed to check the actors)`
    }
  ],
  no_other_drivers: [
    {
      name: "holds when every job is dead",
      input: withSnapshot(withJob(idleHeadSnapshot(), { isDead: true })),
      fails: []
    },
    {
      name: "holds for this process's own driver, whatever the case of its id",
      input: withSnapshot(withJob(idleHeadSnapshot(), { jobId: "0a000000" }), { ownJobIds: ["0A000000"] }),
      fails: []
    },
    {
      name: "refuses a live driver",
      input: withSnapshot(withJob(idleHeadSnapshot(), { jobId: "02000000", driverPid: 1234 })),
      fails: ["no_other_drivers"],
      reason: "a live driver (job 02000000, pid 1234, ip 10.0.0.5, entrypoint python bench.py) is connected"
    },
    {
      name: "refuses another live driver next to our own",
      input: withSnapshot(withJob(withJob(idleHeadSnapshot(), { jobId: jobId(1) }), { jobId: jobId(3) }), {
        ownJobIds: [jobId(1)]
      }),
      fails: ["no_other_drivers"],
      reasonPrefix: "a live driver (job 03000000,"
    },
    {
      name: "names several, leaving out what is unknown, and shortens a long entrypoint",
      input: withSnapshot(
        withJob(withJob(idleHeadSnapshot(), { jobId: jobId(4), driverIp: "", entrypoint: "" }), {
          jobId: jobId(5),
          entrypoint: "x".repeat(81)
        })
      ),
      fails: ["no_other_drivers"],
      reason: `2 live drivers are connected: (job 04000000, pid 1234), (job 05000000, pid 1234, ip 10.0.0.5, entrypoint ${"x".repeat(80)}…)`
    },
    {
      name: "keeps an entrypoint of 80 characters whole",
      input: withSnapshot(withJob(idleHeadSnapshot(), { entrypoint: "y".repeat(80) })),
      fails: ["no_other_drivers"],
      reason: `a live driver (job 02000000, pid 1234, ip 10.0.0.5, entrypoint ${"y".repeat(80)}) is connected`
    },
    {
      name: "cannot tell without the cluster",
      input: guardInput({ snapshot: Either.left("UNAVAILABLE") }),
      fails: [
        "one_local_node",
        "only_our_daemons",
        "no_resources_held",
        "no_live_actors",
        "no_other_drivers",
        "cluster_inspectable"
      ],
      reason: `${UNINSPECTABLE} (needed to check the drivers)`
    }
  ],
  no_lease_submitted: [
    { name: "holds before a lease is submitted", input: guardInput({ leaseSubmitted: false }), fails: [] },
    {
      name: "refuses once a lease actor was submitted",
      input: guardInput({ leaseSubmitted: true }),
      fails: ["no_lease_submitted"],
      reason: "this process already submitted a lease actor (actor creation is asynchronous)"
    }
  ],
  cluster_inspectable: [
    { name: "holds when both were read", input: guardInput(), fails: [] },
    {
      name: "refuses an unreadable GCS and says why",
      input: guardInput({ snapshot: Either.left("UNAVAILABLE: connect ECONNREFUSED") }),
      fails: [
        "one_local_node",
        "only_our_daemons",
        "no_resources_held",
        "no_live_actors",
        "no_other_drivers",
        "cluster_inspectable"
      ],
      reason: "cluster could not be fully inspected: GCS read failed: UNAVAILABLE: connect ECONNREFUSED"
    },
    {
      name: "refuses an unreadable /proc and says why",
      input: guardInput({ daemons: Either.left("EACCES /proc") }),
      fails: ["one_local_node", "only_our_daemons", "cluster_inspectable"],
      reason: "cluster could not be fully inspected: /proc read failed: EACCES /proc"
    },
    {
      name: "refuses a /proc that hides other users' processes (hidepid), naming why",
      input: guardInput({ procHidden: "/proc is mounted with hidepid=invisible" }),
      fails: ["only_our_daemons", "cluster_inspectable"],
      reason:
        "cluster could not be fully inspected: /proc may hide other users' processes: /proc is mounted with hidepid=invisible"
    },
    {
      name: "names both",
      input: guardInput({ snapshot: Either.left("A"), daemons: Either.left("B") }),
      fails: [
        "one_local_node",
        "only_our_daemons",
        "no_resources_held",
        "no_live_actors",
        "no_other_drivers",
        "cluster_inspectable"
      ],
      reason: "cluster could not be fully inspected: GCS read failed: A, /proc read failed: B"
    }
  ]
}

describe("evaluateGuards", () => {
  it("evaluates the nine guards, in their stable order", () => {
    assert.deepStrictEqual([...GUARD_IDS], EXPECTED_IDS)
    assert.deepStrictEqual(
      evaluateGuards(guardInput()).map((r) => r.id),
      EXPECTED_IDS
    )
  })

  it("every guard holds on an idle lone head reached through auto", () => {
    const results = evaluateGuards(guardInput())
    assert.deepStrictEqual(
      results,
      EXPECTED_IDS.map((id) => ({ id, ok: true, reason: null }))
    )
    assert.isTrue(repairAllowed(results))
  })

  for (const id of GUARD_IDS) {
    describe(id, () => {
      for (const c of tables[id]) {
        it(c.name, () => {
          const results = evaluateGuards(c.input)
          assert.deepStrictEqual(failedIds(results), c.fails)
          const result = resultOf(results, id)
          const failing = c.fails.includes(id)
          assert.strictEqual(result.ok, !failing)
          if (!failing) {
            assert.isNull(result.reason)
            return
          }
          assert.isString(result.reason)
          if (c.reason !== undefined) assert.strictEqual(result.reason, c.reason)
          if (c.reasonPrefix !== undefined)
            assert.isTrue(result.reason!.startsWith(c.reasonPrefix), result.reason!)
          assert.notInclude(result.reason!, ";", "reasons are joined with '; ' into one message")
          assert.isFalse(repairAllowed(results))
        })
      }
    })
  }

  it("has a refusing case for every guard", () => {
    for (const id of GUARD_IDS) {
      assert.isTrue(
        tables[id].some((c) => c.fails.includes(id) && c.reason !== undefined),
        `no refusing case for ${id}`
      )
    }
  })

  it("evaluates every guard even when all of them fail", () => {
    const results = evaluateGuards({
      ...guardInput({
        address: { _tag: "Local", raw: "local" },
        nodes: 3,
        snapshot: Either.left("down"),
        daemons: Either.left("no /proc"),
        leaseSubmitted: true
      })
    })
    assert.deepStrictEqual(failedIds(results), EXPECTED_IDS)
    assert.strictEqual(refusalReasons(results).length, 9)
  })
})

describe("repairAllowed", () => {
  // Evaluated inside the tests, never while collecting them: a mutant that throws there would
  // take the whole file down unnoticed by the mutation runner.
  const allOk = () => evaluateGuards(guardInput())

  it("allows when all nine hold", () => {
    assert.isTrue(repairAllowed(allOk()))
  })

  it("refuses when any one fails", () => {
    for (const id of GUARD_IDS) {
      const one = allOk().map((r) => (r.id === id ? { id, ok: false, reason: "x" } : r))
      assert.isFalse(repairAllowed(one), id)
    }
  })

  it("refuses when a guard is missing from the results", () => {
    assert.isFalse(repairAllowed([]))
    for (const id of GUARD_IDS) {
      assert.isFalse(repairAllowed(allOk().filter((r) => r.id !== id)), id)
    }
  })
})

describe("refusalReasons", () => {
  it("is empty when every guard holds", () => {
    assert.deepStrictEqual(refusalReasons(evaluateGuards(guardInput())), [])
  })

  it("lists the failed guards' reasons in guard order", () => {
    const results = evaluateGuards(
      guardInput({
        address: { _tag: "HostPort", raw: "10.0.0.5:6379", host: "10.0.0.5", port: 6379 },
        leaseSubmitted: true,
        snapshot: Either.right(withJob(idleHeadSnapshot(), { jobId: "02000000", driverPid: 1234 }))
      })
    )
    assert.deepStrictEqual(refusalReasons(results), [
      "RAY_ADDRESS=10.0.0.5:6379 is an explicit address chosen by an operator",
      "a live driver (job 02000000, pid 1234, ip 10.0.0.5, entrypoint python bench.py) is connected",
      "this process already submitted a lease actor (actor creation is asynchronous)"
    ])
  })

  it("names a failed guard that gave no reason", () => {
    assert.deepStrictEqual(
      refusalReasons([
        { id: "no_live_actors", ok: false, reason: null },
        { id: "single_node_run", ok: true, reason: null }
      ]),
      ["guard no_live_actors failed"]
    )
  })

  it("are appended to the infeasibility error as the message promises", () => {
    const results = evaluateGuards(guardInput({ nodes: 2, leaseSubmitted: true }))
    const error = new RayClusterInfeasible({
      reason: "no_serving_slot",
      detail: "existing Ray head has no serving_slot resource; restart it",
      refusals: [],
      restartFailure: undefined
    }).withRefusals(refusalReasons(results))
    assert.strictEqual(
      error.message,
      "ray_cluster_infeasible: existing Ray head has no serving_slot resource; restart it" +
        "; not restarting it automatically: this is a multi-node run (2 nodes requested by HYPERLOOM_NODES or --nodes): " +
        "restarting the head would drop the other nodes; this process already submitted a lease actor (actor creation is asynchronous)"
    )
  })
})

// ---------------------------------------------------------------------------------------------
// Properties

/** One way of making the cluster or the run busier (never less busy). */
type Busier =
  | { readonly _tag: "explicit"; readonly address: GuardInput["address"] }
  | { readonly _tag: "moreNodes"; readonly add: number }
  | { readonly _tag: "nodeRecord"; readonly seed: number; readonly dead: boolean; readonly reported: boolean }
  | { readonly _tag: "actor"; readonly seed: number; readonly state: ActorState; readonly detached: boolean }
  | { readonly _tag: "job"; readonly seed: number; readonly dead: boolean }
  | { readonly _tag: "hold"; readonly resource: string; readonly amount: number }
  | { readonly _tag: "foreignGcs"; readonly pid: number; readonly port: number | undefined }
  | { readonly _tag: "foreignRaylet"; readonly seed: number; readonly port: number }
  | { readonly _tag: "leaseSubmitted" }
  | { readonly _tag: "gcsDown" }
  | { readonly _tag: "procDown" }

// Added node records and foreign raylets draw their ids from disjoint ranges: a busier cluster
// gains new nodes, it does not turn a foreign raylet into one of its own.
const NODE_SEEDS = 0x1000
const RAYLET_SEEDS = 0x2000

/**
 * A node id no record of the snapshot has yet, starting from the change's seed. A busier cluster
 * gains a *new* node: re-using an id (seen: two `nodeRecord` changes with seed 12, the second one
 * reported) would give an unreported alive node a resource report and make `no_resources_held`
 * pass, which is not "busier" (fast-check seed -1583324890, path "51828:6:6:11:11:11").
 */
const freshNodeId = (s: ClusterSnapshot, seed: number): string => {
  for (let n = NODE_SEEDS + seed; ; n++) {
    const id = nodeId(n)
    if (!s.nodes.some((node) => node.nodeId === id) && !s.resources.some((r) => r.nodeId === id)) return id
  }
}

const busier: fc.Arbitrary<Busier> = fc.oneof(
  fc
    .constantFrom<GuardInput["address"]>(
      { _tag: "Local", raw: "local" },
      { _tag: "HostPort", raw: "10.0.0.9:6379", host: "10.0.0.9", port: 6379 },
      { _tag: "RayClient", raw: "ray://10.0.0.9:10001" }
    )
    .map((address) => ({ _tag: "explicit" as const, address })),
  fc.integer({ min: 1, max: 4 }).map((add) => ({ _tag: "moreNodes" as const, add })),
  fc
    .record({ seed: fc.integer({ min: 1, max: 50 }), dead: fc.boolean(), reported: fc.boolean() })
    .map((r) => ({ _tag: "nodeRecord" as const, ...r })),
  fc
    .record({
      seed: fc.integer({ min: 1, max: 50 }),
      state: fc.constantFrom<ActorState>(
        "DEPENDENCIES_UNREADY",
        "PENDING_CREATION",
        "ALIVE",
        "RESTARTING",
        "DEAD"
      ),
      detached: fc.boolean()
    })
    .map((r) => ({ _tag: "actor" as const, ...r })),
  fc
    .record({ seed: fc.integer({ min: 1, max: 20 }), dead: fc.boolean() })
    .map((r) => ({ _tag: "job" as const, ...r })),
  fc
    .record({
      resource: fc.constantFrom("CPU", "GPU", "serving_slot", "memory"),
      amount: fc.constantFrom(0.0001, 0.5, 1, 2)
    })
    .map((r) => ({ _tag: "hold" as const, ...r })),
  fc
    .record({
      pid: fc.integer({ min: 2, max: 99 }),
      port: fc.option(fc.integer({ min: 6380, max: 6400 }), { nil: undefined })
    })
    .map((r) => ({ _tag: "foreignGcs" as const, ...r })),
  fc
    .record({ seed: fc.integer({ min: 1, max: 50 }), port: fc.integer({ min: 6379, max: 6400 }) })
    .map((r) => ({ _tag: "foreignRaylet" as const, ...r })),
  fc.constant({ _tag: "leaseSubmitted" as const }),
  fc.constant({ _tag: "gcsDown" as const }),
  fc.constant({ _tag: "procDown" as const })
)

const makeBusier = (input: GuardInput, change: Busier): GuardInput => {
  switch (change._tag) {
    case "explicit":
      return { ...input, address: change.address }
    case "moreNodes":
      return { ...input, nodes: input.nodes + change.add }
    case "nodeRecord":
      return mapSnapshot(input, (s) => {
        const id = freshNodeId(s, change.seed)
        return {
          ...withNode(s, { nodeId: id, isHead: false, state: change.dead ? "DEAD" : "ALIVE" }),
          resources: change.reported ? [...s.resources, nodeResources({ nodeId: id })] : s.resources
        }
      })
    case "actor":
      return mapSnapshot(input, (s) =>
        withActor(s, { actorId: actorId(change.seed), state: change.state, isDetached: change.detached })
      )
    case "job":
      return mapSnapshot(input, (s) => withJob(s, { jobId: jobId(change.seed), isDead: change.dead }))
    case "hold":
      return mapSnapshot(input, (s) => withHeld(s, { [change.resource]: change.amount }))
    case "foreignGcs":
      return {
        ...input,
        daemons: Either.map(input.daemons, (ds) => [...ds, gcsServer({ pid: change.pid, port: change.port })])
      }
    case "foreignRaylet":
      return {
        ...input,
        daemons: Either.map(input.daemons, (ds) => [
          ...ds,
          raylet({
            pid: 500 + change.seed,
            nodeId: nodeId(RAYLET_SEEDS + change.seed),
            gcsAddress: `10.0.0.5:${change.port}`
          })
        ])
      }
    case "leaseSubmitted":
      return { ...input, leaseSubmitted: true }
    case "gcsDown":
      return { ...input, snapshot: Either.left("GCS down") }
    case "procDown":
      return { ...input, daemons: Either.left("/proc gone") }
  }
}

/** A starting point: the idle head, possibly with our own live driver, then some busier changes. */
const baseInput: fc.Arbitrary<GuardInput> = fc
  .record({ ownDriver: fc.boolean(), changes: fc.array(busier, { maxLength: 4 }) })
  .map(({ ownDriver, changes }) => {
    const start = ownDriver
      ? withSnapshot(withJob(idleHeadSnapshot(), { jobId: jobId(1) }), {
          ownJobIds: [jobId(1).toUpperCase()]
        })
      : guardInput()
    return changes.reduce(makeBusier, start)
  })

describe("guard properties", () => {
  it("the generator adds a new node for each nodeRecord change, even with the same seed", () => {
    const twice = { _tag: "nodeRecord", seed: 12, dead: false, reported: false } as const
    const input = [twice, { ...twice, reported: true }].reduce(makeBusier, guardInput())
    const ids = snap(input).nodes.map((n) => n.nodeId)
    assert.strictEqual(new Set(ids).size, 3)
    // The first added node stays unreported: its resources are unknown, so the guard still fails.
    assert.isFalse(resultOf(evaluateGuards(input), "no_resources_held").ok)
  })

  it.prop(
    "monotone: making the cluster or the run busier never turns a failing guard into a passing one",
    { base: baseInput, more: fc.array(busier, { minLength: 1, maxLength: 4 }) },
    ({ base, more }) => {
      const before = evaluateGuards(base)
      const after = evaluateGuards(more.reduce(makeBusier, base))
      for (const id of GUARD_IDS) {
        if (!resultOf(before, id).ok)
          assert.isFalse(resultOf(after, id).ok, `${id} passed after ${JSON.stringify(more)}`)
      }
      if (!repairAllowed(before)) assert.isFalse(repairAllowed(after))
    },
    { fastCheck: { numRuns: 300 } }
  )

  it.prop("each single busier change is refused by at least one guard", { change: busier }, ({ change }) => {
    // A dead actor record or a dead job is history, not load; every other change must be refused.
    const results = evaluateGuards(makeBusier(guardInput(), change))
    const harmless =
      (change._tag === "actor" && change.state === "DEAD") || (change._tag === "job" && change.dead)
    assert.strictEqual(repairAllowed(results), harmless, JSON.stringify(change))
  })

  it.prop(
    "reasons: a failed guard has a one-line reason without '; ', a passing one none",
    { input: baseInput },
    ({ input }) => {
      const results = evaluateGuards(input)
      assert.deepStrictEqual(
        results.map((r) => r.id),
        EXPECTED_IDS
      )
      for (const r of results) {
        assert.strictEqual(r.ok, r.reason === null)
        if (r.reason !== null) {
          assert.isAbove(r.reason.length, 0)
          assert.notInclude(r.reason, ";")
          assert.notInclude(r.reason, "\n")
        }
      }
      assert.strictEqual(repairAllowed(results), refusalReasons(results).length === 0)
      assert.strictEqual(refusalReasons(results).length, failedIds(results).length)
    }
  )
})
