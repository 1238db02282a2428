/**
 * The hyperloom executable: provides the live layers (Live.ts) per command, reads argv and maps
 * every outcome to a stable exit code (see Exit.ts).
 */
import * as CliConfig from "@effect/cli/CliConfig"
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Console, Effect, Exit, Logger, LogLevel, Option } from "effect"
import * as Live from "../Live.js"
import { AppLayer } from "./AppLayer.js"
import { cli } from "./Cli.js"
import { EXIT, exitCodeFor } from "./Exit.js"

/** Help text without colour codes when stdout is not a terminal (piped to a pager, a file, grep). */
const ANSI = /\u001b\[[0-9;]*m/g
const plain = (arg: unknown) => (typeof arg === "string" ? arg.replace(ANSI, "") : arg)
const withPlainConsole = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  process.stdout.isTTY && !process.env.NO_COLOR
    ? effect
    : Effect.flatMap(Console.consoleWith(Effect.succeed), (console) =>
        Effect.withConsole(effect, {
          ...console,
          log: (...args: ReadonlyArray<unknown>) => console.log(...args.map(plain)),
          unsafe: {
            ...console.unsafe,
            log: (...args: ReadonlyArray<unknown>) => console.unsafe.log(...args.map(plain))
          }
        })
      )

/** Diagnostics go to stderr, one line each; stdout is for results. */
const stderrLogger = Logger.make(({ logLevel, message }) => {
  const text = Array.isArray(message) ? message.map(String).join(" ") : String(message)
  const prefix = logLevel._tag === "Warning" ? "warning: " : logLevel._tag === "Error" ? "error: " : ""
  process.stderr.write(`hyperloom: ${prefix}${text}\n`)
})

const reportFailure = (cause: Cause.Cause<unknown>) =>
  Effect.sync(() => {
    const failure = Cause.failureOption(cause)
    if (Option.isSome(failure)) {
      const error = failure.value as { _tag?: string; message?: string }
      const code = exitCodeFor(error)
      // @effect/cli already printed its own usage errors; ExitWith carries no message.
      if (error._tag !== "ExitWith" && !ValidationError.isValidationError(error)) {
        process.stderr.write(`hyperloom: ${error.message ?? String(error)}\n`)
      }
      return code
    }
    const defect = Cause.squash(cause)
    process.stderr.write(
      `hyperloom: internal error: ${defect instanceof Error ? defect.message : String(defect)}\n` +
        (process.env.HYPERLOOM_DEBUG ? `${Cause.pretty(cause)}\n` : "(set HYPERLOOM_DEBUG=1 for details)\n")
    )
    return EXIT.internal
  })

/** @effect/cli prints a usage error as a text block ending in a blank line: print its lines only. */
const trimmedErrors = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.consoleWith((console) =>
    Effect.withConsole(effect, {
      ...console,
      error: (...args: ReadonlyArray<unknown>) =>
        console.error(...args.map((a) => (typeof a === "string" ? a.trimEnd() : a)))
    })
  )

const program = Effect.suspend(() => cli(process.argv)).pipe(
  withPlainConsole,
  trimmedErrors,
  Effect.provideService(AppLayer, Live.layerWith),
  Effect.provide(NodeContext.layer),
  // --help shows hyperloom's own options; the built-ins (--completions, --log-level, --wizard)
  // still work but would bury them.
  Effect.provide(CliConfig.layer({ showBuiltIns: false })),
  Effect.provide(Logger.replace(Logger.defaultLogger, stderrLogger)),
  Logger.withMinimumLogLevel(process.env.HYPERLOOM_DEBUG ? LogLevel.Debug : LogLevel.Info),
  Effect.matchCauseEffect({
    onSuccess: () => Effect.succeed(EXIT.ok as number),
    onFailure: (cause) =>
      Cause.isInterruptedOnly(cause) ? Effect.succeed(EXIT.cancelled as number) : reportFailure(cause)
  })
)

NodeRuntime.runMain(program, {
  disableErrorReporting: true,
  disablePrettyLogger: true,
  teardown: (exit, onExit) => {
    const code: number = Exit.isSuccess(exit)
      ? (exit.value as number)
      : Cause.isInterruptedOnly(exit.cause)
        ? EXIT.cancelled
        : EXIT.internal
    process.exitCode = code
    onExit(code)
  }
})
