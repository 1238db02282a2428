/**
 * LeaseBridge: holds serving leases (docs/design.md#the-bridge-and-the-actor) through the Python
 * bridge shipped in the package (`python/hyperloom/bridge.py`, its header documents the JSON-lines
 * protocol). One bridge process per lease, started with the Ray installation's Python; the lease
 * lives as long as the scope `open` runs in: closing it (normal end, error, interruption) releases
 * the lease — the command's process tree is stopped, the actor killed — and the bridge is killed if
 * it does not finish in time. If hyperloom itself dies, the bridge sees EOF on its stdin and
 * releases on its own.
 */
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import {
  Context,
  Deferred,
  type Duration,
  Effect,
  ExecutionStrategy,
  Exit,
  Fiber,
  Layer,
  Option,
  Ref,
  Schema,
  Scope
} from "effect"
import { definedEntries } from "../domain/Env.js"
import type { RayNotFound } from "../domain/Errors.js"
import { DEFAULT_GPU_CLEAN_TIMEOUT_SEC } from "../domain/GpuHolders.js"
import { Tail } from "../domain/Text.js"
import * as BridgeProcess from "./BridgeProcess.js"
import { DEFAULT_STOP_GRACE_SEC, type LeaseBridgeError, TAIL_CHARS } from "./BridgeProcess.js"
import { rayPython } from "./RayInstall.js"
import { Settings } from "./Settings.js"

// The bridges' errors (GroupBridge fails with them too), kept on this module's surface.
export {
  LeaseActorFailed,
  type LeaseBridgeError,
  LeaseBridgeProtocolError,
  LeaseBridgeStartFailed,
  LeaseRayInitFailed,
  TAIL_CHARS
} from "./BridgeProcess.js"

// ---------------------------------------------------------------------------------------------
// The service

export interface LeaseOutput {
  readonly stream: "stdout" | "stderr"
  readonly line: string
  /** The line's bytes already went to the lease's terminal (LeaseTerminal.write): only for tails and logs. */
  readonly written?: true | undefined
}

/**
 * The terminal a lease's command runs at (`lease run`'s): what it reads and where its bytes go.
 * Read by `open` from the context (default: neither), so that only the CLI command that owns a
 * terminal sets it, whatever program runs the lease in between. A group's bridge forwards `stdin`
 * to rank 0's command (a sweep runner's requests) and ignores the rest.
 */
export interface LeaseTerminalShape {
  /** CMD's stdin, forwarded in order and then closed, as `srun` does; unset: CMD reads /dev/null. */
  readonly stdin?: NodeJS.ReadableStream | undefined
  /**
   * CMD's output as the bytes it wrote (no decoding, no line splitting); unset: output comes as
   * lines only (`onOutput` is called in both cases, with the lines for the tails).
   */
  readonly write?: ((stream: "stdout" | "stderr", bytes: Uint8Array) => void) | undefined
  /** Told when CMD has started (what a cancelled run then says it stopped). */
  readonly onStarted?: ((started: LeaseStarted) => void) | undefined
}

export class LeaseTerminal extends Context.Reference<LeaseTerminal>()(
  "hyperloom/services/LeaseBridge/Terminal",
  {
    defaultValue: (): LeaseTerminalShape => ({})
  }
) {}

