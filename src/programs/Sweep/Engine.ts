/**
 * One engine per server combination (docs/design.md#combinations-and-points): a lease whose command
 * is the sweep runner, which starts the engine once, waits until it is ready, and then runs client
 * invocations on request (domain/Sweep/Runner.ts), until the scope closes: then it is asked to stop
 * the engine (TERM, grace, KILL of its process group) and exit, and the lease is released after it
 * (interrupted if the runner does not end in time).
 *
 * The sweep program sees only the `SweepEngine` tag: the live one (here) runs the lease through
 * the AttemptRunner (one node, or a group with `--nodes`); tests script one (`layerTest`).
 */
import {
  Cause,
  Context,
  Data,
  Deferred,
  Duration,
  Effect,
  Either,
  Exit,
  Fiber,
  Layer,
  Option,
  type Scope
} from "effect"
import type { AttemptResult } from "../../domain/Failure.js"
import { AttemptOutcome, classifyAttempt } from "../../domain/Failure.js"
import type { LeaseRequest } from "../../domain/Feasibility.js"
import { decodeObservations, type Observations, SAMPLER_NAME } from "../../domain/Observations.js"
import { LeasedCommand, type Readiness, SERVER_LOG } from "../../domain/Serving.js"
import { servingNodes } from "../../domain/Sweep/ClassChoice.js"
import type { ClientRunReport } from "../../domain/Sweep/ClientRun.js"
import { type NodeRecord, rayNodeFacts } from "../../domain/Sweep/Nodes.js"
import { eligibleNodes } from "../../domain/Sweep/Requeue.js"
import type { ClientRequest, EngineStatus, RunDone } from "../../domain/Sweep/Runner.js"
import { AttemptFiles } from "../../services/AttemptFiles.js"
import { ClusterInspector } from "../../services/ClusterInspector.js"
import { type LeaseOutput, LeaseTerminal } from "../../services/LeaseBridge.js"
import { SweepControl } from "../../services/SweepControl.js"
import { type AttemptError, AttemptRunner } from "../AttemptRunner.js"
import { readEvidence } from "../Evidence.js"
import type { LeaseRunResult } from "../Lease.js"

export interface EngineSpec {
  readonly request: LeaseRequest
  /** The server command line, placeholders filled (run with `sh -c`). */
  readonly server: string
  /** The engine's folder on this host (server.log, engine.json, control/: services/SweepControl.ts writes them). */
  readonly dir: string
  readonly readiness: Readiness
  /**
   * Bounds the wait for the lease (`--wait`, docs/design.md#fair-queue): past it LeaseWaitExpired
   * names the holder.
   */
  readonly waitSec?: number | undefined
  readonly env: Readonly<Record<string, string | undefined>>
  readonly cwd: string
  readonly onOutput?: ((o: LeaseOutput) => Effect.Effect<void>) | undefined
  /** `--check` and `--warmup`, run by the runner after readiness (docs/trust.md#is-the-number-valid). */
  readonly check?: string | undefined
  readonly warmup?: number | undefined
}

export type EngineStarted = Data.TaggedEnum<{
  Ready: { readonly readySec: number | null; readonly status: EngineStatus | undefined }
  /**
   * The engine exited or timed out before it was ready: classified as a baseline attempt's
   * (docs/design.md#failure-classes).
   */
  NotReady: { readonly result: AttemptResult }
}>
export const EngineStarted = Data.taggedEnum<EngineStarted>()

export interface ClientOutcome extends ClientRunReport {
  /** What the node sampled during the run (python/hyperloom/sampler.py), when it could. */
  readonly observations?: Observations | undefined
  /** `--between`'s own time (docs/design.md#time-to-the-answer), when it ran. */
  readonly betweenSec?: number | null | undefined
  /**
   * The lease itself failed while the client ran (its actor died with its node: the raylet killed,
   * the node declared dead after a cut), what it said: the engine did not fail, its node was lost
   * (domain/Sweep/Requeue.ts).
   */
  readonly leaseLost?: string | undefined
}

export interface EngineHandle {
  readonly started: EngineStarted
  /** The node the engine runs on (rank 0's for a group), as far as it could be told. */
  readonly node: NodeRecord | undefined
  /** Runs one client invocation against the ready engine. */
  readonly run: (request: ClientRequest) => Effect.Effect<ClientOutcome>
}

