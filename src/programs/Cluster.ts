import { Duration, Effect } from "effect"
import { formatHostPort } from "../domain/Address.js"
import { EnsureRefused, InvalidAddress, type RayClusterInfeasible } from "../domain/Errors.js"
import { checkFeasibility, type FeasibilityVerdict, type LeaseRequest } from "../domain/Feasibility.js"
import { adviseForHost, type GuardResult, refusalReasons, repairAllowed } from "../domain/Guards.js"
import { type RepairStep, type RestartPlan, restartPlan, SLOT } from "../domain/Restart.js"
import { headReadyPoll } from "../domain/Schedules.js"
import { totalResources } from "../domain/Snapshot.js"
import { ClusterInspector } from "../services/ClusterInspector.js"
import { ProcFs } from "../services/ProcFs.js"
import { RayCli } from "../services/RayCli.js"
import { Settings } from "../services/Settings.js"
import { WorkGate } from "../services/WorkGate.js"
import { guardsFor, type Inspection, inspect } from "./Inspect.js"

export const REPAIR_LOG = "Ray head has no serving_slot resource; restarting the local head with it"

/** How long a restarted or started head may take before its GCS shows the slot. */
const HEAD_READY_TIMEOUT = Duration.seconds(60)

export interface RepairOutcome {
  /** none: the head needed no repair; would_repair: dry run, allowed; repaired: restarted with the slot. */
  readonly action: "none" | "would_repair" | "repaired"
  readonly gcsAddress: string
  readonly guards: ReadonlyArray<GuardResult>
  readonly plan: RestartPlan | null
  readonly verdict: FeasibilityVerdict
}

/** Polls the GCS at `gcsAddress` until an alive node declares the slot. */
const awaitSlot = Effect.fn("Cluster.awaitSlot")(function* (gcsAddress: string) {
  const inspector = yield* ClusterInspector
  return yield* inspector.snapshot(gcsAddress).pipe(
    // not yet: retried like a head that does not answer yet, until the timeout below names it
    Effect.filterOrFail(
      (s) => (totalResources(s)[SLOT] ?? 0) > 0 && s.nodes.some((n) => n.state === "ALIVE")
    ),
    Effect.retry(headReadyPoll),
    Effect.timeoutFail({
      duration: HEAD_READY_TIMEOUT,
      onTimeout: () =>
        `the head at ${gcsAddress} did not show serving_slot within ${Duration.format(HEAD_READY_TIMEOUT)}`
    })
  )
})

/** The named steps of a restart, for the test-only pause below. */
export { REPAIR_STEPS, type RepairStep } from "../domain/Restart.js"

/** How long the test-only pause waits (the fault-injection test SIGKILLs the process meanwhile). */
const TEST_PAUSE = Duration.seconds(120)

/**
 * TEST ONLY (docs/reliability.md): `HYPERLOOM_TEST_REPAIR_PAUSE=<step>` makes the repair log
 * `repair paused at <step>` and wait there, so a fault-injection test can SIGKILL the repairing
 * process at a known step (before `ray stop`, between stop and start, before the slot shows).
 * Unset, it does nothing. `before_stop` pauses before the final guard check, not after it, so
 * that even a paused repair never stops a head whose guards changed meanwhile.
 */
const testPause = (step: RepairStep) =>
  Effect.flatMap(Settings, (settings) =>
    settings.testRepairPause === step
      ? Effect.zipRight(
          Effect.logWarning(`repair paused at ${step} (HYPERLOOM_TEST_REPAIR_PAUSE, test only)`),
          Effect.sleep(TEST_PAUSE)
        )
      : Effect.void
  )

/**
 * The guarded runtime repair (docs/design.md#the-repair-guards), for a caller that holds the work permit.
 * Nothing to repair → `none`. Guards refuse → the infeasibility error with the reasons appended,
 * and nothing is stopped. Allowed → re-inspect and re-check every guard, `ray stop --force`,
 * start the head on the same port with the old head's resources plus the slot, wait for the slot;
 * the outcome's verdict is the feasibility checked again. The caller holds the work permit, which
 * includes the host-wide lock (WorkGate.withPermit).
 */
