import { Effect, Layer, Scope } from "effect"
import { holdNamedLock, type LockHeld } from "./LockFile.js"

/** How long to wait for another hyperloom process that is working on the host's Ray head. */
const HOST_LOCK_WAIT_MS = 300_000

/**
 * The host lock's name: one fixed abstract socket name for the whole host (its network namespace),
 * whatever a process's RAY_TMPDIR/TMPDIR, because `ray stop --force` kills every Ray process on
 * the host whatever temp dir it was started with.
 */
export const HOST_LOCK_NAME = "hyperloom-ray-host-lock"

/**
 * TEST ONLY, fixed when a test bundles the CLI (test/support/bundle.ts, an esbuild `define`): the
 * unit tests run the real CLI against stand-in `ray` executables beside the real-Ray tests, and
 * must never wait behind the host's lock those hold. Nothing sets it at run time (no variable, no
 * option): the shipped CLI and the library always take HOST_LOCK_NAME, so no process can step out
 * of the host's exclusion.
 */
declare const __HYPERLOOM_TEST_HOST_LOCK__: string | undefined
const hostLockName: string =
  typeof __HYPERLOOM_TEST_HOST_LOCK__ === "string" ? __HYPERLOOM_TEST_HOST_LOCK__ : HOST_LOCK_NAME

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
const makeWorkGate = (lockName: string) =>
  Effect.gen(function* () {
    const permit = yield* Effect.makeSemaphore(1)
    let leaseSubmitted = false
    const ownJobs = new Set<string>()
    const holdHostLock = holdNamedLock(lockName, `the host's Ray lock (${lockName})`, {
      waitMs: HOST_LOCK_WAIT_MS,
      onWait: (held) =>
        Effect.logInfo(
          `waiting for ${held.holderPid > 0 ? `hyperloom process ${held.holderPid}` : "another hyperloom process"}` +
            `${held.holderWhat !== undefined ? ` (${held.holderWhat})` : ""}, which is working on the Ray head`
        )
    }).pipe(
      // A socket that cannot be bound at all (not Linux) is an OS impossibility here.
      Effect.catchTag("LockUnavailable", (e) => Effect.die(e))
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
      hostLockName: lockName
    }
  })

export class WorkGate extends Effect.Service<WorkGate>()("hyperloom/services/WorkGate", {
  effect: makeWorkGate(hostLockName)
}) {}

export type { LockHeld }

/** The live layer: one permit and the host's Ray lock (HOST_LOCK_NAME). */
export const layer: Layer.Layer<WorkGate> = WorkGate.Default

let testGates = 0

/**
 * A test layer: the same permit and process-wide facts, with a host lock of its own name (so
 * tests never contend with this host's hyperloom processes for the real one). Fresh per build.
 */
export const layerTest: Layer.Layer<WorkGate> = Layer.effect(
  WorkGate,
  Effect.suspend(() =>
    Effect.map(makeWorkGate(`hyperloom-test-gate:${process.pid}:${++testGates}`), (g) => WorkGate.make(g))
  )
)
