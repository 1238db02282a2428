/**
 * LeaseBridge: holds serving leases (SPEC §5) through the Python bridge shipped in the package
 * (`python/hyperloom_bridge.py`, its header documents the JSON-lines protocol). One bridge process
 * per lease, started with the Ray installation's Python; the lease lives as long as the scope
 * `open` runs in: closing it (normal end, error, interruption) releases the lease — the command's
 * process tree is stopped, the actor killed — and the bridge is killed if it does not finish in
 * time. If hyperloom itself dies, the bridge sees EOF on its stdin and releases on its own.
 */
import * as Command from "@effect/platform/Command"
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import {
  Cause,
  Context,
  Data,
  Deferred,
  Duration,
  Effect,
  Either,
  ExecutionStrategy,
  Exit,
  Fiber,
  Layer,
  Option,
  Queue,
  Ref,
  Schema,
  Scope,
  Stream
} from "effect"
import type { RayNotFound } from "../domain/Errors.js"
import { oneLine, Tail } from "../domain/Text.js"
import { packageFile } from "./PackagePaths.js"
import { rayPython } from "./RayInstall.js"
import { Settings } from "./Settings.js"

// ---------------------------------------------------------------------------------------------
// Errors

/** The bridge could not be started, or its Python cannot import Ray. */
export class LeaseBridgeStartFailed extends Data.TaggedError("LeaseBridgeStartFailed")<{
  readonly python: string
  readonly detail: string
}> {
  override get message(): string {
    return `cannot start the lease bridge with ${this.python}: ${oneLine(this.detail)}`
  }
}

/** The bridge said something unexpected, or ended before the lease did. */
export class LeaseBridgeProtocolError extends Data.TaggedError("LeaseBridgeProtocolError")<{
  readonly detail: string
}> {
  override get message(): string {
    return `lease bridge failed: ${oneLine(this.detail)}`
  }
}

/** ray.init in the bridge failed (or did not answer in time): Ray's reason. */
export class LeaseRayInitFailed extends Data.TaggedError("LeaseRayInitFailed")<{
  readonly address: string
  readonly reason: string
}> {
  override get message(): string {
    return `cannot connect a Ray driver to ${this.address}: ${oneLine(this.reason)}`
  }
}

/** The lease actor could not be created, died, or its method failed. */
export class LeaseActorFailed extends Data.TaggedError("LeaseActorFailed")<{
  readonly kind: "actor_creation" | "actor_died" | "actor_failed"
  readonly actorId: string | undefined
  readonly reason: string
}> {
  override get message(): string {
    const what =
      this.kind === "actor_creation" ? "could not be created" : this.kind === "actor_died" ? "died" : "failed"
    return `the lease actor${this.actorId !== undefined ? ` ${this.actorId}` : ""} ${what}: ${oneLine(this.reason)}`
  }
}

export type LeaseBridgeError =
  | LeaseBridgeStartFailed
  | LeaseBridgeProtocolError
  | LeaseRayInitFailed
  | LeaseActorFailed

// ---------------------------------------------------------------------------------------------
// The service

export interface LeaseOutput {
  readonly stream: "stdout" | "stderr"
  readonly line: string
}

export interface LeaseSpec {
  /** The GCS `host:port` of the cluster to lease from. */
  readonly gcsAddress: string
  /** GPUs for the actor (`num_gpus`); 0 leaves CUDA_VISIBLE_DEVICES to the caller's env. */
  readonly gpus: number
  /** Also ask for `serving_slot: 1` (the whole-host mutex). */
  readonly servingSlot: boolean
  readonly argv: ReadonlyArray<string>
  /** The command's whole environment; the actor's device variables are laid over it. */
  readonly env: Readonly<Record<string, string | undefined>>
  readonly cwd: string
  /** Actor name (in Ray namespace `hyperloom`); a taken name fails with LeaseActorFailed. */
  readonly name?: string | undefined
  /** Grace between TERM and KILL when the command is stopped (default 3 s). */
  readonly stopGraceSec?: number | undefined
  /** Time a release may take before the bridge is killed (default stop grace + 10 s). */
  readonly releaseTimeoutSec?: number | undefined
  /** Time allowed from bridge start to actor submission (default 60 s). */
  readonly connectTimeoutSec?: number | undefined
  /** Called for each output line as it comes, in order (a slow callback slows the stream). */
  readonly onOutput?: ((output: LeaseOutput) => Effect.Effect<void>) | undefined
}

