/**
 * What every command does with its program's result: print it (one JSON document with --json,
 * else the human rendering), turn it into an exit code, and, with --json, print a failure as JSON
 * too. Shared by every command module.
 */

import * as Console from "effect/Console"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { EXIT, ExitWith, exitCodeFor, type Failure } from "./Exit.js"

export interface Presentation<A> {
  /** The human rendering. */
  readonly render: (a: A) => string
  /** The exit code for a result (default 0). */
  readonly exitCode?: (a: A) => number
  /** Where the human rendering goes (default stdout). */
  readonly humanTo?: "stdout" | "stderr"
  /** The JSON document for --json (default: the result itself). */
  readonly toJson?: (a: A) => unknown
}

export const printJson = (value: unknown) => Console.log(JSON.stringify(value, null, 2))

/**
 * The JSON document of a failure: `{"error": {"tag", "message", "exit_code"}}` (gpu_busy: also
 * `class`, `holders`, and where known `rank`, `node_id`, `node_address`: the holders' node).
 */
export const errorJson = (error: Failure) => ({
  error: {
    tag: error._tag,
    message: error.message,
    exit_code: exitCodeFor(error),
    ...(error._tag === "GpuBusy"
      ? {
          class: error.class,
          holders: error.holders,
          ...(error.rank === undefined ? {} : { rank: error.rank }),
          ...(error.nodeId === undefined ? {} : { node_id: error.nodeId }),
          ...(error.nodeAddress === undefined ? {} : { node_address: error.nodeAddress })
        }
      : {})
  }
})

/**
 * With --json, a failure still produces one JSON document on stdout before the error reaches
 * main's exit-code table. `--json` counts when the command's options parsed it or when it stands
 * among the raw options before `--`: @effect/cli hands everything after an unknown option
 * (`--bogus --json -- CMD`) to CMD, and the usage error that follows must still be JSON.
 */
export const withJsonErrors =
  (asJson: boolean) =>
  <A, E extends Failure, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.flatMap(Effect.serviceOption(CommandLine), (line) =>
      asJson || Option.exists(line, (l) => l.json)
        ? Effect.tapError(effect, (e) => (e._tag === "ExitWith" ? Effect.void : printJson(errorJson(e))))
        : effect
    )

/** Prints a program's result as the command's output and ends with its exit code. */
export const present = <A, E extends Failure, R>(
  asJson: boolean,
  program: Effect.Effect<A, E, R>,
  show: Presentation<A>
): Effect.Effect<void, E | ExitWith, Exclude<R, Scope.Scope>> =>
  Effect.gen(function* () {
    const result = yield* program
    yield* asJson
      ? printJson(show.toJson ? show.toJson(result) : result)
      : show.humanTo === "stderr"
        ? Console.error(show.render(result))
        : Console.log(show.render(result))
    const code = show.exitCode?.(result) ?? EXIT.ok
    if (code !== EXIT.ok) return yield* new ExitWith({ code })
  }).pipe(withJsonErrors(asJson), Effect.scoped)

/** The raw command line (after the executable), as main.ts received it. */
export class CommandLine extends Context.Tag("hyperloom/cli/CommandLine")<
  CommandLine,
  {
    readonly args: ReadonlyArray<string>
    /** `--json` stands among the options before `--` (whatever @effect/cli made of it). */
    readonly json: boolean
  }
>() {}
