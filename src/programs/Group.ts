/**
 * Serving groups (docs/design.md#serving-groups-across-nodes): `--nodes N` (N >= 2) holds one
 * placement group of N bundles `{"GPU": G, "serving_slot": 1}` (STRICT_SPREAD) and runs the command
 * as N ranks, one per node. Nothing is ever started or restarted for a group: the cluster must
 * answer and have N nodes that each declare the slot and G GPUs, else the typed infeasibility
 * (`insufficient_nodes`).
 */
import { Clock, Duration, Effect, Fiber, Option } from "effect"
import { EnsureRefused, InvalidAddress, InvalidSetting } from "../domain/Errors.js"
import type { LeaseRequest } from "../domain/Feasibility.js"
import {
  checkGroupFeasibility,
  DEFAULT_RANK_CWD,
  describeHolder,
  type GroupRequest,
  groupBundle,
  type RankExit,
  rankEnvironment,
  slotHolders
} from "../domain/Group.js"
import { contentionFirstLook } from "../domain/Schedules.js"
import { shortId } from "../domain/Text.js"
import { GroupBridge, type GroupSession, type GroupStarted, rankPrefix } from "../services/GroupBridge.js"
import type { LeaseOutput } from "../services/LeaseBridge.js"
import { RayCli } from "../services/RayCli.js"
import { Settings } from "../services/Settings.js"
import { WorkGate } from "../services/WorkGate.js"
import { inspect } from "./Inspect.js"
import { appendToTail, type LeaseRunResult, type LeaseRunSpec, reportWaiting } from "./Lease.js"

/**
 * Ensure for a group, for a caller holding the work permit: the cluster must answer and be able
 * to place the group. A group never starts a head (a head started here would hold one node, never
 * the N the group needs) and never repairs one (other nodes' work may depend on it). Returns its
 * GCS address.
 */
export const ensureGroupLocked = Effect.fn("Group.ensureGroupLocked")(function* (request: GroupRequest) {
  const settings = yield* Settings
  const rayCli = yield* RayCli
  if (settings.rayAddress._tag === "RayClient") {
    return yield* new InvalidAddress({
      value: settings.rayAddress.raw,
      reason:
        "a ray:// Ray Client URL cannot be read over the GCS; set RAY_ADDRESS to the GCS host:port (e.g. 10.0.0.5:6379)"
    })
  }
  if (Object.keys(groupBundle(request)).length === 0) {
    return yield* new InvalidSetting({
      name: "--gpus",
      value: String(request.gpus),
      reason: "a group without the serving slot needs --gpus >= 1 (each bundle must ask for something)"
    })
  }
  const probe = yield* rayCli.probe()
  if (!probe.answered) {
    const why = probe.timedOut
      ? `\`ray status\` did not answer within ${settings.statusTimeoutSec} s`
      : `\`ray status\` exited with code ${probe.exitCode}`
    return yield* new EnsureRefused({
      detail: `this is a multi-node run (${request.nodes} nodes) and ${why}; start the cluster's head and join its nodes first (docs/multi-node.md)`
    })
  }
  const inspection = yield* inspect()
  const verdict = checkGroupFeasibility(inspection.snapshot, request)
  for (const w of verdict.warnings) yield* Effect.logWarning(w)
  if (verdict.infeasible !== undefined) return yield* Effect.fail(verdict.infeasible)
  return { gcsAddress: inspection.resolved.gcsAddress, eligible: verdict.eligible }
})

/** How a group's ranks differ from one another (default: every rank runs the same command, all must end). */
export interface GroupOptions {
  /** Rank 0 runs this instead of the spec's argv (a serving engine with its client beside it). */
  readonly leaderArgv?: ReadonlyArray<string> | undefined
  /** Rank 0's end stops the other ranks (a serving benchmark ends with its client). */
  readonly endWithLeader?: boolean | undefined
  /** Every rank gets HYPERLOOM_PORT / HYPERLOOM_BASE_URL: a free port on its own node (a server per rank). */
  readonly rankPorts?: boolean | undefined
}

