/**
 * Several combinations at once (`--parallel`, docs/design.md#sweeps-at-cluster-scale), as data:
 * each combination in flight writes only its own record (and, when it stops the sweep, the sweep's
 * status), so the document a combination saves is merged into the latest one instead of replacing
 * it; and what the status line counts. Pure.
 */
import { nodeName } from "./Nodes.js"
import type { CombinationRecord, SweepDoc } from "./Schema.js"

const TOP: ReadonlyArray<"status" | "stop_reason" | "stop_error" | "hardware_class" | "left_alone"> = [
  "status",
  "stop_reason",
  "stop_error",
  "hardware_class",
  "left_alone"
]

/**
 * `next`, made by one combination (`index`) from `before` (the document it last saw), laid over
 * `latest` (what every other combination has saved since): its own combination from `next`, the
 * others from `latest`; a sweep-wide field from `next` only when the combination changed it.
 */
export const mergeOwn = (latest: SweepDoc, before: SweepDoc, next: SweepDoc, index: number): SweepDoc => {
  const own = next.combinations.find((c) => c.index === index)
  const merged: Record<string, unknown> = {
    ...latest,
    combinations: latest.combinations.map((c) => (c.index === index && own !== undefined ? own : c))
  }
  for (const k of TOP) if (next[k] !== before[k]) merged[k] = next[k]
  return merged as unknown as SweepDoc
}

/** The node(s) that ran a combination (its engine starts', not those left alone), in order, once each. */
export const nodesOf = (c: CombinationRecord): ReadonlyArray<string> => [
  ...new Set(
    c.engine_starts.flatMap((s) =>
      s.node === undefined || s.outcome === "left_alone" ? [] : [nodeName(s.node)]
    )
  )
]

/** Whether any combination of the sweep recorded its node (older sweeps did not). */
export const hasNodes = (doc: SweepDoc): boolean =>
  doc.combinations.some((c) => c.engine_starts.some((s) => s.node !== undefined))

/** Runs planned and done: every point's repeats (a search's points as far as they are known). */
export const runCounts = (doc: SweepDoc) => {
  const repeats = doc.experiment.repeats
  let planned = 0
  let done = 0
  for (const c of doc.combinations) {
    for (const p of c.points) {
      const measured = p.runs.filter((r) => r.ended_at !== null && r.try === 1).length
      if (p.status === "not_run") {
        planned += measured
        done += measured
        continue
      }
      planned += repeats
      done += p.status === "pending" || p.status === "running" ? Math.min(measured, repeats) : repeats
    }
  }
  return { planned, done }
}