export const repairLocked = Effect.fn("Cluster.repairLocked")(function* (
  request: LeaseRequest,
  options: { readonly dryRun: boolean }
) {
  const settings = yield* Settings
  const rayCli = yield* RayCli
  const first = yield* inspect()
  const verdict = checkFeasibility(first.snapshot, request)
  const guards = yield* guardsFor(first)
  const outcome = (
    action: RepairOutcome["action"],
    inspection: Inspection,
    plan: RestartPlan | null,
    g = guards
  ) =>
    ({
      action,
      gcsAddress: inspection.resolved.gcsAddress,
      guards: g,
      plan,
      verdict: checkFeasibility(inspection.snapshot, request)
    }) satisfies RepairOutcome
  if (verdict.infeasible?.reason !== "no_serving_slot") return outcome("none", first, null)
  const infeasible: RayClusterInfeasible = verdict.infeasible
  // A process that may not repair (an MCP server without --allow-repair) refuses it as a failed
  // guard would, naming why, whatever the guards say.
  const refused = settings.repairRefused === undefined ? [] : [settings.repairRefused]
  if (!repairAllowed(guards) || refused.length > 0) {
    return yield* Effect.fail(
      adviseForHost(infeasible, first.snapshot, guards, first.daemons).withRefusals([
        ...refusalReasons(guards),
        ...refused
      ])
    )
  }
  if (options.dryRun) {
    return outcome(
      "would_repair",
      first,
      restartPlan(first.snapshot, first.resolved.port, settings.numGpusOverride)
    )
  }
  // Paused here (test only), a repair still re-checks every guard after the pause, right before
  // it stops the head.
  yield* testPause("before_stop")
  // The caller holds the permit and the host lock. Re-inspect and re-check every guard
  // immediately before stopping: the cluster may have changed since the verdict above.
  const current = yield* inspect().pipe(
    Effect.mapError((e) => infeasible.withRefusals([`cluster could not be inspected again: ${e.message}`]))
  )
  const again = checkFeasibility(current.snapshot, request)
  if (again.infeasible?.reason !== "no_serving_slot") return outcome("none", current, null)
  const recheck = yield* guardsFor(current)
  if (!repairAllowed(recheck)) {
    return yield* Effect.fail(
      adviseForHost(infeasible, current.snapshot, recheck, current.daemons).withRefusals(
        refusalReasons(recheck)
      )
    )
  }
  const plan = restartPlan(current.snapshot, current.resolved.port, settings.numGpusOverride)
  // The stop's, the start's and the wait's errors: tagged errors with a message, or the wait's text.
  const restartFailed = (e: string | { readonly message: string }) =>
    infeasible.withRestartFailure(typeof e === "string" ? e : e.message)
  yield* Effect.logWarning(REPAIR_LOG)
  yield* Effect.logInfo(
    `ray stop --force, then ray start --head --port=${plan.port} with ${JSON.stringify(plan.resources)}`
  )
  yield* rayCli.stop().pipe(Effect.mapError(restartFailed))
  yield* testPause("before_start")
  yield* rayCli.start({ ...plan, timeoutSec: settings.startTimeoutSec }).pipe(Effect.mapError(restartFailed))
  yield* testPause("before_slot")
  const gcsAddress = formatHostPort(current.resolved.host, plan.port)
  const snapshot = yield* awaitSlot(gcsAddress).pipe(Effect.mapError(restartFailed))
  yield* Effect.logInfo(`Ray head restarted at ${gcsAddress} with serving_slot`)
  return outcome("repaired", { ...current, snapshot }, plan, recheck)
})

/** The repair on demand, under the work permit (`hyperloom ray repair`). */
export const repair = Effect.fn("Cluster.repair")(function* (
  request: LeaseRequest,
  options: { readonly dryRun: boolean }
) {
  const gate = yield* WorkGate
  return yield* gate.withPermit(repairLocked(request, options))
})

export interface EnsureOutcome {
  /** reused: a head answered and was feasible; repaired: it lacked the slot and was restarted; started: none answered. */
  readonly action: "reused" | "repaired" | "started"
  readonly gcsAddress: string
  readonly verdict: FeasibilityVerdict
  readonly guards: ReadonlyArray<GuardResult>
}

