import { Effect, Layer, Scope } from "effect"
import { holdLockFile, hostFile, type LockHeld, type LockUnavailable } from "./LockFile.js"
import { Settings } from "./Settings.js"

/** How long to wait for another hyperloom process that is working on the host's Ray head. */
const HOST_LOCK_WAIT_MS = 300_000

/**
 * The host lock's file in the host's hyperloom directory (`/tmp/hyperloom-<uid>/host.lock`,
 * LockFile.ts): one path for every process of this user on the host, whatever its
 * RAY_TMPDIR/TMPDIR, because `ray stop --force` kills every Ray process it may kill on the host
 * whatever temp dir it was started with.
 */
export const HOST_LOCK_FILE = "host.lock"

/**
 * The one permit that keeps lease work (connect, feasibility check, actor creation) and repair
 * work exclusive, the process-wide facts the repair guards need (has a lease actor been
 * submitted; which Ray jobs are our own drivers), and the host-wide lock (LockFile.ts: a lock the
 * kernel releases when its holder dies, the same for every process on the host) that extends the
 * same exclusion to every hyperloom process on the host, so two of them never repair at once and
 * none submits a lease while another restarts the head.
 *
 * Provide it once (main.ts composes it once): a second instance would be a second semaphore.
 */
const makeWorkGate = (holdHostLock: Effect.Effect<unknown, LockHeld | LockUnavailable, Scope.Scope>) =>
  Effect.gen(function* () {
    const permit = yield* Effect.makeSemaphore(1)
    let leaseSubmitted = false
    const ownJobs = new Set<string>()
    return {
      /**
       * Runs `effect` holding the one permit and the host-wide lock. Resources `effect` adds to
       * the caller's scope (a lease) outlive both: only the work itself is exclusive.
       */
      withPermit: <A, E, R>(
        effect: Effect.Effect<A, E, R>
      ): Effect.Effect<A, E | LockHeld | LockUnavailable, R> =>
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
      ownJobIds: Effect.sync((): ReadonlyArray<string> => [...ownJobs])
    }
  })

/**
 * The host's Ray lock, waited for up to HOST_LOCK_WAIT_MS, saying whom it waits for; its holder
 * is told as the command (`hyperloom ray repair`) of Settings' `commandLine`.
 */
const holdHostLock = (commandLine: ReadonlyArray<string>) =>
  Effect.flatMap(hostFile(HOST_LOCK_FILE), (path) =>
    holdLockFile(path, {
      label: `the host's Ray lock (${path})`,
      what: `hyperloom ${commandLine.slice(0, 2).join(" ")}`.trim(),
      waitMs: HOST_LOCK_WAIT_MS,
      onWait: (held) =>
        Effect.logInfo(
          `waiting for ${held.holderPid > 0 ? `hyperloom process ${held.holderPid}` : "another hyperloom process"}` +
            `${held.holderWhat !== undefined ? ` (${held.holderWhat})` : ""}, which is working on the Ray head`
        )
    })
  )

export class WorkGate extends Effect.Service<WorkGate>()("hyperloom/services/WorkGate", {
  effect: Effect.flatMap(Settings, (settings) => makeWorkGate(holdHostLock(settings.commandLine)))
}) {}

export type { LockHeld, LockUnavailable }

/** The live layer: one permit and the host's Ray lock (HOST_LOCK_FILE). */
export const layer: Layer.Layer<WorkGate, never, Settings> = WorkGate.Default

/**
 * A test layer: the same permit and process-wide facts, without the host-wide lock (the permit
 * alone excludes within the test's process; tests never contend with this host's hyperloom
 * processes, and the host lock itself is tested in LockFile.test.ts and on real heads). Fresh per
 * build.
 */
export const layerTest: Layer.Layer<WorkGate> = Layer.effect(
  WorkGate,
  Effect.suspend(() => Effect.map(makeWorkGate(Effect.void), (g) => WorkGate.make(g)))
)
