/**
 * The user's recent sweeps on this host (docs/design.md#time-to-the-answer, `--dry-run`): when a sweep run ends (done,
 * cancelled, failed…) and its session measured something, a record of its medians goes to the
 * host queue's `sweeps.jsonl`; `--dry-run` estimates from them when neither the options nor the
 * session's own measurements give one.
 */
import * as nodePath from "node:path"
import { Clock, Effect, Option } from "effect"
import { chooseEstimate, sweepRecordOf, type Unlike } from "../../domain/Sweep/HostEstimate.js"
import type { Estimate } from "../../domain/Sweep/Plan.js"
import type { SweepDoc } from "../../domain/Sweep.js"
import { HostQueue } from "../../services/HostQueue.js"
import { SweepStore } from "../../services/SweepStore.js"

/**
 * Records the session's medians as of now among the user's recent sweeps, when this run (begun at
 * `sinceMs`) wrote the session (a run refused before it wrote anything records nothing); never fails.
 */
export const recordSweepEnd = (
  sessionDir: string,
  sinceMs: number
): Effect.Effect<void, never, HostQueue | SweepStore> =>
  Effect.gen(function* () {
    const doc = yield* Effect.flatMap(SweepStore, (store) => store.load(sessionDir))
    // the document's timestamps may be whole seconds
    if (Option.isNone(doc) || Date.parse(doc.value.updated_at) < Math.floor(sinceMs / 1000) * 1000) return
    const record = sweepRecordOf(doc.value, nodePath.resolve(sessionDir), yield* Clock.currentTimeMillis)
    if (record !== null) yield* Effect.flatMap(HostQueue, (q) => q.recordSweep(record))
  }).pipe(Effect.catchAllCause(() => Effect.void))

/**
 * `--dry-run`'s estimate: the options, else the session's own measurements, else the host's recent
 * sweeps of the same engine (`server`, the server command); `unlike` when the host has sweeps but
 * none of this engine.
 */
export const dryRunEstimate = (
  given: Estimate | null,
  held: Option.Option<SweepDoc>,
  server: string
): Effect.Effect<
  { readonly estimate: Estimate | null; readonly unlike?: Unlike | undefined },
  never,
  HostQueue
> =>
  given !== null
    ? Effect.succeed({ estimate: given })
    : Effect.map(
        Effect.flatMap(HostQueue, (q) => q.recentSweeps),
        (host) => chooseEstimate(null, Option.getOrNull(held), host, server)
      )
