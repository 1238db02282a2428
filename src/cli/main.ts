/**
 * The hyperloom executable and the one composition root: gives every command the live layers
 * (Live.ts, LiveCluster.ts, built per command run), reads argv and maps every outcome to a stable
 * exit code (see Exit.ts). Only the top-level command the command line names is loaded (Cli.ts).
 */
import * as CliConfig from "@effect/cli/CliConfig"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Console, Effect, Either, Exit, Logger, LogLevel, Option } from "effect"
import * as NodePlatform from "../NodePlatform.js"
import { loadTerminal, type TerminalSettings } from "../services/Settings.js"
import { cliOf, loadRootCommand } from "./Cli.js"
import { EXIT, exitCodeFor, type Failure, UsageError } from "./Exit.js"
import { commandPathError, explainUsage, isCompletions, tidyCompletions, tidyHelp } from "./RenderHelp.js"
import { CommandLine, errorJson } from "./Run.js"
import { exitCodeAfterSignals, watchSignals } from "./Signals.js"
import { writeAroundStatus } from "./StatusLine.js"
import {
  EXIT_STDOUT_CLOSED,
  EXIT_STDOUT_FAILED,
  exitForStdoutFailure,
  flushStdout,
  stdoutFailure,
  watchStdout
} from "./Stdout.js"

const ANSI = /\u001b\[[0-9;]*m/g

/** The CLI's own variables (HYPERLOOM_DEBUG, COLUMNS, NO_COLOR), read once through Config; a bad HYPERLOOM_DEBUG is a usage error below. */
const terminalRead = Effect.runSync(Effect.either(loadTerminal))
const terminal: TerminalSettings = Either.getOrElse(terminalRead, () => ({
  debug: false,
  columns: undefined,
  noColor: false
}))

/** The command line, split where hyperloom's options end (`--`), with --log-level taken out. */
const parseCommandLine = (args: ReadonlyArray<string>) => {
  const dashes = args.indexOf("--")
  const head = dashes < 0 ? [...args] : args.slice(0, dashes)
  const tail = dashes < 0 ? [] : args.slice(dashes)
  const kept: Array<string> = []
  let logLevel: string | undefined
  for (let i = 0; i < head.length; i++) {
    const a = head[i]!
    if (a === "--log-level") {
      logLevel = head[i + 1] ?? ""
      i++
    } else if (a.startsWith("--log-level=")) {
      logLevel = a.slice("--log-level=".length)
    } else {
      kept.push(a)
    }
  }
  return { args: [...kept, ...tail], logLevel, json: kept.includes("--json"), help: kept }
}

const LEVELS: Record<string, LogLevel.LogLevel> = {
  all: LogLevel.All,
  trace: LogLevel.Trace,
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warning: LogLevel.Warning,
  error: LogLevel.Error,
  fatal: LogLevel.Fatal,
  none: LogLevel.None
}

const COMMAND_NAMES = new Set([
  "ray",
  "status",
  "doctor",
  "ensure",
  "repair",
  "lease",
  "baseline",
  "run",
  "state",
  "show",
  "report",
  "sweep",
  "queue",
  "mcp"
])

/** Word-wraps one line to `width`, continuing under its text (after a `term  ` column if any). */
const wrapLine = (line: string, width: number): Array<string> => {
  if (line.length <= width) return [line]
  const hanging = /^(\s*\S+\s{2,})\S/.exec(line)?.[1]?.length ?? /^\s*/.exec(line)![0].length
  const indent = " ".repeat(hanging < width / 2 ? hanging : 2)
  const out: Array<string> = []
  let rest = line
  while (rest.length > width) {
    let cut = rest.lastIndexOf(" ", width)
    if (cut <= indent.length) cut = rest.indexOf(" ", width)
    if (cut < 0) break
    out.push(rest.slice(0, cut).trimEnd())
    rest = indent + rest.slice(cut + 1).trimStart()
  }
  out.push(rest)
  return out
}

/**
 * Help as users read it: the whole command path in USAGE (`$ hyperloom lease run …`, not
 * `$ run …`), wrapped to the terminal width, without colour codes when stdout is not a terminal.
 */
const commandPath = (words: ReadonlyArray<string>) => {
  const path: Array<string> = []
  for (const w of words) {
    if (w.startsWith("-")) break
    if (COMMAND_NAMES.has(w)) path.push(w)
  }
  return path
}

const presentHelp = (text: string, words: ReadonlyArray<string>, tty: boolean) => {
  const path = commandPath(words)
  const plain = tidyHelp(text.replace(ANSI, ""), path.length === 0)
  const width = Math.max(40, (tty ? process.stdout.columns : terminal.columns) || 80)
  return plain
    .split("\n")
    .flatMap((l) =>
      l.startsWith("$ ") ? wrapLine(keepGroups(usageLine(l, path)), width).map(NBSP_BACK) : wrapLine(l, width)
    )
    .join("\n")
}

/** A usage line wraps between its option groups, never inside one (`[--ready-path P]`). */
const keepGroups = (line: string) => line.replace(/\[[^\]]*\]/g, (group) => group.replaceAll(" ", "\u00a0"))
const NBSP_BACK = (line: string) => line.replaceAll("\u00a0", " ")

