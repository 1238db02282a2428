import type { Either } from "effect"
import type { RayAddress } from "./Address.js"
import type { ClusterSnapshot, RayDaemon } from "./Snapshot.js"

/** The repair guards' stable ids (SPEC §4), in report order. */
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
}
