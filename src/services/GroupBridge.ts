/**
 * GroupBridge: holds serving groups (docs/design.md#serving-groups-across-nodes) through the Python
 * group bridge shipped in the package (`python/hyperloom/group.py`, its header documents the
 * JSON-lines protocol). One bridge process per group, started with the Ray installation's Python:
 * it asks Ray for one placement group of N bundles `{"GPU": G, "serving_slot": 1}` (STRICT_SPREAD),
 * and once every bundle is placed starts one rank actor per bundle, each the lease actor of
 * `python/hyperloom/actor.py` (so every rank's command is supervised exactly as a single lease's).
 * The group lives as long as the scope `open` runs in: closing it stops every rank, kills the
 * actors and removes the placement group; if hyperloom dies, the bridge sees EOF on its stdin and
 * does the same; if the bridge dies, Ray removes its job's placement group and actors.
 */
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import { Context, Deferred, type Duration, Effect, Fiber, Layer, Schema, Scope } from "effect"
import { definedEntries } from "../domain/Env.js"
import type { RayNotFound } from "../domain/Errors.js"
import { DEFAULT_GPU_CLEAN_TIMEOUT_SEC } from "../domain/GpuHolders.js"
import { groupExitCode, type RankExit } from "../domain/Group.js"
import { Tail } from "../domain/Text.js"
import * as BridgeProcess from "./BridgeProcess.js"
import { DEFAULT_STOP_GRACE_SEC, type LeaseBridgeError, TAIL_CHARS } from "./BridgeProcess.js"
import type { LeaseOutput } from "./LeaseBridge.js"
import { forwardStdin, LeaseTerminal } from "./LeaseBridge.js"
import { rayPython } from "./RayInstall.js"
import { Settings } from "./Settings.js"

export { TAIL_CHARS } from "./BridgeProcess.js"

export interface GroupSpec {
  readonly gcsAddress: string
  /** Ranks: one bundle, one node each (>= 2 for a real group). */
  readonly nodes: number
  /** GPUs per rank. */
  readonly gpus: number
  readonly servingSlot: boolean
  readonly argv: ReadonlyArray<string>
  /**
   * What every rank gets of the launching environment, laid over its own node's environment (the
   * Ray worker's: the node's PATH and libraries); the rank variables and the actor's device
   * variables are laid over both.
   */
  readonly env: Readonly<Record<string, string | undefined>>
  readonly cwd: string
  /** What rank 0 runs instead of `argv` (e.g. the serving engine and, beside it, the benchmark client). */
  readonly leaderArgv?: ReadonlyArray<string> | undefined
  /** Rank 0's end stops the other ranks and ends the group (its exit code, unless one failed first). */
  readonly endWithLeader?: boolean | undefined
  /** Every rank also gets HYPERLOOM_PORT (a free port on its own node) and HYPERLOOM_BASE_URL. */
  readonly rankPorts?: boolean | undefined
  /** The placement group's name (optional). */
  readonly name?: string | undefined
  readonly stopGraceSec?: number | undefined
  /**
   * Each rank's clean-GPU wait on its own node (docs/design.md#clean-gpus; default 30 s), as in
   * LeaseSpec.
   */
  readonly gpuCleanTimeoutSec?: number | undefined
  readonly releaseTimeoutSec?: number | undefined
  readonly connectTimeoutSec?: number | undefined
  /** Each output line of each rank, in order per rank. */
  readonly onOutput?: ((output: RankOutput) => Effect.Effect<void>) | undefined
}

export interface RankOutput extends LeaseOutput {
  readonly rank: number
}

export interface RankStarted {
  readonly rank: number
  readonly pid: number | undefined
  readonly pgid: number
  readonly actorPid: number
  readonly actorId: string
  readonly nodeId: string
  readonly cudaVisibleDevices: string | undefined
}

export interface GroupPlaced {
  /** The node of each bundle (rank r runs on nodeIds[r]). */
  readonly nodeIds: ReadonlyArray<string>
}