export interface LeaseStarted {
  /** CMD's pid; undefined when CMD could not be started (its exit code is then 127). */
  readonly pid: number | undefined
  /** CMD's process group (its supervisor's pid). */
  readonly pgid: number
  /** The actor's worker process. */
  readonly actorPid: number
  readonly nodeId: string
  readonly cudaVisibleDevices: string | undefined
}

export interface LeaseExit {
  readonly exitCode: number
  /** The last output, at most TAIL_CHARS characters per stream, lines joined with "\n". */
  readonly stdoutTail: string
  readonly stderrTail: string
}

export interface LeaseSession {
  /** The bridge's Ray job (the driver hyperloom uses for this lease). */
  readonly jobId: string
  readonly actorId: string
  readonly bridgePid: number
  /** Resolves once the actor runs (after any wait for the slot or GPUs held by another lease). */
  readonly awaitStarted: Effect.Effect<LeaseStarted, LeaseBridgeError>
  /** Resolves when CMD ends. The actor is then killed at once (the slot frees). */
  readonly awaitExit: Effect.Effect<LeaseExit, LeaseBridgeError>
}

export interface LeaseBridgeShape {
  /**
   * Starts a bridge, connects it, sends the actor creation and returns once it is submitted
   * (mark "lease submitted" before calling). The lease is released when the scope closes.
   */
  readonly open: (spec: LeaseSpec) => Effect.Effect<LeaseSession, LeaseBridgeError | RayNotFound, Scope.Scope>
  /**
   * Starts the next lease's bridge process now, so that Python imports Ray while the caller does
   * other work (ensure); the next `open` takes it. Sends nothing (no lease is submitted); an
   * unused one is stopped with the layer. Never fails: `open` reports any problem.
   */
  readonly prestart: Effect.Effect<void>
}

export class LeaseBridge extends Context.Tag("hyperloom/services/LeaseBridge")<
  LeaseBridge,
  LeaseBridgeShape
>() {}

/** Output tail bound per stream. */
export const TAIL_CHARS = 64 * 1024
const DEFAULT_STOP_GRACE_SEC = 3
const DEFAULT_CONNECT_TIMEOUT_SEC = 60
/** Beyond the stop grace, how long a release may take before the bridge is killed. */
const RELEASE_MARGIN_SEC = 10
const KILL_WAIT = Duration.seconds(2)

// ---------------------------------------------------------------------------------------------
// Protocol (python/hyperloom_bridge.py)

const BridgeEvent = Schema.Union(
  Schema.Struct({ event: Schema.Literal("connected"), job_id: Schema.String }),
  Schema.Struct({ event: Schema.Literal("submitted"), actor_id: Schema.String }),
  Schema.Struct({
    event: Schema.Literal("started"),
    pid: Schema.NullOr(Schema.Number),
    pgid: Schema.Number,
    actor_pid: Schema.Number,
    node_id: Schema.String,
    cuda_visible_devices: Schema.NullOr(Schema.String)
  }),
  Schema.Struct({
    event: Schema.Literal("output"),
    stream: Schema.Literal("stdout", "stderr"),
    line: Schema.String
  }),
  Schema.Struct({ event: Schema.Literal("exit"), code: Schema.Number }),
  Schema.Struct({ event: Schema.Literal("error"), kind: Schema.String, message: Schema.String }),
  Schema.Struct({ event: Schema.Literal("released") })
)
type BridgeEvent = typeof BridgeEvent.Type

const decodeEvent = Schema.decodeUnknownEither(Schema.parseJson(BridgeEvent))