export interface SweepEngineShape {
  /** Leases, starts the engine and waits for it; stopped and released when the scope closes. */
  readonly start: (spec: EngineSpec) => Effect.Effect<EngineHandle, AttemptError, Scope.Scope>
  /**
   * Ray's ids of the alive nodes that could hold a lease of `gpus` GPUs and the slot; undefined
   * when the cluster cannot be read (domain/Sweep/Requeue.ts: is any node left for a combination
   * that avoids some?).
   */
  readonly eligibleNodes: (gpus: number) => Effect.Effect<ReadonlyArray<string> | undefined>
  /**
   * What the nodes that could hold a lease of `gpus` GPUs and the slot tell before any lease
   * (domain/Sweep/ClassChoice.ts: Ray's GPU count and accelerator type, the vendor tool's model where
   * `known` recorded it); undefined when the cluster cannot be read.
   */
  readonly servingNodes: (
    gpus: number,
    known: ReadonlyArray<NodeRecord>
  ) => Effect.Effect<ReadonlyArray<NodeRecord> | undefined>
}

export class SweepEngine extends Context.Tag("hyperloom/programs/SweepEngine")<
  SweepEngine,
  SweepEngineShape
>() {}

/** How long the runner may take to stop the engine and exit before the lease is taken down anyway. */
const STOP_WAIT = Duration.seconds(20)

/**
 * The node's facts: what the runner's engine status told (kept in engine.json: host, GPU models,
 * driver, CPU, Ray's node id) and what Ray tells of that node (its GPU total, its accelerator type).
 */
export const nodeRecordOf = (
  status: EngineStatus | undefined,
  ray: ReturnType<typeof rayNodeFacts>
): NodeRecord | undefined => {
  const n = status?.node
  if (n === undefined && ray === undefined) return undefined
  const models = n?.gpus ?? []
  return {
    hostname: n?.hostname ?? ray?.hostname ?? null,
    node_id: n?.ray_node_id ?? null,
    gpu_count: ray?.gpuCount ?? models.length,
    gpu_model: models[0] ?? ray?.accelerator ?? null,
    driver: n?.gpu_driver ?? null,
    cpu_model: n?.cpu_model ?? null,
    cpu_count: n?.cpu_count ?? null
  }
}

