import * as path from "node:path"
import { FileSystem } from "@effect/platform"
import { Effect, type Scope } from "effect"
import { holdLockFile, type LockHeld } from "./LockFile.js"
import { Settings } from "./Settings.js"

/**
 * The one permit that keeps lease work (connect, feasibility check, actor creation) and repair
 * work exclusive inside this process, the process-wide facts the repair guards need (has a lease
 * actor been submitted; which Ray jobs are our own drivers), and the host-wide repair lock that
 * keeps two hyperloom processes from repairing at once.
 *
 * Provide it once (main.ts composes it once): a second instance would be a second semaphore.
 */
export class WorkGate extends Effect.Service<WorkGate>()("hyperloom/services/WorkGate", {
  effect: Effect.gen(function* () {
    const settings = yield* Settings
    const fs = yield* FileSystem.FileSystem
    const permit = yield* Effect.makeSemaphore(1)
    let leaseSubmitted = false
    const ownJobs = new Set<string>()
    const lockPath = path.join(path.dirname(settings.rayTempDir), "hyperloom-ray-repair.lock")
    return {
      /** Runs `effect` holding the one permit. */
      withPermit: <A, E, R>(effect: Effect.Effect<A, E, R>) => permit.withPermits(1)(effect),
      /** Marks that this process has submitted a lease actor (before the creation is sent). */
      markLeaseSubmitted: Effect.sync(() => {
        leaseSubmitted = true
      }),
      leaseSubmitted: Effect.sync(() => leaseSubmitted),
      addOwnJob: (jobId: string) => Effect.sync(() => ownJobs.add(jobId.toLowerCase())),
      removeOwnJob: (jobId: string) => Effect.sync(() => ownJobs.delete(jobId.toLowerCase())),
      ownJobIds: Effect.sync((): ReadonlyArray<string> => [...ownJobs]),
      repairLockPath: lockPath,
      /** Holds the host-wide repair lock for the scope, waiting up to `waitMs` for another holder. */
      holdRepairLock: (
        waitMs: number,
        onWait?: (holderPid: number) => Effect.Effect<void>
      ): Effect.Effect<void, LockHeld, Scope.Scope> =>
        holdLockFile(lockPath, { waitMs, ...(onWait ? { onWait } : {}) }).pipe(
          Effect.provideService(FileSystem.FileSystem, fs),
          // A lock file that cannot be written at all is an OS impossibility here.
          Effect.catchAll((e) => (e._tag === "LockHeld" ? Effect.fail(e) : Effect.die(e)))
        )
    }
  })
}) {}
