import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import { Console, Effect, Option } from "effect"
import type { LeaseRequest } from "../domain/Feasibility.js"
import type { SettingsOverrides } from "../services/Settings.js"
import { ExitWith, exitCodeFor } from "./Exit.js"

const atLeast = (name: string, min: number) => (n: number) =>
  n >= min
    ? Effect.succeed(n)
    : Effect.fail(
        ValidationError.invalidValue(HelpDoc.p(`--${name} must be a whole number >= ${min}, got ${n}`))
      )

export const json = Options.boolean("json").pipe(
  Options.withDescription("Print one JSON document on stdout (logs stay on stderr).")
)

export const gpus = Options.integer("gpus").pipe(
  Options.withDescription("GPUs the serving lease asks for (declared GPUs count; default 0)."),
  Options.withDefault(0),
  Options.mapEffect(atLeast("gpus", 0))
)

export const noServingSlot = Options.boolean("no-serving-slot").pipe(
  Options.withDescription(
    "Do not ask for the serving_slot resource (the lease is then not a host-wide mutex)."
  )
)

export const nodes = Options.integer("nodes").pipe(
  Options.withDescription(
    "Nodes in this run (default: HYPERLOOM_NODES, else 1). 2 or more is a multi-node run: no repair, no local head start; lease run and baseline run then hold a group (one placement group, one rank per node, docs/multi-node.md) and ray doctor checks that N nodes each declare serving_slot and --gpus GPUs."
  ),
  Options.mapEffect(atLeast("nodes", 1)),
  Options.optional
)

export const positiveSeconds = (name: string, description: string) =>
  Options.float(name).pipe(
    Options.withDescription(description),
    Options.mapEffect((n) =>
      n > 0 && Number.isFinite(n)
        ? Effect.succeed(n)
        : Effect.fail(
            ValidationError.invalidValue(
              HelpDoc.p(`--${name} must be a positive number of seconds, got ${n}`)
            )
          )
    ),
    Options.optional
  )

export const overridesOf = (opts: { readonly nodes: Option.Option<number> }): SettingsOverrides =>
  Option.isSome(opts.nodes) ? { nodes: opts.nodes.value } : {}

export const leaseRequestOf = (opts: {
  readonly gpus: number
  readonly noServingSlot?: boolean
}): LeaseRequest => ({
  gpus: opts.gpus,
  servingSlot: !(opts.noServingSlot ?? false)
})

export const printJson = (value: unknown) => Console.log(JSON.stringify(value, null, 2))

const errorMessage = (e: unknown) => (e instanceof Error ? e.message : String(e))

/**
 * With --json, a failure still produces one JSON document on stdout
 * (`{"error": {"tag", "message", "exit_code"}}`) before the error reaches main's exit-code table.
 */
export const withJsonErrors =
  (asJson: boolean) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    asJson
      ? Effect.tapError(effect, (e) =>
          e instanceof ExitWith
            ? Effect.void
            : printJson({
                error: {
                  tag: (e as { _tag?: string })._tag ?? "Error",
                  message: errorMessage(e),
                  exit_code: exitCodeFor(e)
                }
              })
        )
      : effect
