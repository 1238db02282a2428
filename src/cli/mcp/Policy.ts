/**
 * What an agent may ask of `hyperloom mcp` (docs/agents.md): the guard rails the server enforces
 * whatever the agent says. Pure: the server (./Server.ts) reads the files and the clock.
 *
 * - One session root: a session is named relative to it (or as an absolute path inside it); `..`
 *   and symlinks that lead out are refused (the server resolves the links, this file judges paths).
 * - An allow-list of programs: the engine's command line (run with `sh -c`) must start with one of
 *   them and may not chain, pipe, redirect or substitute commands; the client's argv[0] too.
 * - A budget per server: engine starts, GPU hours, a deadline. Work past it is refused, naming
 *   what is left.
 */
import * as path from "node:path"

/** The server's budget (`--max-engine-starts`, `--max-gpu-hours`, `--deadline`); undefined: unbounded. */
export interface Budget {
  readonly maxEngineStarts?: number | undefined
  readonly maxGpuHours?: number | undefined
  /** When the server stops taking work (epoch ms). */
  readonly deadlineAt?: number | undefined
}

/** What the server has spent: engine starts made, GPU seconds held (engines up × their GPUs). */
export interface Spent {
  readonly engineStarts: number
  readonly gpuSeconds: number
}

/** The budget's left-overs, as an agent reads them (null: no bound). */
export interface BudgetLeft {
  readonly engine_starts: number | null
  readonly gpu_hours: number | null
  readonly deadline_sec: number | null
}

const round = (x: number, digits: number) => Number(x.toFixed(digits))

export const budgetLeft = (budget: Budget, spent: Spent, now: number): BudgetLeft => ({
  engine_starts:
    budget.maxEngineStarts === undefined ? null : Math.max(0, budget.maxEngineStarts - spent.engineStarts),
  gpu_hours:
    budget.maxGpuHours === undefined
      ? null
      : Math.max(0, round(budget.maxGpuHours - spent.gpuSeconds / 3600, 4)),
  deadline_sec:
    budget.deadlineAt === undefined ? null : Math.max(0, round((budget.deadlineAt - now) / 1000, 1))
})

/** The budget's state in one sentence: what is left of each bound. */
export const renderLeft = (left: BudgetLeft): string => {
  const parts = [
    left.engine_starts === null ? undefined : `${left.engine_starts} engine start(s)`,
    left.gpu_hours === null ? undefined : `${left.gpu_hours} GPU hour(s)`,
    left.deadline_sec === null ? undefined : `${left.deadline_sec} s before the server's deadline`
  ].filter((p): p is string => p !== undefined)
  return parts.length === 0 ? "the server has no budget bound" : `left: ${parts.join(", ")}`
}

/**
 * Why work needing `starts` engine starts (at least) and `gpus` GPUs per engine may not begin, or
 * undefined when it may. A start needs one engine start and some GPU time left, and the deadline
 * not passed.
 */
export const budgetRefusal = (
  budget: Budget,
  spent: Spent,
  now: number,
  need: { readonly starts: number; readonly gpus: number }
): string | undefined => {
  const left = budgetLeft(budget, spent, now)
  if (left.deadline_sec !== null && left.deadline_sec <= 0)
    return `the server's deadline has passed (${renderLeft(left)}); no new work is taken: ask the operator for a new server`
  if (left.engine_starts !== null && left.engine_starts < need.starts)
    return `this needs ${need.starts} engine start(s) and the server's budget has ${left.engine_starts} left (${renderLeft(left)}); plan fewer combinations (plan_sweep shows how many) or ask the operator for a larger --max-engine-starts`
  if (budget.maxGpuHours !== undefined && need.gpus > 0 && spent.gpuSeconds >= budget.maxGpuHours * 3600)
    return `the server's GPU hours are spent (${renderLeft(left)}); ask the operator for a larger --max-gpu-hours`
  return undefined
}

/**
 * How long (seconds) work on `gpus` GPUs per engine, `atOnce` engines at a time, may still run
 * before the budget's GPU hours or deadline end it; undefined: unbounded.
 */
export const secondsLeft = (
  budget: Budget,
  spent: Spent,
  now: number,
  use: { readonly gpus: number; readonly atOnce: number }
): number | undefined => {
  const left = budgetLeft(budget, spent, now)
  const bounds = [
    left.deadline_sec ?? undefined,
    left.gpu_hours === null || use.gpus === 0 ? undefined : (left.gpu_hours * 3600) / (use.gpus * use.atOnce)
  ].filter((b): b is number => b !== undefined)
  return bounds.length === 0 ? undefined : Math.max(1, Math.floor(Math.min(...bounds)))
}

// ---------------------------------------------------------------------------------------------
// The session root

/** Whether `target` (absolute, normalised) is `root` itself or inside it. */
export const isInside = (root: string, target: string): boolean => {
  const rel = path.relative(root, target)
  return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel))
}

/**
 * A session named by an agent, as an absolute path lexically inside `root` (before links are
 * resolved), or why not. Relative names are relative to the root; an absolute path must lie in it.
 */
