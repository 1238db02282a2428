/**
 * A combination's engine life (docs/design.md#combinations-and-points), as data: what one engine
 * start came to, and what that makes of the document and of the combination (start again, go on
 * to the next one, requeue it, stop the sweep). Pure: the program (programs/Sweep/Combination.ts)
 * starts the engine and runs its points; this file decides what each end means.
 *
 * - before ready, `kv_cache_oom` / `fast_exit_arg_error` make the combination `infeasible` (no
 *   retry: they are deterministic); a readiness timeout fails it at once (it would most likely hang
 *   as long again); any other class is retried once, then `failed`;
 * - granted a node of another hardware class: the start is `left_alone` (not charged) and the
 *   combination starts again elsewhere;
 * - `ray_cluster_infeasible` stops the whole sweep; any other lease failure stops the run (the
 *   sweep stays resumable);
 * - a fault of its node (lost, or missing a command): its run in flight interrupted, back to the
 *   queue, or failed once no node is left (Sweep/Requeue.ts);
 * - ready: `done`, or `engine_died` when the engine died during a point (the rest `not_run`).
 */
import type { AttemptResult } from "../Failure.js"
import type { RequeueVerdict } from "./Requeue.js"
import { interruptCombination } from "./Requeue.js"
import type { SweepDoc, SweepStopReason } from "./Schema.js"
import { setCombination, setSweepStatus, skipRemaining, updateEngine } from "./Transitions.js"

/** Failures before ready that the same start would meet again: never retried. */
export const DETERMINISTIC: ReadonlySet<string> = new Set(["kv_cache_oom", "fast_exit_arg_error"])

/** What one engine start of a combination came to. */
export type EngineEnd =
  /** Its node is of another hardware class: left alone, started again elsewhere. */
  | { readonly _tag: "left_alone" }
  /** Ray can never place its lease: the whole sweep stops. */
  | { readonly _tag: "infeasible"; readonly error: string }
  /** It failed before ready; `note` is the engine's note (Sweep/EngineNote.ts). */
  | { readonly _tag: "not_ready"; readonly result: AttemptResult; readonly note: string }
  /**
   * It was ready but `--check` exited non-zero: nothing measured on it, the combination
   * `check_failed` (docs/trust.md#is-the-number-valid); `finding` quotes the check's last line.
   */
  | { readonly _tag: "check_failed"; readonly finding: string }
  /** It served its points (`engine_died`: it died during one). */
  | { readonly _tag: "ran"; readonly end: "done" | "engine_died" }
  /**
   * A fault of its node (Sweep/Requeue.ts), `why` in words, and what the requeue decided;
   * `missing`: something it needs is missing there (the node is avoided from then on).
   */
  | {
      readonly _tag: "setback"
      readonly why: string
      readonly verdict: RequeueVerdict
      readonly missing: boolean
    }

/** What comes next for the combination. */
export type EngineNext = "retry" | "next" | "requeue" | "stop"

export interface AfterEngine {
  readonly doc: SweepDoc
  readonly next: EngineNext
  /** One line for the log, when the end is worth one (`warning` for a node's fault). */
  readonly log?: { readonly level: "info" | "warning"; readonly line: string } | undefined
}

/**
 * The document after the combination's latest engine start ended (`ended`: when), and what comes
 * next; `failedStarts`: its starts that failed before this one.
 */
export const afterEngine = (
  doc: SweepDoc,
  index: number,
  end: EngineEnd,
  at: { readonly ended: string; readonly failedStarts: number }
): AfterEngine => {
  const { ended, failedStarts } = at
  switch (end._tag) {
    case "left_alone":
      return { doc: updateEngine(doc, index, { ended_at: ended, outcome: "left_alone" }), next: "retry" }
    case "infeasible": {
      const d = updateEngine(doc, index, {
        ended_at: ended,
        outcome: "failed",
        class: "ray_cluster_infeasible",
        error: end.error
      })
      return { doc: setSweepStatus(d, "stopped", "ray_cluster_infeasible", end.error, ended), next: "stop" }
    }
    case "not_ready": {
      const r = end.result
      const note = end.note
      const d = updateEngine(doc, index, {
        ended_at: ended,
        outcome: "failed",
        class: r.errorClass,
        error: note
      })
      const head = note.split("\n")[0] ?? ""
      if (r.errorClass !== null && DETERMINISTIC.has(r.errorClass))
        return {
          doc: skipRemaining(
            setCombination(d, index, { status: "infeasible", class: r.errorClass, error: note }),
            index
          ),
          next: "next",
          log: {
            level: "info",
            line: `sweep: combination #${index}: infeasible (${r.errorClass}, not retried): ${head}`
          }
        }
      if (failedStarts === 0 && r.errorClass !== "timeout")
        return {
          doc: d,
          next: "retry",
          log: {
            level: "info",
            line: `sweep: combination #${index}: the engine failed before ready (${r.errorClass}); retrying once: ${head}`
          }
        }
      return {
        doc: skipRemaining(
          setCombination(d, index, { status: "failed", class: r.errorClass, error: note }),
          index
        ),
        next: "next",
        log: {
          level: "info",
          line: `sweep: combination #${index}: the engine failed before ready${failedStarts === 0 ? " (a readiness timeout: not retried)" : " again"}: ${head}; going on`
        }
      }
    }
    case "check_failed": {
      const d = updateEngine(doc, index, { ended_at: ended })
      return {
        // deterministic (the engine answers wrong): not retried, out of the best
        doc: skipRemaining(
          setCombination(d, index, { status: "check_failed", class: null, error: end.finding }),
          index
        ),
        next: "next",
        log: { level: "info", line: `sweep: combination #${index}: ${end.finding}; nothing measured on it` }
      }
    }
    case "ran": {
      const d = updateEngine(doc, index, { ended_at: ended })
      return end.end === "engine_died"
        ? {
            doc: skipRemaining(setCombination(d, index, { status: "engine_died" }), index),
            next: "next",
            log: {
              level: "info",
              line: `sweep: combination #${index}: the engine died during a point; its remaining points are not run`
            }
          }
        : { doc: setCombination(d, index, { status: "done" }), next: "next" }
    }
    case "setback": {
      const d = interruptCombination(doc, index, ended, end.why)
      if (end.verdict._tag === "give_up")
        return {
          doc: skipRemaining(
            setCombination(d, index, {
              status: "failed",
              class: null,
              error: `${end.why}; ${end.verdict.error}`
            }),
            index
          ),
          next: "next",
          log: { level: "warning", line: `sweep: combination #${index}: ${end.why}; ${end.verdict.error}` }
        }
      return {
        doc: d,
        next: "requeue",
        log: {
          level: "warning",
          line: `sweep: combination #${index}: ${end.why}; its run in flight is interrupted, and the combination goes back to the queue to run again from its first point not done${end.missing ? " (avoiding that node)" : ""}`
        }
      }
    }
  }
}

/**
 * The combination's lease failed (not a fault of its engine or its node): its engine start
 * `interrupted` and the sweep `stopped`, resumable once that is fixed.
 */
export const afterLeaseFailure = (
  doc: SweepDoc,
  index: number,
  now: string,
  error: { readonly waitExpired: boolean; readonly message: string }
): SweepDoc => {
  const reason: SweepStopReason = error.waitExpired ? "lease_wait_expired" : "lease_failed"
  return setSweepStatus(
    updateEngine(doc, index, { ended_at: now, outcome: "interrupted", error: error.message }),
    "stopped",
    reason,
    error.message,
    now
  )
}
