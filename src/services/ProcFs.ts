import { Context, Data, type Effect } from "effect"
import type { ProcessInfo, RayDaemon } from "../domain/Snapshot.js"

/** The /proc root itself could not be listed (a vanished process is never an error). */
export class ProcUnreadable extends Data.TaggedError("ProcUnreadable")<{
  readonly root: string
  readonly detail: string
}> {
  override get message(): string {
    return `cannot read the process table at ${this.root}: ${this.detail}`
  }
}

export interface ProcFsShape {
  /** Every process readable under the root; processes that vanish mid-scan are skipped. */
  readonly processes: Effect.Effect<ReadonlyArray<ProcessInfo>, ProcUnreadable>
  /** The host's `gcs_server` and `raylet` daemons with their flags parsed. */
  readonly rayDaemons: Effect.Effect<ReadonlyArray<RayDaemon>, ProcUnreadable>
}

export class ProcFs extends Context.Tag("hyperloom/services/ProcFs")<ProcFs, ProcFsShape>() {}
