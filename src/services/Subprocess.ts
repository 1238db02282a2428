import { Command, type CommandExecutor } from "@effect/platform"
import { Clock, Duration, Effect, Option, Stream } from "effect"
import { keepTail } from "../domain/Text.js"

const signalGroup = (pid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(-pid, signal)
  } catch {
    try {
      process.kill(pid, signal)
    } catch {
      // already gone
    }
  }
}

/**
 * Ends a child's whole process group: SIGTERM, up to `graceMs` for it to exit, then SIGKILL.
 * Safe as a finalizer: the wait is interruptible (finalizers are not, otherwise) and bounded,
 * so a child that ignores SIGTERM cannot hold the caller (or Ctrl-C) hostage.
 */
export const terminateTree = (proc: CommandExecutor.Process, graceMs = 2_000) =>
  Effect.gen(function* () {
    const running = yield* proc.isRunning.pipe(Effect.orElseSucceed(() => false))
    // A child that exited on its own keeps its group: `ray start` leaves its daemons in it.
    if (!running) return
    signalGroup(proc.pid, "SIGTERM")
    const exited = yield* proc.exitCode.pipe(
      Effect.either,
      Effect.timeoutOption(Duration.millis(graceMs)),
      Effect.interruptible
    )
    signalGroup(proc.pid, "SIGKILL")
    if (Option.isNone(exited)) {
      yield* proc.exitCode.pipe(
        Effect.either,
        Effect.timeoutOption(Duration.seconds(2)),
        Effect.interruptible
      )
    }
  })

export interface BoundedRun {
  readonly exitCode: number | undefined
  readonly timedOut: boolean
  /** stdout and stderr, each tail-bounded, stdout first. */
  readonly stdout: string
  readonly stderr: string
  readonly elapsedMs: number
}

export interface BoundedOptions {
  readonly timeoutSec: number
  /**
   * The child's whole environment (the Settings layer's `env`, plus what the caller adds):
   * nothing of this process's own `process.env` is inherited.
   */
  readonly env: Readonly<Record<string, string | undefined>>
  /** Variables of `env` the child must not get. */
  readonly unsetEnv?: ReadonlyArray<string>
  readonly cwd?: string
  readonly maxOutput?: number
}

const drain = (stream: Stream.Stream<Uint8Array, unknown>, max: number) =>
  stream.pipe(
    Stream.decodeText(),
    Stream.runFold("", (acc, chunk) => keepTail(acc + chunk, max)),
    Effect.orElseSucceed(() => "")
  )

/**
 * Runs argv (no shell) with a timeout, draining stdout and stderr concurrently with the exit code.
 * On timeout or interruption the child's process group is terminated (TERM, then KILL).
 * Spawn failures (no such file) surface as the PlatformError.
 */
export const runBounded = (argv: ReadonlyArray<string>, options: BoundedOptions) =>
  Effect.scoped(
    Effect.gen(function* () {
      const started = yield* Clock.currentTimeMillis
      const env: Record<string, string | undefined> = { ...options.env }
      for (const name of options.unsetEnv ?? []) delete env[name]
      let command = Command.env(Command.make(argv[0]!, ...argv.slice(1)), env, { extendEnv: false })
      if (options.cwd) command = Command.workingDirectory(command, options.cwd)
      const proc = yield* Command.start(command)
      yield* Effect.addFinalizer(() => terminateTree(proc))
      const max = options.maxOutput ?? 64 * 1024
      const outcome = yield* Effect.all(
        [
          drain(proc.stdout, max),
          drain(proc.stderr, max),
          proc.exitCode.pipe(Effect.orElseSucceed(() => undefined))
        ],
        { concurrency: 3 }
      ).pipe(Effect.timeoutOption(Duration.seconds(options.timeoutSec)))
      const elapsedMs = (yield* Clock.currentTimeMillis) - started
      return Option.match(outcome, {
        onNone: (): BoundedRun => ({
          exitCode: undefined,
          timedOut: true,
          stdout: "",
          stderr: "",
          elapsedMs
        }),
        onSome: ([stdout, stderr, exitCode]): BoundedRun => ({
          exitCode: exitCode === undefined ? undefined : Number(exitCode),
          timedOut: false,
          stdout,
          stderr,
          elapsedMs
        })
      })
    })
  )
