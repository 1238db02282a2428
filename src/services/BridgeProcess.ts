/**
 * BridgeProcess: what the two bridge services (LeaseBridge, GroupBridge) share — not a service
 * of its own. Both start a Python bridge with the Ray installation's Python and speak JSON lines
 * with it over stdio (`python/hyperloom/bridge.py` and `python/hyperloom/group.py` document the
 * protocols): one request in, events out, `{"op": "release"}` when the holder's scope closes.
 * Here: the bridges' errors, starting the process, wiring its streams (events, stderr tail,
 * requests), the bounded release (release → wait → TERM → KILL), what it means when the event
 * stream ends early, the connect timeout, and the bookkeeping both scripted fakes keep.
 */

import * as Command from "@effect/platform/Command"
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import {
  Cause,
  Data,
  Deferred,
  Duration,
  Effect,
  Either,
  ExecutionStrategy,
  Exit,
  Option,
  Queue,
  Ref,
  Schema,
  Scope,
  Stream
} from "effect"
import { definedEntries } from "../domain/Env.js"
import { GpuBusy, GpuHolderJson } from "../domain/GpuHolders.js"
import { oneLine, Tail } from "../domain/Text.js"
import { type PythonCommand, pythonEntry } from "./PackagePaths.js"

// ---------------------------------------------------------------------------------------------
// Errors (both bridges fail with these; the CLI maps their tags to exit codes)

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
  | GpuBusy

/**
 * The typed error of an `{"event": "error", "kind": …}` line: `ray_import` and `ray_init` as both
 * bridges send them, `actorKinds` the bridge's own kinds of actor failure (with the actor if
 * known), any other kind a protocol error.
 */
const errorOfEvent = (
  kind: string,
  message: string,
  ctx: {
    readonly python: string
    readonly address: string
    readonly actorKinds: Readonly<Record<string, LeaseActorFailed["kind"]>>
    readonly actorId?: string | undefined
  }
): LeaseBridgeError => {
  if (kind === "ray_import") return new LeaseBridgeStartFailed({ python: ctx.python, detail: message })
  if (kind === "ray_init") return new LeaseRayInitFailed({ address: ctx.address, reason: message })
  if (Object.hasOwn(ctx.actorKinds, kind)) {
    return new LeaseActorFailed({ kind: ctx.actorKinds[kind]!, actorId: ctx.actorId, reason: message })
  }
  return new LeaseBridgeProtocolError({ detail: `${kind}: ${message}` })
}

// ---------------------------------------------------------------------------------------------
// Settings both bridges share

/** Output tail bound per stream. */
export const TAIL_CHARS = 64 * 1024
export const DEFAULT_STOP_GRACE_SEC = 3
export const DEFAULT_CONNECT_TIMEOUT_SEC = 60
/** How long a signal, or the exit code after the event stream ended, is waited for. */
const KILL_WAIT = Duration.seconds(2)
/** The bridge's own stderr kept for messages (its last three lines are quoted). */
const STDERR_TAIL_CHARS = 16 * 1024

// ---------------------------------------------------------------------------------------------
// Protocol lines both bridges send

/** `{"event": "connected", "job_id": …}`: ray.init succeeded. */
export const ConnectedEvent = Schema.Struct({ event: Schema.Literal("connected"), job_id: Schema.String })
/** `{"event": "error", …}`: mapped to a typed error by `errorOfEvent` with the bridge's `actorKinds`. */
export const ErrorEvent = Schema.Struct({
  event: Schema.Literal("error"),
  kind: Schema.String,
  message: Schema.String
})
/** `{"event": "gpu_busy", …}`: the clean-GPU gate refused (python/hyperloom/gpus.py); CMD never started. */
export const GpuBusyEvent = Schema.Struct({
  event: Schema.Literal("gpu_busy"),
  holders: Schema.Array(GpuHolderJson),
  waited_sec: Schema.Number,
  /** The node whose gate refused: the holders' pids are that node's. */
  node_id: Schema.optional(Schema.NullOr(Schema.String)),
  node_address: Schema.optional(Schema.NullOr(Schema.String))
})
/** The GpuBusy failure of a `gpu_busy` event (a group's carries its rank). */
export const gpuBusyOf = (ev: typeof GpuBusyEvent.Type, rank?: number) =>
  new GpuBusy({
    holders: ev.holders,
    waitedSec: ev.waited_sec,
    rank,
    nodeId: ev.node_id ?? undefined,
    nodeAddress: ev.node_address ?? undefined
  })
/** `{"event": "released"}`: the bridge's last line. */
export const ReleasedEvent = Schema.Struct({ event: Schema.Literal("released") })

type Shared = typeof ConnectedEvent.Type | typeof ErrorEvent.Type | typeof ReleasedEvent.Type

