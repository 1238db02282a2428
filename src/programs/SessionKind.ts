/**
 * One experiment per session folder (issue 27 item 6): a baseline session holds `state.json`, a
 * sweep session `sweep.json`. `baseline run` on a sweep's folder and `sweep run` on a baseline's
 * both ran and exited 0, and `report` then showed one of them. Each run, once it holds the session
 * lock (so a run of the other kind cannot slip in between the check and the run), refuses a
 * folder that holds the other experiment: a usage error (exit 2) naming what the folder holds.
 */
import { Data, Effect, Option } from "effect"
import { AttemptFiles } from "../services/AttemptFiles.js"
import { StateStore } from "../services/StateStore.js"

export type SessionKind = "baseline" | "sweep"

const FILE: Readonly<Record<SessionKind, string>> = { baseline: "state.json", sweep: "sweep.json" }

/** The session folder holds the other kind of experiment (exit 2); nothing ran, nothing was written. */
export class SessionHoldsOther extends Data.TaggedError("SessionHoldsOther")<{
  readonly sessionDir: string
  /** What the folder holds. */
  readonly holds: SessionKind
}> {
  override get message(): string {
    const wanted = this.holds === "sweep" ? "baseline" : "sweep"
    return `session ${this.sessionDir} holds a ${this.holds} (${FILE[this.holds]}), not a ${wanted}: two experiments never share a folder; use a new --session directory for the ${wanted} (hyperloom ${this.holds === "sweep" ? "sweep show" : "state show"} --session ${this.sessionDir} shows what it holds)`
  }
}

const join = (dir: string, base: string) => `${dir.replace(/\/+$/, "")}/${base}`

/** For `baseline run`: fails when the folder holds a sweep (its sweep.json is there, whatever it holds). */
export const refuseSweepSession = (sessionDir: string) =>
  Effect.flatMap(AttemptFiles, (files) => files.exists(join(sessionDir, FILE.sweep))).pipe(
    Effect.flatMap((held) =>
      held ? Effect.fail(new SessionHoldsOther({ sessionDir, holds: "sweep" })) : Effect.void
    )
  )

/** For `sweep run`: fails when the folder holds a baseline (a state.json, readable or not). */
export const refuseBaselineSession = (sessionDir: string) =>
  Effect.flatMap(StateStore, (store) => store.load(sessionDir)).pipe(
    Effect.map(Option.isSome),
    Effect.orElseSucceed(() => true),
    Effect.flatMap((held) =>
      held ? Effect.fail(new SessionHoldsOther({ sessionDir, holds: "baseline" })) : Effect.void
    )
  )