/** `$ run [--json] … <CMD>...` → `$ hyperloom lease run [--json] … -- <CMD>...` */
const usageLine = (line: string, path: ReadonlyArray<string>) => {
  const leaf = path[path.length - 1]
  const full =
    leaf !== undefined && line.startsWith(`$ ${leaf}`)
      ? `$ hyperloom ${path.join(" ")}${line.slice(2 + leaf.length)}`
      : line
  return full.replace(/ <CMD>\.\.\.$/, " -- <CMD>...")
}

const isHelp = (text: string) => /\n\s*USAGE\s*\n/.test(text.replace(ANSI, ""))

/** A text for stderr as one line that starts with `hyperloom: `. */
const errorLine = (text: string) => {
  const line = text
    .replace(ANSI, "")
    .trim()
    .replace(/\s*\n\s*/g, " ")
  return line.startsWith("hyperloom: ") ? line : `hyperloom: ${line}`
}

const withConsole = <A, E, R>(effect: Effect.Effect<A, E, R>, words: ReadonlyArray<string>) => {
  const tty = process.stdout.isTTY === true && !terminal.noColor
  const show = (arg: unknown) =>
    typeof arg !== "string"
      ? arg
      : isHelp(arg)
        ? presentHelp(arg, words, tty)
        : isCompletions(arg)
          ? tidyCompletions(arg)
          : tty
            ? arg
            : arg.replace(ANSI, "")
  return Effect.flatMap(Console.consoleWith(Effect.succeed), (console) =>
    Effect.withConsole(effect, {
      ...console,
      log: (...args: ReadonlyArray<unknown>) => console.log(...args.map(show)),
      // @effect/cli prints its usage errors (a missing option, a value it could not read) as a text
      // block ending in a blank line: one line, marked `hyperloom: ` as every other error line is.
      error: (...args: ReadonlyArray<unknown>) =>
        console.error(
          ...args.map((a) => (typeof a === "string" ? explainUsage(errorLine(a), commandPath(words)) : a))
        ),
      unsafe: {
        ...console.unsafe,
        log: (...args: ReadonlyArray<unknown>) => console.unsafe.log(...args.map(show))
      }
    })
  )
}

/** Diagnostics go to stderr, one line each; stdout is for results. */
const stderrLogger = Logger.make(({ logLevel, message }) => {
  const text = Array.isArray(message) ? message.map(String).join(" ") : String(message)
  const prefix = logLevel._tag === "Warning" ? "warning: " : logLevel._tag === "Error" ? "error: " : ""
  writeAroundStatus(`hyperloom: ${prefix}${text}\n`)
})

const usageText = (e: ValidationError.ValidationError) => {
  const doc = (e as { readonly error?: HelpDoc.HelpDoc }).error
  return doc === undefined
    ? e._tag
    : HelpDoc.toAnsiText(doc)
        .replace(ANSI, "")
        .trim()
        .replace(/\s*\n\s*/g, " ")
}

