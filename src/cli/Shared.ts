import * as Args from "@effect/cli/Args"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import { Effect, Option } from "effect"
import type { LeaseRequest } from "../domain/Feasibility.js"
import { DEFAULT_GPU_CLEAN_TIMEOUT_SEC } from "../domain/GpuHolders.js"
import { DEFAULT_RANK_CWD, isEnvName } from "../domain/Group.js"
import { parseDecimal, parseWholeNumber } from "../domain/Numbers.js"
import { MAX_WARMUP, RUNNER_DEFAULTS } from "../domain/Serving.js"
import { editDistance } from "../domain/Text.js"
import { DEFAULT_MAX_FAILED } from "../domain/Validity.js"
import { EXIT, UsageError } from "./Exit.js"
import { CommandLine } from "./Run.js"

const invalid = (text: string) => Effect.fail(ValidationError.invalidValue(HelpDoc.p(text)))

/**
 * A whole-number option, strict decimal (domain/Numbers.ts): @effect/cli's `Options.integer` reads
 * with `Number()`, so `--gpus 0x10` was 16 GPUs and `1e1` was 10. Read as text, then parsed here.
 */
export const wholeNumber = (name: string, min: number) =>
  Options.text(name).pipe(
    Options.withPseudoName("N"),
    Options.mapEffect((text) => {
      const n = parseWholeNumber(text)
      return n !== undefined && n >= min
        ? Effect.succeed(n)
        : invalid(`--${name} must be a whole number >= ${min} in decimal digits, got '${text}'`)
    })
  )

/** A positive number of seconds, strict decimal (`30`, `1.5`; no `1e3`, `0x10` or `Infinity`). */
export const decimalSeconds = (name: string) =>
  Options.text(name).pipe(
    Options.withPseudoName("S"),
    Options.mapEffect((text) => {
      const n = parseDecimal(text)
      return n !== undefined && n > 0
        ? Effect.succeed(n)
        : invalid(`--${name} must be a positive number of seconds in decimal digits, got '${text}'`)
    })
  )

export const json = Options.boolean("json").pipe(
  Options.withDescription("Print one JSON document on stdout (logs stay on stderr).")
)

/** `--gpus N` where it is required (lease and baseline commands: no silent default; 0 is explicit). */
export const gpus = wholeNumber("gpus", 0).pipe(
  Options.withDescription("GPUs the serving lease asks for (required; 0 is a valid explicit value).")
)

/** `--gpus N` for the read-and-repair commands (doctor, ensure, repair), where 0 is the default. */
export const gpusOptional = wholeNumber("gpus", 0).pipe(
  Options.withDescription("GPUs the serving lease would ask for (default 0)."),
  Options.withDefault(0)
)

export const noServingSlot = Options.boolean("no-serving-slot").pipe(
  Options.withDescription(
    "Do not ask for the serving_slot resource (the lease is then not a host-wide mutex)."
  )
)

export const nodes = wholeNumber("nodes", 1).pipe(
  Options.withDescription(
    "Nodes in this run (default: HYPERLOOM_NODES, else 1). 2 or more is a multi-node run: no repair, no local head start; lease run and baseline run then hold a group (one placement group, one rank per node, docs/multi-node.md) and ray doctor checks that N nodes each declare serving_slot and --gpus GPUs."
  ),
  Options.optional
)

/**
 * `--rank-cwd DIR` (docs/design.md#what-each-node-is-given): the directory each rank of a group
 * runs in; absolute, it must exist on every node.
 */
export const rankCwd = Options.text("rank-cwd").pipe(
  Options.withPseudoName("DIR"),
  Options.withDescription(
    `With --nodes N >= 2: the directory every rank's command runs in (absolute; it must exist on every node). Default ${DEFAULT_RANK_CWD}: the launching directory may not exist on the other nodes.`
  ),
  Options.mapEffect((dir) =>
    dir.startsWith("/")
      ? Effect.succeed(dir)
      : Effect.fail(
          ValidationError.invalidValue(HelpDoc.p(`--rank-cwd must be an absolute path, got ${dir}`))
        )
  ),
  Options.optional
)

