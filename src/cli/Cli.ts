import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import { VERSION } from "../version.js"
import { baselineCommand } from "./commands/baseline.js"
import { leaseCommand } from "./commands/lease.js"
import { rayCommand } from "./commands/ray.js"
import { stateCommand } from "./commands/state.js"
import { EXIT_CODES_HELP } from "./Exit.js"

const about = `hyperloom keeps a Ray-backed GPU serving host usable for benchmark work: it ensures a local Ray head that declares the serving_slot resource (repairing one that lacks it only when every guard proves nobody else's Ray work can be hurt), grants serving leases (a Ray actor holding the slot and N GPUs, running a command) and runs baseline benchmarks with stop rules.`

const environment = `Environment:
  RAY_ADDRESS                       unset/auto: the local cluster; anything else is explicit (never repaired)
  HYPERLOOM_NODES                   nodes in the run (>= 2: multi-node; same as --nodes)
  HYPERLOOM_RAY                     the ray executable (default: the project's .venv, else PATH)
  HYPERLOOM_RAY_PYTHON              the Python of the Ray installation (default: the ray script's shebang)
  HYPERLOOM_RAY_STATUS_TIMEOUT_SEC  timeout of the \`ray status\` probe (default 5)
  HYPERLOOM_RAY_START_TIMEOUT_SEC   timeout of \`ray start\` (default 120)
  HL_RAY_HEAD_PORT                  port of a head hyperloom starts (default 6379)
  HYPERLOOM_RAY_NUM_GPUS            GPUs to declare when (re)starting a head`

/** A preformatted block: one paragraph, its lines kept. */
const lines = (text: string) => HelpDoc.p(text)

export const rootCommand = Command.make("hyperloom").pipe(
  Command.withDescription(HelpDoc.sequence(HelpDoc.p(about), lines(`${environment}\n\n${EXIT_CODES_HELP}`))),
  Command.withSubcommands([rayCommand, leaseCommand, baselineCommand, stateCommand])
)

export const cli = Command.run(rootCommand, { name: "hyperloom", version: VERSION })
