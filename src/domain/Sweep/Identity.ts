/**
 * What makes two `sweep run` invocations the same experiment (docs/design.md#resume): the server
 * string, the client's argv, the grid (params with their values, in order), the load points or the
 * search, the SLOs, the repeats and the lease's shape (GPUs, nodes). Resuming a session with any of
 * them changed would mix two experiments' points: it is refused, naming each difference.
 * Operational options (`--between`, `--point-timeout`, `--ready-*`, `--deadline`) may change
 * between runs. Pure.
 */
import type { Combination, LoadSpec, Param } from "./Grid.js"
import type { Link } from "./GridForms.js"
import { renderSlo, type Slo } from "./Slo.js"

export interface Experiment {
  readonly server: string
  readonly client: ReadonlyArray<string>
  readonly params: ReadonlyArray<Param>
  readonly load: LoadSpec
  readonly slos: ReadonlyArray<Slo>
  readonly repeats: number
  readonly gpus: number
  readonly nodes: number
  /** `--combo`: exactly these combinations instead of the params' Cartesian product. */
  readonly combos?: ReadonlyArray<Combination> | undefined
  /** `--link-vars PARAM=LOAD`: each combination runs only the load equal to its PARAM. */
  readonly links?: ReadonlyArray<Link> | undefined
  /**
   * `--one-run`: the client takes every load point of a combination in one run (`{NAME}` is the
   * comma list: GuideLLM's `--rate`, AIPerf's `--concurrency`) and its report's benchmarks are the
   * points, each at the load it states (docs/clients.md#in-a-sweep).
   */
  readonly oneRun?: boolean | undefined
}

export interface Difference {
  /** The option that differs, as the user wrote it (`--server`, `--param`, …). */
  readonly field: string
  readonly was: string
  readonly now: string
}

const paramsText = (ps: ReadonlyArray<Param>) =>
  ps.length === 0 ? "(none)" : ps.map((p) => `${p.name}=${p.values.join(",")}`).join(" ")

const combosText = (e: Experiment) =>
  e.combos === undefined
    ? `--param ${paramsText(e.params)}`
    : e.combos
        .map((c) =>
          Object.entries(c)
            .map(([k, v]) => `${k}=${v}`)
            .join(",")
        )
        .join(" ")

const linksText = (ls: ReadonlyArray<Link> | undefined) =>
  ls === undefined || ls.length === 0 ? "(none)" : ls.map((l) => `${l.param}=${l.load}`).join(",")

const loadText = (l: LoadSpec) =>
  l.kind === "points" ? `--load ${l.name}=${l.values.join(",")}` : `--search ${l.name}:${l.max}`

const slosText = (ss: ReadonlyArray<Slo>) => (ss.length === 0 ? "(none)" : ss.map(renderSlo).join(" "))

/** Every field in which `now` differs from the session's recorded experiment `was`. */
export const experimentDiff = (was: Experiment, now: Experiment): ReadonlyArray<Difference> => {
  const out: Array<Difference> = []
  const cmp = (field: string, a: string, b: string) => {
    if (a !== b) out.push({ field, was: a, now: b })
  }
  cmp("--server", was.server, now.server)
  cmp("the client (after --)", JSON.stringify(was.client), JSON.stringify(now.client))
  if (was.combos === undefined && now.combos === undefined)
    cmp("--param", paramsText(was.params), paramsText(now.params))
  else cmp("--combo", combosText(was), combosText(now))
  cmp("--link-vars", linksText(was.links), linksText(now.links))
  cmp("--load/--search", loadText(was.load), loadText(now.load))
  cmp("--slo", slosText(was.slos), slosText(now.slos))
  cmp("--repeats", String(was.repeats), String(now.repeats))
  cmp("--gpus", String(was.gpus), String(now.gpus))
  cmp("--nodes", String(was.nodes), String(now.nodes))
  cmp("--one-run", was.oneRun === true ? "on" : "off", now.oneRun === true ? "on" : "off")
  return out
}

export const renderDifferences = (diffs: ReadonlyArray<Difference>): string =>
  diffs.map((d) => `${d.field}: the session has ${d.was}, this run gives ${d.now}`).join("; ")