// ---------------------------------------------------------------------------------------------
// The process

/** Starts `python <package>/python <command>` with piped stdio and only `env`, owned by `scope`. */
export const spawn = (
  executor: CommandExecutor.CommandExecutor,
  scope: Scope.Scope,
  options: {
    readonly python: string
    readonly command: PythonCommand
    readonly env: Readonly<Record<string, string | undefined>>
  }
): Effect.Effect<CommandExecutor.Process, LeaseBridgeStartFailed> =>
  Effect.suspend(() => {
    const entry = pythonEntry(options.command)
    return executor
      .start(
        Command.make(options.python, ...entry).pipe(
          Command.env(definedEntries(options.env), { extendEnv: false }),
          Command.stdin("pipe"),
          Command.stdout("pipe"),
          Command.stderr("pipe")
        )
      )
      .pipe(
        Scope.extend(scope),
        Effect.mapError(
          (e) =>
            new LeaseBridgeStartFailed({ python: options.python, detail: `${entry.join(" ")}: ${e.message}` })
        )
      )
  })

export interface Wiring<Event extends { readonly event: string }> {
  /** The bridge in messages: "the <name> exited with code 1 before …" ("bridge", "group bridge"). */
  readonly name: string
  /** The bridge in the log ("lease bridge", "group bridge"). */
  readonly title: string
  /** The span of the release ("LeaseBridge.release"). */
  readonly span: string
  /** What the bridge holds and what ends it: "the <name> released <holding> before <work> ended". */
  readonly holding: string
  readonly work: string
  /** The Python the bridge runs with, and what the holder asked for (the request's source). */
  readonly python: string
  readonly spec: {
    readonly gcsAddress: string
    readonly stopGraceSec?: number | undefined
    /** Time a release may take before the bridge is killed (default stop grace + `releaseMarginSec`). */
    readonly releaseTimeoutSec?: number | undefined
  }
  readonly releaseMarginSec: number
  readonly decode: (line: string) => Either.Either<Event, unknown>
  /** Each event but `connected`, `error` and `released` (handled here), with the job once connected. */
  readonly onEvent: (event: Exclude<Event, Shared>, jobId: string | undefined) => Effect.Effect<void>
  /** The bridge's kinds of actor failure in `error` events (see `errorOfEvent`), and the actor if one. */
  readonly actorKinds: Readonly<Record<string, LeaseActorFailed["kind"]>>
  readonly actorId?: (() => string | undefined) | undefined
  /** Fails whatever the holder still waits for (a Deferred already done stays as it is). */
  readonly failAll: (error: LeaseBridgeError) => Effect.Effect<void>
  /** The request line sent once wired. */
  readonly request: string
  /** How to run `tidy` (below) when the bridge ended without releasing (it died, or was killed). */
  readonly tidy?:
    | {
        readonly executor: CommandExecutor.CommandExecutor
        readonly env: Readonly<Record<string, string | undefined>>
      }
    | undefined
}

export interface Wired {
  readonly pid: number
  /** The bridge's Ray job, once it said `connected`. */
  readonly jobId: () => string | undefined
  /** Sends one more request line, in order after the first; false (not sent) once released. */
  readonly send: (line: string) => boolean
}

let holding = 0

/**
 * Bridges of this process wired and not yet released (leases or groups held, or being released):
 * while there is one, the CLI must not end on a signal, or the lease would outlive it.
 */
export const bridgesHeld = (): number => holding

const lines = (bytes: Stream.Stream<Uint8Array, unknown>) =>
  bytes.pipe(Stream.decodeText(), Stream.splitLines)

/**
 * Wires a started bridge to its holder: reads its events (a line that is not one, or the end of
 * the stream before the holder's end, fails everything pending with LeaseBridgeProtocolError,
 * quoting the bridge's last stderr lines), writes the request, and adds to `scope` the release:
 * `{"op": "release"}` and EOF, then TERM and KILL of a bridge that does not exit in time.
 * Uninterruptible, so that the release is always in place once the process runs.
 */