/** The `lease` request line. */
export const leaseRequest = (spec: LeaseSpec): string =>
  JSON.stringify({
    op: "lease",
    address: spec.gcsAddress,
    gpus: spec.gpus,
    serving_slot: spec.servingSlot,
    argv: spec.argv,
    env: definedEntries(spec.env),
    cwd: spec.cwd,
    ...(spec.name !== undefined ? { name: spec.name } : {}),
    stop_grace_sec: spec.stopGraceSec ?? DEFAULT_STOP_GRACE_SEC
  })

const definedEntries = (env: Readonly<Record<string, string | undefined>>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(env)) if (v !== undefined) out[k] = v
  return out
}

const errorFromEvent = (
  kind: string,
  message: string,
  ctx: { readonly python: string; readonly address: string; readonly actorId: string | undefined }
): LeaseBridgeError => {
  switch (kind) {
    case "ray_import":
      return new LeaseBridgeStartFailed({ python: ctx.python, detail: message })
    case "ray_init":
      return new LeaseRayInitFailed({ address: ctx.address, reason: message })
    case "actor_creation":
    case "actor_died":
    case "actor_failed":
      return new LeaseActorFailed({ kind, actorId: ctx.actorId, reason: message })
    default:
      return new LeaseBridgeProtocolError({ detail: `${kind}: ${message}` })
  }
}

// ---------------------------------------------------------------------------------------------
// Live implementation

