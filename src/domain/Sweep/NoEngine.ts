/**
 * Whether a sweep ever had an engine ready, a leaf of its own (type imports only) so that
 * cli/Exit.ts, which every command reaches, decides sweep_no_engine_ready without loading the
 * sweep's domain. Pure.
 */
import type { SweepDoc } from "./Schema.js"

/**
 * No engine of the sweep ever became ready (every start failed or was cut short before): nothing
 * was measured, so no SLO was ever judged. `sweep run` exits sweep_no_engine_ready (17), not
 * sweep_no_feasible_point (14), and the statement says so (docs/design.md#time-to-the-answer).
 */
export const noEngineReady = (doc: SweepDoc): boolean => {
  const started = doc.combinations.flatMap((c) => c.engine_starts)
  return started.length > 0 && started.every((s) => s.outcome !== "ready")
}
