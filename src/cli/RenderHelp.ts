/**
 * Help, completions and command-path errors as a user reads them, laid over what @effect/cli
 * generates (its CliApp prints a banner and a version line on every page, a type sentence and
 * "This setting is optional." under every option, a command table whose descriptions start at the
 * widest usage's column; its bash completions never reach a leaf command's options and every
 * shell is offered the `--wizard` mode hyperloom does not support).
 */

import { editDistance } from "../domain/Text.js"
import { UsageError } from "./Exit.js"

/** Under a repeatable option: its description says so, and USAGE shows it as `[--name V]...`. */
const REPEATABLE = /^This option may be repeated zero or more times\.$/

/** The paragraphs @effect/cli writes under every option and argument, which say nothing here. */
const BOILERPLATE = [
  /^A user-defined piece of text( that is confidential)?\.$/,
  /^A true or false value\.$/,
  /^An integer\.$/,
  /^A floating point number\.$/,
  /^This setting is optional\.( Defaults to: .*)?$/,
  /^A (file|directory|path)\.$/,
  /^This (argument|option) must be repeated at least 1 times\.$/,
  REPEATABLE
]

const SECTION = /^[A-Z][A-Z ]+$/

/**
 * USAGE shows an option that may be given zero or more times as required (`--rank-env NAME...`):
 * such options (the ones whose block says so) become `[--rank-env NAME]...` there.
 */
const bracketRepeatable = (lines: ReadonlyArray<string>): Array<string> => {
  const repeatable: Array<string> = []
  let option: string | undefined
  for (const line of lines) {
    const header = /^(--[a-z][a-z0-9-]*)\b/.exec(line)
    if (header !== null) option = header[1]
    else if (option !== undefined && REPEATABLE.test(line.trim())) repeatable.push(option)
  }
  return lines.map((line) =>
    line.startsWith("$ ")
      ? repeatable.reduce(
          (l, name) => l.replace(new RegExp(`(?<=^| )${name} (\\S+?)\\.\\.\\.(?= |$)`), `[${name} $1]...`),
          line
        )
      : line
  )
}

/** A list of commands cuts a first sentence longer than this at a word. */
const SUMMARY_MAX_CHARS = 200

/**
 * A command's description as a list of commands shows it: its first sentence (a dot inside
 * parentheses or backticks does not end it), cut at a word and marked when longer than
 * SUMMARY_MAX_CHARS. The command's own --help shows the whole description.
 */
const summaryOf = (description: string): string => {
  let depth = 0
  let quoted = false
  let end = description.length
  for (let i = 0; i < description.length; i++) {
    const c = description[i]
    if (c === "`") quoted = !quoted
    else if (!quoted && c === "(") depth++
    else if (!quoted && c === ")") depth = Math.max(0, depth - 1)
    else if (
      !quoted &&
      depth === 0 &&
      c === "." &&
      (i + 1 === description.length || description[i + 1] === " ")
    ) {
      end = i + 1
      break
    }
  }
  const sentence = description.slice(0, end)
  if (sentence.length <= SUMMARY_MAX_CHARS) return sentence
  const cut = sentence.slice(0, SUMMARY_MAX_CHARS)
  return `${cut.slice(0, Math.max(cut.lastIndexOf(" "), 1)).trimEnd()} …`
}

/**
 * The help text (plain, before wrapping) without the banner, the version line and the boilerplate
 * paragraphs; the version stays on the root page. In COMMANDS, each entry's usage on a line of its
 * own and its description's first sentence under it (`summaryOf`), indented, so that wrapping
 * keeps it aligned.
 */
export const tidyHelp = (plain: string, root: boolean): string => {
  const lines = bracketRepeatable(plain.split("\n"))
  const usageAt = lines.indexOf("USAGE")
  const head = usageAt < 0 ? [] : lines.slice(0, usageAt).filter((l) => /^\S+ \S+$/.test(l.trim()))
  const out: Array<string> = root && head.length > 0 ? [head[head.length - 1]!.trim(), ""] : []
  let section = ""
  for (const line of usageAt < 0 ? lines : lines.slice(usageAt)) {
    const trimmed = line.trim()
    if (SECTION.test(line)) section = line
    if (BOILERPLATE.some((b) => b.test(trimmed))) continue
    if (section === "COMMANDS" && line.startsWith("  ")) {
      const entry = /^ {2}- (.*?)(?: {2,}(\S.*))?$/.exec(line)
      if (entry !== null) {
        out.push(`  ${entry[1]!.trimEnd()}`)
        if (entry[2] !== undefined) out.push(`      ${summaryOf(entry[2])}`)
      } else {
        out.push(`      ${trimmed}`)
      }
      continue
    }
    if (trimmed === "" && out.length > 0 && out[out.length - 1]!.trim() === "") continue
    out.push(line)
  }
  while (out.length > 0 && out[out.length - 1]!.trim() === "") out.pop()
  return out.join("\n")
}

/** What a required option holds, for the line that says it is missing. */
const REQUIRED_HINTS: Readonly<Record<string, string>> = {
  "--gpus": "--gpus N is required: the GPUs the lease asks for (0 is a valid explicit value)",
  "--session":
    "--session DIR is required: the session directory (a new one starts a session, an existing one resumes it)",
  "--server": "--server 'SERVER CMD' is required: the engine's command line"
}

