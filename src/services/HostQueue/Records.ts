/**
 * The user's own records beside the host's queue (docs/design.md#fair-queue): the leases that
 * ended (`history.jsonl`) and the sweeps that ended (`sweeps.jsonl`), each appended under the
 * user's mutex; reading or writing them never fails the lease.
 */
import * as nodePath from "node:path"
import { Effect } from "effect"
import type { SweepRecord } from "../../domain/Sweep/HostEstimate.js"
import { holdLockFile, type LockUnavailable } from "../LockFile.js"
import { appendHistory, readHistory } from "./History.js"
import type { QueuePlace } from "./Place.js"
import { appendSweep, readSweeps } from "./Sweeps.js"

const historyFile = (place: QueuePlace) => nodePath.join(place.own, "history.jsonl")
const sweepsFile = (place: QueuePlace) => nodePath.join(place.own, "sweeps.jsonl")

/** The user's mutex over both files, for the enclosing scope; `what` tells a waiter who holds it. */
const mutex = (place: QueuePlace, what: string) =>
  holdLockFile(nodePath.join(place.own, ".mutex"), {
    waitMs: 30_000,
    label: `the host queue's history mutex (${place.own})`,
    what
  })

/** The user's recent leases (a missing or corrupt file is none). */
export const leaseHistory = (place: QueuePlace) => readHistory(historyFile(place))

/** Appends a finished lease to the history; never fails. */
export const recordLease = (
  place: QueuePlace,
  what: string,
  lease: { endedAt: number; heldSec: number; gpus: number }
) =>
  Effect.scoped(
    Effect.gen(function* () {
      yield* mutex(place, what)
      appendHistory(historyFile(place), lease)
    })
  ).pipe(Effect.catchAll(() => Effect.void))

/** Appends a sweep run's end to the user's recent sweeps; never fails. */
export const recordSweepIn = (
  placeOf: Effect.Effect<QueuePlace, LockUnavailable>,
  what: string,
  record: SweepRecord
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const place = yield* placeOf
      yield* mutex(place, what)
      appendSweep(sweepsFile(place), record)
    })
  ).pipe(Effect.catchAllCause(() => Effect.void))

/** The user's recent sweeps (a missing or corrupt file, or no place, is none); never fails. */
export const recentSweepsIn = (placeOf: Effect.Effect<QueuePlace, LockUnavailable>) =>
  Effect.map(placeOf, (place) => readSweeps(sweepsFile(place))).pipe(
    Effect.orElseSucceed((): ReadonlyArray<SweepRecord> => [])
  )