export const layer: Layer.Layer<SweepEngine, never, AttemptRunner | SweepControl | AttemptFiles> =
  Layer.effect(
    SweepEngine,
    Effect.gen(function* () {
      const runner = yield* AttemptRunner
      const control = yield* SweepControl
      const files = yield* AttemptFiles
      // Ray's view of the node, where the live services have it (they do: Live.ts)
      const inspector = yield* Effect.serviceOption(ClusterInspector)

      /** The node of the engine: engine.json's facts and Ray's view of that node (bounded, best effort). */
      const nodeOf = (status: EngineStatus | undefined) =>
        Effect.gen(function* () {
          const id = status?.node?.ray_node_id ?? null
          const ray =
            id === null || Option.isNone(inspector)
              ? undefined
              : yield* inspector.value.resolve.pipe(
                  Effect.flatMap((r) => inspector.value.snapshot(r.gcsAddress)),
                  Effect.map((snap) => rayNodeFacts(snap, id)),
                  Effect.timeout(Duration.seconds(5)),
                  Effect.orElseSucceed(() => undefined)
                )
          return nodeRecordOf(status, ray)
        })

      /**
       * The engine failed before ready: judged on server.log
       * (docs/design.md#classified-from-what-happened), its class as for a baseline attempt.
       */
      const notReady = (
        spec: EngineSpec,
        status: EngineStatus | undefined,
        lease: LeaseRunResult | undefined
      ) =>
        Effect.gen(function* () {
          const read = yield* readEvidence(files, [{ file: `${spec.dir}/${SERVER_LOG}`, channel: "server" }])
          const tail = read.tails[0] ?? ""
          const timedOut = status?.outcome === "ready_timeout"
          const fallback = lease === undefined ? "" : `${lease.stdoutTail}\n${lease.stderrTail}`.trim()
          return EngineStarted.NotReady({
            result: classifyAttempt(
              AttemptOutcome.ServerNotReady({
                exitCode: timedOut ? null : (status?.exit_code ?? lease?.exitCode ?? null),
                runtimeSec: status?.runtime_sec ?? lease?.commandSec ?? 0,
                outputTail: tail !== "" ? tail : fallback,
                readyTimeoutSec: timedOut ? spec.readiness.timeoutSec : undefined,
                outputSignature: read.signature,
                evidence: read.evidence
              })
            )
          })
        })

      const start = Effect.fn("SweepEngine.start")(function* (spec: EngineSpec) {
        // The runner's requests go to its stdin through the lease; its messages (status, answers,
        // the files it keeps) come back as lines of its output, taken here before anyone sees them.
        const channel = yield* control.open(spec.dir)
        const onOutput = (o: LeaseOutput) =>
          Effect.flatMap(channel.take(o), (taken) =>
            taken || spec.onOutput === undefined ? Effect.void : spec.onOutput(o)
          )
        const leaseFiber = yield* Effect.forkScoped(
          runner
            .run({
              request: spec.request,
              command: LeasedCommand.Engine({
                server: spec.server,
                readiness: spec.readiness,
                dir: spec.dir,
                check: spec.check,
                warmup: spec.warmup
              }),
              env: spec.env,
              cwd: spec.cwd,
              waitSec: spec.waitSec,
              onOutput
            })
            .pipe(Effect.provideService(LeaseTerminal, { stdin: channel.stdin }))
        )
        let seq = 0
        // Ask the runner to stop the engine and exit before the lease goes (the forked lease is
        // interrupted after this finalizer, which runs first).
        yield* Effect.addFinalizer(() =>
          Effect.gen(function* () {
            if (leaseFiber.unsafePoll() !== null) return
            seq++
            yield* channel.send(seq, { stop: true })
            yield* Fiber.await(leaseFiber).pipe(
              Effect.timeout(STOP_WAIT),
              Effect.ignore,
              Effect.interruptible
            )
          })
        )
        const leaseEnded = yield* Deferred.make<Exit.Exit<LeaseRunResult, AttemptError>>()
        yield* Effect.forkScoped(
          Effect.flatMap(Fiber.await(leaseFiber), (exit) => Deferred.succeed(leaseEnded, exit))
        )

        const first = yield* Effect.raceFirst(
          Effect.map(channel.awaitEngine, (s) => ({ _tag: "status" as const, s })),
          Effect.map(Deferred.await(leaseEnded), (exit) => ({ _tag: "lease" as const, exit }))
        )
        let started: EngineStarted
        let seen: EngineStatus | undefined = first._tag === "status" ? first.s : undefined
        if (first._tag === "lease") {
          if (Exit.isFailure(first.exit)) {
            // the lease's own failure (infeasible cluster, bridge): the caller's to judge, by tag
            return yield* Effect.failCause(first.exit.cause)
          }
          seen = yield* channel.engine
          started = yield* notReady(spec, seen, first.exit.value)
        } else if (first.s.state === "ready" || (first.s.state !== "failed" && first.s.ready_sec !== null)) {
          started = EngineStarted.Ready({ readySec: first.s.ready_sec, status: first.s })
        } else {
          // wait for the runner to end, so the lease's tails are there too
          const exit = yield* Deferred.await(leaseEnded).pipe(Effect.timeout(STOP_WAIT), Effect.option)
          const lease = exit._tag === "Some" && Exit.isSuccess(exit.value) ? exit.value.value : undefined
          started = yield* notReady(spec, yield* channel.engine, lease)
        }

        const run = (request: ClientRequest) =>
          Effect.gen(function* () {
            const began = Date.now()
            seq++
            const mine = seq
            const gone = (): ClientOutcome => ({
              exitCode: null,
              timedOut: false,
              runtimeSec: (Date.now() - began) / 1000,
              engineDied: true,
              engineExitCode: null,
              betweenExitCode: null
            })
            const polled = leaseFiber.unsafePoll()
            if (polled !== null) return { ...gone(), leaseLost: lostBy(polled) }
            yield* channel.send(mine, request)
            const answer = yield* Effect.raceFirst(
              Effect.map(channel.awaitDone(mine), (d) => ({ _tag: "done" as const, d })),
              Effect.as(Deferred.await(leaseEnded), { _tag: "gone" as const })
            )
            if (answer._tag === "gone") {
              // the runner ended while the client ran (the engine died and took it down, or the
              // lease went); every line it sent came before the lease's end
              const d = yield* channel.done(mine)
              if (d === undefined) {
                const s = yield* channel.engine
                return {
                  ...gone(),
                  engineExitCode: s?.exit_code ?? null,
                  leaseLost: lostBy(yield* Deferred.await(leaseEnded))
                }
              }
              return outcomeOf(d)
            }
            return outcomeOf(answer.d)
          })
        const node = yield* nodeOf(seen?.node !== undefined ? seen : yield* channel.engine)
        return { started, node, run } satisfies EngineHandle
      })
      const eligible = (gpus: number) =>
        Option.isNone(inspector)
          ? Effect.succeed(undefined)
          : inspector.value.resolve.pipe(
              Effect.flatMap((r) => inspector.value.snapshot(r.gcsAddress)),
              Effect.map((snap): ReadonlyArray<string> | undefined => eligibleNodes(snap, gpus)),
              Effect.timeout(Duration.seconds(5)),
              Effect.orElseSucceed(() => undefined)
            )
      const serving = (gpus: number, known: ReadonlyArray<NodeRecord>) =>
        Option.isNone(inspector)
          ? Effect.succeed(undefined)
          : inspector.value.resolve.pipe(
              Effect.flatMap((r) => inspector.value.snapshot(r.gcsAddress)),
              Effect.map((snap): ReadonlyArray<NodeRecord> | undefined => servingNodes(snap, gpus, known)),
              Effect.timeout(Duration.seconds(5)),
              Effect.orElseSucceed(() => undefined)
            )
      return SweepEngine.of({ start, eligibleNodes: eligible, servingNodes: serving })
    })
  )

