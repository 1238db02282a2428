import * as Command from "@effect/cli/Command"
import { Clock, Effect } from "effect"
import { estimateWaitSec, fmtSec, splitQueue, typicalHoldSec } from "../../domain/Queue.js"
import { leasesInRay } from "../../programs/Queue.js"
import { HostQueue } from "../../services/HostQueue.js"
import { EXIT } from "../Exit.js"
import { present } from "../Run.js"
import { json, positiveSeconds } from "../Shared.js"

/** `--wait S` of the commands that hold leases (docs/design.md#fair-queue). */
export const waitOption = positiveSeconds(
  "wait",
  `Give up if the lease is not granted within S seconds (its wait in the host's queue and for Ray's grant): nothing runs, the holder of the slot is named, and hyperloom exits ${EXIT.waitExpired} (lease run: ${EXIT.leaseFailed}, with code ${EXIT.waitExpired} in the error line). Single-node leases only (a group is not queued). Ctrl-C also ends the wait and leaves the queue.`
)

/**
 * `hyperloom queue` (docs/design.md#fair-queue): who holds the host's slot and who waits for it, in
 * order.
 */
export const queueReport = Effect.gen(function* () {
  const queue = yield* HostQueue
  const view = yield* queue.view
  const now = yield* Clock.currentTimeMillis
  const { holders, waiters } = splitQueue(view.entries)
  // Which waiters Ray shows asking for the slot: a waiter of another user passed over by a later
  // one (programs/Queue.ts) is one Ray does not show while a later one of another user it does.
  const inRay = waiters.length > 0 ? yield* leasesInRay(waiters.map((w) => w.leaseId)) : undefined
  const typical = typicalHoldSec(view.history)
  const round = (n: number) => Number(n.toFixed(1))
  return {
    queue: view.path,
    shared: view.shared,
    holders: holders.map((h) => ({
      lease_id: h.leaseId,
      user: h.user,
      uid: h.uid,
      pid: h.pid,
      command: h.command,
      gpus: h.gpus,
      since: new Date(h.holding?.since ?? h.joinedAt).toISOString(),
      held_sec: round((now - (h.holding?.since ?? now)) / 1000),
      actor_id: h.holding?.actorId ?? null
    })),
    waiters: waiters.map((w, i) => {
      const estimate = estimateWaitSec(i + 1, holders, view.history, now)
      return {
        position: i + 1,
        lease_id: w.leaseId,
        user: w.user,
        uid: w.uid,
        pid: w.pid,
        command: w.command,
        gpus: w.gpus,
        joined_at: new Date(w.joinedAt).toISOString(),
        waited_sec: round((now - w.joinedAt) / 1000),
        estimate_sec: estimate === undefined ? null : round(estimate),
        in_ray: inRay === undefined ? null : inRay.has(w.leaseId),
        passed_over:
          inRay !== undefined &&
          !inRay.has(w.leaseId) &&
          waiters.slice(i + 1).some((l) => l.uid !== w.uid && inRay.has(l.leaseId))
      }
    }),
    typical_lease_sec: typical === undefined ? null : round(typical),
    recent_leases: view.history.length
  }
})

type QueueReport = Effect.Effect.Success<typeof queueReport>

const render = (r: QueueReport): string => {
  const lines = [
    `host queue ${r.queue}${r.shared ? "" : " (this user's own)"}: ${r.holders.length} holding, ${r.waiters.length} waiting`
  ]
  for (const h of r.holders) {
    lines.push(
      `  holding  lease ${h.lease_id}  ${h.user}  pid ${h.pid}  ${h.gpus} GPU(s)  since ${h.since} (${fmtSec(h.held_sec)})  ${h.command}`
    )
  }
  for (const w of r.waiters) {
    const estimate = w.estimate_sec === null ? "no estimate yet" : `about ${fmtSec(w.estimate_sec)} more`
    const ray = w.passed_over
      ? "  [passed over: never asked Ray while the head]"
      : w.in_ray === true
        ? "  [asking Ray]"
        : ""
    lines.push(
      `  ${String(w.position).padStart(2)}.  lease ${w.lease_id}  ${w.user}  pid ${w.pid}  ${w.gpus} GPU(s)  waited ${fmtSec(w.waited_sec)}, ${estimate}  ${w.command}${ray}`
    )
  }
  if (r.holders.length === 0 && r.waiters.length === 0)
    lines.push("  nobody holds or waits for the serving slot")
  lines.push(
    r.typical_lease_sec === null
      ? "  estimates: no finished lease recorded on this host yet"
      : `  estimates from the median of the last ${Math.min(r.recent_leases, 20)} lease(s) on this host: ${fmtSec(r.typical_lease_sec)} each`
  )
  return lines.join("\n")
}

export const queueCommand = Command.make("queue", { json }, (o) =>
  present(o.json, queueReport, { render })
).pipe(
  Command.withDescription(
    "Show who holds the host's serving slot and who waits for it. The holders (lease id, user, pid, command, GPUs, since when) and the waiters, in arrival order (position, user, command, waited so far, an estimate from the host's recent leases). Every user's leases of this host are granted in this order, whatever order Ray would choose. Reads the queue and asks Ray (briefly) which waiters it shows asking for the slot. Who leaves the queue and who is passed over: docs/reliability.md#8-fair-the-hosts-queue."
  )
)