/** Bytes of CMD's stdin sent to the bridge and not yet written: past it, reading stdin pauses. */
const STDIN_IN_FLIGHT = 1024 * 1024
/** The largest stdin chunk in one request line. */
const STDIN_CHUNK = 48 * 1024

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
  /**
   * The lease's id in the host's queue, named in the actor's default name: the waiters behind it
   * see by it that it asked Ray (programs/Queue.ts passes over a foreign head that never does).
   */
  readonly leaseId?: string | undefined
  /** Grace between TERM and KILL when the command is stopped (default 3 s). */
  readonly stopGraceSec?: number | undefined
  /**
   * How long the supervisor waits, before CMD starts, for processes outside the lease to let go
   * of its GPUs (docs/design.md#clean-gpus; default 30 s); then the lease fails with GpuBusy and
   * CMD never runs.
   */
  readonly gpuCleanTimeoutSec?: number | undefined
  /** Ray node ids the lease must not be placed on (Ray's `ray.io/node-id` label selector). */
  readonly avoidNodes?: ReadonlyArray<string> | undefined
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
  /**
   * Resolves once Ray has placed the lease's placement group (its slot and GPUs are held on that
   * node, its Ray id given), before the command starts (the clean-GPU gate may still wait).
   * Never resolves for a lease that holds no resources.
   */
  readonly awaitPlaced?: Effect.Effect<string | null, LeaseBridgeError> | undefined
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

/** Beyond the stop grace, how long a release may take before the bridge is killed. */
const RELEASE_MARGIN_SEC = 10

// ---------------------------------------------------------------------------------------------
// Protocol (python/hyperloom/bridge.py)

const BridgeEvent = Schema.Union(
  BridgeProcess.ConnectedEvent,
  Schema.Struct({ event: Schema.Literal("submitted"), actor_id: Schema.String }),
  Schema.Struct({ event: Schema.Literal("placed"), node_id: Schema.NullOr(Schema.String) }),
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
  Schema.Struct({
    event: Schema.Literal("output"),
    stream: Schema.Literal("stdout", "stderr"),
    data: Schema.String
  }),
  Schema.Struct({ event: Schema.Literal("stdin_written"), bytes: Schema.Number }),
  Schema.Struct({ event: Schema.Literal("stdin_closed") }),
  Schema.Struct({ event: Schema.Literal("exit"), code: Schema.Number }),
  BridgeProcess.GpuBusyEvent,
  BridgeProcess.ErrorEvent,
  BridgeProcess.ReleasedEvent
)

const decodeEvent = Schema.decodeUnknownEither(Schema.parseJson(BridgeEvent))

/** The `lease` request line. */
export const leaseRequest = (spec: LeaseSpec, terminal: LeaseTerminalShape = {}): string =>
  JSON.stringify({
    op: "lease",
    address: spec.gcsAddress,
    gpus: spec.gpus,
    serving_slot: spec.servingSlot,
    argv: spec.argv,
    env: definedEntries(spec.env),
    cwd: spec.cwd,
    ...(spec.name !== undefined ? { name: spec.name } : {}),
    ...(spec.leaseId !== undefined ? { lease_id: spec.leaseId } : {}),
    stop_grace_sec: spec.stopGraceSec ?? DEFAULT_STOP_GRACE_SEC,
    ...(terminal.stdin !== undefined ? { stdin: true } : {}),
    ...(terminal.write !== undefined ? { raw_output: true } : {}),
    gpu_clean_timeout_sec: spec.gpuCleanTimeoutSec ?? DEFAULT_GPU_CLEAN_TIMEOUT_SEC,
    ...(spec.avoidNodes !== undefined && spec.avoidNodes.length > 0 ? { avoid_nodes: spec.avoidNodes } : {})
  })

/**
 * CMD's output as bytes, cut into lines for the tails and `onOutput` (decoded as UTF-8, a line
 * longer than the tail kept by its end only); `flush` gives the last line without its newline.
 */
const lineSplitter = () => {
  const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() }
  const partial = { stdout: "", stderr: "" }
  return {
    push: (stream: "stdout" | "stderr", bytes: Uint8Array): Array<string> => {
      const parts = (partial[stream] + decoders[stream].decode(bytes, { stream: true })).split("\n")
      const last = parts.pop() ?? ""
      partial[stream] = last.length > TAIL_CHARS ? last.slice(last.length - TAIL_CHARS) : last
      return parts.map((l) => (l.endsWith("\r") ? l.slice(0, -1) : l))
    },
    flush: (stream: "stdout" | "stderr"): Array<string> => {
      const last = partial[stream] + decoders[stream].decode()
      partial[stream] = ""
      return last === "" ? [] : [last]
    }
  }
}

