import * as path from "node:path"
import { FileSystem } from "@effect/platform"
import { Effect, Layer, Scope } from "effect"
import { holdLockFile, type LockHeld } from "./LockFile.js"
import { layerTest as layerTestSettings, Settings } from "./Settings.js"

/** How long to wait for another hyperloom process that is working on the host's Ray head. */
const HOST_LOCK_WAIT_MS = 300_000

/**
 * The one permit that keeps lease work (connect, feasibility check, actor creation) and repair
 * work exclusive, the process-wide facts the repair guards need (has a lease actor been
 * submitted; which Ray jobs are our own drivers), and the host-wide lock file (next to Ray's temp
 * dir) that extends the same exclusion to every hyperloom process on the host, so two of them
 * never repair at once and none submits a lease while another restarts the head.
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
    const lockPath = path.join(path.dirname(settings.rayTempDir), "hyperloom-ray.lock")
    const holdHostLock = holdLockFile(lockPath, {
      waitMs: HOST_LOCK_WAIT_MS,
      onWait: (pid) =>
        Effect.logInfo(`waiting for hyperloom process ${pid}, which is working on the Ray head`)
    }).pipe(
      Effect.provideService(FileSystem.FileSystem, fs),
      // A lock file that cannot be written at all is an OS impossibility here.
      Effect.catchAll((e) => (e._tag === "LockHeld" ? Effect.fail(e) : Effect.die(e)))
    )
    return {
      /**
       * Runs `effect` holding the one permit and the host-wide lock. Resources `effect` adds to
       * the caller's scope (a lease) outlive both: only the work itself is exclusive.
       */
      withPermit: <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | LockHeld, R> =>
        permit.withPermits(1)(
          Effect.acquireUseRelease(
            Scope.make(),
            (lockScope) => Effect.zipRight(Scope.extend(holdHostLock, lockScope), effect),
            (lockScope, exit) => Scope.close(lockScope, exit)
          )
        ),
      /** Marks that this process has submitted a lease actor (before the creation is sent). */
      markLeaseSubmitted: Effect.sync(() => {
        leaseSubmitted = true
      }),
      leaseSubmitted: Effect.sync(() => leaseSubmitted),
      addOwnJob: (jobId: string) => Effect.sync(() => ownJobs.add(jobId.toLowerCase())),
      removeOwnJob: (jobId: string) => Effect.sync(() => ownJobs.delete(jobId.toLowerCase())),
      ownJobIds: Effect.sync((): ReadonlyArray<string> => [...ownJobs]),
      hostLockPath: lockPath
    }
  })
}) {}

export type { LockHeld }

/** The live layer: one permit and the host-wide lock file next to Ray's temp dir. */
export const layer: Layer.Layer<WorkGate, never, Settings | FileSystem.FileSystem> = WorkGate.Default

/**
 * A test layer: the same permit and process-wide facts, with the host-wide lock file in a fresh
 * temporary directory of its own (so tests never contend with this host's hyperloom processes).
 */
export const layerTest: Layer.Layer<WorkGate, never, FileSystem.FileSystem> = Layer.unwrapScoped(
  Effect.map(
    Effect.flatMap(FileSystem.FileSystem, (fs) =>
      fs.makeTempDirectoryScoped({ prefix: "hyperloom-workgate-" })
    ),
    (dir) => WorkGate.Default.pipe(Layer.provide(layerTestSettings({ rayTempDir: path.join(dir, "ray") })))
  )
).pipe(Layer.orDie)