export interface GroupRunResult extends LeaseRunResult {
  readonly nodes: number
  readonly placementGroupId: string
  readonly group: GroupStarted | null
  readonly exits: ReadonlyArray<RankExit>
  readonly failedRank: number | undefined
}

/** While the placement group waits, say so and name who holds the slots it waits for, whenever that changes. */
const reportGroupContention = (gcsAddress: string, request: GroupRequest) =>
  reportWaiting(
    gcsAddress,
    `${request.nodes} nodes with ${request.servingSlot ? "serving_slot and " : ""}${request.gpus} GPU(s) each`,
    (snapshot) => {
      const held = slotHolders(snapshot).filter((n) => n.declared > 0 && (n.held > 0 || n.holders.length > 0))
      if (held.length === 0) return undefined
      return held
        .map(
          (n) =>
            `node ${shortId(n.nodeId)} (${n.address}): ${
              n.holders.length > 0
                ? n.holders.map(describeHolder).join(", ")
                : `placement group ${n.placementGroups.map(shortId).join(", ")}`
            }`
        )
        .join("; ")
    }
  )

/**
 * Acquires a group for the enclosing scope: under the work permit, ensure the cluster can place
 * it, mark "lease submitted", and ask for the placement group. The permit is released once that
 * is sent; the group lives until the scope closes (every rank stopped, placement group removed).
 */
export const acquireGroup = Effect.fn("Group.acquireGroup")(function* (
  spec: Omit<LeaseRunSpec, "timeoutSec" | "onOutput">,
  nodes: number,
  onOutput: (o: LeaseOutput & { readonly rank: number }) => Effect.Effect<void>,
  options: GroupOptions = {}
) {
  const gate = yield* WorkGate
  const bridge = yield* GroupBridge
  const settings = yield* Settings
  const request: GroupRequest = { ...spec.request, nodes }
  return yield* gate.withPermit(
    Effect.gen(function* () {
      const ensured = yield* ensureGroupLocked(request)
      yield* gate.markLeaseSubmitted
      const session: GroupSession = yield* bridge.open({
        gcsAddress: ensured.gcsAddress,
        nodes,
        gpus: spec.request.gpus,
        servingSlot: spec.request.servingSlot,
        gpuCleanTimeoutSec: spec.request.gpuCleanTimeoutSec,
        argv: spec.argv,
        // Never the launching host's paths by accident (docs/design.md#what-each-node-is-given):
        // each rank runs in its own node's environment with only HYPERLOOM_* and the --rank-env
        // names of this one laid over it, in a directory every node has unless --rank-cwd names
        // one.
        env: rankEnvironment(spec.env, settings.rankEnv ?? []),
        cwd: settings.rankCwd ?? DEFAULT_RANK_CWD,
        name: spec.name,
        leaderArgv: options.leaderArgv,
        endWithLeader: options.endWithLeader,
        rankPorts: options.rankPorts,
        onOutput
      })
      yield* gate.addOwnJob(session.jobId)
      yield* Effect.addFinalizer(() => gate.removeOwnJob(session.jobId))
      return { session, gcsAddress: ensured.gcsAddress }
    })
  )
})

/**
 * Holds a group, runs the command as its ranks (output lines prefixed `[rank r] `), and releases
 * it on every exit path. The exit code is the first failing rank's (the others are stopped).
 */