export interface GroupStarted {
  readonly leaderHost: string
  readonly leaderPort: number
  /**
   * A rank that hears nothing from the group bridge for this long stops its command by itself
   * (a partition, the launching host gone), below `nodeDeathSec`: how long Ray takes to declare
   * an unreachable node dead and free its slot, from the cluster's health-check settings.
   */
  readonly heartbeatSec?: number | undefined
  readonly nodeDeathSec?: number | undefined
  readonly ranks: ReadonlyArray<RankStarted>
}

export interface GroupExit {
  /** The first failing rank's exit code, else 0. */
  readonly exitCode: number
  readonly failedRank: number | undefined
  /** Every rank's exit, in the order they came. */
  readonly exits: ReadonlyArray<RankExit>
  /** All ranks' output, `[rank r] ` prefixed, at most TAIL_CHARS per stream. */
  readonly stdoutTail: string
  readonly stderrTail: string
}

export interface GroupSession {
  readonly jobId: string
  readonly placementGroupId: string
  readonly bridgePid: number
  /** Resolves once every bundle is reserved (after any wait for slots held by others). */
  readonly awaitPlaced: Effect.Effect<GroupPlaced, LeaseBridgeError>
  /** Resolves once every rank's command was started. */
  readonly awaitStarted: Effect.Effect<GroupStarted, LeaseBridgeError>
  /** Resolves when every rank ended (the actors are then killed and the placement group removed). */
  readonly awaitExit: Effect.Effect<GroupExit, LeaseBridgeError>
}

export interface GroupBridgeShape {
  /** Starts a group bridge and returns once the placement group is asked for (mark "lease submitted" first). */
  readonly open: (spec: GroupSpec) => Effect.Effect<GroupSession, LeaseBridgeError | RayNotFound, Scope.Scope>
}

export class GroupBridge extends Context.Tag("hyperloom/services/GroupBridge")<
  GroupBridge,
  GroupBridgeShape
>() {}

/** Beyond the stop grace, how long a release may take before the bridge is killed. */
const RELEASE_MARGIN_SEC = 15

/** The rank prefix of every output line. */
export const rankPrefix = (rank: number) => `[rank ${rank}] `

// ---------------------------------------------------------------------------------------------
// Protocol (python/hyperloom/group.py)

const GroupEvent = Schema.Union(
  BridgeProcess.ConnectedEvent,
  Schema.Struct({ event: Schema.Literal("submitted"), placement_group_id: Schema.String }),
  Schema.Struct({ event: Schema.Literal("placed"), node_ids: Schema.Array(Schema.String) }),
  Schema.Struct({
    event: Schema.Literal("leader"),
    host: Schema.String,
    port: Schema.Number,
    heartbeat_sec: Schema.optional(Schema.Number),
    node_death_sec: Schema.optional(Schema.Number)
  }),
  Schema.Struct({
    event: Schema.Literal("started"),
    rank: Schema.Number,
    pid: Schema.NullOr(Schema.Number),
    pgid: Schema.Number,
    actor_pid: Schema.Number,
    actor_id: Schema.optional(Schema.String),
    node_id: Schema.String,
    cuda_visible_devices: Schema.NullOr(Schema.String)
  }),
  Schema.Struct({
    event: Schema.Literal("output"),
    rank: Schema.Number,
    stream: Schema.Literal("stdout", "stderr"),
    line: Schema.String
  }),
  Schema.Struct({ event: Schema.Literal("exit"), rank: Schema.Number, code: Schema.Number }),
  Schema.Struct({ event: Schema.Literal("stdin_written"), bytes: Schema.Number }),
  Schema.Struct({ event: Schema.Literal("stdin_closed") }),
  Schema.extend(BridgeProcess.GpuBusyEvent, Schema.Struct({ rank: Schema.Number })),
  Schema.Struct({
    event: Schema.Literal("ended"),
    code: Schema.Number,
    failed_rank: Schema.NullOr(Schema.Number)
  }),
  BridgeProcess.ErrorEvent,
  BridgeProcess.ReleasedEvent
)

const decodeEvent = Schema.decodeUnknownEither(Schema.parseJson(GroupEvent))

