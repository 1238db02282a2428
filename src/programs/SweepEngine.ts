/**
 * One engine per server combination (SPEC §12): a lease whose command is the sweep runner, which
 * starts the engine once, waits until it is ready, and then runs client invocations on request
 * (domain/Sweep/Runner.ts), until the scope closes: then it is asked to stop the engine (TERM,
 * grace, KILL of its process group) and exit, and the lease is released after it (interrupted if
 * the runner does not end in time).
 *
 * The sweep program sees only the `SweepEngine` tag: the live one (here) runs the lease through
 * the AttemptRunner (one node, or a group with `--nodes`); tests script one (`layerTest`).
 */
import { Context, Data, Deferred, Duration, Effect, Exit, Fiber, Layer, type Scope } from "effect"
import type { AttemptResult } from "../domain/Failure.js"
import {
  AttemptOutcome,
  classifyAttempt,
  isTellingLine,
  MAX_ERROR_CHARS,
  MAX_EVIDENCE_LINES
} from "../domain/Failure.js"
import type { LeaseRequest } from "../domain/Feasibility.js"
import { LeasedCommand, SERVER_LOG } from "../domain/Serving.js"
import { OutputDigest } from "../domain/Signature.js"
import type { ClientRequest, EngineStatus, RunDone } from "../domain/Sweep/Runner.js"
import { AttemptFiles } from "../services/AttemptFiles.js"
import type { LeaseOutput } from "../services/LeaseBridge.js"
import { SweepControl } from "../services/SweepControl.js"
import { type AttemptError, AttemptRunner } from "./AttemptRunner.js"
import type { LeaseRunResult } from "./Lease.js"

export interface EngineSpec {
  readonly request: LeaseRequest
  /** The server command line, placeholders filled (run with `sh -c`). */
  readonly server: string
  /** The engine's directory: server.log, engine.json, control/. */
  readonly dir: string
  readonly readyPath: string
  readonly readyTimeoutSec: number
  /** Bounds the wait for the lease (SPEC §13 `--wait`): past it LeaseWaitExpired names the holder. */
  readonly waitSec?: number | undefined
  readonly env: Readonly<Record<string, string | undefined>>
  readonly cwd: string
  readonly onOutput?: ((o: LeaseOutput) => Effect.Effect<void>) | undefined
}

export type EngineStarted = Data.TaggedEnum<{
  Ready: { readonly readySec: number | null; readonly status: EngineStatus | undefined }
  /** The engine exited or timed out before it was ready: classified as SPEC §6 says. */
  NotReady: { readonly result: AttemptResult }
}>
export const EngineStarted = Data.taggedEnum<EngineStarted>()

export interface ClientOutcome {
  readonly exitCode: number | null
  readonly timedOut: boolean
  /** The client's own runtime. */
  readonly runtimeSec: number
  /** The engine was gone after (or during) the run. */
  readonly engineDied: boolean
  readonly engineExitCode: number | null
  /** `--between` exited non-zero (the client did not run). */
  readonly betweenExitCode: number | null
  /** `--between`'s own time (SPEC §15), when it ran. */
  readonly betweenSec?: number | null | undefined
}

export interface EngineHandle {
  readonly started: EngineStarted
  /** Runs one client invocation against the ready engine. */
  readonly run: (request: ClientRequest) => Effect.Effect<ClientOutcome>
}

export interface SweepEngineShape {
  /** Leases, starts the engine and waits for it; stopped and released when the scope closes. */
  readonly start: (spec: EngineSpec) => Effect.Effect<EngineHandle, AttemptError, Scope.Scope>
}

export class SweepEngine extends Context.Tag("hyperloom/programs/SweepEngine")<
  SweepEngine,
  SweepEngineShape
>() {}

/** How long the runner may take to stop the engine and exit before the lease is taken down anyway. */
const STOP_WAIT = Duration.seconds(20)