const reportFailure = (cause: Cause.Cause<Failure | ValidationError.ValidationError>, asJson: boolean) =>
  Effect.gen(function* () {
    const failure = Cause.failureOption(cause)
    if (Option.isSome(failure)) {
      const error = failure.value
      const code = exitCodeFor(error)
      if (ValidationError.isValidationError(error)) {
        // @effect/cli already printed its usage error on stderr; --json wants a document too.
        if (asJson) {
          yield* Console.log(
            JSON.stringify(
              {
                error: {
                  tag: error._tag,
                  message: explainUsage(usageText(error), commandPath(commandLine.help)),
                  exit_code: code
                }
              },
              null,
              2
            )
          )
        }
      } else if (error._tag !== "ExitWith") {
        process.stderr.write(`hyperloom: ${error.message}\n`)
      }
      return code
    }
    const defect = Cause.squash(cause)
    process.stderr.write(
      `hyperloom: internal error: ${defect instanceof Error ? defect.message : String(defect)}\n` +
        (terminal.debug ? `${Cause.pretty(cause)}\n` : "(set HYPERLOOM_DEBUG=1 for details)\n")
    )
    return EXIT.internal
  })

const commandLine = parseCommandLine(process.argv.slice(2))
const level = commandLine.logLevel === undefined ? undefined : LEVELS[commandLine.logLevel.toLowerCase()]

/** A usage error found before any command is loaded: a bad HYPERLOOM_DEBUG, COLUMNS, NO_COLOR or --log-level. */
const earlyUsageError = Either.isLeft(terminalRead)
  ? terminalRead.left
  : commandLine.logLevel !== undefined && level === undefined
    ? new UsageError({
        detail: `--log-level must be one of ${Object.keys(LEVELS).join(", ")}, got '${commandLine.logLevel}'`
      })
    : undefined

const failUsage = (e: NonNullable<typeof earlyUsageError>) =>
  Effect.fail(e).pipe(
    Effect.tapError((e) =>
      commandLine.json ? Console.log(JSON.stringify(errorJson(e), null, 2)) : Effect.void
    )
  )

/** The whole CLI: its error channel must be known failures only (an unmapped one fails here). */
const run: Effect.Effect<void, Failure | ValidationError.ValidationError, NodePlatform.NodePlatform> =
  earlyUsageError !== undefined
    ? failUsage(earlyUsageError)
    : Effect.promise(() => loadRootCommand(commandLine.args)).pipe(
        Effect.flatMap((root) => {
          const usageError = commandPathError(root, commandLine.args)
          return usageError !== undefined
            ? failUsage(usageError)
            : Effect.suspend(() => cliOf(root)([...process.argv.slice(0, 2), ...commandLine.args])).pipe(
                Effect.provideService(CommandLine, { args: commandLine.args, json: commandLine.json }),
                // --help shows hyperloom's own options; the built-ins are listed in the root's help text.
                Effect.provide(CliConfig.layer({ showBuiltIns: false }))
              )
        })
      )

const program = run.pipe(
  (effect) => withConsole(effect, commandLine.help),
  Effect.provide(NodePlatform.layer),
  Effect.provide(Logger.replace(Logger.defaultLogger, stderrLogger)),
  Logger.withMinimumLogLevel(level ?? (terminal.debug ? LogLevel.Debug : LogLevel.Info)),
  Effect.matchCauseEffect({
    onSuccess: () => Effect.succeed(EXIT.ok as number),
    onFailure: (cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.succeed(EXIT.cancelled as number)
        : reportFailure(cause, commandLine.json)
  })
)

// stdout's write errors become exit codes (Stdout.ts), never an "Unhandled 'error' event" crash.
watchStdout()
// SIGHUP cancels like SIGINT/SIGTERM; a later signal never abandons a lease being released (Signals.ts).
watchSignals()

/** After the program: everything on stdout flushed; a failed stdout decides the exit code. */
const withStdoutChecked = <E>(effect: Effect.Effect<number, E, never>) =>
  Effect.flatMap(effect, (code) =>
    Effect.map(
      Effect.promise(() => flushStdout()),
      () => {
        const failed = stdoutFailure()
        return failed === undefined || code === EXIT_STDOUT_CLOSED || code === EXIT_STDOUT_FAILED
          ? code
          : exitForStdoutFailure(failed)
      }
    )
  )

NodeRuntime.runMain(withStdoutChecked(program), {
  disableErrorReporting: true,
  disablePrettyLogger: true,
  teardown: (exit, onExit) => {
    const code: number = Exit.isSuccess(exit)
      ? (exit.value as number)
      : Cause.isInterruptedOnly(exit.cause)
        ? EXIT.cancelled
        : EXIT.internal
    process.exitCode = exitCodeAfterSignals(code)
    onExit(exitCodeAfterSignals(code))
  }
})