export const wire = <Event extends { readonly event: string }>(
  scope: Scope.Scope,
  proc: CommandExecutor.Process,
  w: Wiring<Event>
): Effect.Effect<Wired> =>
  Effect.gen(function* () {
    const released = yield* Ref.make(false)
    const ids: { jobId: string | undefined } = { jobId: undefined }
    const bridgeStderr = new Tail(STDERR_TAIL_CHARS)

    const onEvent = (ev: Event): Effect.Effect<void> => {
      const shared = ev as Event & Shared
      switch (shared.event) {
        case "connected":
          return Effect.sync(() => {
            ids.jobId = shared.job_id
          })
        case "error":
          return w.failAll(
            errorOfEvent(shared.kind, shared.message, {
              python: w.python,
              address: w.spec.gcsAddress,
              actorKinds: w.actorKinds,
              actorId: w.actorId?.()
            })
          )
        case "released":
          return Ref.set(released, true)
        default:
          return w.onEvent(ev as Exclude<Event, Shared>, ids.jobId)
      }
    }

    const readProtocol = lines(proc.stdout).pipe(
      Stream.runForEach((line) =>
        Either.match(w.decode(line), {
          onLeft: () =>
            w.failAll(
              new LeaseBridgeProtocolError({
                detail: `unexpected line from the ${w.name}: ${line.slice(0, 200)}`
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
            ? `the ${w.name} released ${w.holding} before ${w.work} ended`
            : `the ${w.name} ${status} before ${w.holding} ended`
          yield* w.failAll(new LeaseBridgeProtocolError({ detail: stderr ? `${ended}: ${stderr}` : ended }))
        })
      ),
      Effect.catchAllCause((cause) =>
        w.failAll(
          new LeaseBridgeProtocolError({ detail: `reading the ${w.name} failed: ${Cause.pretty(cause)}` })
        )
      )
    )
    const readStderr = lines(proc.stderr).pipe(
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

    const kill = (signal: "SIGTERM" | "SIGKILL") =>
      proc.kill(signal).pipe(Effect.exit, Effect.interruptible, Effect.timeout(KILL_WAIT), Effect.option)
    const releaseTimeout = Duration.seconds(
      w.spec.releaseTimeoutSec ?? (w.spec.stopGraceSec ?? DEFAULT_STOP_GRACE_SEC) + w.releaseMarginSec
    )
    const release = Effect.gen(function* () {
      releasing = true
      yield* Queue.offerAll(inbox, [JSON.stringify({ op: "release" }), null])
      const done = yield* proc.exitCode.pipe(
        Effect.exit,
        Effect.interruptible,
        Effect.timeout(releaseTimeout),
        Effect.option
      )
      if (Option.isSome(done)) return
      yield* Effect.logWarning(`${w.title} did not release in time; killing it`).pipe(
        Effect.annotateLogs({ bridgePid: proc.pid })
      )
      const termed = yield* kill("SIGTERM")
      if (Option.isNone(termed)) yield* kill("SIGKILL")
    }).pipe(
      Effect.ensuring(Queue.shutdown(inbox)),
      // A bridge that ended without releasing may have left its lease's placement group, which
      // holds the resources until nothing of the lease runs: end that now, not at the next lease.
      Effect.zipRight(
        Effect.suspend(() =>
          w.tidy !== undefined && ids.jobId !== undefined
            ? Effect.flatMap(Ref.get(released), (done) =>
                done
                  ? Effect.void
                  : tidy(w.tidy!.executor, {
                      python: w.python,
                      env: w.tidy!.env,
                      address: w.spec.gcsAddress,
                      jobId: ids.jobId!,
                      title: w.title
                    })
              )
            : Effect.void
        )
      ),
      Effect.ensuring(Effect.sync(() => holding--)),
      Effect.withSpan(w.span)
    )
    holding++
    yield* Scope.addFinalizer(scope, release)
    yield* Queue.offer(inbox, w.request)
    let releasing = false
    const wired: Wired = {
      pid: proc.pid,
      jobId: () => ids.jobId,
      send: (line) => !releasing && inbox.unsafeOffer(line)
    }
    return wired
  }).pipe(Effect.uninterruptible)

/** `python PYDIR tidy`'s one line (python/hyperloom/tidy.py). */
const TidyResult = Schema.parseJson(
  Schema.Struct({ removed: Schema.Number, left: Schema.Array(Schema.String) })
)
/** What tidy may take: its own bound (40 s), Python's start and ray.init. */
const TIDY_TIMEOUT = Duration.seconds(70)

/**
 * After a bridge ended without releasing: `python PYDIR tidy` waits for the GCS to have its job
 * dead, ends what is left of the job's leases on their nodes by their tokens and removes their
 * placement groups (python/hyperloom/tidy.py). Never fails: what it could not do is a warning
 * (the next lease's bridge sweeps the same groups).
 */
export const tidy = (
  executor: CommandExecutor.CommandExecutor,
  options: {
    readonly python: string
    readonly env: Readonly<Record<string, string | undefined>>
    readonly address: string
    readonly jobId: string
    /** The bridge in messages ("lease bridge"). */
    readonly title: string
  }
): Effect.Effect<void> =>
  Effect.gen(function* () {
    yield* Effect.logInfo(
      `the ${options.title} ended before it released: ending what is left of its lease before its resources are let go`
    )
    const out = yield* Command.make(
      options.python,
      ...pythonEntry("tidy"),
      "--address",
      options.address,
      "--job",
      options.jobId
    ).pipe(
      Command.env(definedEntries(options.env), { extendEnv: false }),
      Command.string,
      Effect.provideService(CommandExecutor.CommandExecutor, executor),
      Effect.timeoutFail({
        duration: TIDY_TIMEOUT,
        onTimeout: () => `no answer within ${Duration.format(TIDY_TIMEOUT)}`
      })
    )
    const result = yield* Schema.decodeUnknown(TidyResult)(out.trim().split("\n").at(-1) ?? "").pipe(
      Effect.mapError(() =>
        out.trim() === "" ? "it could not reach the cluster" : `it said ${oneLine(out)}`
      )
    )
    if (result.left.length > 0) {
      yield* Effect.logWarning(
        `what the ${options.title} left still runs, so its resources stay held until a later lease finds it gone: ${result.left.join(", ")}`
      )
    }
  }).pipe(
    Effect.catchAll((reason) =>
      Effect.logWarning(
        `cannot end what the ${options.title} left (${typeof reason === "string" ? reason : reason.message}): a later lease lets its resources go once nothing of it runs`
      )
    ),
    Effect.catchAllCause(() => Effect.void),
    Effect.withSpan("BridgeProcess.tidy")
  )

/**
 * Waits for the bridge's `submitted`, at most `connectTimeoutSec` (default 60 s) from start: no
 * `connected` by then is LeaseRayInitFailed, `connected` but nothing submitted LeaseActorFailed
 * ("<unsubmitted> within …").
 */
export const awaitSubmitted = <A>(
  submitted: Deferred.Deferred<A, LeaseBridgeError>,
  bridge: Wired,
  spec: { readonly gcsAddress: string; readonly connectTimeoutSec?: number | undefined },
  unsubmitted: string
): Effect.Effect<A, LeaseBridgeError> => {
  const connectTimeout = Duration.seconds(spec.connectTimeoutSec ?? DEFAULT_CONNECT_TIMEOUT_SEC)
  return Deferred.await(submitted).pipe(
    Effect.timeoutFail({
      duration: connectTimeout,
      onTimeout: () =>
        bridge.jobId() === undefined
          ? new LeaseRayInitFailed({
              address: spec.gcsAddress,
              reason: `no answer within ${Duration.format(connectTimeout)}`
            })
          : new LeaseActorFailed({
              kind: "actor_creation",
              actorId: undefined,
              reason: `${unsubmitted} within ${Duration.format(connectTimeout)}`
            })
    })
  )
}

/**
 * Runs `open` in a scope of its own, forked from the caller's: the hold ends with the caller's
 * scope, and at once if `open` fails or is interrupted.
 */
export const inOwnScope = <A, E, R>(
  open: (scope: Scope.Scope) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R | Scope.Scope> =>
  Effect.gen(function* () {
    const outer = yield* Effect.scope
    const scope = yield* Scope.fork(outer, ExecutionStrategy.sequential)
    return yield* open(scope).pipe(
      Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : Scope.close(scope, exit)))
    )
  })

// ---------------------------------------------------------------------------------------------
// The scripted fakes' bookkeeping

/** What a fake bridge layer records: every spec opened, releases, holds still open. */
export interface FakeOpenLog<Spec> {
  readonly opened: ReadonlyArray<Spec>
  readonly released: number
  readonly active: number
}

/**
 * The opening half both fakes share: `open(spec)` logs the spec, picks the n-th script entry
 * (0-based), fails with its `openError` if it has one, and otherwise holds until the caller's
 * scope closes (counted as released). `log` reads the record.
 */
export const fakeOpens = <Spec, Fake extends { readonly openError?: LeaseBridgeError | undefined }>(
  script: (spec: Spec, n: number) => Fake
) =>
  Effect.map(Ref.make<FakeOpenLog<Spec>>({ opened: [], released: 0, active: 0 }), (log) => ({
    log: Ref.get(log),
    open: (
      spec: Spec
    ): Effect.Effect<{ readonly n: number; readonly fake: Fake }, LeaseBridgeError, Scope.Scope> =>
      Effect.gen(function* () {
        const n = (yield* Ref.getAndUpdate(log, (l) => ({ ...l, opened: [...l.opened, spec] }))).opened.length
        const fake = script(spec, n)
        if (fake.openError !== undefined) return yield* fake.openError
        yield* Effect.acquireRelease(
          Ref.update(log, (l) => ({ ...l, active: l.active + 1 })),
          () => Ref.update(log, (l) => ({ ...l, active: l.active - 1, released: l.released + 1 }))
        )
        return { n, fake }
      })
  }))