export const sessionPath = (
  root: string,
  name: string
): { readonly ok: true; readonly path: string } | { readonly ok: false; readonly error: string } => {
  if (name.trim() === "")
    return {
      ok: false,
      error: "session must name a directory under the server's session root, got an empty string"
    }
  if (name.includes("\u0000")) return { ok: false, error: "session must not contain a NUL character" }
  const resolved = path.resolve(root, name)
  if (!isInside(root, resolved) || resolved === root)
    return {
      ok: false,
      error: `session '${name}' is outside the server's session root ${root}: name a directory inside it (e.g. 'sweep-1'); nothing outside the root is read or written`
    }
  return { ok: true, path: resolved }
}

// ---------------------------------------------------------------------------------------------
// The allow-list of programs

/** What a command line run with `sh -c` may not hold: chaining, pipes, redirections, substitutions, globs that reach out. */
const SHELL_CONTROL = /[;&|<>`\n\r]|\$\(|\$\{(?!HYPERLOOM_)|\\/

/** `$NAME` references other than the runner's own ($HYPERLOOM_*). */
const FOREIGN_VARIABLE = /\$(?!HYPERLOOM_|\{HYPERLOOM_)/

/** Parses `--allow-server vllm,python3 …`: program names (basenames), comma- or space-separated. */
export const allowListOf = (items: ReadonlyArray<string>): ReadonlyArray<string> =>
  [...new Set(items.flatMap((i) => i.split(/[,\s]+/)).filter((p) => p !== ""))].map((p) => path.basename(p))

/** The program a `sh -c` command line starts: its first word after `NAME=value` assignments (and `exec`/`env`). */
export const programOf = (command: string): string | undefined => {
  const words = command
    .trim()
    .split(/\s+/)
    .filter((w) => w !== "")
  let i = 0
  while (
    i < words.length &&
    (/^[A-Za-z_][A-Za-z0-9_]*=/.test(words[i]!) || words[i] === "exec" || words[i] === "env")
  )
    i++
  const word = words[i]
  return word === undefined ? undefined : path.basename(word.replace(/^['"]|['"]$/g, ""))
}

/** What an allow-list refusal says when the list is empty. */
const knownOf = (allow: ReadonlyArray<string>) =>
  allow.length === 0 ? "none (the server was started without --allow-server)" : allow.join(", ")

/**
 * Why a command line run with `sh -c` (the engine's, a check's) may not run under `allow`: shell
 * syntax, no program, or a program not on the list; undefined when it may. `what` names it in
 * the sentence ("engine", "check").
 */
const programRefusal = (
  allow: ReadonlyArray<string>,
  what: string,
  line: string,
  shell: string
): string | undefined => {
  if (SHELL_CONTROL.test(line) || FOREIGN_VARIABLE.test(line)) return shell
  const program = programOf(line)
  if (program === undefined) return `the ${what}'s command line is empty`
  if (!allow.includes(program))
    return `the ${what} program '${program}' is not on the server's allow-list (${knownOf(allow)}); use one of those, or ask the operator to start the server with --allow-server ${program}`
  return undefined
}

const SHELL_SYNTAX =
  "shell syntax (;, &, |, <, >, backquotes, $(...), a variable other than $HYPERLOOM_*, or a backslash)"

/**
 * Why an engine command line (`sh -c`, with its parameter values filled in) and a client argv may
 * not run under `allow`, or undefined when they may. A value with shell syntax is refused like the
 * command itself: values are pasted into the command as written.
 */
export const commandRefusal = (
  allow: ReadonlyArray<string>,
  server: string,
  values: ReadonlyArray<string>,
  client: ReadonlyArray<string>
): string | undefined => {
  const shell = (text: string) =>
    `'${text}' holds ${SHELL_SYNTAX}: an agent's engine command is one program with its arguments; write it without them`
  for (const text of [server, ...values])
    if (SHELL_CONTROL.test(text) || FOREIGN_VARIABLE.test(text)) return shell(text)
  const engine = programRefusal(allow, "engine", server, shell(server))
  if (engine !== undefined) return engine
  const clientProgram = client[0] === undefined ? undefined : path.basename(client[0])
  if (clientProgram === undefined) return "the client's command is empty: give its program and arguments"
  if (!allow.includes(clientProgram))
    return `the client program '${clientProgram}' is not on the server's allow-list (${knownOf(allow)}); use one of those, or ask the operator to start the server with --allow-server ${clientProgram}`
  return undefined
}

/**
 * Why an agent's `check` (the sweep's `--check`, run with `sh -c` once per engine start) may not
 * run under `allow`, or undefined when it may: one allowed program with its arguments, as the
 * engine's command line is.
 */
export const checkRefusal = (allow: ReadonlyArray<string>, check: string): string | undefined =>
  programRefusal(
    allow,
    "check",
    check,
    `the check '${check}' holds ${SHELL_SYNTAX}: an agent's check is one program with its arguments`
  )
