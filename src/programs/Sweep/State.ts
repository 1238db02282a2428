/**
 * The sweep's one state (docs/design.md#sweeps-at-cluster-scale): the document in a
 * `SynchronizedRef` (every change goes through it: read the latest, change it, save it, in one
 * step, one at a time), the counters beside it in a `Ref`, and what the rooms share (the options,
 * the files, the engine service). Up to `--parallel` combinations change the document at once:
 * each only through `updateCombination(i, f)`, which keeps of `f`'s result the combination `i`
 * (and the sweep-wide fields `f` changed) and every other combination as the latest document has
 * it (domain/Sweep/Parallel.ts `mergeOwn`), so no combination ever writes back another's older
 * record. Every save recomputes the summary, stamps `updated_at` and the session's wall seconds,
 * refuses a session folder that vanished (SessionVanished), and redraws the status line.
 */
import { Clock, Effect, Ref, SynchronizedRef } from "effect"
import { mergeOwn, runCounts } from "../../domain/Sweep/Parallel.js"
import type { RequeueState } from "../../domain/Sweep/Requeue.js"
import { isFinalCombination, type SweepDoc, statusLine, withSummary } from "../../domain/Sweep.js"
import type { AttemptFilesShape } from "../../services/AttemptFiles.js"
import type { StateLoadError } from "../../services/StateStore.js"
import type { SweepStoreShape } from "../../services/SweepStore.js"
import type { SweepEngineShape } from "./Engine.js"
import { SessionVanished, type SweepOptions } from "./Options.js"

/** What the sweep counts in this invocation, beside its document. */
export interface Counters {
  /** Engine starts (leases) this run made. */
  readonly engineStarts: number
  /** Client runs this run made. */
  readonly clientRuns: number
  /** The combinations in flight. */
  readonly running: ReadonlySet<number>
  /** Seconds to ready of each engine start, and of each client run (the status line's ETA). */
  readonly startSecs: ReadonlyArray<number>
  readonly runSecs: ReadonlyArray<number>
  /** What each combination met of its nodes' faults in this run (domain/Sweep/Requeue.ts). */
  readonly requeue: ReadonlyMap<number, RequeueState>
}

/** A save that failed: the session folder vanished, or the store could not write. */
export type SaveError = SessionVanished | StateLoadError

export interface SweepState {
  readonly options: SweepOptions
  readonly dir: string
  readonly files: AttemptFilesShape
  readonly engine: SweepEngineShape
  /** `--parallel`, at least 1. */
  readonly parallel: number
  /** The latest document. */
  readonly doc: Effect.Effect<SweepDoc>
  readonly counters: Effect.Effect<Counters>
  /** Changes the counters. */
  readonly count: (f: (c: Counters) => Counters) => Effect.Effect<void>
  /** The document changed as a whole (the sweep's status, a resume's growth) and saved; the new one. */
  readonly update: (f: (doc: SweepDoc) => SweepDoc) => Effect.Effect<SweepDoc, SaveError>
  /**
   * Combination `index` changed by `f` (applied to the latest document) and saved: of `f`'s result
   * only that combination and the sweep-wide fields `f` changed are kept. The new document.
   */
  readonly updateCombination: (
    index: number,
    f: (doc: SweepDoc) => SweepDoc
  ) => Effect.Effect<SweepDoc, SaveError>
  /**
   * Decides on the latest document and changes it in the same step (nothing changes in between):
   * `f` gives the answer and the new document, or undefined when nothing changes (nothing saved).
   */
  readonly decide: <A>(
    f: (doc: SweepDoc) => readonly [A, SweepDoc | undefined]
  ) => Effect.Effect<A, SaveError>
  /** The status line now: combinations done / running / waiting, runs, elapsed, ETA. */
  readonly statusLine: Effect.Effect<string>
}

const iso = (ms: number) => new Date(ms).toISOString()

export const makeState = (o: {
  readonly options: SweepOptions
  readonly store: SweepStoreShape
  readonly files: AttemptFilesShape
  readonly engine: SweepEngineShape
  /** The document as loaded (or the new sweep's, not saved yet). */
  readonly doc: SweepDoc
  /** sweep.json was found: from the first save on it must still be there at every save. */
  readonly saved: boolean
  /** The session's wall seconds before this invocation (docs/design.md#time-to-the-answer). */
  readonly wallBefore: number
}) =>
  Effect.gen(function* () {
    const dir = o.options.sessionDir
    const startedMs = yield* Clock.currentTimeMillis
    const parallel = Math.max(1, Math.floor(o.options.parallel ?? 1))
    const ref = yield* SynchronizedRef.make(o.doc)
    const saved = yield* Ref.make(o.saved)
    const counters = yield* Ref.make<Counters>({
      engineStarts: 0,
      clientRuns: 0,
      running: new Set(),
      startSecs: [],
      runSecs: [],
      requeue: new Map()
    })

    const statusNow = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const doc = yield* SynchronizedRef.get(ref)
      const c = yield* Ref.get(counters)
      const finals = doc.combinations.filter(isFinalCombination).length
      const running = c.running.size
      const waiting = Math.max(0, doc.combinations.length - finals - running)
      const runs = runCounts(doc)
      return statusLine({
        done: finals,
        running,
        waiting,
        runsDone: runs.done,
        runsPlanned: runs.planned,
        elapsedSec: (now - startedMs) / 1000,
        startSecs: c.startSecs,
        runSecs: c.runSecs,
        parallel,
        startsLeft: waiting,
        // adaptive: the search decides how many run at once (issue 33 item 2)
        strategy: doc.strategy ?? "grid"
      })
    })
    const redraw =
      o.options.redrawStatus === undefined ? Effect.void : Effect.flatMap(statusNow, o.options.redrawStatus)

    /** Writes `next` (its summary, time and wall recomputed) as the sweep's document. */
    const commit = (next: SweepDoc) =>
      Effect.gen(function* () {
        if ((yield* Ref.get(saved)) && !(yield* o.store.stillThere(dir)))
          return yield* new SessionVanished({ sessionDir: dir })
        const nowMs = yield* Clock.currentTimeMillis
        const doc = withSummary({
          ...next,
          updated_at: iso(nowMs),
          wall_sec: Math.round((o.wallBefore + (nowMs - startedMs) / 1000) * 1000) / 1000
        })
        yield* o.store.save(dir, doc)
        yield* Ref.set(saved, true)
        return doc
      })

    /** `f`'s answer, and the document after it (saved when `f` changed it). */
    const change = <A>(f: (doc: SweepDoc) => readonly [A, SweepDoc | undefined]) =>
      Effect.uninterruptible(
        SynchronizedRef.modifyEffect(ref, (latest) => {
          const [answer, next] = f(latest)
          return next === undefined
            ? Effect.succeed([[answer, latest] as const, latest] as const)
            : Effect.map(commit(next), (doc) => [[answer, doc] as const, doc] as const)
        })
      ).pipe(Effect.tap(() => redraw))
    const update = (f: (doc: SweepDoc) => SweepDoc) =>
      Effect.map(
        change((d) => [undefined, f(d)] as const),
        ([, doc]) => doc
      )

    return {
      options: o.options,
      dir,
      files: o.files,
      engine: o.engine,
      parallel,
      doc: SynchronizedRef.get(ref),
      counters: Ref.get(counters),
      count: (f) => Ref.update(counters, f),
      update,
      updateCombination: (index, f) => update((latest) => mergeOwn(latest, latest, f(latest), index)),
      decide: (f) => Effect.map(change(f), ([answer]) => answer),
      statusLine: statusNow
    } satisfies SweepState as SweepState
  })