/**
 * Ensure, for a caller that holds the work permit: probe with `ray status`; reuse what answers
 * (repairing it if it lacks the slot and the guards allow); otherwise start a local head with the
 * slot — never behind an explicit address, on a multi-node run, or over daemons the probe could
 * not reach. Fails with the infeasibility error when the lease can still not be granted.
 */
export const ensureLocked = Effect.fn("Cluster.ensureLocked")(function* (request: LeaseRequest) {
  const settings = yield* Settings
  const rayCli = yield* RayCli
  const address = settings.rayAddress
  if (address._tag === "RayClient") {
    return yield* Effect.fail(
      new InvalidAddress({
        value: address.raw,
        reason:
          "a ray:// Ray Client URL cannot be read over the GCS; set RAY_ADDRESS to the GCS host:port (e.g. 10.0.0.5:6379)"
      })
    )
  }
  const probe = yield* rayCli.probe()
  if (probe.answered) {
    const outcome = yield* repairLocked(request, { dryRun: false })
    if (outcome.verdict.infeasible !== undefined) return yield* Effect.fail(outcome.verdict.infeasible)
    return {
      action: outcome.action === "repaired" ? "repaired" : "reused",
      gcsAddress: outcome.gcsAddress,
      verdict: outcome.verdict,
      guards: outcome.guards
    } satisfies EnsureOutcome
  }
  const why = probe.timedOut
    ? `\`ray status\` did not answer within ${settings.statusTimeoutSec} s`
    : `\`ray status\` exited with code ${probe.exitCode}`
  if (address._tag !== "Auto") {
    return yield* Effect.fail(
      new EnsureRefused({
        detail: `RAY_ADDRESS=${address.raw} is an explicit address and ${why}; hyperloom never starts a head behind an operator's address (check the address, or unset RAY_ADDRESS to use a local head)`
      })
    )
  }
  if (settings.nodes >= 2) {
    return yield* Effect.fail(
      new EnsureRefused({
        detail: `this is a multi-node run (${settings.nodes} nodes) and ${why}; start the cluster's head first`
      })
    )
  }
  const procFs = yield* ProcFs
  const daemons = yield* procFs.rayDaemons.pipe(
    Effect.mapError((e) => new EnsureRefused({ detail: `${why}, and ${e.message}` }))
  )
  if (daemons.length > 0) {
    const named = daemons.map((d) =>
      d.kind === "gcs_server"
        ? `gcs_server pid ${d.pid} (port ${d.port ?? "?"})`
        : `raylet pid ${d.pid} (GCS ${d.gcsAddress ?? "?"})`
    )
    return yield* Effect.fail(
      new EnsureRefused({
        detail: `${why}, but Ray daemons run on this host: ${named.join(", ")}; not touching them (hyperloom cannot tell whose they are, and stopping Ray here would stop them all): set RAY_ADDRESS to their GCS host:port if one of them is the cluster to use`
      })
    )
  }
  yield* Effect.logInfo(
    `no Ray cluster answers (${why}); starting a local head on port ${settings.headPort} with serving_slot`
  )
  const gpus = request.gpus > 0 ? request.gpus : settings.numGpusOverride
  yield* rayCli.start({
    port: settings.headPort,
    numCpus: undefined,
    numGpus: gpus,
    resources: { [SLOT]: 1 },
    timeoutSec: settings.startTimeoutSec
  })
  const inspector = yield* ClusterInspector
  const resolved = yield* inspector.resolve
  const snapshot = yield* awaitSlot(resolved.gcsAddress).pipe(
    Effect.mapError((detail) => new EnsureRefused({ detail: `started a head, but ${detail}` }))
  )
  yield* Effect.logInfo(`Ray head started at ${resolved.gcsAddress}`)
  const verdict = checkFeasibility(snapshot, request)
  if (verdict.infeasible !== undefined) return yield* Effect.fail(verdict.infeasible)
  return { action: "started", gcsAddress: resolved.gcsAddress, verdict, guards: [] } satisfies EnsureOutcome
})

/** `hyperloom ray ensure`: `ensureLocked` under the work permit (one ensure or repair at a time per host). */
export const ensure = Effect.fn("Cluster.ensure")(function* (request: LeaseRequest) {
  const gate = yield* WorkGate
  return yield* gate.withPermit(ensureLocked(request))
})