/**
 * `--rank-env NAME`, repeatable (docs/design.md#what-each-node-is-given): a variable of this
 * environment every rank gets too.
 */
export const rankEnv = Options.text("rank-env").pipe(
  Options.withPseudoName("NAME"),
  Options.withDescription(
    "With --nodes N >= 2: a variable of this environment that every rank gets too (repeat for more). Ranks run in their own node's environment; of this one they get only the HYPERLOOM_* variables and the names listed here (the device variables are Ray's)."
  ),
  Options.repeated,
  Options.mapEffect((names) => {
    const bad = names.find((name) => !isEnvName(name))
    return bad === undefined
      ? Effect.succeed(names)
      : Effect.fail(
          ValidationError.invalidValue(HelpDoc.p(`--rank-env must name an environment variable, got ${bad}`))
        )
  })
)

export const positiveSeconds = (name: string, description: string) =>
  decimalSeconds(name).pipe(Options.withDescription(description), Options.optional)

/**
 * `--gpu-clean-timeout S` (docs/design.md#clean-gpus): lease run, baseline run, sweep run. 0: look
 * once, no wait.
 */
export const gpuCleanTimeout = Options.text("gpu-clean-timeout").pipe(
  Options.withPseudoName("S"),
  Options.mapEffect((text) => {
    const n = parseDecimal(text)
    return n !== undefined && n >= 0
      ? Effect.succeed(n)
      : invalid(`--gpu-clean-timeout must be a number of seconds >= 0 in decimal digits, got '${text}'`)
  }),
  Options.withDescription(
    `Before the command starts, wait up to S seconds (default ${DEFAULT_GPU_CLEAN_TIMEOUT_SEC}) for processes outside the lease that hold its GPUs (open /dev/nvidia<N>, /dev/dri/renderD*, /dev/kfd; nvidia-smi or amd-smi where installed) to let go; then nothing runs, each holder is named (pid, user, command, memory) and hyperloom exits ${EXIT.gpuBusy} (lease run: ${EXIT.leaseFailed}, with code ${EXIT.gpuBusy} in the error line). Holders are never killed. Checked on the node that runs the command.`
  ),
  Options.optional
)

export const leaseRequestOf = (opts: {
  readonly gpus: number
  readonly noServingSlot?: boolean
  readonly gpuCleanTimeout?: Option.Option<number>
}): LeaseRequest => ({
  gpus: opts.gpus,
  servingSlot: !(opts.noServingSlot ?? false),
  gpuCleanTimeoutSec:
    opts.gpuCleanTimeout === undefined ? undefined : Option.getOrUndefined(opts.gpuCleanTimeout)
})

/** CMD…: everything after `--` (checked by `strictCommand`). */
export const commandArgs = (description: string) =>
  Args.text({ name: "CMD" }).pipe(Args.withDescription(description), Args.atLeast(1))

/**
 * The CMD of a command that runs one, as the command line promises
 * (docs/design.md#the-command-line): options end at `--`, everything after it is CMD, and nothing
 * before it may become part of CMD. @effect/cli hands an option it does not know (`--gpu`,
 * `--timout`) to the positional CMD, so `parsed` is compared with the raw command line: whatever
 * precedes the part after `--` is a usage error (nothing runs).
 */
