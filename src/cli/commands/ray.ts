import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Console, Effect } from "effect"
import { type EnsureOutcome, ensure, type RepairOutcome, repair } from "../../programs/Cluster.js"
import { type DoctorReport, doctor, type StatusReport, status } from "../../programs/Inspect.js"
import type { SettingsOverrides } from "../../services/Settings.js"
import { AppLayer, type AppServices } from "../AppLayer.js"
import { EXIT, ExitWith } from "../Exit.js"
import { renderDoctor, renderEnsure, renderRepair, renderStatus } from "../Render.js"
import {
  gpus,
  json,
  leaseRequestOf,
  nodes,
  noServingSlot,
  overridesOf,
  printJson,
  withJsonErrors
} from "../Shared.js"

/** Runs a program with the command's services, printing JSON or the human rendering. */
export const runWith = <A, E>(
  overrides: SettingsOverrides,
  asJson: boolean,
  program: Effect.Effect<A, E, AppServices>,
  render: (a: A) => string,
  exitCode: (a: A) => number = () => EXIT.ok,
  humanTo: "stdout" | "stderr" = "stdout"
) =>
  Effect.gen(function* () {
    const make = yield* AppLayer
    const result = yield* program.pipe(Effect.provide(make(overrides)))
    yield* asJson
      ? printJson(result)
      : humanTo === "stdout"
        ? Console.log(render(result))
        : Console.error(render(result))
    const code = exitCode(result)
    if (code !== EXIT.ok) return yield* Effect.fail(new ExitWith({ code }))
  }).pipe(withJsonErrors(asJson), Effect.scoped)

const statusCommand = Command.make("status", { json }, (o) =>
  runWith<StatusReport, unknown>({}, o.json, status(), renderStatus)
).pipe(
  Command.withDescription(
    "The cluster snapshot read from the GCS: address, Ray version, nodes, resources total/available, actors, jobs, and the host's Ray daemons."
  )
)

const doctorCommand = Command.make("doctor", { json, gpus, noServingSlot, nodes }, (o) =>
  runWith<DoctorReport, unknown>(overridesOf(o), o.json, doctor(leaseRequestOf(o)), renderDoctor, (r) =>
    r.feasible ? EXIT.ok : EXIT.infeasible
  )
).pipe(
  Command.withDescription(
    "Whether a serving lease (--gpus N, with serving_slot unless --no-serving-slot) is feasible, and whether the automatic repair would be allowed, with every guard. Changes nothing. Exits 0 when feasible, 7 when not."
  )
)

const ensureCommand = Command.make("ensure", { json, gpus, nodes }, (o) =>
  runWith<EnsureOutcome, unknown>(overridesOf(o), o.json, ensure(leaseRequestOf(o)), renderEnsure)
).pipe(
  Command.withDescription(
    "Reuse the Ray head that answers `ray status`, repairing it if it lacks serving_slot and every guard allows; start a local head with serving_slot when none answers (never behind an explicit RAY_ADDRESS, on a multi-node run, or over Ray daemons it cannot reach)."
  )
)

const dryRun = Options.boolean("dry-run").pipe(
  Options.withDescription("Evaluate the guards and show the restart plan without stopping anything.")
)

const repairCommand = Command.make("repair", { json, dryRun, gpus, nodes }, (o) =>
  runWith<RepairOutcome, unknown>(
    overridesOf(o),
    o.json,
    repair(leaseRequestOf(o), { dryRun: o.dryRun }),
    renderRepair,
    (r) => (r.verdict.feasible || r.action === "would_repair" ? EXIT.ok : EXIT.infeasible)
  )
).pipe(
  Command.withDescription(
    "The guarded repair on demand: if the connected head lacks serving_slot and every guard holds, `ray stop --force` and start it again on the same port with its resources plus serving_slot. Refused guards are listed and nothing is stopped."
  )
)

export const rayCommand = Command.make("ray").pipe(
  Command.withDescription("Inspect, ensure and repair the host's Ray cluster."),
  Command.withSubcommands([statusCommand, doctorCommand, ensureCommand, repairCommand])
)
