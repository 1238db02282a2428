/**
 * Which combinations run, and when (docs/design.md#sweeps-at-cluster-scale,
 * docs/design.md#time-to-the-answer): the grid and the adaptive search behind one signature
 * (`Schedule`), and the one driver that runs what a schedule proposes, up to `--parallel` at once,
 * each under its own lease (where it runs is Ray's to decide, steered only away from the nodes the
 * sweep leaves alone). A combination that stops the sweep stops the others (their runs in flight
 * become interrupted, their points run again on a resume); so does a lease failure, which fails
 * the run.
 */
import { Effect, Exit, Fiber, Queue } from "effect"
import {
  adaptiveView,
  comboRef,
  isFinalCombination,
  monotoneSkips,
  notRunReason,
  proposeAdaptive,
  recoverInterrupted,
  type SweepDoc,
  setSweepStatus,
  skipCombination
} from "../../domain/Sweep.js"
import { runCombination } from "./Combination.js"
import { nowIso } from "./Points.js"
import type { SweepState } from "./State.js"

/** What a schedule proposes, asked with `free` places (at least 1) and the combinations running. */
export type Proposal =
  /** Start these now (at most `free` of them, none running). */
  | { readonly _tag: "run"; readonly indices: ReadonlyArray<number> }
  /** Nothing to start until one running ends. */
  | { readonly _tag: "wait" }
  /** Nothing is left to start: the sweep is done once the running ones end. */
  | { readonly _tag: "done" }

/**
 * A schedule: the grid (every combination, in order) or the adaptive search. The driver asks
 * `next` whenever a place is free and after each combination ends (`ended`, with how it ended:
 * `next`, or `requeue` for a fault of its node).
 */
export interface Schedule {
  /** How many combinations it may have running at once (the driver's width). */
  readonly width: number
  /**
   * Whether others may have been running when one stopped the sweep: their runs in flight are
   * then marked interrupted.
   */
  readonly recoverOnStop: boolean
  readonly next: (free: number, running: ReadonlySet<number>) => Effect.Effect<Proposal, SweepFailure, never>
  readonly ended: (index: number, end: "next" | "requeue") => Effect.Effect<void>
}

type SweepFailure = Effect.Effect.Error<ReturnType<typeof runCombination>>

/**
 * The grid: the combinations not finished, in the sweep's order; a combination sent back to the
 * queue (domain/Sweep/Requeue.ts) runs again after the ones already waiting.
 */
export const gridSchedule = (doc: SweepDoc, parallel: number): Schedule => {
  const order = doc.combinations.filter((c) => !isFinalCombination(c)).map((c) => c.index)
  return {
    width: Math.max(1, Math.min(parallel, order.length)),
    recoverOnStop: parallel > 1,
    next: (free) =>
      Effect.sync(() =>
        order.length === 0 ? { _tag: "done" } : { _tag: "run", indices: order.splice(0, free) }
      ),
    ended: (index, end) =>
      Effect.sync(() => {
        if (end === "requeue") order.push(index)
      })
  }
}

/**
 * `--strategy adaptive` (docs/design.md#time-to-the-answer): first the combinations it already
 * started and that are open (a larger --repeats, or left open), so the search goes on from what
 * they measure; then the search (domain/Sweep/Adaptive.ts `proposeAdaptive`) names up to the free
 * places' worth of combinations beside those in flight (with `--parallel N`: what the serial search
 * needs next, then the neighbours it is about to compare and its next move, within 1.5× its engine
 * starts); what it rules out is `skipped` with the reason as soon as it is known (monotone
 * infeasibility), and what it never reached when it settles.
 */