/**
 * The lease failed (not interrupted, not ended by its command): its node was lost, as its error
 * tells; undefined when the lease ended as leases do.
 */
const lostBy = (exit: Exit.Exit<LeaseRunResult, AttemptError>): string | undefined => {
  if (Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause)) return undefined
  return Option.match(Cause.failureOption(exit.cause), {
    onNone: () => "the lease failed",
    onSome: (e) => e.message
  })
}

/** The samplers' observations of a run (python/hyperloom/sampler.py's NAME), when they decode. */
const observationsOf = (d: RunDone): Observations | undefined =>
  Either.getOrUndefined(decodeObservations(d.observations?.[SAMPLER_NAME]))

const outcomeOf = (d: RunDone): ClientOutcome => ({
  observations: observationsOf(d),
  exitCode: d.exit_code,
  timedOut: d.timed_out,
  runtimeSec: d.runtime_sec ?? 0,
  engineDied: !d.engine_alive,
  engineExitCode: d.engine_exit_code,
  betweenExitCode: d.between_exit_code !== null && d.between_exit_code !== 0 ? d.between_exit_code : null,
  betweenSec: d.between_sec
})

// ---------------------------------------------------------------------------------------------
// Test implementation: a scripted engine

/** What a fake engine does at its start: serve, fail before ready, or fail the lease. */
export type FakeStart =
  | { readonly ready: true }
  | { readonly notReady: { readonly exitCode: number; readonly log: string; readonly runtimeSec?: number } }
  | { readonly error: AttemptError }

/** What a fake client run does: its exit code, the metrics it writes (vLLM's format), the engine dying. */
export interface FakeRun {
  readonly exitCode?: number | undefined
  /** Written to HYPERLOOM_RESULT_FILE as a vLLM result (`output_throughput` etc.). */
  readonly metrics?: Readonly<Record<string, number>> | undefined
  /** Written to HYPERLOOM_RESULT_FILE as is instead: a client's own report (GuideLLM's, AIPerf's). */
  readonly report?: unknown
  readonly engineDies?: boolean | undefined
  readonly timedOut?: boolean | undefined
  /** The run never ends (until interrupted). */
  readonly hang?: boolean | undefined
  /** Seconds the run takes, on the Clock (TestClock works). */
  readonly runFor?: number | undefined
  /** The lease is lost while the client runs (its node died): no answer, `leaseLost` said. */
  readonly nodeLost?: boolean | undefined
}

export interface FakeEngineLog {
  /** Every engine start: its server command line, in order. */
  readonly starts: ReadonlyArray<string>
  /** Every client run: the server it ran against and its argv. */
  readonly runs: ReadonlyArray<{ readonly server: string; readonly argv: ReadonlyArray<string> }>
  /** Engines started and not stopped yet. */
  readonly live: number
  /** Every start's `--wait` bound, in order. */
  readonly waits: ReadonlyArray<number | undefined>
  /** The most engines live at once. */
  readonly maxLive: number
  /** Every start's nodes to avoid (docs/design.md#sweeps-at-cluster-scale), in order. */
  readonly avoids: ReadonlyArray<ReadonlyArray<string>>
}

export class FakeSweepEngineLog extends Context.Tag("hyperloom/programs/SweepEngine/FakeLog")<
  FakeSweepEngineLog,
  Effect.Effect<FakeEngineLog>
>() {}

/**
 * A scripted SweepEngine: `start(server, n)` decides the n-th start (1-based), `run(server, argv)`
 * each client run; results are written through AttemptFiles (give it the memory layer).
 */
