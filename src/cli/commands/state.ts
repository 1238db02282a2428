import * as path from "node:path"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import { Console, Effect, Option } from "effect"
import { SessionNotFound } from "../../domain/Errors.js"
import { renderState } from "../../domain/State.js"
import { StateStore } from "../../services/StateStore.js"
import { EXIT } from "../Exit.js"
import { renderSession } from "../RenderSession.js"
import { withJsonErrors } from "../Run.js"
import { json } from "../Shared.js"

/** `--session DIR`, resolved against the working directory; `what` says what the folder holds. */
export const sessionOption = (what: string) =>
  Options.text("session").pipe(
    Options.withPseudoName("DIR"),
    Options.withDescription(what),
    Options.mapEffect((dir) =>
      dir.trim() === ""
        ? Effect.fail(
            ValidationError.invalidValue(HelpDoc.p("--session must name a directory, got an empty string"))
          )
        : Effect.succeed(path.resolve(dir))
    )
  )

/** A baseline session's `--session DIR`. */
export const session = Options.text("session").pipe(
  Options.withPseudoName("DIR"),
  Options.withDescription("The session directory (holds state.json, the lock and one folder per attempt)."),
  Options.mapEffect((dir) =>
    dir.trim() === ""
      ? Effect.fail(
          ValidationError.invalidValue(HelpDoc.p("--session must name a directory, got an empty string"))
        )
      : Effect.succeed(path.resolve(dir))
  )
)

export const showCommand = Command.make("show", { session, json }, (o) =>
  Effect.gen(function* () {
    const loaded = yield* Effect.flatMap(StateStore, (store) => store.load(o.session))
    if (Option.isNone(loaded)) return yield* new SessionNotFound({ sessionDir: o.session })
    yield* o.json
      ? Console.log(renderState(loaded.value).trimEnd())
      : Console.log(renderSession(o.session, loaded.value))
  }).pipe(withJsonErrors(o.json), Effect.scoped)
).pipe(
  Command.withDescription(
    `Show a baseline session's state: status, why it stopped, each attempt (number, class, exit code, runtime, error), the streaks, the last failure signature and the enablement lane. --json prints the state document itself. Never modifies the session; an unreadable or newer state file is an error (exit ${EXIT.state}).`
  )
)