/** The `group` request line (`stdin`: rank 0's command reads what `stdin` ops send). */
export const groupRequest = (spec: GroupSpec, stdin = false): string =>
  JSON.stringify({
    op: "group",
    address: spec.gcsAddress,
    nodes: spec.nodes,
    gpus: spec.gpus,
    serving_slot: spec.servingSlot,
    argv: spec.argv,
    env: definedEntries(spec.env),
    env_base: "node",
    cwd: spec.cwd,
    ...(spec.name !== undefined ? { name: spec.name } : {}),
    ...(spec.leaderArgv !== undefined ? { leader_argv: spec.leaderArgv } : {}),
    ...(spec.endWithLeader === true ? { end_with_leader: true } : {}),
    ...(spec.rankPorts === true ? { rank_ports: true } : {}),
    ...(stdin ? { stdin: true } : {}),
    stop_grace_sec: spec.stopGraceSec ?? DEFAULT_STOP_GRACE_SEC,
    gpu_clean_timeout_sec: spec.gpuCleanTimeoutSec ?? DEFAULT_GPU_CLEAN_TIMEOUT_SEC
  })

/** The group bridge's kinds of actor failure (its `error` events), none naming one actor. */
const ACTOR_KINDS = {
  placement: "actor_creation",
  actor_creation: "actor_creation",
  rank_died: "actor_died",
  actor_failed: "actor_failed"
} as const

// ---------------------------------------------------------------------------------------------
// Live implementation

