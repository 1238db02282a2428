import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { ensure, repair } from "../../programs/Cluster.js"
import { doctor, status } from "../../programs/Inspect.js"
import { ensureReport, repairReport } from "../Documents.js"
import { EXIT } from "../Exit.js"
import { renderDoctor, renderEnsure, renderRepair, renderStatus } from "../Render.js"
import { present } from "../Run.js"
import { gpusOptional as gpus, json, leaseRequestOf, nodes, noServingSlot } from "../Shared.js"

export const statusCommand = Command.make("status", { json }, (o) =>
  present(o.json, status(), { render: renderStatus })
).pipe(
  Command.withDescription(
    "The cluster snapshot read from the GCS: address, Ray version, nodes, resources used/total (as `ray status` counts them), actors, jobs, and the host's Ray daemons."
  )
)

export const doctorCommand = Command.make("doctor", { json, gpus, noServingSlot, nodes }, (o) =>
  present(o.json, doctor(leaseRequestOf(o)), {
    render: renderDoctor,
    exitCode: (r) => (r.feasible ? EXIT.ok : EXIT.infeasible)
  })
).pipe(
  Command.withDescription(
    `Whether a serving lease (--gpus N, with serving_slot unless --no-serving-slot) is feasible, and whether the automatic repair would be allowed, with every guard. Changes nothing. Exits ${EXIT.ok} when feasible, ${EXIT.infeasible} when not.`
  )
)

export const ensureCommand = Command.make("ensure", { json, gpus, nodes }, (o) =>
  present(o.json, ensure(leaseRequestOf(o)), { render: renderEnsure, toJson: ensureReport })
).pipe(
  Command.withDescription(
    "Make sure a Ray head with serving_slot answers. Reuse the head that answers `ray status`, repairing it if it lacks serving_slot and every guard allows; start a local head with serving_slot when none answers (never behind an explicit RAY_ADDRESS, on a multi-node run, or over Ray daemons it cannot reach)."
  )
)

const dryRun = Options.boolean("dry-run").pipe(
  Options.withDescription("Evaluate the guards and show the restart plan without stopping anything.")
)

export const repairCommand = Command.make("repair", { json, dryRun, gpus, nodes }, (o) =>
  present(o.json, repair(leaseRequestOf(o), { dryRun: o.dryRun }), {
    render: renderRepair,
    exitCode: (r) => (r.verdict.feasible || r.action === "would_repair" ? EXIT.ok : EXIT.infeasible),
    toJson: repairReport
  })
).pipe(
  Command.withDescription(
    "The guarded repair on demand: if the connected head lacks serving_slot and every guard holds, `ray stop --force` and start it again on the same port with its resources plus serving_slot. Refused guards are listed and nothing is stopped."
  )
)
