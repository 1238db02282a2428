/**
 * The root command. Its leaves get their services from `layers` (main.ts passes the live ones,
 * the one composition root), built per command run with that command's overrides (e.g. --nodes),
 * so `--help` builds nothing.
 */
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import type { Layer, Option } from "effect"
import type { InvalidAddress, InvalidSetting } from "../domain/Errors.js"
import type { Services } from "../Live.js"
import type { SettingsOverrides } from "../services/Settings.js"
import { VERSION } from "../version.js"
import { baselineRun } from "./commands/baseline.js"
import { compareCommand } from "./commands/compare.js"
import { leaseRun } from "./commands/lease.js"
import { queueCommand } from "./commands/queue.js"
import { doctorCommand, ensureCommand, repairCommand, statusCommand } from "./commands/ray.js"
import { reportCommand } from "./commands/report.js"
import { showCommand } from "./commands/state.js"
import { sweepRun, sweepShow } from "./commands/sweep.js"
import { EXIT_CODES_HELP } from "./Exit.js"

const about = `hyperloom keeps a Ray-backed GPU serving host usable for benchmark work: it ensures a local Ray head that declares the serving_slot resource (repairing one that lacks it only when every guard proves nobody else's Ray work can be hurt), grants serving leases (a Ray actor holding the slot and N GPUs, running a command) runs baseline benchmarks with stop rules, and sweeps engine flags and client load for the best serving configuration under an SLO (sweep run, sweep show, and report for the charts).`

const environment = `Environment:
  RAY_ADDRESS                       unset/auto: the local cluster; anything else is explicit (never repaired)
  HYPERLOOM_NODES                   nodes in the run (>= 2: multi-node; same as --nodes)
  HYPERLOOM_RAY                     the ray executable (default: the project's .venv, else PATH)
  HYPERLOOM_RAY_PYTHON              the Python of the Ray installation (default: the ray script's shebang)
  HYPERLOOM_RAY_STATUS_TIMEOUT_SEC  timeout of the \`ray status\` probe (default 5)
  HYPERLOOM_RAY_START_TIMEOUT_SEC   timeout of \`ray start\` (default 120)
  HL_RAY_HEAD_PORT                  port of a head hyperloom starts (default 6379)
  HYPERLOOM_RAY_NUM_GPUS            GPUs to declare when (re)starting a head`

const global = `Everywhere: --help, --version, --log-level (all|trace|debug|info|warning|error|fatal|none),
--completions (bash|fish|zsh: prints a completion script; see the README).`

/** A preformatted block: one paragraph, its lines kept. */
const lines = (text: string) => HelpDoc.p(text)

/** Builds the services of one command run from its overrides. */
export type Layers = (overrides: SettingsOverrides) => Layer.Layer<Services, InvalidSetting | InvalidAddress>

/** What a command's options override of the settings: --nodes, and a group's --rank-cwd / --rank-env. */
interface OverridingOptions {
  readonly nodes?: Option.Option<number>
  readonly rankCwd?: Option.Option<string>
  readonly rankEnv?: ReadonlyArray<string>
}

const overridesOf = (config: OverridingOptions): SettingsOverrides => ({
  ...(config.nodes !== undefined && config.nodes._tag === "Some" ? { nodes: config.nodes.value } : {}),
  ...(config.rankCwd !== undefined && config.rankCwd._tag === "Some"
    ? { rankCwd: config.rankCwd.value }
    : {}),
  ...(config.rankEnv !== undefined && config.rankEnv.length > 0 ? { rankEnv: config.rankEnv } : {})
})

/** The hyperloom command tree with each leaf provided from `layers`. */
export const makeRootCommand = (layers: Layers) => {
  const provide = <Name extends string, R, E, A>(command: Command.Command<Name, R, E, A>) =>
    Command.provide(command, (config: A) => layers(overridesOf(config as OverridingOptions)))
  return Command.make("hyperloom").pipe(
    Command.withDescription(
      HelpDoc.sequence(HelpDoc.p(about), lines(`${environment}\n\n${global}\n\n${EXIT_CODES_HELP}`))
    ),
    Command.withSubcommands([
      Command.make("ray").pipe(
        Command.withDescription("Inspect, ensure and repair the host's Ray cluster."),
        Command.withSubcommands([
          provide(statusCommand),
          provide(doctorCommand),
          provide(ensureCommand),
          provide(repairCommand)
        ])
      ),
      Command.make("lease").pipe(
        Command.withDescription(
          "Serving leases: hold the host's serving slot and GPUs while a command runs."
        ),
        Command.withSubcommands([provide(leaseRun)])
      ),
      Command.make("baseline").pipe(
        Command.withDescription("Run baseline benchmarks under serving leases, with stop rules."),
        Command.withSubcommands([provide(baselineRun)])
      ),
      Command.make("state").pipe(
        Command.withDescription("Inspect baseline sessions."),
        Command.withSubcommands([provide(showCommand)])
      ),
      Command.make("sweep").pipe(
        Command.withDescription(
          "Sweep engine flags and client load for the best configuration under an SLO."
        ),
        Command.withSubcommands([provide(sweepRun), provide(sweepShow)])
      ),
      provide(reportCommand),
      provide(compareCommand),
      provide(queueCommand)
    ])
  )
}

/** The CLI over `layers`: give it the command line (process.argv). */
export const makeCli = (layers: Layers) =>
  Command.run(makeRootCommand(layers), { name: "hyperloom", version: VERSION })
