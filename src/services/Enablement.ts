import * as Command from "@effect/platform/Command"
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import { Clock, Context, Duration, Effect, Layer, Ref, Stream } from "effect"
import { definedEntries } from "../domain/Env.js"
import { keepTail } from "../domain/Text.js"
import { terminateTree } from "./Subprocess.js"

/**
 * Runs the operator's enablement command (`--enablement-cmd`, docs/design.md#the-enablement-lane).
 *
 * The operator gives it as ONE string, a shell command line: it runs as `/bin/sh -c <command>`, so
 * quoting, pipes, `&&` and `$HYPERLOOM_LAUNCH_LOG` work as in a terminal. This is the one place
 * hyperloom uses a shell, and only for text the operator wrote. The command gets its own process
 * group, no stdin, the given environment and working directory; each output line is handed to
 * `onOutput` as it comes. Interruption (Ctrl-C, the session deadline) stops its whole process
 * group: SIGTERM, a short grace, SIGKILL.
 *
 * Whatever the command does, `run` succeeds with what happened: the stop rules treat the next
 * baseline attempt (the revalidation) as the verdict, not the enablement command's exit code.
 */
export interface EnablementSpec {
  /** The shell command line, run with `/bin/sh -c`. */
  readonly command: string
  /** The command's whole environment. */
  readonly env: Readonly<Record<string, string | undefined>>
  readonly cwd: string
  /** Each output line as it comes. */
  readonly onOutput?: ((line: string, stream: "stdout" | "stderr") => Effect.Effect<void>) | undefined
}

export interface EnablementRun {
  /** The command's exit code; null when it could not be started. */
  readonly exitCode: number | null
  /** The last output (stdout and stderr interleaved as read), at most TAIL_CHARS. */
  readonly outputTail: string
  readonly elapsedSec: number
  /** Why the command could not be started (`exitCode` is then null). */
  readonly startError?: string | undefined
}

export interface EnablementShape {
  readonly run: (spec: EnablementSpec) => Effect.Effect<EnablementRun>
}

export class Enablement extends Context.Tag("hyperloom/services/Enablement")<Enablement, EnablementShape>() {}

export const SHELL = "/bin/sh"
const TAIL_CHARS = 16 * 1024
const STOP_GRACE_MS = 3_000

const make = Effect.gen(function* () {
  const executor = yield* CommandExecutor.CommandExecutor

  const run = Effect.fn("Enablement.run")(function* (spec: EnablementSpec) {
    const began = yield* Clock.currentTimeMillis
    const elapsed = Effect.map(Clock.currentTimeMillis, (now) => (now - began) / 1000)
    const tail = yield* Ref.make("")
    const lines = (stream: Stream.Stream<Uint8Array, unknown>, name: "stdout" | "stderr") =>
      stream.pipe(
        Stream.decodeText(),
        Stream.splitLines,
        Stream.runForEach((line) =>
          Effect.zipRight(
            Ref.update(tail, (t) => keepTail(`${t}${line}\n`, TAIL_CHARS)),
            spec.onOutput?.(line, name) ?? Effect.void
          )
        ),
        Effect.ignore
      )
    const command = Command.make(SHELL, "-c", spec.command).pipe(
      Command.env(definedEntries(spec.env), { extendEnv: false }),
      Command.workingDirectory(spec.cwd),
      Command.stdin(Stream.empty),
      Command.stdout("pipe"),
      Command.stderr("pipe")
    )
    return yield* Effect.scoped(
      Effect.gen(function* () {
        const proc = yield* executor.start(command)
        yield* Effect.addFinalizer(() => terminateTree(proc, STOP_GRACE_MS))
        const [, , code] = yield* Effect.all(
          [lines(proc.stdout, "stdout"), lines(proc.stderr, "stderr"), Effect.either(proc.exitCode)],
          { concurrency: 3 }
        )
        const outputTail = (yield* Ref.get(tail)).trimEnd()
        return {
          exitCode: code._tag === "Right" ? Number(code.right) : null,
          outputTail,
          elapsedSec: yield* elapsed,
          ...(code._tag === "Left" ? { startError: code.left.message } : {})
        } satisfies EnablementRun
      })
    ).pipe(
      Effect.catchAll((e) =>
        Effect.map(elapsed, (elapsedSec) => ({
          exitCode: null,
          outputTail: "",
          elapsedSec,
          startError: `cannot start ${SHELL}: ${e.message}`
        }))
      )
    )
  })

  return Enablement.of({ run })
})

/** The live service: needs a CommandExecutor. */
export const layer: Layer.Layer<Enablement, never, CommandExecutor.CommandExecutor> = Layer.effect(
  Enablement,
  make
)

/** What a fake enablement run does (defaults: exits 0 at once, prints nothing). */
export interface FakeEnablement {
  readonly exitCode?: number | null | undefined
  readonly output?: ReadonlyArray<string> | undefined
  /** Time the run takes (on the Clock: TestClock works). */
  readonly runFor?: Duration.DurationInput | undefined
  /** Runs when the command does (e.g. to "fix" what the fake attempt runner checks). */
  readonly effect?: Effect.Effect<void> | undefined
}

/**
 * A fake Enablement following `script(spec, n)` for the n-th run (0-based), appending each run's
 * spec to `runs` (pass your own array to read them back). Times run on the Clock.
 */
export const layerTest = (
  script: (spec: EnablementSpec, n: number) => FakeEnablement = () => ({}),
  runs: Array<EnablementSpec> = []
): Layer.Layer<Enablement> => {
  const service: EnablementShape = {
    run: (spec) =>
      Effect.gen(function* () {
        const n = runs.length
        runs.push(spec)
        const fake = script(spec, n)
        for (const line of fake.output ?? []) yield* spec.onOutput?.(line, "stdout") ?? Effect.void
        yield* Effect.sleep(fake.runFor ?? Duration.zero)
        if (fake.effect !== undefined) yield* fake.effect
        return {
          exitCode: fake.exitCode === undefined ? 0 : fake.exitCode,
          outputTail: (fake.output ?? []).join("\n"),
          elapsedSec: Duration.toSeconds(fake.runFor ?? Duration.zero)
        } satisfies EnablementRun
      })
  }
  return Layer.succeed(Enablement, service)
}
