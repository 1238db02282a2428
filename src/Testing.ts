/**
 * hyperloom without Ray, for the tests of programs built on it: every service as its test layer
 * (each module's `layerTest`), composed once like Live.ts composes the live ones. By default the
 * cluster is one idle local head with `serving_slot` and 1 GPU that answers its probe, every
 * lease starts at once and its command exits 0; pass options to script anything else.
 *
 *   program.pipe(Effect.provide(Testing.layer({ lease: () => ({ exitCode: 3 }) })))
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Layer } from "effect"
import type { ClusterSnapshot, ProcessInfo, ResourceMap } from "./domain/Snapshot.js"
import * as AttemptRunner from "./programs/AttemptRunner.js"
import * as AttemptFiles from "./services/AttemptFiles.js"
import * as ClusterInspector from "./services/ClusterInspector.js"
import * as Enablement from "./services/Enablement.js"
import * as GcsClient from "./services/GcsClient.js"
import * as GpuScan from "./services/GpuScan.js"
import * as GroupBridge from "./services/GroupBridge.js"
import * as HostQueue from "./services/HostQueue.js"
import * as LeaseBridge from "./services/LeaseBridge.js"
import * as ProcFs from "./services/ProcFs.js"
import * as RayCli from "./services/RayCli.js"
import * as Settings from "./services/Settings.js"
import * as StateStore from "./services/StateStore.js"
import * as WorkGate from "./services/WorkGate.js"

const HEAD_NODE_ID = "ab12cd34".repeat(7)

/** One alive, idle head node declaring `resources` (all available), at the test cluster's address. */
export const idleHead = (
  resources: ResourceMap = { CPU: 8, GPU: 1, serving_slot: 1 },
  gcsAddress: string = ClusterInspector.DEFAULT_TEST_CLUSTER.gcsAddress
): ClusterSnapshot => {
  const host = gcsAddress.split(":")[0]!
  const total = { ...resources, [`node:${host}`]: 1 }
  return {
    gcsAddress,
    clusterId: "c1c1c1c1".repeat(7),
    nodes: [
      {
        nodeId: HEAD_NODE_ID,
        address: host,
        hostname: "test-host",
        nodeName: host,
        state: "ALIVE",
        isHead: true,
        resourcesTotal: total,
        startTimeMs: 0,
        endTimeMs: 0
      }
    ],
    actors: [],
    jobs: [],
    resources: [{ nodeId: HEAD_NODE_ID, total, available: total }],
    demands: [],
    placementGroups: []
  }
}

/**
 * The Ray daemons /proc shows for a snapshot's alive nodes, as if they ran on this host: each
 * head's `gcs_server` (with its GCS port) and every node's `raylet` (its node id, the GCS address,
 * `--head` on the head). The default `processes` of `layer`, so that the repair guards that read
 * /proc (`one_local_node`, `only_our_daemons`) hold on the default head. Pids from `firstPid` on.
 */
export const headDaemons = (snapshot: ClusterSnapshot = idleHead(), firstPid = 100): Array<ProcessInfo> => {
  const port = snapshot.gcsAddress.split(":").at(-1)!
  const alive = snapshot.nodes.filter((n) => n.state === "ALIVE")
  let pid = firstPid
  const processes: Array<ProcessInfo> = []
  if (alive.some((n) => n.isHead)) {
    processes.push({
      pid: pid++,
      ppid: 1,
      comm: "gcs_server",
      argv: ["/ray/gcs_server", `--gcs_server_port=${port}`],
      state: "S"
    })
  }
  for (const n of alive) {
    processes.push({
      pid: pid++,
      ppid: 1,
      comm: "raylet",
      argv: [
        "/ray/raylet",
        `--node_id=${n.nodeId}`,
        `--gcs-address=${snapshot.gcsAddress}`,
        ...(n.isHead ? ["--head"] : [])
      ],
      state: "S"
    })
  }
  return processes
}

export interface Options {
  /** What the GCS shows (default: `idleHead()`); `snapshots` for several addresses or a function. */
  readonly snapshot?: ClusterSnapshot
  readonly inspector?: ClusterInspector.TestOptions
  /** What each lease does (default: starts at once, exits 0). */
  readonly lease?: (spec: LeaseBridge.LeaseSpec, n: number) => LeaseBridge.FakeLease
  /** What each group does (multi-node runs). */
  readonly group?: (spec: GroupBridge.GroupSpec, n: number) => GroupBridge.FakeGroup
  /** What `ray status` / `ray start` / `ray stop` answer (default: the probe answers). */
  readonly rayCli?: RayCli.TestScript
  /** Receives every `ray` call. */
  readonly rayCalls?: Array<RayCli.RayCliCall>
  /** The host's processes (default: `headDaemons(snapshot)`, the test cluster's own daemons). */
  readonly processes?: ReadonlyArray<ProcessInfo>
  readonly settings?: Partial<Settings.SettingsShape>
  /** Seeds state files by session directory. */
  readonly stateFiles?: Readonly<Record<string, string>>
  /** What `ray doctor`'s GPU scan finds (default: a host without GPU device files). */
  readonly gpuScan?: Partial<GpuScan.GpuScanReport> | undefined
}

/**
 * Every hyperloom service as a test layer, plus the fakes' logs (LeaseBridge.FakeLeaseBridgeLog,
 * GroupBridge.FakeGroupBridgeLog). Build it per test: the fakes hold state. A baseline's attempts
 * run the lease program over these fakes (AttemptRunner.layer), so `lease`, `group` and the cluster
 * script them; to script each attempt whole instead (exit code, output, throughput, a lease error),
 * provide `AttemptRunner.layerTest(script)` inside this layer.
 */
export const layer = (options: Options = {}) => {
  const settings = Settings.layerTest(options.settings)
  const inspector: ClusterInspector.TestOptions = options.inspector ?? {
    snapshots: (address) => {
      const snapshot = options.snapshot ?? idleHead()
      return address === snapshot.gcsAddress ? snapshot : undefined
    }
  }
  const services = Layer.mergeAll(
    RayCli.layerTest(options.rayCli, options.rayCalls),
    ProcFs.layerTest(options.processes ?? headDaemons(options.snapshot ?? idleHead())),
    ClusterInspector.layerTest(inspector),
    // the same cluster, for a program that reads the GCS directly
    GcsClient.layerTest(inspector),
    WorkGate.layerTest.pipe(Layer.provide(NodeFileSystem.layer)),
    LeaseBridge.layerTest(options.lease),
    GroupBridge.layerTest(options.group),
    HostQueue.layerTest(),
    GpuScan.layerTest(options.gpuScan),
    StateStore.layerTest(options.stateFiles),
    AttemptFiles.layerTest(),
    Enablement.layerTest(),
    settings
  )
  return AttemptRunner.layer.pipe(Layer.provideMerge(services))
}