/**
 * Forwards `input` to the bridge as `stdin` requests, at most STDIN_IN_FLIGHT bytes unanswered
 * (reading pauses beyond: a command that does not read its stdin never fills memory), then EOF.
 * `acked` answers `stdin_written`, `stop` detaches (CMD's stdin is gone, or the lease ended).
 */
export const forwardStdin = (input: NodeJS.ReadableStream, send: (line: string) => boolean) => {
  let inFlight = 0
  let stopped = false
  const onData = (chunk: Buffer | string) => {
    const bytes = typeof chunk === "string" ? Buffer.from(chunk) : chunk
    for (let at = 0; at < bytes.length; at += STDIN_CHUNK) {
      const piece = bytes.subarray(at, at + STDIN_CHUNK)
      if (!send(JSON.stringify({ op: "stdin", data: piece.toString("base64") }))) return stop()
      inFlight += piece.length
    }
    if (inFlight >= STDIN_IN_FLIGHT) input.pause()
  }
  const onEnd = () => {
    send(JSON.stringify({ op: "stdin", eof: true }))
    stop()
  }
  const stop = () => {
    if (stopped) return
    stopped = true
    input.removeListener("data", onData)
    input.removeListener("end", onEnd)
    input.removeListener("error", onEnd)
    input.pause()
  }
  input.on("data", onData)
  input.on("end", onEnd)
  input.on("error", onEnd)
  input.resume()
  return {
    acked: (n: number) => {
      inFlight -= n
      if (!stopped && inFlight < STDIN_IN_FLIGHT) input.resume()
    },
    stop
  }
}

/** The bridge's kinds of actor failure (its `error` events). */
const ACTOR_KINDS = {
  actor_creation: "actor_creation",
  actor_died: "actor_died",
  actor_failed: "actor_failed"
} as const

// ---------------------------------------------------------------------------------------------
// Live implementation

