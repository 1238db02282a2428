import { headRestartResources } from "./Feasibility.js"
import type { ClusterSnapshot, ResourceMap } from "./Snapshot.js"

export { SERVING_SLOT as SLOT } from "./Feasibility.js"

/** The steps of a repair a test can pause at (`HYPERLOOM_TEST_REPAIR_PAUSE`, docs/reliability.md). */
export const REPAIR_STEPS = ["before_stop", "before_start", "before_slot"] as const
export type RepairStep = (typeof REPAIR_STEPS)[number]

/** How to start the replacement head so nothing the old head offered is lost. */
export interface RestartPlan {
  readonly port: number
  readonly numCpus: number | undefined
  /**
   * The GPUs to declare: the old head's count, 0 when it had no GPU key (`--num-gpus=0` gives no
   * key at all, and a head started without `--num-gpus` on a GPU host would have one): never left to
   * Ray's detection, which would hand every GPU of the host to a head that declared none.
   */
  readonly numGpus: number
  /** The old head's custom resources plus `serving_slot: 1`. */
  readonly resources: ResourceMap
}

/**
 * The restart plan for a lone head that lacks the slot (docs/design.md#the-repair-itself): same
 * port, the old head's CPU count, its declared GPUs (none declared: 0, never Ray's detection;
 * `numGpusOverride` wins) and its custom resources, plus the slot (`headRestartResources`, which
 * the manual fix prints too).
 */
export const restartPlan = (
  snapshot: ClusterSnapshot,
  port: number,
  numGpusOverride: number | undefined
): RestartPlan => {
  const kept = headRestartResources(snapshot)
  return { port, numCpus: kept.numCpus, numGpus: numGpusOverride ?? kept.numGpus, resources: kept.resources }
}
