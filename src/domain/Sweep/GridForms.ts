/**
 * Grids as people write them (issue 27, item 13), beside the Cartesian product of `--param`:
 * - an explicit list of server combinations, `--combo 'a=1,b=2'` repeated (vLLM's `bench sweep
 *   --serve-params` list of records): exactly those run, in the order given;
 * - linked values, `--link-vars PARAM=LOAD` (vLLM's `--link-vars max_num_seqs=max_concurrency`,
 *   vllm/benchmarks/sweep/serve.py `_comb_is_valid`): a combination runs only the load points
 *   whose value equals its PARAM's, e.g. each engine at the concurrency of its own batch limit.
 * Pure.
 */
import { type Combination, type GridResult, loadNumber, type Param } from "./Grid.js"

const NAME = /^[A-Za-z_][A-Za-z0-9_-]*$/
const ok = <A>(value: A): GridResult<A> => ({ ok: true, value })
const bad = <A>(error: string): GridResult<A> => ({ ok: false, error })

/** `a=1,b=2` for `--combo`: every name once, no empty value. */
export const parseCombo = (text: string): GridResult<Combination> => {
  const out: Record<string, string> = {}
  for (const part of text.split(",")) {
    const eq = part.indexOf("=")
    const name = part.slice(0, Math.max(0, eq)).trim()
    const value = part.slice(eq + 1).trim()
    if (eq <= 0 || !NAME.test(name) || value === "")
      return bad(`--combo expects NAME=VALUE,NAME=VALUE,…, got ${JSON.stringify(text)}`)
    if (Object.hasOwn(out, name)) return bad(`--combo ${JSON.stringify(text)} gives ${name} twice`)
    out[name] = value
  }
  return ok(out)
}

const comboKey = (c: Combination) => JSON.stringify(Object.entries(c))

/** The params of a list of combinations (names in the first's order, values in order of appearance). */
export const paramsOfCombos = (combos: ReadonlyArray<Combination>): GridResult<ReadonlyArray<Param>> => {
  if (combos.length === 0) return bad("--combo: no combination given")
  const names = Object.keys(combos[0]!)
  const seen = new Set<string>()
  for (const c of combos) {
    const these = Object.keys(c)
    if (these.length !== names.length || names.some((n) => !Object.hasOwn(c, n)))
      return bad(
        `every --combo must name the same params (${names.join(", ")}); one names ${these.join(", ")}`
      )
    const key = comboKey(Object.fromEntries(names.map((n) => [n, c[n]!])))
    if (seen.has(key)) return bad(`--combo ${names.map((n) => `${n}=${c[n]}`).join(",")} is given twice`)
    seen.add(key)
  }
  return ok(names.map((name) => ({ name, values: [...new Set(combos.map((c) => c[name]!))] })))
}

export interface Link {
  /** The server param … */
  readonly param: string
  /** … whose value is the only load point its combination runs. */
  readonly load: string
}

/** `--link-vars PARAM=LOAD[,PARAM=LOAD…]`, repeatable. */
export const parseLinks = (texts: ReadonlyArray<string>): GridResult<ReadonlyArray<Link>> => {
  const out: Array<Link> = []
  for (const part of texts.flatMap((t) => t.split(","))) {
    const [param = "", load, ...rest] = part.split("=").map((s) => s.trim())
    if (!NAME.test(param) || load === undefined || !NAME.test(load) || rest.length > 0)
      return bad(`--link-vars expects PARAM=LOAD (e.g. max-num-seqs=c), got ${JSON.stringify(part)}`)
    out.push({ param, load })
  }
  return ok(out)
}

/** The load points a combination runs under the links: those equal (as numbers, else as text) to its linked params. */
export const linkedLoads = (
  loads: ReadonlyArray<string>,
  combo: Combination,
  links: ReadonlyArray<Link> | undefined
): ReadonlyArray<string> =>
  links === undefined || links.length === 0
    ? loads
    : loads.filter((l) =>
        links.every((k) => {
          const v = combo[k.param]
          if (v === undefined) return false
          const a = loadNumber(v)
          const b = loadNumber(l)
          return Number.isNaN(a) || Number.isNaN(b) ? v === l : a === b
        })
      )

/** The usage checks of the new forms (nothing runs when one fails). */
export const checkGridForms = (input: {
  readonly params: ReadonlyArray<Param>
  readonly load: { readonly kind: string; readonly name: string }
  readonly links?: ReadonlyArray<Link> | undefined
  /** The combinations and load points the sweep would run (grid loads only). */
  readonly combos?: ReadonlyArray<Combination>
  readonly loads?: ReadonlyArray<string>
}): ReadonlyArray<string> => {
  const errors: Array<string> = []
  if (
    input.links !== undefined &&
    input.links.length > 0 &&
    input.combos !== undefined &&
    input.loads !== undefined
  ) {
    const empty = input.combos.filter((c) => linkedLoads(input.loads!, c, input.links).length === 0)
    if (empty.length > 0 && input.load.kind === "points")
      errors.push(
        `--link-vars leaves ${empty
          .map((c) =>
            Object.entries(c)
              .map(([k, v]) => `${k}=${v}`)
              .join(",")
          )
          .join("; ")} without a load point: add its value to --load ${input.load.name}=… or drop it`
      )
  }
  for (const k of input.links ?? []) {
    if (!input.params.some((p) => p.name === k.param))
      errors.push(`--link-vars ${k.param}=${k.load}: ${k.param} is no --param (or --combo) name`)
    if (k.load !== input.load.name)
      errors.push(`--link-vars ${k.param}=${k.load}: ${k.load} is not the load's name (${input.load.name})`)
    if (input.load.kind === "search")
      errors.push("--link-vars fixes each combination's load; it does not go with --search")
  }
  return errors
}