/**
 * @effect/cli's usage errors in words a user acts on: `Expected to find option: '--gpus'` becomes
 * `--gpus N is required: … (see \`hyperloom sweep run --help\`)`. Other lines pass unchanged.
 * `path` is the command's words (`["sweep", "run"]`).
 */
export const explainUsage = (line: string, path: ReadonlyArray<string>): string => {
  const missing = /Expected to find option: '(--[a-z][a-z0-9-]*)'/.exec(line)
  if (missing === null) return line
  const name = missing[1]!
  const help = path.length === 0 ? "hyperloom --help" : `hyperloom ${path.join(" ")} --help`
  return line.replace(missing[0], `${REQUIRED_HINTS[name] ?? `${name} is required`} (see \`${help}\`)`)
}

/** Options whose value is a number: bash completes no file names for them. */
const NUMERIC_OPTIONS = [
  "--gpus",
  "--nodes",
  "--timeout",
  "--attempt-timeout",
  "--deadline",
  "--ready-timeout",
  "--wait",
  "--repeats",
  "--point-timeout",
  "--gpu-clean-timeout"
]

/** Is this a completion script @effect/cli generated (bash, zsh or fish)? */
export const isCompletions = (text: string): boolean =>
  text.startsWith("function _") || text.startsWith("#compdef ") || text.startsWith("complete -c ")

/**
 * The completion script without `--wizard`; in bash, the case labels that find the command being
 * completed match the names the loop builds (`hyperloom__ray,status`, where @effect/cli writes
 * `hyperloom,ray,status`, so a leaf's options were never offered), and numeric options complete
 * nothing instead of file names.
 */
export const tidyCompletions = (
  text: string,
  numericOptions: ReadonlyArray<string> = NUMERIC_OPTIONS
): string => {
  if (text.startsWith("#compdef "))
    return text
      .split("\n")
      .filter((l) => !l.includes("'--wizard["))
      .join("\n")
  if (text.startsWith("complete -c "))
    return text
      .split("\n")
      .filter((l) => !l.includes(" -l wizard "))
      .join("\n")
  const lines = text.split("\n").map((line) =>
    line
      .replace(/ --wizard(?= |")/g, "")
      .replace(/^(\s+)([\w-]+(?:,[\w-]+){2,})\)$/, (_, indent: string, label: string) => {
        const words = label.split(",")
        return `${indent}${words.slice(0, -1).join("__")},${words[words.length - 1]})`
      })
  )
  // `--gpus)` is followed by `COMPREPLY=( $(compgen -f "${cur}") )`: a number, not a file.
  for (let i = 0; i + 1 < lines.length; i++) {
    const option = /^\s+(--[\w-]+)\)$/.exec(lines[i]!)?.[1]
    if (option !== undefined && numericOptions.includes(option)) {
      lines[i + 1] = lines[i + 1]!.replace(/COMPREPLY=\( \$\(compgen -f "\$\{cur\}"\) \)/, "COMPREPLY=()")
    }
  }
  return lines.join("\n")
}

/**
 * A command's subcommands by name, read from its descriptor's instructions (`Map` wraps,
 * `Subcommands` holds the parent and its children): @effect/cli's getSubcommands returns each child
 * without its own children, so it cannot walk more than one level.
 */
type Instruction = { readonly _tag: string; readonly [k: string]: any }
const unwrap = (d: Instruction): Instruction => (d._tag === "Map" ? unwrap(d.command) : d)
const nameOf = (d: Instruction): string => {
  const u = unwrap(d)
  return u._tag === "Subcommands" ? nameOf(u.parent) : String(u.name)
}
const childrenOf = (d: Instruction): Map<string, Instruction> => {
  const u = unwrap(d)
  return u._tag === "Subcommands"
    ? new Map((u.children as ReadonlyArray<Instruction>).map((c) => [nameOf(c), c]))
    : new Map()
}

/**
 * A command word that names no command (`hyperloom ray stauts`): a usage error suggesting the
 * nearest command of that level, or listing them. @effect/cli reports any mismatch below the root
 * as "Invalid subcommand for hyperloom" with the top-level commands. Undefined when the words
 * before the first option name commands (or reach a leaf).
 */
export const commandPathError = (
  root: { readonly descriptor: unknown },
  args: ReadonlyArray<string>
): UsageError | undefined => {
  let children = childrenOf(root.descriptor as Instruction)
  const path = ["hyperloom"]
  for (const word of args) {
    if (word.startsWith("-") || children.size === 0) return undefined
    const next = children.get(word)
    if (next !== undefined) {
      path.push(word)
      children = childrenOf(next)
      continue
    }
    const names = [...children.keys()]
    const near = names
      .map((n) => ({ n, d: editDistance(word, n) }))
      .filter(({ d }) => d <= 2)
      .sort((a, b) => a.d - b.d)[0]
    return new UsageError({
      detail:
        `unknown command \`${[...path, word].join(" ")}\`` +
        (near !== undefined
          ? ` (did you mean \`${[...path, near.n].join(" ")}\`?)`
          : `; the commands of \`${path.join(" ")}\` are ${names.join(", ")}`)
    })
  }
  return undefined
}