export const layer: Layer.Layer<SweepEngine, never, AttemptRunner | SweepControl | AttemptFiles> =
  Layer.effect(
    SweepEngine,
    Effect.gen(function* () {
      const runner = yield* AttemptRunner
      const control = yield* SweepControl
      const files = yield* AttemptFiles

      /** The engine failed before ready: judged on server.log (SPEC §10), its class as §6 says. */
      const notReady = (
        spec: EngineSpec,
        status: EngineStatus | undefined,
        lease: LeaseRunResult | undefined
      ) =>
        Effect.gen(function* () {
          const digest = new OutputDigest()
          const evidence: Array<string> = []
          const tail =
            (yield* files.scanLog(
              `${spec.dir}/${SERVER_LOG}`,
              (line) => {
                digest.add("server", line)
                if (evidence.length < MAX_EVIDENCE_LINES && isTellingLine(line))
                  evidence.push(line.trim().slice(0, 1000))
              },
              MAX_ERROR_CHARS * 4
            )) ?? ""
          const timedOut = status?.outcome === "ready_timeout"
          const fallback = lease === undefined ? "" : `${lease.stdoutTail}\n${lease.stderrTail}`.trim()
          return EngineStarted.NotReady({
            result: classifyAttempt(
              AttemptOutcome.ServerNotReady({
                exitCode: timedOut ? null : (status?.exit_code ?? lease?.exitCode ?? null),
                runtimeSec: status?.runtime_sec ?? lease?.commandSec ?? 0,
                outputTail: tail !== "" ? tail : fallback,
                readyTimeoutSec: timedOut ? spec.readyTimeoutSec : undefined,
                outputSignature: digest.signature(),
                evidence
              })
            )
          })
        })

      const start = Effect.fn("SweepEngine.start")(function* (spec: EngineSpec) {
        yield* Effect.orDie(control.prepare(spec.dir))
        const leaseFiber = yield* Effect.forkScoped(
          runner.run({
            request: spec.request,
            command: LeasedCommand.Engine({
              server: spec.server,
              readiness: { path: spec.readyPath, timeoutSec: spec.readyTimeoutSec },
              dir: spec.dir
            }),
            env: spec.env,
            cwd: spec.cwd,
            waitSec: spec.waitSec,
            onOutput: spec.onOutput
          })
        )
        let seq = 0
        // Ask the runner to stop the engine and exit before the lease goes (the forked lease is
        // interrupted after this finalizer, which runs first).
        yield* Effect.addFinalizer(() =>
          Effect.gen(function* () {
            if (leaseFiber.unsafePoll() !== null) return
            seq++
            yield* control.send(spec.dir, seq, { stop: true }).pipe(Effect.ignore)
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
          Effect.map(control.awaitEngine(spec.dir), (s) => ({ _tag: "status" as const, s })),
          Effect.map(Deferred.await(leaseEnded), (exit) => ({ _tag: "lease" as const, exit }))
        )
        let started: EngineStarted
        if (first._tag === "lease") {
          if (Exit.isFailure(first.exit)) {
            // the lease's own failure (infeasible cluster, bridge): the caller's to judge, by tag
            return yield* Effect.failCause(first.exit.cause)
          }
          started = yield* notReady(spec, yield* control.engine(spec.dir), first.exit.value)
        } else if (first.s.state === "ready" || (first.s.state !== "failed" && first.s.ready_sec !== null)) {
          started = EngineStarted.Ready({ readySec: first.s.ready_sec, status: first.s })
        } else {
          // wait for the runner to end, so the lease's tails are there too
          const exit = yield* Deferred.await(leaseEnded).pipe(Effect.timeout(STOP_WAIT), Effect.option)
          const lease = exit._tag === "Some" && Exit.isSuccess(exit.value) ? exit.value.value : undefined
          started = yield* notReady(spec, first.s, lease)
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
            if (leaseFiber.unsafePoll() !== null) return gone()
            yield* Effect.orDie(control.send(spec.dir, mine, request))
            const answer = yield* Effect.raceFirst(
              Effect.map(control.awaitDone(spec.dir, mine), (d) => ({ _tag: "done" as const, d })),
              Effect.as(Deferred.await(leaseEnded), { _tag: "gone" as const })
            )
            if (answer._tag === "gone") {
              // the runner ended while the client ran (the engine died and took it down, or the lease went)
              const d = yield* control
                .awaitDone(spec.dir, mine)
                .pipe(Effect.timeout(Duration.seconds(1)), Effect.option)
              if (d._tag === "None") {
                const s = yield* control.engine(spec.dir)
                return { ...gone(), engineExitCode: s?.exit_code ?? null }
              }
              return outcomeOf(d.value)
            }
            return outcomeOf(answer.d)
          })
        return { started, run } satisfies EngineHandle
      })
      return SweepEngine.of({ start })
    })
  )

const outcomeOf = (d: RunDone): ClientOutcome => ({
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
  readonly engineDies?: boolean | undefined
  readonly timedOut?: boolean | undefined
  /** The run never ends (until interrupted). */
  readonly hang?: boolean | undefined
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
  readonly run: (server: string, argv: ReadonlyArray<string>) => FakeRun
}): Layer.Layer<SweepEngine | FakeSweepEngineLog, never, AttemptFiles> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const files = yield* AttemptFiles
      const log = {
        starts: [] as Array<string>,
        runs: [] as Array<{ server: string; argv: ReadonlyArray<string> }>,
        live: 0,
        waits: [] as Array<number | undefined>
      }
      const start = (spec: EngineSpec) =>
        Effect.gen(function* () {
          log.starts.push(spec.server)
          log.waits.push(spec.waitSec)
          const decided = (script.start ?? (() => ({ ready: true }) as const))(spec.server, log.starts.length)
          if ("error" in decided) return yield* Effect.fail(decided.error)
          yield* Effect.acquireRelease(
            Effect.sync(() => void log.live++),
            () => Effect.sync(() => void log.live--)
          )
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
              const resultFile = request.env.HYPERLOOM_RESULT_FILE
              if (r.metrics !== undefined && resultFile !== undefined)
                yield* Effect.orDie(
                  files.writeJson(resultFile, {
                    endpoint_type: "openai",
                    total_token_throughput: 0,
                    ...r.metrics
                  })
                )
              if (r.engineDies === true) dead = true
              return {
                exitCode: r.timedOut === true ? null : (r.exitCode ?? 0),
                timedOut: r.timedOut === true,
                runtimeSec: 1,
                engineDied: r.engineDies === true,
                engineExitCode: r.engineDies === true ? 1 : null,
                betweenExitCode: null
              } satisfies ClientOutcome
            })
          return {
            started: EngineStarted.Ready({ readySec: 1, status: undefined }),
            run
          } satisfies EngineHandle
        })
      return Context.make(SweepEngine, SweepEngine.of({ start })).pipe(
        Context.add(
          FakeSweepEngineLog,
          Effect.sync(() => ({
            starts: [...log.starts],
            runs: [...log.runs],
            live: log.live,
            waits: [...log.waits]
          }))
        )
      )
    })
  )