const make = Effect.gen(function* () {
  const settings = yield* Settings
  const executor = yield* CommandExecutor.CommandExecutor
  const layerScope = yield* Effect.scope

  const spawn = (scope: Scope.Scope, python: string) =>
    Effect.suspend(() => {
      const script = packageFile("python", "hyperloom_bridge.py")
      return executor
        .start(
          Command.make(python, script).pipe(
            Command.env(definedEntries(settings.env), { extendEnv: false }),
            Command.stdin("pipe"),
            Command.stdout("pipe"),
            Command.stderr("pipe")
          )
        )
        .pipe(
          Scope.extend(scope),
          Effect.mapError((e) => new LeaseBridgeStartFailed({ python, detail: `${script}: ${e.message}` }))
        )
    })

  /** A bridge process started ahead of its lease (see `prestart`), in a scope of its own. */
  const spare = yield* Ref.make(
    Option.none<{
      readonly scope: Scope.CloseableScope
      readonly proc: CommandExecutor.Process
      readonly python: string
    }>()
  )

  const prestart = Effect.gen(function* () {
    if (Option.isSome(yield* Ref.get(spare))) return
    const python = yield* rayPython(settings)
    const scope = yield* Scope.fork(layerScope, ExecutionStrategy.sequential)
    const proc = yield* spawn(scope, python).pipe(Effect.tapError(() => Scope.close(scope, Exit.void)))
    yield* Ref.set(spare, Option.some({ scope, proc, python }))
  }).pipe(
    // Never fails (not even on a defect): open meets and reports any problem itself.
    Effect.catchAllCause(() => Effect.void),
    Effect.uninterruptible,
    Effect.withSpan("LeaseBridge.prestart")
  )

  /** The prestarted process for this Python if it is still running (now owned by `scope`), else a new one. */
  const takeOrSpawn = (scope: Scope.Scope, python: string) =>
    Effect.gen(function* () {
      const taken = yield* Ref.getAndSet(spare, Option.none())
      if (Option.isSome(taken)) {
        const { proc, python: its } = taken.value
        yield* Scope.addFinalizer(scope, Scope.close(taken.value.scope, Exit.void))
        if (its === python && (yield* proc.isRunning.pipe(Effect.orElseSucceed(() => false)))) return proc
      }
      return yield* spawn(scope, python)
    })

  /** Spawns the bridge and wires it up; uninterruptible so the release finalizer is always in place. */
  const startBridge = (scope: Scope.Scope, spec: LeaseSpec, python: string) =>
    Effect.gen(function* () {
      const proc = yield* takeOrSpawn(scope, python)

      const submitted = yield* Deferred.make<{ jobId: string; actorId: string }, LeaseBridgeError>()
      const started = yield* Deferred.make<LeaseStarted, LeaseBridgeError>()
      const exited = yield* Deferred.make<LeaseExit, LeaseBridgeError>()
      const released = yield* Ref.make(false)
      const bridgeStderr = new Tail(16 * 1024)
      const tails = { stdout: new Tail(TAIL_CHARS), stderr: new Tail(TAIL_CHARS) }
      const ids: { jobId: string | undefined; actorId: string | undefined } = {
        jobId: undefined,
        actorId: undefined
      }

      const failAll = (error: LeaseBridgeError) =>
        Effect.all(
          [Deferred.fail(submitted, error), Deferred.fail(started, error), Deferred.fail(exited, error)],
          {
            discard: true
          }
        )

      const onEvent = (ev: BridgeEvent): Effect.Effect<void> => {
        switch (ev.event) {
          case "connected":
            return Effect.sync(() => {
              ids.jobId = ev.job_id
            })
          case "submitted":
            ids.actorId = ev.actor_id
            return Deferred.succeed(submitted, { jobId: ids.jobId ?? "", actorId: ev.actor_id }).pipe(
              Effect.asVoid
            )
          case "started":
            return Deferred.succeed(started, {
              pid: ev.pid ?? undefined,
              pgid: ev.pgid,
              actorPid: ev.actor_pid,
              nodeId: ev.node_id,
              cudaVisibleDevices: ev.cuda_visible_devices ?? undefined
            }).pipe(Effect.asVoid)
          case "output": {
            tails[ev.stream].push(ev.line)
            return spec.onOutput !== undefined
              ? spec.onOutput({ stream: ev.stream, line: ev.line })
              : Effect.void
          }
          case "exit":
            return Deferred.succeed(exited, {
              exitCode: ev.code,
              stdoutTail: tails.stdout.text(),
              stderrTail: tails.stderr.text()
            }).pipe(Effect.asVoid)
          case "error":
            return failAll(
              errorFromEvent(ev.kind, ev.message, { python, address: spec.gcsAddress, actorId: ids.actorId })
            )
          case "released":
            return Ref.set(released, true)
        }
      }

      const readProtocol = proc.stdout.pipe(
        Stream.decodeText(),
        Stream.splitLines,
        Stream.runForEach((line) =>
          Either.match(decodeEvent(line), {
            onLeft: () =>
              failAll(
                new LeaseBridgeProtocolError({
                  detail: `unexpected line from the bridge: ${line.slice(0, 200)}`
                })
              ),
            onRight: onEvent
          })
        ),
        // stdout closed: the bridge is gone. Whatever is still pending will never come.
        Effect.exit,
        Effect.zipRight(proc.exitCode.pipe(Effect.either, Effect.timeout(KILL_WAIT), Effect.option)),
        Effect.flatMap((code) =>
          Effect.gen(function* () {
            const status = Option.match(Option.flatten(Option.map(code, Either.getRight)), {
              onNone: () => "was killed",
              onSome: (c) => `exited with code ${c}`
            })
            const stderr = bridgeStderr.lastLines(3)
            const ended = (yield* Ref.get(released))
              ? "the bridge released the lease before the command ended"
              : `the bridge ${status} before the lease ended`
            yield* failAll(new LeaseBridgeProtocolError({ detail: stderr ? `${ended}: ${stderr}` : ended }))
          })
        ),
        Effect.catchAllCause((cause) =>
          failAll(
            new LeaseBridgeProtocolError({ detail: `reading the bridge failed: ${Cause.pretty(cause)}` })
          )
        )
      )
      const readStderr = proc.stderr.pipe(
        Stream.decodeText(),
        Stream.splitLines,
        Stream.runForEach((line) => Effect.sync(() => bridgeStderr.push(line))),
        Effect.ignore
      )

      const inbox = yield* Queue.unbounded<string | null>()
      const writeStdin = Stream.fromQueue(inbox).pipe(
        Stream.takeWhile((line): line is string => line !== null),
        Stream.map((line) => new TextEncoder().encode(`${line}\n`)),
        Stream.run(proc.stdin),
        Effect.ignore
      )

      // Forked before the release finalizer is added, so that they outlive it (finalizers run
      // in reverse order): the release needs stdin written and stdout drained.
      // (Forked fibers inherit this region's uninterruptibility: give it back to them.)
      yield* Effect.forkIn(Effect.interruptible(readStderr), scope)
      yield* Effect.forkIn(Effect.interruptible(readProtocol), scope)
      yield* Effect.forkIn(Effect.interruptible(writeStdin), scope)

      const grace = spec.stopGraceSec ?? DEFAULT_STOP_GRACE_SEC
      const awaitBridgeExit = (within: Duration.DurationInput) =>
        proc.exitCode.pipe(Effect.exit, Effect.interruptible, Effect.timeout(within), Effect.option)
      const kill = (signal: "SIGTERM" | "SIGKILL") =>
        proc.kill(signal).pipe(Effect.exit, Effect.interruptible, Effect.timeout(KILL_WAIT), Effect.option)
      const release = Effect.gen(function* () {
        yield* Queue.offerAll(inbox, [JSON.stringify({ op: "release" }), null])
        const done = yield* awaitBridgeExit(
          Duration.seconds(spec.releaseTimeoutSec ?? grace + RELEASE_MARGIN_SEC)
        )
        if (Option.isSome(done)) return
        yield* Effect.logWarning("lease bridge did not release in time; killing it").pipe(
          Effect.annotateLogs({ bridgePid: proc.pid })
        )
        const termed = yield* kill("SIGTERM")
        if (Option.isNone(termed)) yield* kill("SIGKILL")
      }).pipe(Effect.ensuring(Queue.shutdown(inbox)), Effect.withSpan("LeaseBridge.release"))
      yield* Scope.addFinalizer(scope, release)
      yield* Queue.offer(inbox, leaseRequest(spec))
      return { proc, ids, submitted, started, exited }
    }).pipe(Effect.uninterruptible)

  const openIn = (scope: Scope.Scope, spec: LeaseSpec, python: string) =>
    Effect.gen(function* () {
      const { proc, ids, submitted, started, exited } = yield* startBridge(scope, spec, python)
      const connectTimeout = Duration.seconds(spec.connectTimeoutSec ?? DEFAULT_CONNECT_TIMEOUT_SEC)
      const { jobId, actorId } = yield* Deferred.await(submitted).pipe(
        Effect.timeoutFail({
          duration: connectTimeout,
          onTimeout: () =>
            ids.jobId === undefined
              ? new LeaseRayInitFailed({
                  address: spec.gcsAddress,
                  reason: `no answer within ${Duration.format(connectTimeout)}`
                })
              : new LeaseActorFailed({
                  kind: "actor_creation",
                  actorId: undefined,
                  reason: `not submitted within ${Duration.format(connectTimeout)}`
                })
        })
      )
      const session: LeaseSession = {
        jobId,
        actorId,
        bridgePid: proc.pid,
        awaitStarted: Deferred.await(started),
        awaitExit: Deferred.await(exited)
      }
      return session
    })

  const open = Effect.fn("LeaseBridge.open")(function* (spec: LeaseSpec) {
    const python = yield* rayPython(settings)
    const outer = yield* Effect.scope
    const scope = yield* Scope.fork(outer, ExecutionStrategy.sequential)
    // A failed or interrupted open releases at once instead of when the caller's scope ends.
    return yield* openIn(scope, spec, python).pipe(
      Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : Scope.close(scope, exit)))
    )
  })

  return LeaseBridge.of({ open, prestart })
})