export const layerTest = (script: {
  readonly start?: ((server: string, n: number) => FakeStart) | undefined
  /** The node the n-th start is granted (default: none told). */
  readonly node?: ((server: string, n: number) => NodeRecord | undefined) | undefined
  /** Seconds each start takes before the engine is ready, on the Clock (default 0). */
  readonly startFor?: number | undefined
  readonly run: (server: string, argv: ReadonlyArray<string>) => FakeRun
  /** What `servingNodes` answers (default: undefined, the cluster not read). */
  readonly serving?: (() => ReadonlyArray<NodeRecord> | undefined) | undefined
  /** What `eligibleNodes` answers (default: undefined, the cluster not read). */
  readonly eligible?: (() => ReadonlyArray<string> | undefined) | undefined
}): Layer.Layer<SweepEngine | FakeSweepEngineLog, never, AttemptFiles> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const files = yield* AttemptFiles
      const log = {
        starts: [] as Array<string>,
        runs: [] as Array<{ server: string; argv: ReadonlyArray<string> }>,
        live: 0,
        waits: [] as Array<number | undefined>,
        maxLive: 0,
        avoids: [] as Array<ReadonlyArray<string>>
      }
      const start = (spec: EngineSpec) =>
        Effect.gen(function* () {
          log.starts.push(spec.server)
          log.waits.push(spec.waitSec)
          log.avoids.push([...(spec.request.avoidNodes ?? [])])
          const n = log.starts.length
          const decided = (script.start ?? (() => ({ ready: true }) as const))(spec.server, n)
          if ("error" in decided) return yield* Effect.fail(decided.error)
          const node = script.node?.(spec.server, n)
          yield* Effect.acquireRelease(
            Effect.sync(() => {
              log.live++
              log.maxLive = Math.max(log.maxLive, log.live)
            }),
            () => Effect.sync(() => void log.live--)
          )
          if (script.startFor !== undefined) yield* Effect.sleep(Duration.seconds(script.startFor))
          if ("notReady" in decided) {
            return {
              started: EngineStarted.NotReady({
                result: classifyAttempt(
                  AttemptOutcome.ServerNotReady({
                    exitCode: decided.notReady.exitCode,
                    runtimeSec: decided.notReady.runtimeSec ?? 1,
                    outputTail: decided.notReady.log
                  })
                )
              }),
              node,
              run: () => Effect.die("the engine is not ready")
            } satisfies EngineHandle
          }
          let dead = false
          const run = (request: ClientRequest) =>
            Effect.gen(function* () {
              log.runs.push({ server: spec.server, argv: request.argv })
              if (dead)
                return {
                  exitCode: null,
                  timedOut: false,
                  runtimeSec: 0,
                  engineDied: true,
                  engineExitCode: 1,
                  betweenExitCode: null
                }
              const r = script.run(spec.server, request.argv)
              if (r.hang === true) return yield* Effect.never
              if (r.runFor !== undefined) yield* Effect.sleep(Duration.seconds(r.runFor))
              if (r.nodeLost === true) {
                dead = true
                return {
                  exitCode: null,
                  timedOut: false,
                  runtimeSec: r.runFor ?? 1,
                  engineDied: true,
                  engineExitCode: null,
                  betweenExitCode: null,
                  leaseLost: "the lease actor died: the node was marked dead"
                } satisfies ClientOutcome
              }
              const resultFile = request.env.HYPERLOOM_RESULT_FILE
              if (r.metrics !== undefined && resultFile !== undefined)
                yield* Effect.orDie(
                  files.writeJson(resultFile, {
                    endpoint_type: "openai",
                    total_token_throughput: 0,
                    ...r.metrics
                  })
                )
              if (r.report !== undefined && resultFile !== undefined)
                yield* Effect.orDie(files.writeJson(resultFile, r.report))
              if (r.engineDies === true) dead = true
              return {
                exitCode: r.timedOut === true ? null : (r.exitCode ?? 0),
                timedOut: r.timedOut === true,
                runtimeSec: r.runFor ?? 1,
                engineDied: r.engineDies === true,
                engineExitCode: r.engineDies === true ? 1 : null,
                betweenExitCode: null
              } satisfies ClientOutcome
            })
          return {
            started: EngineStarted.Ready({ readySec: script.startFor ?? 1, status: undefined }),
            node,
            run
          } satisfies EngineHandle
        })
      const eligibleNodes = () => Effect.sync(() => script.eligible?.())
      const servingNodes = () => Effect.sync(() => script.serving?.())
      return Context.make(SweepEngine, SweepEngine.of({ start, eligibleNodes, servingNodes })).pipe(
        Context.add(
          FakeSweepEngineLog,
          Effect.sync(() => ({
            starts: [...log.starts],
            runs: [...log.runs],
            live: log.live,
            waits: [...log.waits],
            maxLive: log.maxLive,
            avoids: [...log.avoids]
          }))
        )
      )
    })
  )