export const strictCommand = (
  parsed: ReadonlyArray<string>,
  knownOptions: ReadonlyArray<string>
): Effect.Effect<ReadonlyArray<string>, UsageError, CommandLine> =>
  Effect.flatMap(CommandLine, ({ args }) => {
    const dashes = args.indexOf("--")
    const tail = dashes < 0 ? [] : args.slice(dashes + 1)
    const extra = parsed.slice(0, Math.max(0, parsed.length - tail.length))
    const endsWithTail = tail.every((t, k) => parsed[parsed.length - tail.length + k] === t)
    if (dashes >= 0 && tail.length > 0 && extra.length === 0 && endsWithTail) return Effect.succeed(tail)
    const stray = extra[0] ?? parsed[0] ?? ""
    if (stray.startsWith("-")) {
      const name = stray.split("=")[0]!
      if (knownOptions.includes(name)) {
        // A known option lands in CMD when it is given twice or has no value (`--server --`).
        const given = (dashes < 0 ? args : args.slice(0, dashes)).filter(
          (a) => a === name || a.startsWith(`${name}=`)
        ).length
        return Effect.fail(
          new UsageError({
            detail:
              given > 1
                ? `option ${name} given more than once; give it once`
                : `option ${name} needs a value (${name} VALUE); options go before \`--\`, the command after it`
          })
        )
      }
      const near = knownOptions
        .map((o) => ({ o, d: editDistance(name, o) }))
        .filter(({ d }) => d <= 2)
        .sort((a, b) => a.d - b.d)[0]
      return Effect.fail(
        new UsageError({
          detail: `unknown option ${name}${near !== undefined ? ` (did you mean ${near.o}?)` : ""}; options go before \`--\`, the command after it`
        })
      )
    }
    return Effect.fail(
      new UsageError({
        detail:
          dashes < 0
            ? `the command must follow \`--\` (e.g. \`-- ${parsed.join(" ")}\`), so that no option can be mistaken for part of it`
            : `unexpected argument '${stray}' before \`--\`; the command goes after \`--\``
      })
    )
  })

/**
 * `--check 'CMD'` (docs/trust.md#is-the-number-valid): baseline run and sweep run. Once per engine
 * start, after readiness, before anything is measured.
 */
export const checkCmd = Options.text("check").pipe(
  Options.withPseudoName("'CMD'"),
  Options.withDescription(
    "With --server: a shell command line run once per engine start, after it is ready and before anything is measured, with the engine's HYPERLOOM_BASE_URL and HYPERLOOM_PORT (a handful of known prompts, a small lm_eval subset, your own probe). A non-zero exit means the engine answers wrong: nothing is measured on it (check_failed, out of the best), its last line is quoted and its whole output kept in check.log."
  ),
  Options.mapEffect((cmd) =>
    cmd.trim() === "" ? invalid("--check must be a command line, got an empty string") : Effect.succeed(cmd)
  ),
  Options.optional
)

/** `--warmup N`: requests after each engine start, discarded (default `RUNNER_DEFAULTS.warmup`). */
export const warmup = wholeNumber("warmup", 0).pipe(
  Options.mapEffect((n) =>
    n <= MAX_WARMUP
      ? Effect.succeed(n)
      : invalid(
          `--warmup must be at most ${MAX_WARMUP} (requests sent at once, a thread each on the node), got ${n}`
        )
  ),
  Options.withDescription(
    `With --server: requests sent at once after each engine start, before anything is measured; their answers are discarded and their time is warm-up time (at most ${MAX_WARMUP}; default ${RUNNER_DEFAULTS.warmup}: the engines compile and capture their CUDA graphs before they answer ready, but the first prefill of several sequences, the sampler above batch size one and the first JIT'd kernels are still cold; 0: none).`
  ),
  Options.optional
)

/** `--max-failed PCT`: the share of failed requests above which a run is invalid (default 1 %). */
export const maxFailed = Options.text("max-failed").pipe(
  Options.withPseudoName("PCT"),
  Options.withDescription(
    `With --server: a run whose client reports more than PCT % of its requests failed is invalid (failed_requests), kept but never counted; at or under it the run is flagged (default ${DEFAULT_MAX_FAILED * 100} %, the tail a p99 is).`
  ),
  Options.mapEffect((text) => {
    const n = parseDecimal(text.trim().replace(/\s*%$/, ""))
    return n !== undefined && n >= 0 && n <= 100
      ? Effect.succeed(n / 100)
      : invalid(`--max-failed must be a percentage from 0 to 100 in decimal digits (2 or 2%), got '${text}'`)
  }),
  Options.optional
)
