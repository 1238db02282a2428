/**
 * The CLI's texts come from its tables (issue 26 item 4): an exit code in a help text is the exit
 * table's value (cli/Exit.ts), never a number written by hand, and the option names `strictCommand`
 * is given are the Command's own options.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as CliConfig from "@effect/cli/CliConfig"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import type * as Usage from "@effect/cli/Usage"
import { assert, describe, it } from "@effect/vitest"
import * as baseline from "../../src/cli/commands/baseline.js"
import { compareCommand } from "../../src/cli/commands/compare.js"
import * as lease from "../../src/cli/commands/lease.js"
import { queueCommand } from "../../src/cli/commands/queue.js"
import * as ray from "../../src/cli/commands/ray.js"
import { reportCommand } from "../../src/cli/commands/report.js"
import { showCommand } from "../../src/cli/commands/state.js"
import * as sweep from "../../src/cli/commands/sweep.js"
import { EXIT } from "../../src/cli/Exit.js"

const CLI_DIR = path.join(__dirname, "../../src/cli")

/** The files whose strings are help texts: the commands and their shared options. */
const helpSources = () => [
  ...fs
    .readdirSync(path.join(CLI_DIR, "commands"))
    .filter((f) => f.endsWith(".ts"))
    .map((f) => path.join(CLI_DIR, "commands", f)),
  path.join(CLI_DIR, "Shared.ts")
]

/** "exit 13", "Exits 0", "code 16", "Exit: 0", "lease run: 125", "0 when feasible, 7 when not": a code written as a number. */
const HAND_WRITTEN_CODE = /\b(?:exits?|codes?|exit:|run:)\s+\d+|\b\d+ when\b/gi

/** A number that is one of the table's codes from 10 up ("124 timeout, 130 cancelled"). */
const TABLE_NUMBER = new RegExp(
  `(?<![\\w.])(?:${Object.values(EXIT)
    .filter((c) => c >= 10)
    .join("|")})(?![\\w.])`,
  "g"
)

/** The source without its comments and with every interpolation emptied (`${EXIT.waitExpired}` is the table's). */
const textOf = (file: string) =>
  fs
    .readFileSync(file, "utf8")
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .replace(/^\s*\/\/.*$/gm, "")
    .replace(/\$\{[^}]*\}/g, "(interpolated)")

const helpOf = (command: Command.Command<string, never, unknown, unknown>) =>
  HelpDoc.toAnsiText(Command.getHelp(command, CliConfig.defaultConfig))

const optionNames = (usage: Usage.Usage): Array<string> => {
  switch (usage._tag) {
    case "Named":
      return usage.names.filter((n) => n.startsWith("-"))
    case "Optional":
    case "Repeated":
      return optionNames(usage.usage)
    case "Alternation":
    case "Concat":
      return [...optionNames(usage.left), ...optionNames(usage.right)]
    default:
      return []
  }
}

describe("help texts take their exit codes from the exit table", () => {
  it("no command's text writes an exit code by hand", () => {
    for (const file of helpSources()) {
      const text = textOf(file)
      const found = [...text.matchAll(HAND_WRITTEN_CODE), ...text.matchAll(TABLE_NUMBER)].map((m) => m[0])
      assert.deepStrictEqual(found, [], `${path.relative(CLI_DIR, file)} writes exit codes by hand`)
    }
  })

  it("every code a help page names is the table's code for what it names", () => {
    const pages = [lease.leaseRun, baseline.baselineRun, sweep.sweepRun, compareCommand, showCommand].map(
      (c) => helpOf(c as never)
    )
    const codes = new Set<number>(Object.values(EXIT))
    for (const page of pages) {
      for (const m of page.matchAll(/\bexits? (\d+)/g)) assert.isTrue(codes.has(Number(m[1])), m[0])
    }
    const all = pages.join("\n")
    assert.include(all, `session_time_exhausted (exit ${EXIT.sessionTimeExhausted}`)
    assert.include(all, `baseline_arg_error (exit ${EXIT.baselineArgError}`)
    assert.include(all, `${EXIT.sweepNoEngineReady} sweep_no_engine_ready`)
    assert.include(all, `${EXIT.sweepNoFeasiblePoint} sweep_no_feasible_point`)
    assert.include(all, `fails (exit ${EXIT.compareRegression})`)
    assert.include(all, `exits ${EXIT.leaseTimeout}`)
    assert.include(all, `exits ${EXIT.waitExpired} (lease run: ${EXIT.leaseFailed}`)
  })
})

describe("the option names strictCommand is given are the Command's", () => {
  for (const [name, command, listed] of [
    ["lease run", lease.leaseRun, lease.OPTIONS],
    ["baseline run", baseline.baselineRun, baseline.OPTIONS],
    ["sweep run", sweep.sweepRun, sweep.OPTIONS]
  ] as const) {
    it(name, () => {
      const declared = optionNames(Command.getUsage(command as never))
      assert.isNotEmpty(declared)
      assert.deepStrictEqual([...listed].sort(), [...new Set(declared)].sort())
    })
  }
})

/** A command's own description (its DESCRIPTION paragraph, without the options' texts). */
const descriptionOf = (command: Command.Command<string, never, unknown, unknown>): string => {
  let d = (command as unknown as { descriptor: Record<string, unknown> }).descriptor
  while (d._tag === "Map") d = d.command as Record<string, unknown>
  return HelpDoc.toAnsiText(d.description as HelpDoc.HelpDoc).trim()
}

/**
 * A command's description is a short paragraph; the options say the rest, and what is reference
 * (exit tables, file layouts, long explanations) is in the README and docs/, which it points to.
 */
const DESCRIPTION_MAX_CHARS = 1000

describe("every command's description stays a short paragraph", () => {
  for (const [name, command] of [
    ["ray status", ray.statusCommand],
    ["ray doctor", ray.doctorCommand],
    ["ray ensure", ray.ensureCommand],
    ["ray repair", ray.repairCommand],
    ["lease run", lease.leaseRun],
    ["baseline run", baseline.baselineRun],
    ["state show", showCommand],
    ["sweep run", sweep.sweepRun],
    ["sweep show", sweep.sweepShow],
    ["report", reportCommand],
    ["compare", compareCommand],
    ["queue", queueCommand]
  ] as const) {
    it(name, () => {
      const text = descriptionOf(command as never)
      assert.isNotEmpty(text)
      assert.isAtMost(text.length, DESCRIPTION_MAX_CHARS, `${name}'s description:\n${text}`)
    })
  }
})