const make = Effect.gen(function* () {
  const settings = yield* Settings
  const executor = yield* CommandExecutor.CommandExecutor
  const layerScope = yield* Effect.scope

  const spawn = (scope: Scope.Scope, python: string) =>
    BridgeProcess.spawn(executor, scope, { python, command: "bridge", env: settings.env })

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
      const terminal = yield* LeaseTerminal
      const proc = yield* takeOrSpawn(scope, python)
      const split = lineSplitter()
      let stdin: ReturnType<typeof forwardStdin> | undefined
      const toLines = (stream: "stdout" | "stderr", lines: ReadonlyArray<string>, written?: true) =>
        Effect.forEach(
          lines,
          (line) => {
            tails[stream].push(line)
            return spec.onOutput !== undefined ? spec.onOutput({ stream, line, written }) : Effect.void
          },
          { discard: true }
        )

      const submitted = yield* Deferred.make<{ jobId: string; actorId: string }, LeaseBridgeError>()
      const started = yield* Deferred.make<LeaseStarted, LeaseBridgeError>()
      const placed = yield* Deferred.make<string | null, LeaseBridgeError>()
      const exited = yield* Deferred.make<LeaseExit, LeaseBridgeError>()
      const tails = { stdout: new Tail(TAIL_CHARS), stderr: new Tail(TAIL_CHARS) }
      let actorId: string | undefined

      const bridge = yield* BridgeProcess.wire(scope, proc, {
        name: "bridge",
        title: "lease bridge",
        span: "LeaseBridge.release",
        holding: "the lease",
        work: "the command",
        python,
        spec,
        releaseMarginSec: RELEASE_MARGIN_SEC,
        decode: decodeEvent,
        onEvent: (ev, jobId) => {
          switch (ev.event) {
            case "submitted":
              actorId = ev.actor_id
              return Deferred.succeed(submitted, { jobId: jobId ?? "", actorId: ev.actor_id }).pipe(
                Effect.asVoid
              )
            case "placed":
              return Deferred.succeed(placed, ev.node_id).pipe(Effect.asVoid)
            case "started": {
              const info: LeaseStarted = {
                pid: ev.pid ?? undefined,
                pgid: ev.pgid,
                actorPid: ev.actor_pid,
                nodeId: ev.node_id,
                cudaVisibleDevices: ev.cuda_visible_devices ?? undefined
              }
              terminal.onStarted?.(info)
              return Deferred.succeed(started, info).pipe(Effect.asVoid)
            }
            case "output": {
              if ("line" in ev) return toLines(ev.stream, [ev.line])
              const bytes = Buffer.from(ev.data, "base64")
              terminal.write?.(ev.stream, bytes)
              return toLines(ev.stream, split.push(ev.stream, bytes), true)
            }
            case "stdin_written":
              return Effect.sync(() => stdin?.acked(ev.bytes))
            case "stdin_closed":
              return Effect.sync(() => stdin?.stop())
            case "gpu_busy": {
              // CMD never started: the lease fails with the holders (the exit that follows is moot).
              const error = BridgeProcess.gpuBusyOf(ev)
              return Effect.all([Deferred.fail(started, error), Deferred.fail(exited, error)], {
                discard: true
              })
            }
            case "exit":
              return Effect.gen(function* () {
                yield* toLines("stdout", split.flush("stdout"), true)
                yield* toLines("stderr", split.flush("stderr"), true)
                stdin?.stop()
                yield* Deferred.succeed(exited, {
                  exitCode: ev.code,
                  stdoutTail: tails.stdout.text(),
                  stderrTail: tails.stderr.text()
                })
              })
          }
        },
        actorKinds: ACTOR_KINDS,
        actorId: () => actorId,
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
        request: leaseRequest(spec, terminal),
        tidy: { executor, env: settings.env }
      })
      if (terminal.stdin !== undefined) {
        const forwarding = forwardStdin(terminal.stdin, bridge.send)
        stdin = forwarding
        yield* Scope.addFinalizer(scope, Effect.sync(forwarding.stop))
      }
      return { bridge, submitted, placed, started, exited }
    }).pipe(Effect.uninterruptible)

  const openIn = (scope: Scope.Scope, spec: LeaseSpec, python: string) =>
    Effect.gen(function* () {
      const { bridge, submitted, placed, started, exited } = yield* startBridge(scope, spec, python)
      const { jobId, actorId } = yield* BridgeProcess.awaitSubmitted(submitted, bridge, spec, "not submitted")
      const session: LeaseSession = {
        jobId,
        actorId,
        bridgePid: bridge.pid,
        awaitStarted: Deferred.await(started),
        awaitPlaced: Deferred.await(placed),
        awaitExit: Deferred.await(exited)
      }
      return session
    })

  const open = Effect.fn("LeaseBridge.open")(function* (spec: LeaseSpec) {
    const python = yield* rayPython(settings)
    // A failed or interrupted open releases at once instead of when the caller's scope ends.
    return yield* BridgeProcess.inOwnScope((scope) => openIn(scope, spec, python))
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
  /** Time from open to Ray placing the lease (default: when it starts). */
  readonly placedAfter?: Duration.DurationInput | undefined
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

export type FakeLeaseLog = BridgeProcess.FakeOpenLog<LeaseSpec>

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
      const opens = yield* BridgeProcess.fakeOpens(script)
      const open = Effect.fn("LeaseBridge.open")(function* (spec: LeaseSpec) {
        const { n, fake } = yield* opens.open(spec)
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
          awaitPlaced:
            fake.placedAfter === undefined
              ? Effect.map(Fiber.join(started), (s) => s.nodeId)
              : Effect.as(Effect.sleep(fake.placedAfter), info.nodeId),
          awaitExit: Fiber.join(exited)
        }
        return session
      })
      return Context.make(LeaseBridge, LeaseBridge.of({ open, prestart: Effect.void })).pipe(
        Context.add(FakeLeaseBridgeLog, opens.log)
      )
    })
  )
