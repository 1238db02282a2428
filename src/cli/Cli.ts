/**
 * The root command. Its leaves get their services from the live layers (Live.ts, LiveCluster.ts:
 * the one composition root), built per command run with that command's overrides (e.g. --nodes),
 * so `--help` builds nothing.
 *
 * Each top-level command's module (its options, handlers and programs) and its layers are imported
 * only when the command line names that command: `hyperloom ray doctor` evaluates the ray commands
 * and the cluster's services, not the sweep, baseline and state modules and their schemas (the
 * executable's cold start, docs/performance.md). A command line that names none of them (the
 * root's help, `--completions`, an unknown word) loads every one, so the root's help, completions
 * and "unknown command" errors see the whole tree.
 */
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import type { Layer, Option } from "effect"
import type { InvalidAddress, InvalidSetting } from "../domain/Errors.js"
import type { SettingsOverrides } from "../services/Settings.js"
import { VERSION } from "../version.js"
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
export type Layers<Services> = (
  overrides: SettingsOverrides
) => Layer.Layer<Services, InvalidSetting | InvalidAddress>

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

/** Provides a leaf from `layers`, built per run with the leaf's overrides. */
const providerOf =
  <Services>(layers: Layers<Services>) =>
  <Name extends string, R, E, A>(command: Command.Command<Name, R, E, A>) =>
    Command.provide(command, (config: A) => layers(overridesOf(config as OverridingOptions)))

/** The live services of every command. */
const live = () => import("../Live.js").then((m) => providerOf(m.layerWith))

/**
 * The top-level commands, in the order the root's help lists them, each loading its module and
 * the layers it runs on. `ray` runs on the cluster's services only (LiveCluster.ts).
 */
const TOP_LEVEL = {
  ray: async () => {
    const [commands, cluster] = await Promise.all([import("./commands/ray.js"), import("../LiveCluster.js")])
    const provide = providerOf(cluster.layerWith)
    return Command.make("ray").pipe(
      Command.withDescription("Inspect, ensure and repair the host's Ray cluster."),
      Command.withSubcommands([
        provide(commands.statusCommand),
        provide(commands.doctorCommand),
        provide(commands.ensureCommand),
        provide(commands.repairCommand)
      ])
    )
  },
  lease: async () => {
    const [commands, provide] = await Promise.all([import("./commands/lease.js"), live()])
    return Command.make("lease").pipe(
      Command.withDescription("Serving leases: hold the host's serving slot and GPUs while a command runs."),
      Command.withSubcommands([provide(commands.leaseRun)])
    )
  },
  baseline: async () => {
    const [commands, provide] = await Promise.all([import("./commands/baseline.js"), live()])
    return Command.make("baseline").pipe(
      Command.withDescription("Run baseline benchmarks under serving leases, with stop rules."),
      Command.withSubcommands([provide(commands.baselineRun)])
    )
  },
  state: async () => {
    const [commands, provide] = await Promise.all([import("./commands/state.js"), live()])
    return Command.make("state").pipe(
      Command.withDescription("Inspect baseline sessions."),
      Command.withSubcommands([provide(commands.showCommand)])
    )
  },
  sweep: async () => {
    const [commands, provide] = await Promise.all([import("./commands/sweep.js"), live()])
    return Command.make("sweep").pipe(
      Command.withDescription("Sweep engine flags and client load for the best configuration under an SLO."),
      Command.withSubcommands([provide(commands.sweepRun), provide(commands.sweepShow)])
    )
  },
  report: async () => {
    const [commands, provide] = await Promise.all([import("./commands/report.js"), live()])
    return provide(commands.reportCommand)
  },
  compare: async () => {
    const [commands, provide] = await Promise.all([import("./commands/compare.js"), live()])
    return provide(commands.compareCommand)
  },
  check: async () => {
    const [commands, provide] = await Promise.all([import("./commands/check.js"), live()])
    return provide(commands.checkCommand)
  },
  queue: async () => {
    const [commands, provide] = await Promise.all([import("./commands/queue.js"), live()])
    return provide(commands.queueCommand)
  },
  mcp: async () => {
    const [commands, live] = await Promise.all([import("./commands/mcp.js"), import("../Live.js")])
    // One set of live services for the whole server (one work permit); without --allow-repair the
    // guards refuse every repair (docs/agents.md).
    return Command.provide(commands.mcpCommand, (o) =>
      live.layerWith(o.allowRepair ? {} : { repairRefused: commands.REPAIR_REFUSED })
    )
  }
}

type TopLevel = keyof typeof TOP_LEVEL
type Subtree = Awaited<ReturnType<(typeof TOP_LEVEL)[TopLevel]>>
const ALL = Object.keys(TOP_LEVEL) as Array<TopLevel>

/**
 * The subcommands of each top-level group (the others are leaves themselves). A group's own
 * command line (`ray`, `ray --json`) loads every top-level command: @effect/cli answers it with
 * the root's list of commands. test/cli/lazy.test.ts checks these names against the tree.
 */
export const SUBCOMMANDS: Readonly<Partial<Record<TopLevel, ReadonlyArray<string>>>> = {
  ray: ["status", "doctor", "ensure", "repair"],
  lease: ["run"],
  baseline: ["run"],
  state: ["show"],
  sweep: ["run", "show"]
}

/** Options of @effect/cli's own that read the whole tree wherever they stand (a completion script, the wizard). */
const WHOLE_TREE = /^--(completions|wizard)(=|$)/

/**
 * The top-level commands a command line (after the executable, without --log-level) needs: the one
 * whose leaf it names (`ray doctor`, `report`), else all of them.
 */
export const topLevelFor = (args: ReadonlyArray<string>): ReadonlyArray<TopLevel> => {
  const dashes = args.indexOf("--")
  const options = dashes < 0 ? args : args.slice(0, dashes)
  if (options.some((a) => WHOLE_TREE.test(a))) return ALL
  const first = args[0]
  if (first === undefined || !Object.hasOwn(TOP_LEVEL, first)) return ALL
  const subcommands = SUBCOMMANDS[first as TopLevel]
  return subcommands === undefined || subcommands.includes(args[1] ?? "") ? [first as TopLevel] : ALL
}

/** The hyperloom command tree over the given top-level commands (every one: the whole CLI). */
const rootOf = (subtrees: readonly [Subtree, ...Array<Subtree>]) =>
  Command.make("hyperloom").pipe(
    Command.withDescription(
      HelpDoc.sequence(HelpDoc.p(about), lines(`${environment}\n\n${global}\n\n${EXIT_CODES_HELP}`))
    ),
    Command.withSubcommands(subtrees)
  )

/** The root command with the top-level commands `args` needs, their modules loaded. */
export const loadRootCommand = async (args: ReadonlyArray<string>) => {
  const names = topLevelFor(args)
  const subtrees = await Promise.all(names.map((name) => TOP_LEVEL[name]()))
  return rootOf(subtrees as [Subtree, ...Array<Subtree>])
}

/** The root command for a command line. */
export type RootCommand = Awaited<ReturnType<typeof loadRootCommand>>

/** The CLI over `root`: give it the command line (process.argv). */
export const cliOf = (root: RootCommand) => Command.run(root, { name: "hyperloom", version: VERSION })
