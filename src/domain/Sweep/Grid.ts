/**
 * The grid of a sweep (docs/design.md#combinations-and-points): `--param NAME=V1,V2,…` values, the
 * `--load NAME=V1,…` points or `--search NAME[:MAX]`, the Cartesian product of the params (one
 * server combination each) and the `{name}` placeholders in the server string and the client's
 * arguments. Pure.
 *
 * Values are used as written (`inf` is a valid rate). A placeholder is `{name}` with a name of
 * letters, digits, `_` and `-`, not preceded by `$` (so `${HYPERLOOM_PORT}` stays the shell's and
 * the runner's) — JSON in an argument (`{"a": 1}`) is no placeholder either.
 */

export interface Param {
  readonly name: string
  readonly values: ReadonlyArray<string>
}

/** How the load of a combination is chosen: fixed points, or the search for the largest passing one. */
export type LoadSpec =
  | { readonly kind: "points"; readonly name: string; readonly values: ReadonlyArray<string> }
  | { readonly kind: "search"; readonly name: string; readonly max: number }

export const DEFAULT_SEARCH_MAX = 1024

const NAME = /^[A-Za-z_][A-Za-z0-9_-]*$/

/** `{name}` not preceded by `$`. */
const PLACEHOLDER = /(?<!\$)\{([A-Za-z_][A-Za-z0-9_-]*)\}/g

export type GridResult<A> =
  | { readonly ok: true; readonly value: A }
  | { readonly ok: false; readonly error: string }
const ok = <A>(value: A): GridResult<A> => ({ ok: true, value })
const bad = <A>(error: string): GridResult<A> => ({ ok: false, error })

/** `NAME=V1,V2,…` (for `--param` and `--load`); values trimmed, none empty, no duplicates. */
export const parseValues = (flag: string, text: string): GridResult<Param> => {
  const eq = text.indexOf("=")
  if (eq <= 0) return bad(`${flag} expects NAME=V1,V2,…, got ${JSON.stringify(text)}`)
  const name = text.slice(0, eq).trim()
  if (!NAME.test(name))
    return bad(`${flag}: ${JSON.stringify(name)} is not a name (letters, digits, _ and -)`)
  const values = text
    .slice(eq + 1)
    .split(",")
    .map((v) => v.trim())
  if (values.some((v) => v === "")) return bad(`${flag} ${name}: an empty value in ${JSON.stringify(text)}`)
  const seen = new Set<string>()
  for (const v of values) {
    if (seen.has(v)) return bad(`${flag} ${name}: the value ${JSON.stringify(v)} is given twice`)
    seen.add(v)
  }
  return ok({ name, values })
}

/** `NAME[:MAX]` for `--search`; MAX a positive integer (default 1024). */
export const parseSearch = (text: string): GridResult<{ readonly name: string; readonly max: number }> => {
  const [name = "", maxText, ...rest] = text.trim().split(":")
  if (!NAME.test(name) || rest.length > 0)
    return bad(`--search expects NAME[:MAX], got ${JSON.stringify(text)}`)
  if (maxText === undefined) return ok({ name, max: DEFAULT_SEARCH_MAX })
  const max = Number(maxText)
  if (!/^\d+$/.test(maxText) || !Number.isSafeInteger(max) || max < 1)
    return bad(`--search ${name}: MAX must be a positive integer, got ${JSON.stringify(maxText)}`)
  return ok({ name, max })
}

/** A load value as a number, for ordering and the report's axis: `inf` is +∞; NaN when not numeric. */
export const loadNumber = (value: string): number => {
  const v = value.trim().toLowerCase()
  if (v === "inf" || v === "+inf" || v === "infinity") return Number.POSITIVE_INFINITY
  return v === "" ? Number.NaN : Number(v)
}

/** Load points in ascending order (numeric; `inf` last; non-numeric after, in the given order). */
export const ascendingLoads = (values: ReadonlyArray<string>): ReadonlyArray<string> =>
  values
    .map((v, i) => ({ v, i, n: loadNumber(v) }))
    .sort((a, b) => {
      const an = Number.isNaN(a.n)
      const bn = Number.isNaN(b.n)
      if (an || bn) return an && bn ? a.i - b.i : an ? 1 : -1
      return a.n === b.n ? a.i - b.i : a.n - b.n
    })
    .map((x) => x.v)

/** One server combination: a value of every param, in the params' order. */
export type Combination = Readonly<Record<string, string>>

/** The Cartesian product of the params: the first param varies slowest. One empty combination without params. */
export const combinations = (params: ReadonlyArray<Param>): ReadonlyArray<Combination> =>
  params.reduce<ReadonlyArray<Combination>>(
    (acc, p) => acc.flatMap((c) => p.values.map((v) => ({ ...c, [p.name]: v }))),
    [{}]
  )

