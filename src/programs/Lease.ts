import { Clock, Duration, Effect, Fiber, Option } from "effect"
import type { LeaseRequest } from "../domain/Feasibility.js"
import { describeHolder, holderOf, isSlotResource, placementGroupsOf } from "../domain/Group.js"
import { LeaseWaitExpired } from "../domain/Queue.js"
import { contentionFirstLook, contentionPoll, contentionQuietLooks } from "../domain/Schedules.js"
import type { ClusterSnapshot } from "../domain/Snapshot.js"
import { keepTail, shortId } from "../domain/Text.js"
import { ClusterInspector } from "../services/ClusterInspector.js"
import { HostQueue } from "../services/HostQueue.js"
import {
  LeaseBridge,
  type LeaseOutput,
  type LeaseSession,
  type LeaseStarted
} from "../services/LeaseBridge.js"
import { WorkGate } from "../services/WorkGate.js"
import { ensureLocked } from "./Cluster.js"
import { awaitTurn, leasesInRay, type WaitNotes } from "./Queue.js"

export interface LeaseRunSpec {
  readonly request: LeaseRequest
  readonly argv: ReadonlyArray<string>
  /** The command's whole environment (the actor's GPU variables are laid over it). */
  readonly env: Readonly<Record<string, string | undefined>>
  readonly cwd: string
  /**
   * Bounds the command's run, from its start in the actor (docs/design.md#waiting-is-not-failing):
   * the wait for a slot or GPUs held by another lease is never charged to it. The caller's own
   * bounds (a session deadline, interruption) still cover the wait.
   */
  readonly timeoutSec?: number | undefined
  /**
   * Bounds the wait for the lease (the host's queue, then Ray's grant), from the lease's start
   * (`--wait`, docs/design.md#fair-queue): past it the lease fails with LeaseWaitExpired naming the
   * holder, and nothing runs. Unset: the wait is bounded by the caller only.
   */
  readonly waitSec?: number | undefined
  readonly name?: string | undefined
  /** The lease's id in the host's queue (set by `runLeased` for a queued lease). */
  readonly leaseId?: string | undefined
  /** Each output line as it comes. */
  readonly onOutput?: ((output: LeaseOutput) => Effect.Effect<void>) | undefined
}

export interface LeaseRunResult {
  /** The command's exit code; null when the lease timed out. */
  readonly exitCode: number | null
  readonly timedOut: boolean
  readonly stdoutTail: string
  readonly stderrTail: string
  /** Seconds from the lease's start to its end (waiting included). */
  readonly runtimeSec: number
  /** Seconds spent waiting for the slot or GPUs held by someone else. */
  readonly waitedSec: number
  /** Seconds the command itself ran (from its start in the actor to its end); 0 if it never started. */
  readonly commandSec: number
  readonly gcsAddress: string
  readonly started: LeaseStarted | null
}

/** How much of each stream a lease's result keeps (its last characters). */
const TAIL = 64 * 1024

/** `tail` with one more output line, keeping the last characters a lease's result keeps. */
export const appendToTail = (tail: string, line: string): string => keepTail(`${tail}${line}\n`, TAIL)

/** `GPU`, or the names Ray gives it inside a placement group (`GPU_group_[i_]<pg>`). */
const isGpuResource = (name: string): boolean => name === "GPU" || name.startsWith("GPU_group_")

/** The placement groups the lease's own actor draws on (its own hold of the slot and GPUs). */
const ownGroups = (snapshot: ClusterSnapshot, ownActorId: string) => {
  const own = snapshot.actors.find((a) => a.actorId === ownActorId)
  const ids = own === undefined ? [] : placementGroupsOf(own)
  return snapshot.placementGroups.filter((g) => ids.includes(g.groupId))
}

/**
 * Which of what the lease asks for no alive node has free right now (its own actor's share, once
 * placed, counted as free). Neither, when some node could take the lease now: then it waits on
 * nobody, Ray is only starting its worker (or has not yet taken back a holder just killed).
 */