export const runGroupLeased = Effect.fn("Group.runGroupLeased")(function* (
  spec: LeaseRunSpec,
  nodes: number,
  options: GroupOptions = {}
) {
  if (spec.waitSec !== undefined) {
    return yield* new InvalidSetting({
      name: "--wait",
      value: String(spec.waitSec),
      reason:
        "applies to single-node leases: a group (--nodes >= 2) is not queued on the host and waits in Ray's own order (docs/reliability.md)"
    })
  }
  const began = yield* Clock.currentTimeMillis
  const tails = { stdout: "", stderr: "" }
  const onOutput = (o: LeaseOutput & { readonly rank: number }) => {
    const line = `${rankPrefix(o.rank)}${o.line}`
    return Effect.zipRight(
      Effect.sync(() => {
        tails[o.stream] = appendToTail(tails[o.stream], line)
      }),
      spec.onOutput?.({ stream: o.stream, line }) ?? Effect.void
    )
  }
  const progress = {
    gcsAddress: "",
    placementGroupId: "",
    group: null as GroupStarted | null,
    startedAt: 0,
    waitedSec: 0
  }
  const request: GroupRequest = { ...spec.request, nodes }
  const outcome = yield* Effect.scoped(
    Effect.gen(function* () {
      const { session, gcsAddress } = yield* acquireGroup(spec, nodes, onOutput, options)
      progress.gcsAddress = gcsAddress
      progress.placementGroupId = session.placementGroupId
      const waitStart = yield* Clock.currentTimeMillis
      const reporter = yield* Effect.fork(
        Effect.delay(reportGroupContention(gcsAddress, request), contentionFirstLook)
      )
      const placed = yield* session.awaitPlaced.pipe(Effect.ensuring(Fiber.interrupt(reporter)))
      progress.waitedSec = ((yield* Clock.currentTimeMillis) - waitStart) / 1000
      if (progress.waitedSec > 1.5) {
        yield* Effect.logInfo(`group placed after waiting ${progress.waitedSec.toFixed(1)} s`)
      }
      yield* Effect.logInfo(
        `group of ${nodes} ranks placed on nodes ${placed.nodeIds.map(shortId).join(", ")}`
      )
      progress.group = yield* session.awaitStarted
      const { heartbeatSec, nodeDeathSec } = progress.group
      if (heartbeatSec !== undefined && nodeDeathSec !== undefined) {
        yield* Effect.logDebug(
          `a rank that hears nothing from this host for ${heartbeatSec.toFixed(0)} s stops its command (Ray declares an unreachable node dead after ~${nodeDeathSec.toFixed(0)} s)`
        )
      }
      progress.startedAt = yield* Clock.currentTimeMillis
      // As for single leases (docs/design.md#waiting-is-not-failing), the timeout runs from the
      // commands' start: waiting is not charged.
      return spec.timeoutSec !== undefined
        ? yield* Effect.timeoutOption(session.awaitExit, Duration.seconds(spec.timeoutSec))
        : Option.some(yield* session.awaitExit)
    })
  )
  const ended = yield* Clock.currentTimeMillis
  const exit = Option.getOrUndefined(outcome)
  const rank0 = progress.group?.ranks[0]
  return {
    exitCode: exit?.exitCode ?? null,
    timedOut: exit === undefined,
    stdoutTail: exit?.stdoutTail ?? tails.stdout,
    stderrTail: exit?.stderrTail ?? tails.stderr,
    runtimeSec: (ended - began) / 1000,
    waitedSec: progress.waitedSec,
    commandSec: progress.startedAt > 0 ? (ended - progress.startedAt) / 1000 : 0,
    gcsAddress: progress.gcsAddress,
    started:
      rank0 === undefined
        ? null
        : {
            pid: rank0.pid,
            pgid: rank0.pgid,
            actorPid: rank0.actorPid,
            nodeId: rank0.nodeId,
            cudaVisibleDevices: rank0.cudaVisibleDevices
          },
    nodes,
    placementGroupId: progress.placementGroupId,
    group: progress.group,
    exits: exit?.exits ?? [],
    failedRank: exit?.failedRank
  } satisfies GroupRunResult
})

/** Whether a serving run's result is a group's. */
export const isGroupResult = (r: LeaseRunResult): r is GroupRunResult => "placementGroupId" in r

export type { LeaseRequest }