const make = Effect.gen(function* () {
  const settings = yield* Settings
  const executor = yield* CommandExecutor.CommandExecutor

  /** Spawns the bridge and wires it up; uninterruptible so the release finalizer is always in place. */
  const startBridge = (scope: Scope.Scope, spec: GroupSpec, python: string) =>
    Effect.gen(function* () {
      const proc = yield* BridgeProcess.spawn(executor, scope, {
        python,
        command: "group",
        env: settings.env
      })
      const { stdin: input } = yield* LeaseTerminal
      let stdin: ReturnType<typeof forwardStdin> | undefined
      const submitted = yield* Deferred.make<{ jobId: string; pgId: string }, LeaseBridgeError>()
      const placed = yield* Deferred.make<GroupPlaced, LeaseBridgeError>()
      const started = yield* Deferred.make<GroupStarted, LeaseBridgeError>()
      const exited = yield* Deferred.make<GroupExit, LeaseBridgeError>()
      const tails = { stdout: new Tail(TAIL_CHARS), stderr: new Tail(TAIL_CHARS) }
      const ranks = new Map<number, RankStarted>()
      const exits: Array<RankExit> = []
      const leader: { host: string; port: number; heartbeatSec?: number; nodeDeathSec?: number } = {
        host: "",
        port: 0
      }

      const bridge = yield* BridgeProcess.wire(scope, proc, {
        name: "group bridge",
        title: "group bridge",
        span: "GroupBridge.release",
        holding: "the group",
        work: "every rank",
        python,
        spec,
        releaseMarginSec: RELEASE_MARGIN_SEC,
        decode: decodeEvent,
        onEvent: (ev, jobId) => {
          switch (ev.event) {
            case "submitted":
              return Deferred.succeed(submitted, { jobId: jobId ?? "", pgId: ev.placement_group_id }).pipe(
                Effect.asVoid
              )
            case "placed":
              return Deferred.succeed(placed, { nodeIds: ev.node_ids }).pipe(Effect.asVoid)
            case "leader":
              return Effect.sync(() => {
                leader.host = ev.host
                leader.port = ev.port
                if (ev.heartbeat_sec !== undefined) leader.heartbeatSec = ev.heartbeat_sec
                if (ev.node_death_sec !== undefined) leader.nodeDeathSec = ev.node_death_sec
              })
            case "started": {
              ranks.set(ev.rank, {
                rank: ev.rank,
                pid: ev.pid ?? undefined,
                pgid: ev.pgid,
                actorPid: ev.actor_pid,
                actorId: ev.actor_id ?? "",
                nodeId: ev.node_id,
                cudaVisibleDevices: ev.cuda_visible_devices ?? undefined
              })
              if (ranks.size < spec.nodes) return Effect.void
              return Deferred.succeed(started, {
                leaderHost: leader.host,
                leaderPort: leader.port,
                heartbeatSec: leader.heartbeatSec,
                nodeDeathSec: leader.nodeDeathSec,
                ranks: [...ranks.values()].sort((a, b) => a.rank - b.rank)
              }).pipe(Effect.asVoid)
            }
            case "output": {
              tails[ev.stream].push(`${rankPrefix(ev.rank)}${ev.line}`)
              return spec.onOutput !== undefined
                ? spec.onOutput({ rank: ev.rank, stream: ev.stream, line: ev.line })
                : Effect.void
            }
            case "gpu_busy": {
              // That rank's command never started: the group fails with its node's holders.
              const error = BridgeProcess.gpuBusyOf(ev, ev.rank)
              return Effect.all([Deferred.fail(started, error), Deferred.fail(exited, error)], {
                discard: true
              })
            }
            case "exit":
              return Effect.sync(() => {
                exits.push({ rank: ev.rank, code: ev.code })
              })
            case "stdin_written":
              return Effect.sync(() => stdin?.acked(ev.bytes))
            case "stdin_closed":
              return Effect.sync(() => stdin?.stop())
            case "ended":
              // The bridge decides: exits caused by the group's own stop are not failures.
              return Deferred.succeed(exited, {
                exitCode: ev.code,
                failedRank: ev.failed_rank ?? undefined,
                exits: [...exits],
                stdoutTail: tails.stdout.text(),
                stderrTail: tails.stderr.text()
              }).pipe(Effect.asVoid)
          }
        },
        actorKinds: ACTOR_KINDS,
        failAll: (error) =>
          Effect.all(
            [
              Deferred.fail(submitted, error),
              Deferred.fail(placed, error),
              Deferred.fail(started, error),
              Deferred.fail(exited, error)
            ],
            { discard: true }
          ),
        request: groupRequest(spec, input !== undefined),
        tidy: { executor, env: settings.env }
      })
      if (input !== undefined) {
        const forwarding = forwardStdin(input, bridge.send)
        stdin = forwarding
        yield* Scope.addFinalizer(scope, Effect.sync(forwarding.stop))
      }
      return { bridge, submitted, placed, started, exited }
    }).pipe(Effect.uninterruptible)

  const openIn = (scope: Scope.Scope, spec: GroupSpec, python: string) =>
    Effect.gen(function* () {
      const b = yield* startBridge(scope, spec, python)
      const { jobId, pgId } = yield* BridgeProcess.awaitSubmitted(
        b.submitted,
        b.bridge,
        spec,
        "the placement group was not submitted"
      )
      return {
        jobId,
        placementGroupId: pgId,
        bridgePid: b.bridge.pid,
        awaitPlaced: Deferred.await(b.placed),
        awaitStarted: Deferred.await(b.started),
        awaitExit: Deferred.await(b.exited)
      } satisfies GroupSession
    })

  const open = Effect.fn("GroupBridge.open")(function* (spec: GroupSpec) {
    const python = yield* rayPython(settings)
    return yield* BridgeProcess.inOwnScope((scope) => openIn(scope, spec, python))
  })

  return GroupBridge.of({ open })
})

/** The live service: needs Settings and a CommandExecutor. */
export const layer: Layer.Layer<GroupBridge, never, Settings | CommandExecutor.CommandExecutor> =
  Layer.effect(GroupBridge, make)

// ---------------------------------------------------------------------------------------------
// Test implementation: a scripted fake

/** What a fake group does (defaults: placed at once, every rank exits 0). */
export interface FakeGroup {
  readonly openError?: LeaseBridgeError | undefined
  /** Time from open to placed (a wait for slots). */
  readonly placeAfter?: Duration.DurationInput | undefined
  readonly placeError?: LeaseBridgeError | undefined
  /** Per rank: output lines, run time, exit code (default 0), or hang until stopped. */
  readonly ranks?:
    | ReadonlyArray<{
        readonly output?: ReadonlyArray<LeaseOutput> | undefined
        readonly runFor?: Duration.DurationInput | undefined
        readonly exitCode?: number | undefined
        readonly hang?: boolean | undefined
      }>
    | undefined
}