const shortOf = (snapshot: ClusterSnapshot, request: LeaseRequest, ownActorId: string) => {
  const own = snapshot.actors.find((a) => a.actorId === ownActorId && a.state !== "DEAD")
  const groups = ownGroups(snapshot, ownActorId)
  const alive = new Set(snapshot.nodes.filter((n) => n.state === "ALIVE").map((n) => n.nodeId))
  const free = snapshot.resources
    .filter((r) => alive.has(r.nodeId))
    .map((r) => {
      const available: Record<string, number> = { ...r.available }
      const giveBack = (resources: Readonly<Record<string, number>>) => {
        for (const [k, v] of Object.entries(resources)) available[k] = (available[k] ?? 0) + v
      }
      // The lease's own placement group, once placed, holds the node's own names of what it asked.
      if (groups.length > 0) {
        for (const g of groups) {
          if (g.state === "CREATED")
            for (const b of g.bundles) if (b.nodeId === r.nodeId) giveBack(b.resources)
        }
      } else if (own !== undefined && own.nodeId === r.nodeId) giveBack(own.requiredResources)
      return available
    })
  const slotFree = (a: Record<string, number>) => !request.servingSlot || (a.serving_slot ?? 0) >= 1
  const gpusFree = (a: Record<string, number>) => request.gpus <= 0 || (a.GPU ?? 0) >= request.gpus
  if (free.some((a) => slotFree(a) && gpusFree(a))) return { slot: false, gpus: false }
  const slot = !free.some(slotFree)
  const gpus = !free.some(gpusFree)
  // Each is free somewhere, never both on one node: both count as short.
  return slot || gpus ? { slot, gpus } : { slot: request.servingSlot, gpus: request.gpus > 0 }
}

/**
 * Who holds what this lease waits for, as an operator reads it: the actors and placement groups
 * holding what no node has free. Undefined when nothing is short (the lease waits on nobody) or
 * nobody visibly holds what is.
 */
export const whoHolds = (snapshot: ClusterSnapshot, request: LeaseRequest, ownActorId: string) => {
  const short = shortOf(snapshot, request, ownActorId)
  if (!short.slot && !short.gpus) return undefined
  // The slot or a GPU, also under a placement group's name for it (`serving_slot_group_…`).
  const wanted = (resources: Readonly<Record<string, number>>) =>
    Object.entries(resources).some(
      ([k, v]) => v > 0 && ((short.slot && isSlotResource(k)) || (short.gpus && isGpuResource(k)))
    )
  const holders = snapshot.actors.filter(
    (a) =>
      a.actorId !== ownActorId &&
      (a.state === "ALIVE" || a.state === "RESTARTING") &&
      wanted(a.requiredResources)
  )
  // A placement group reserves its bundles' resources whether or not an actor runs in them (a
  // lease's group holds them until its command is gone); one whose holder is named is not named twice.
  const named = new Set([
    ...holders.flatMap(placementGroupsOf),
    ...ownGroups(snapshot, ownActorId).map((g) => g.groupId)
  ])
  const groups = snapshot.placementGroups
    .filter(
      (g) => g.state === "CREATED" && !named.has(g.groupId) && g.bundles.some((b) => wanted(b.resources))
    )
    .map(
      (g) =>
        `placement group ${g.name || shortId(g.groupId)} (job ${g.creatorJobId}` +
        // A lease's group outlives its dead bridge until nothing of the lease runs (a bridge sweeps it).
        (g.creatorJobDead && g.isDetached
          ? ", its driver gone: the next lease lets it go once nothing of it runs"
          : "") +
        ")"
    )
  const all = [...holders.map((a) => describeHolder(holderOf(a, snapshot))), ...groups]
  return all.length === 0 ? undefined : all.join(", ")
}

/**
 * While a lease or a group waits, looks at the cluster on the contention pace and says what it
 * waits for and who holds it (`holderOf`), whenever that changes. Nothing while nobody visibly
 * holds it, until `contentionQuietLooks` looks in a row found nobody. Marks `said.waited` once it
 * has said anything.
 */