/** The live service: needs Settings and a CommandExecutor. */
export const layer: Layer.Layer<LeaseBridge, never, Settings | CommandExecutor.CommandExecutor> =
  Layer.scoped(LeaseBridge, make)

// ---------------------------------------------------------------------------------------------
// Test implementation: a scripted fake

/** What a fake lease does; every field optional (defaults: starts at once, exits 0). */
export interface FakeLease {
  /** `open` fails with this. */
  readonly openError?: LeaseBridgeError | undefined
  readonly jobId?: string | undefined
  readonly actorId?: string | undefined
  /** Time from open to started (a wait for the slot). */
  readonly startAfter?: Duration.DurationInput | undefined
  /** The lease fails instead of starting (awaitStarted and awaitExit fail with it). */
  readonly startError?: LeaseBridgeError | undefined
  readonly started?: Partial<LeaseStarted> | undefined
  readonly output?: ReadonlyArray<LeaseOutput> | undefined
  /** Time from started to exit. */
  readonly runFor?: Duration.DurationInput | undefined
  readonly exitCode?: number | undefined
  /** The lease fails after starting (e.g. the actor died) instead of exiting. */
  readonly failWith?: LeaseBridgeError | undefined
  /** CMD never ends on its own (until released). */
  readonly hang?: boolean | undefined
}