export type FakeGroupLog = BridgeProcess.FakeOpenLog<GroupSpec>

export class FakeGroupBridgeLog extends Context.Tag("hyperloom/services/GroupBridge/FakeLog")<
  FakeGroupBridgeLog,
  Effect.Effect<FakeGroupLog>
>() {}

/**
 * A fake GroupBridge following `script(spec, n)` for the n-th open. Ranks run on the Clock; when
 * one exits non-zero, the others end at once with 143 (stopped), as the real bridge does.
 */
export const layerTest = (
  script: (spec: GroupSpec, n: number) => FakeGroup = () => ({})
): Layer.Layer<GroupBridge | FakeGroupBridgeLog> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const opens = yield* BridgeProcess.fakeOpens(script)
      const open = Effect.fn("GroupBridge.open")(function* (spec: GroupSpec) {
        const { n, fake } = yield* opens.open(spec)
        const nodeIds = Array.from({ length: spec.nodes }, (_, r) =>
          String(r + 1)
            .repeat(56)
            .slice(0, 56)
        )
        const placed = yield* Effect.forkScoped(
          Effect.sleep(fake.placeAfter ?? 0).pipe(
            Effect.zipRight(
              fake.placeError !== undefined ? Effect.fail(fake.placeError) : Effect.succeed({ nodeIds })
            )
          )
        )
        const startedInfo: GroupStarted = {
          leaderHost: "10.0.0.5",
          leaderPort: 29500,
          ranks: nodeIds.map((nodeId, rank) => ({
            rank,
            pid: 1000 + rank,
            pgid: 1000 + rank,
            actorPid: 900 + rank,
            actorId: `${rank}`.repeat(32),
            nodeId,
            cudaVisibleDevices: spec.gpus > 0 ? "0" : undefined
          }))
        }
        const exited = yield* Effect.forkScoped(
          Effect.gen(function* () {
            yield* Fiber.join(placed)
            const tails = { stdout: new Tail(TAIL_CHARS), stderr: new Tail(TAIL_CHARS) }
            const exits: Array<RankExit> = []
            let decided: number | undefined
            const failed = yield* Deferred.make<void>()
            const rankRun = (rank: number) =>
              Effect.gen(function* () {
                const r = fake.ranks?.[rank] ?? {}
                for (const o of r.output ?? []) {
                  tails[o.stream].push(`${rankPrefix(rank)}${o.line}`)
                  if (spec.onOutput !== undefined) yield* spec.onOutput({ ...o, rank })
                }
                const own = Effect.sleep(r.runFor ?? 0).pipe(
                  Effect.zipRight(r.hang === true ? Effect.never : Effect.succeed(r.exitCode ?? 0))
                )
                const code = yield* Effect.raceFirst(own, Deferred.await(failed).pipe(Effect.as(143)))
                exits.push({ rank, code })
                if (code !== 0 || (rank === 0 && spec.endWithLeader === true)) {
                  if (decided === undefined) decided = exits.length
                  yield* Deferred.succeed(failed, undefined)
                }
              })
            yield* Effect.all(
              Array.from({ length: spec.nodes }, (_, r) => rankRun(r)),
              { concurrency: "unbounded", discard: true }
            )
            const counted = decided === undefined ? exits : exits.slice(0, decided)
            const exit: GroupExit = {
              exitCode: groupExitCode(counted),
              failedRank: counted.find((e) => e.code !== 0)?.rank,
              exits,
              stdoutTail: tails.stdout.text(),
              stderrTail: tails.stderr.text()
            }
            return exit
          })
        )
        const session: GroupSession = {
          jobId: (n + 1).toString(16).padStart(2, "0").padEnd(8, "0"),
          placementGroupId: "e".repeat(36),
          bridgePid: 3000 + n,
          awaitPlaced: Fiber.join(placed),
          awaitStarted: Fiber.join(placed).pipe(Effect.as(startedInfo)),
          awaitExit: Fiber.join(exited)
        }
        return session
      })
      return Context.make(GroupBridge, GroupBridge.of({ open })).pipe(
        Context.add(FakeGroupBridgeLog, opens.log)
      )
    })
  )
