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

/** Runs a program with the command's services, printing JSON or the human rendering. */
export const runWith = <A, E>(
  overrides: SettingsOverrides,
  asJson: boolean,
  program: Effect.Effect<A, E, AppServices>,
  show: Presentation<A>
) =>
  Effect.gen(function* () {
    const make = yield* AppLayer
    const result = yield* program.pipe(Effect.provide(make(overrides)))
    yield* asJson
      ? printJson(show.toJson ? show.toJson(result) : result)
      : show.humanTo === "stderr"
        ? Console.error(show.render(result))
        : Console.log(show.render(result))
    const code = show.exitCode?.(result) ?? EXIT.ok
    if (code !== EXIT.ok) return yield* Effect.fail(new ExitWith({ code }))
  }).pipe(withJsonErrors(asJson), Effect.scoped)

const statusCommand = Command.make("status", { json }, (o) =>
  runWith<StatusReport, unknown>({}, o.json, status(), { render: renderStatus })
).pipe(
  Command.withDescription(
    "The cluster snapshot read from the GCS: address, Ray version, nodes, resources total/available, actors, jobs, and the host's Ray daemons."
  )
)

const doctorCommand = Command.make("doctor", { json, gpus, noServingSlot, nodes }, (o) =>
  runWith<DoctorReport, unknown>(overridesOf(o), o.json, doctor(leaseRequestOf(o)), {
    render: renderDoctor,
    exitCode: (r) => (r.feasible ? EXIT.ok : EXIT.infeasible)
  })
).pipe(
  Command.withDescription(
    "Whether a serving lease (--gpus N, with serving_slot unless --no-serving-slot) is feasible, and whether the automatic repair would be allowed, with every guard. Changes nothing. Exits 0 when feasible, 7 when not."
  )
)

/** The JSON documents of ensure and repair, in the CLI contract's snake_case. */
const ensureJson = (r: EnsureOutcome) => ({
  action: r.action,
  address: r.gcsAddress,
  feasible: r.verdict.feasible,
  warnings: r.verdict.warnings,
  guards: r.guards
})

const repairJson = (r: RepairOutcome) => ({
  action: r.action,
  address: r.gcsAddress,
  feasible: r.verdict.feasible,
  infeasible:
    r.verdict.infeasible === undefined
      ? null
      : {
          marker: r.verdict.infeasible.marker,
          reason: r.verdict.infeasible.reason,
          message: r.verdict.infeasible.message
        },
  plan:
    r.plan === null
      ? null
      : {
          port: r.plan.port,
          num_cpus: r.plan.numCpus ?? null,
          num_gpus: r.plan.numGpus ?? null,
          resources: r.plan.resources
        },
  repair: { allowed: r.action !== "none" || r.guards.every((g) => g.ok), guards: r.guards },
  warnings: r.verdict.warnings
})

const ensureCommand = Command.make("ensure", { json, gpus, nodes }, (o) =>
  runWith(overridesOf(o), o.json, ensure(leaseRequestOf(o)), { render: renderEnsure, toJson: ensureJson })
).pipe(
  Command.withDescription(
    "Reuse the Ray head that answers `ray status`, repairing it if it lacks serving_slot and every guard allows; start a local head with serving_slot when none answers (never behind an explicit RAY_ADDRESS, on a multi-node run, or over Ray daemons it cannot reach)."
  )
)

const dryRun = Options.boolean("dry-run").pipe(
  Options.withDescription("Evaluate the guards and show the restart plan without stopping anything.")
)

const repairCommand = Command.make("repair", { json, dryRun, gpus, nodes }, (o) =>
  runWith(overridesOf(o), o.json, repair(leaseRequestOf(o), { dryRun: o.dryRun }), {
    render: renderRepair,
    exitCode: (r) => (r.verdict.feasible || r.action === "would_repair" ? EXIT.ok : EXIT.infeasible),
    toJson: repairJson
  })
).pipe(
  Command.withDescription(
    "The guarded repair on demand: if the connected head lacks serving_slot and every guard holds, `ray stop --force` and start it again on the same port with its resources plus serving_slot. Refused guards are listed and nothing is stopped."
  )
)

export const rayCommand = Command.make("ray").pipe(
  Command.withDescription("Inspect, ensure and repair the host's Ray cluster."),
  Command.withSubcommands([statusCommand, doctorCommand, ensureCommand, repairCommand])
)