export const reportWaiting = (
  gcsAddress: string,
  what: string,
  holderOf: (snapshot: ClusterSnapshot) => string | undefined,
  said: WaitNotes = { waited: false }
) =>
  Effect.gen(function* () {
    const inspector = yield* ClusterInspector
    let last: string | undefined
    let quietLooks = 0
    yield* inspector.snapshot(gcsAddress).pipe(
      Effect.map((snapshot) => {
        const holder = holderOf(snapshot)
        quietLooks = holder === undefined ? quietLooks + 1 : 0
        if (holder !== undefined) said.holder = holder
        if (holder !== undefined) return `held by ${holder}`
        return quietLooks >= contentionQuietLooks
          ? "not granted yet, though nothing visibly holds it"
          : undefined
      }),
      Effect.orElseSucceed(() => "held by unknown (the GCS did not answer)"),
      Effect.flatMap((why) => {
        if (why === undefined || why === last) return Effect.void
        last = why
        said.waited = true
        return Effect.logInfo(`waiting for ${what}: ${why}`)
      }),
      Effect.repeat(contentionPoll)
    )
  }).pipe(Effect.withSpan("Lease.reportWaiting", { attributes: { what } }))

/** While the actor waits to be scheduled, say so, and for whom, whenever that changes. */
const reportContention = (
  gcsAddress: string,
  request: LeaseRequest,
  session: LeaseSession,
  said: WaitNotes
) =>
  reportWaiting(
    gcsAddress,
    request.servingSlot
      ? `serving_slot${request.gpus > 0 ? ` and ${request.gpus} GPU(s)` : ""}`
      : `${request.gpus} GPU(s)`,
    (snapshot) => whoHolds(snapshot, request, session.actorId),
    said
  )

/**
 * Acquires a serving lease for the enclosing scope (docs/design.md#serving-leases): under the work
 * permit, ensure the cluster (repairing it if it lacks the slot and every guard allows; failing
 * with the typed infeasibility otherwise), mark "lease submitted", and send the actor creation. The
 * permit is released once the creation is sent; the lease itself lives until the scope closes,
 * which stops the command's process tree and kills the actor.
 */
export const acquireLease = Effect.fn("Lease.acquireLease")(function* (
  spec: Omit<LeaseRunSpec, "timeoutSec">
) {
  const gate = yield* WorkGate
  const bridge = yield* LeaseBridge
  // Python imports Ray (the bridge's slowest step) while the cluster is ensured.
  yield* bridge.prestart
  return yield* gate.withPermit(
    Effect.gen(function* () {
      const ensured = yield* ensureLocked(spec.request)
      // What `ray ensure` and `ray doctor` show (a serving_slot total other than 1: serving runs
      // can overlap) must not go unsaid when a lease or a baseline ensures the cluster itself.
      for (const w of ensured.verdict.warnings) yield* Effect.logWarning(w)
      // Actor creation is asynchronous: from here on a repair must assume the actor exists.
      yield* gate.markLeaseSubmitted
      const session = yield* bridge.open({
        gcsAddress: ensured.gcsAddress,
        gpus: spec.request.gpus,
        servingSlot: spec.request.servingSlot,
        gpuCleanTimeoutSec: spec.request.gpuCleanTimeoutSec,
        avoidNodes: spec.request.avoidNodes,
        argv: spec.argv,
        env: spec.env,
        cwd: spec.cwd,
        name: spec.name,
        leaseId: spec.leaseId,
        onOutput: spec.onOutput
      })
      yield* gate.addOwnJob(session.jobId)
      yield* Effect.addFinalizer(() => gate.removeOwnJob(session.jobId))
      return { session, gcsAddress: ensured.gcsAddress }
    })
  )
})

/**
 * Holds a lease, runs the command in it, and releases it on every exit path. `timeoutSec` starts
 * when the command starts: a lease that waits behind another holder is not timed out by it.
 */
