import * as Command from "@effect/cli/Command"
import { Console, Effect } from "effect"
import { renderFinding } from "../../domain/Validity.js"
import { type CheckReport, checkSession } from "../../programs/Check.js"
import { withJsonErrors } from "../Run.js"
import { json } from "../Shared.js"
import { sessionOption } from "./state.js"

/** The re-judged verdicts as text: one line per run, what changed marked, the session's line. */
export const renderCheck = (r: CheckReport): string => {
  const out = [`check ${r.session} (${r.kind}): ${r.line}${r.agrees ? "; every verdict as recorded" : ""}`]
  for (const run of r.runs) {
    const was = run.recorded === null ? "not judged before" : run.recorded
    out.push(`  ${run.run}: ${run.now.verdict}${run.agrees ? "" : ` (recorded: ${was})`}`)
    for (const f of run.now.findings) out.push(`      ${renderFinding(f)}`)
  }
  for (const n of r.not_checked) out.push(`  not checked: ${n}`)
  if (r.best !== null)
    out.push(
      r.best.recorded === r.best.now
        ? `best: ${r.best.now ?? "none"} (as recorded)`
        : `best: ${r.best.now ?? "none"} (recorded: ${r.best.recorded ?? "none"})`
    )
  return out.join("\n")
}

export const checkCommand = Command.make(
  "check",
  {
    session: sessionOption("The session directory: a sweep's (sweep.json) or a baseline's (state.json)."),
    json
  },
  (o) =>
    Effect.gen(function* () {
      const report = yield* checkSession(o.session)
      yield* Console.log(o.json ? JSON.stringify(report, null, 2) : renderCheck(report))
    }).pipe(withJsonErrors(o.json), Effect.scoped)
).pipe(
  Command.withDescription(
    "Judge a session's validity again from what it recorded (docs/trust.md: not_engaged, client_bound, load_not_delivered, counts_disagree, failed_requests, too_few_requests, throttled, gpu_shared, cold), running nothing and writing nothing: after a change of thresholds or a newer hyperloom. Prints each measured run's verdict now (and the one it recorded when they differ), how many runs are valid, what could not be checked, and for a sweep its best as re-judged. --json: one document."
  )
)