/** The placeholder names in a text, in order of appearance, each once. */
export const placeholdersIn = (text: string): ReadonlyArray<string> => [
  ...new Set([...text.matchAll(PLACEHOLDER)].map((m) => m[1]!))
]

/** `{name}` replaced by its value; placeholders without a value stay as written. */
export const substitute = (text: string, values: Readonly<Record<string, string>>): string =>
  text.replace(PLACEHOLDER, (whole, name: string) => (Object.hasOwn(values, name) ? values[name]! : whole))

/** A short label of a combination: `max-num-seqs=8 max-num-batched-tokens=2048`. */
export const comboLabel = (combo: Combination): string => {
  const entries = Object.entries(combo)
  return entries.length === 0 ? "(no params)" : entries.map(([k, v]) => `${k}=${v}`).join(" ")
}

/**
 * How user text names a combination: `#2 (max-num-seqs=8)` — the `#` is the combination's index,
 * as in `sweep show`'s table, the report and sweep.json (one numbering); `#0` alone without params.
 */
export const comboRef = (index: number, combo: Combination): string =>
  Object.keys(combo).length === 0 ? `#${index}` : `#${index} (${comboLabel(combo)})`

/**
 * The usage checks of docs/design.md#combinations-and-points (nothing runs when one fails): names
 * used once, every placeholder has a value (a param's in the server; a param's or the load's in the
 * client), every param appears somewhere, the load's name appears in the client, the load not in
 * the server.
 */
export const checkPlaceholders = (input: {
  readonly server: string
  readonly client: ReadonlyArray<string>
  readonly params: ReadonlyArray<Param>
  readonly load: LoadSpec
}): ReadonlyArray<string> => {
  const errors: Array<string> = []
  const paramNames = input.params.map((p) => p.name)
  const dup = paramNames.find((n, i) => paramNames.indexOf(n) !== i)
  if (dup !== undefined) errors.push(`--param ${dup} is given twice`)
  if (paramNames.includes(input.load.name))
    errors.push(
      `${input.load.name} is both a --param and the ${input.load.kind === "search" ? "--search" : "--load"} name`
    )
  const inServer = placeholdersIn(input.server)
  const inClient = [...new Set(input.client.flatMap(placeholdersIn))]
  for (const name of inServer) {
    if (name === input.load.name)
      errors.push(
        `the server string uses {${name}}, the load: the load goes to the client only (one engine serves every load)`
      )
    else if (!paramNames.includes(name))
      errors.push(`the server string uses {${name}}, which no --param gives a value`)
  }
  for (const name of inClient) {
    if (name !== input.load.name && !paramNames.includes(name))
      errors.push(`the client uses {${name}}, which no --param (nor the load) gives a value`)
  }
  for (const name of paramNames) {
    if (!inServer.includes(name) && !inClient.includes(name))
      errors.push(
        `--param ${name} appears nowhere: put {${name}} in the server string or the client's arguments`
      )
  }
  if (!inClient.includes(input.load.name))
    errors.push(
      `the load ${input.load.name} is missing from the client: put {${input.load.name}} in its arguments (e.g. --max-concurrency {${input.load.name}})`
    )
  return errors
}

const HYPERLOOM_REF = /\$(?:\{HYPERLOOM_[A-Z_]+\}|HYPERLOOM_[A-Z_]+)/g

/**
 * Quotes one argument for a POSIX shell only when it needs it, so the printed line pastes as it
 * ran. An argument holding `$HYPERLOOM_…` references is double-quoted with them left live (the
 * user exports them, as hyperloom sets them); every other `$`, `"`, `\\` and backquote escaped.
 */
export const shellQuote = (arg: string): string => {
  if (arg !== "" && /^[A-Za-z0-9_@%+=:,./-]+$/.test(arg)) return arg
  if (arg.match(HYPERLOOM_REF) === null) return `'${arg.replace(/'/g, `'"'"'`)}'`
  const parts: Array<string> = []
  let at = 0
  for (const m of arg.matchAll(HYPERLOOM_REF)) {
    parts.push(
      arg.slice(at, m.index).replace(/[$"\\`]/g, (c) => `\\${c}`),
      m[0]
    )
    at = m.index + m[0].length
  }
  parts.push(arg.slice(at).replace(/[$"\\`]/g, (c) => `\\${c}`))
  return `"${parts.join("")}"`
}

/** An argv as one line a shell runs as the same argv. */
export const shellLine = (argv: ReadonlyArray<string>): string => argv.map(shellQuote).join(" ")
