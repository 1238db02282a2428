import { Context, type Effect } from "effect"
import type { ClusterUnreachable, InvalidAddress, MultipleClusters, NoClusterFound } from "../domain/Errors.js"
import type { ClusterSnapshot } from "../domain/Snapshot.js"

/** Which GCS to read and how it was chosen (SPEC §2). */
export interface ResolvedCluster {
  /** `host:port` of the GCS. */
  readonly gcsAddress: string
  readonly host: string
  readonly port: number
  /** RAY_ADDRESS named it; hyperloom never repairs such a cluster. */
  readonly explicit: boolean
  readonly source: "RAY_ADDRESS" | "current_cluster_file" | "raylet_cmdline"
}

export interface ClusterInspectorShape {
  /** Resolves the cluster like Ray does: RAY_ADDRESS, else the current-cluster file, else the single local GCS. */
  readonly resolve: Effect.Effect<ResolvedCluster, InvalidAddress | NoClusterFound | MultipleClusters>
  /** Reads cluster id, nodes, actors, jobs, per-node resources and queued demand from the GCS. */
  readonly snapshot: (gcsAddress: string) => Effect.Effect<ClusterSnapshot, ClusterUnreachable>
}

export class ClusterInspector extends Context.Tag("hyperloom/services/ClusterInspector")<
  ClusterInspector,
  ClusterInspectorShape
>() {}