export const adaptiveSchedule = (state: SweepState, doc: SweepDoc): Schedule => {
  const open = doc.combinations
    .filter((c) => !isFinalCombination(c) && c.engine_starts.length > 0)
    .map((c) => c.index)
  const total = doc.combinations.length
  const parallel = state.parallel
  let settled = false
  return {
    width: Math.max(1, Math.min(parallel, total)),
    recoverOnStop: parallel > 1,
    next: (free, running) =>
      Effect.gen(function* () {
        if (open.length > 0) {
          // the open ones first, alone: the search goes on from what they measure
          if (running.size > 0) return { _tag: "wait" } as const
          return { _tag: "run", indices: open.splice(0, free) } as const
        }
        if (settled) return running.size > 0 ? ({ _tag: "wait" } as const) : ({ _tag: "done" } as const)
        const now = yield* state.doc
        const params = now.experiment.params
        const skips = monotoneSkips(params, adaptiveView(now), running)
        if (skips.length > 0) {
          yield* state.update((d) => skips.reduce((x, k) => skipCombination(x, k.index, k.reason), d))
          for (const k of skips) yield* Effect.logInfo(`sweep: combination #${k.index} skipped: ${k.reason}`)
        }
        const after = yield* state.doc
        const step = proposeAdaptive(params, adaptiveView(after), free, running)
        if (step._tag === "wait") return step
        if (step._tag === "done") {
          const reason = notRunReason(step.settledAt.map((i) => after.combinations[i]!.params))
          const left = after.combinations.filter((c) => !isFinalCombination(c))
          const skipped = yield* state.update((d) =>
            left.reduce((x, c) => skipCombination(x, c.index, reason), d)
          )
          const started = skipped.combinations.filter((c) => c.engine_starts.length > 0).length
          yield* Effect.logInfo(
            `sweep: the adaptive search settled after ${started} of ${total} combination(s); ${left.length} not run (skipped): ${reason}`
          )
          settled = true
          return { _tag: "done" } as const
        }
        for (const w of step.start)
          yield* Effect.logInfo(
            `sweep: adaptive: combination ${comboRef(w.index, after.combinations[w.index]!.params)}: ${w.why}`
          )
        return { _tag: "run", indices: step.start.map((w) => w.index) } as const
      }),
    ended: () => Effect.void
  }
}

/**
 * Runs what `schedule` proposes, up to its width at once, until it is done (`finished`) or a
 * combination stops the sweep (`stopped`: the others are interrupted). A combination that fails
 * interrupts the others and fails the run; with more than one at once, the runs they had in flight
 * are marked interrupted first.
 */
export const drive = (state: SweepState, schedule: Schedule) =>
  Effect.gen(function* () {
    const ended = yield* Queue.unbounded<number>()
    const fibers = new Map<number, Fiber.RuntimeFiber<"next" | "requeue" | "stop", SweepFailure>>()
    const stopAll = Effect.suspend(() => Fiber.interruptAll(fibers.values()))
    const recover = Effect.flatMap(nowIso, (now) => state.update((d) => recoverInterrupted(d, now)))
    for (;;) {
      const free = schedule.width - fibers.size
      const proposal: Proposal =
        free > 0 ? yield* schedule.next(free, new Set(fibers.keys())) : { _tag: "wait" }
      if (proposal._tag === "run" && proposal.indices.length > 0) {
        for (const index of proposal.indices) {
          yield* state.count((k) => ({ ...k, running: new Set(k.running).add(index) }))
          const fiber = yield* runCombination(state, index).pipe(
            Effect.onExit(() =>
              Effect.zipRight(
                state.count((k) => {
                  const running = new Set(k.running)
                  running.delete(index)
                  return { ...k, running }
                }),
                Queue.offer(ended, index)
              )
            ),
            Effect.forkScoped
          )
          fibers.set(index, fiber)
        }
        continue
      }
      if (fibers.size === 0) return "finished" as const
      const index = yield* Queue.take(ended)
      const fiber = fibers.get(index)
      fibers.delete(index)
      if (fiber === undefined) continue
      const exit = yield* Fiber.await(fiber)
      if (Exit.isFailure(exit)) {
        yield* stopAll
        if (schedule.width > 1) yield* recover
        return yield* Effect.failCause(exit.cause)
      }
      if (exit.value === "stop") {
        yield* stopAll
        return "stopped" as const
      }
      yield* schedule.ended(index, exit.value)
    }
  }).pipe(Effect.scoped)

/**
 * The sweep's combinations by its strategy, to the end: `done` once every one is finished; a
 * sweep stopped by a combination (an infeasible cluster) keeps its status `stopped`.
 */
export const runCombinations = (state: SweepState) =>
  Effect.gen(function* () {
    const doc = yield* state.doc
    const schedule =
      doc.strategy === "adaptive" ? adaptiveSchedule(state, doc) : gridSchedule(doc, state.parallel)
    const ended = yield* drive(state, schedule)
    if (ended === "stopped") {
      if (schedule.recoverOnStop) {
        const now = yield* nowIso
        yield* state.update((d) => recoverInterrupted(d, now))
      }
      return
    }
    const now = yield* nowIso
    yield* state.update((d) => setSweepStatus(d, "done", null, null, now))
  })