export interface FakeLeaseLog {
  readonly opened: ReadonlyArray<LeaseSpec>
  readonly released: number
  readonly active: number
}

export class FakeLeaseBridgeLog extends Context.Tag("hyperloom/services/LeaseBridge/FakeLog")<
  FakeLeaseBridgeLog,
  Effect.Effect<FakeLeaseLog>
>() {}

/**
 * A fake LeaseBridge following `script(spec, n)` for the n-th open (0-based), plus
 * FakeLeaseBridgeLog to read what happened. Times run on the Clock (TestClock works); the
 * lease's timeline starts at open and stops when its scope closes (counted as released).
 */
export const layerTest = (
  script: (spec: LeaseSpec, n: number) => FakeLease = () => ({})
): Layer.Layer<LeaseBridge | FakeLeaseBridgeLog> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const log = yield* Ref.make<FakeLeaseLog>({ opened: [], released: 0, active: 0 })
      const open = Effect.fn("LeaseBridge.open")(function* (spec: LeaseSpec) {
        const n = (yield* Ref.getAndUpdate(log, (l) => ({ ...l, opened: [...l.opened, spec] }))).opened.length
        const fake = script(spec, n)
        if (fake.openError !== undefined) return yield* fake.openError
        yield* Effect.acquireRelease(
          Ref.update(log, (l) => ({ ...l, active: l.active + 1 })),
          () => Ref.update(log, (l) => ({ ...l, active: l.active - 1, released: l.released + 1 }))
        )
        const info: LeaseStarted = {
          pid: 1000 + n,
          pgid: 999 + n,
          actorPid: 900 + n,
          nodeId: "f".repeat(56),
          cudaVisibleDevices:
            spec.gpus > 0 ? Array.from({ length: Math.ceil(spec.gpus) }, (_, i) => i).join(",") : undefined,
          ...fake.started
        }
        const started = yield* Effect.forkScoped(
          Effect.sleep(fake.startAfter ?? 0).pipe(
            Effect.zipRight(
              fake.startError !== undefined ? Effect.fail(fake.startError) : Effect.succeed(info)
            )
          )
        )
        const exited = yield* Effect.forkScoped(
          Effect.gen(function* () {
            yield* Fiber.join(started)
            const tails = { stdout: new Tail(TAIL_CHARS), stderr: new Tail(TAIL_CHARS) }
            for (const o of fake.output ?? []) {
              tails[o.stream].push(o.line)
              if (spec.onOutput !== undefined) yield* spec.onOutput(o)
            }
            yield* Effect.sleep(fake.runFor ?? 0)
            if (fake.hang === true) return yield* Effect.never
            if (fake.failWith !== undefined) return yield* Effect.fail(fake.failWith)
            const exit: LeaseExit = {
              exitCode: fake.exitCode ?? 0,
              stdoutTail: tails.stdout.text(),
              stderrTail: tails.stderr.text()
            }
            return exit
          })
        )
        const session: LeaseSession = {
          jobId: fake.jobId ?? (n + 1).toString(16).padStart(2, "0").padEnd(8, "0"),
          actorId: fake.actorId ?? "a".repeat(24) + (n + 1).toString(16).padStart(2, "0").padEnd(8, "0"),
          bridgePid: 2000 + n,
          awaitStarted: Fiber.join(started),
          awaitExit: Fiber.join(exited)
        }
        return session
      })
      return Context.make(LeaseBridge, LeaseBridge.of({ open, prestart: Effect.void })).pipe(
        Context.add(FakeLeaseBridgeLog, Ref.get(log))
      )
    })
  )