export const runLeased = Effect.fn("Lease.runLeased")(function* (spec: LeaseRunSpec) {
  const queue = yield* HostQueue
  // The bridge's `import ray` (its slowest step, ~1–3 s) runs from the lease's first moment, beside
  // the queue and ensure; it sends nothing until the lease is submitted (acquireLease takes it).
  yield* (yield* LeaseBridge).prestart
  const began = yield* Clock.currentTimeMillis
  const tails = { stdout: "", stderr: "" }
  const onOutput = (o: LeaseOutput) =>
    Effect.zipRight(
      Effect.sync(() => {
        tails[o.stream] = appendToTail(tails[o.stream], o.line)
      }),
      spec.onOutput?.(o) ?? Effect.void
    )
  // Filled in as the lease progresses, so a timeout still reports how far it got.
  const progress: { gcsAddress: string; started: LeaseStarted | null; startedAt: number; waitedSec: number } =
    {
      gcsAddress: "",
      started: null,
      startedAt: 0,
      waitedSec: 0
    }
  const outcome = yield* Effect.scoped(
    Effect.gen(function* () {
      const waitStart = yield* Clock.currentTimeMillis
      const said: WaitNotes = { waited: false }
      // docs/design.md#fair-queue: a lease for the slot waits its turn in the host's queue before
      // it submits its actor.
      const ticket = spec.request.servingSlot ? yield* queue.join({ gpus: spec.request.gpus }) : undefined
      const grant = Effect.gen(function* () {
        if (ticket !== undefined) yield* awaitTurn(ticket, said, leasesInRay)
        const lease = yield* acquireLease({ ...spec, leaseId: ticket?.entry.leaseId, onOutput })
        progress.gcsAddress = lease.gcsAddress
        const reporter = yield* Effect.fork(
          Effect.delay(
            reportContention(lease.gcsAddress, spec.request, lease.session, said),
            contentionFirstLook
          )
        )
        // docs/design.md#fair-queue, docs/design.md#sweeps-at-cluster-scale: the lease stops
        // holding the host's queue once Ray has placed it (its node's slot is held from then), not
        // once its command starts: a lease of this host bound for another node never waits behind
        // this one's clean-GPU wait or worker start.
        const holding =
          ticket === undefined
            ? undefined
            : yield* Effect.fork(
                Effect.raceFirst(lease.session.awaitPlaced ?? Effect.never, lease.session.awaitStarted).pipe(
                  Effect.zipRight(ticket.markHolding(lease.session.actorId)),
                  Effect.ignore
                )
              )
        progress.started = yield* lease.session.awaitStarted.pipe(Effect.ensuring(Fiber.interrupt(reporter)))
        if (holding !== undefined) yield* Fiber.join(holding)
        return lease
      })
      const lease = yield* spec.waitSec === undefined
        ? grant
        : Effect.timeoutFail(grant, {
            duration: Duration.seconds(spec.waitSec),
            onTimeout: () =>
              new LeaseWaitExpired({
                waitSec: spec.waitSec ?? 0,
                holder: said.holder,
                ahead: said.ahead ?? 0
              })
          })
      progress.startedAt = yield* Clock.currentTimeMillis
      progress.waitedSec = (progress.startedAt - waitStart) / 1000
      // Only after a line that said it waits: a worker slow to start is no wait for anyone.
      if (said.waited) {
        yield* Effect.logInfo(`lease granted after waiting ${progress.waitedSec.toFixed(1)} s`)
      }
      // The timeout runs from here: the command has started.
      return spec.timeoutSec !== undefined
        ? yield* Effect.timeoutOption(lease.session.awaitExit, Duration.seconds(spec.timeoutSec))
        : Option.some(yield* lease.session.awaitExit)
    })
  )
  const ended = yield* Clock.currentTimeMillis
  return {
    exitCode: Option.match(outcome, { onNone: () => null, onSome: (e) => e.exitCode }),
    timedOut: Option.isNone(outcome),
    stdoutTail: Option.match(outcome, { onNone: () => tails.stdout, onSome: (e) => e.stdoutTail }),
    stderrTail: Option.match(outcome, { onNone: () => tails.stderr, onSome: (e) => e.stderrTail }),
    runtimeSec: (ended - began) / 1000,
    waitedSec: progress.waitedSec,
    commandSec: progress.startedAt > 0 ? (ended - progress.startedAt) / 1000 : 0,
    gcsAddress: progress.gcsAddress,
    started: progress.started
  } satisfies LeaseRunResult
})
