/**
 * `sweep run --dry-run` (docs/design.md#time-to-the-answer): the plan of a sweep — combinations,
 * points, runs, the command lines of the first combination — and an estimate of the time it will
 * take, from `--estimate-start S` and `--estimate-run S`, else from what the session itself has
 * measured (a resumed sweep: the median engine start and client run so far), else from the host's
 * recent sweeps (./HostEstimate.ts). Nothing runs. Pure.
 */
import { median } from "../Stats.js"
import type { Strategy } from "./Adaptive.js"
import { ascendingLoads, combinations, shellLine, substitute } from "./Grid.js"
import { type Experiment, renderDifferences } from "./Identity.js"
import type { SessionLeft } from "./Left.js"

export interface Estimate {
  readonly start_sec: number
  readonly run_sec: number
  /** Where the figures came from: `options`, `session` or `host` (the user's recent sweeps on this host). */
  readonly source: "options" | "session" | "host"
  /** `host`: how many recent sweeps the medians are over, and when the last of them ended (ISO 8601). */
  readonly sweeps?: number
  readonly last_ended?: string
  /** `host`: the engine the sweeps ran (the same as this one's) and their session folders. */
  readonly engine?: string
  readonly sessions?: ReadonlyArray<string>
}

/** The host's recent sweeps when none ran this engine (./HostEstimate.ts): what they ran. */
export interface UnlikeSweeps {
  readonly engine: string
  readonly ran: ReadonlyArray<{ readonly engine: string; readonly sweeps: number }>
}

export interface SweepPlan {
  readonly strategy: Strategy
  readonly combinations: number
  /** Load points per combination (`--load`), or the most a search evaluates (`--search`). */
  readonly points_per_combination: number
  readonly points_are_upper_bound: boolean
  readonly repeats: number
  /** Client runs (retries aside): combinations × points × repeats (an upper bound for a search or adaptive). */
  readonly runs: number
  readonly first: {
    readonly params: Readonly<Record<string, string>>
    readonly server_cmd: string
    readonly client_cmds: ReadonlyArray<string>
  }
  readonly estimate: (Estimate & { readonly total_sec: number }) | null
  /**
   * On a session that holds a sweep: what the same command would still run there (everything
   * measured kept), or the differences it would be refused for; the estimate is of what is left.
   */
  readonly session?: SessionLeft | undefined
  /** No estimate, though the host has recent sweeps: none of them ran this engine (what they ran). */
  readonly host_sweeps_unlike?: UnlikeSweeps | undefined
}

const ceilLog2 = (x: number) => (x > 1 ? Math.ceil(Math.log2(x)) : 0)

export const sweepPlan = (
  e: Experiment,
  strategy: Strategy,
  estimate: Estimate | null,
  session?: SessionLeft,
  unlike?: UnlikeSweeps
): SweepPlan => {
  const combos = combinations(e.params)
  const search = e.load.kind === "search"
  // the search: doubling from 1 up to MAX (ceil(log2 MAX) + 1 points), then at most ceil(log2 MAX) bisections
  const points = e.load.kind === "points" ? e.load.values.length : 2 * ceilLog2(e.load.max) + 1
  const first = combos[0] ?? {}
  const loads = e.load.kind === "points" ? ascendingLoads(e.load.values) : ["1"]
  const runs = combos.length * points * e.repeats
  return {
    strategy,
    combinations: combos.length,
    points_per_combination: points,
    points_are_upper_bound: search,
    repeats: e.repeats,
    runs,
    first: {
      params: first,
      server_cmd: substitute(e.server, first),
      client_cmds: loads.map((l) =>
        shellLine(e.client.map((a) => substitute(a, { ...first, [e.load.name]: l })))
      )
    },
    estimate:
      estimate === null
        ? null
        : session?._tag === "left"
          ? {
              ...estimate,
              total_sec: session.engine_starts * estimate.start_sec + session.runs * estimate.run_sec
            }
          : { ...estimate, total_sec: combos.length * estimate.start_sec + runs * estimate.run_sec },
    ...(session === undefined ? {} : { session }),
    ...(unlike === undefined || estimate !== null ? {} : { host_sweeps_unlike: unlike })
  }
}

const SHOWN_SESSIONS = 3

/** `from this host's 2 recent sweep(s) of the same engine (vllm, model M): /s/a, /s/b; the last ended …`. */
const hostSource = (e: Estimate): string => {
  const sessions = e.sessions ?? []
  const named =
    sessions.length === 0
      ? ""
      : `: ${sessions.slice(-SHOWN_SESSIONS).join(", ")}${sessions.length > SHOWN_SESSIONS ? ` and ${sessions.length - SHOWN_SESSIONS} more` : ""}`
  return `from this host's ${e.sweeps ?? 0} recent sweep(s)${e.engine === undefined ? "" : ` of the same engine (${e.engine})`}${named}; the last ended ${e.last_ended ?? "?"}`
}

const unlikeLine = (u: UnlikeSweeps): string =>
  `estimate: none — none of this host's ${u.ran.reduce((n, r) => n + r.sweeps, 0)} recent sweep(s) ran this engine (${u.engine}): they ran ${u.ran.map((r) => `${r.engine} (${r.sweeps})`).join(", ")}; give --estimate-start S and --estimate-run S`

const dur = (s: number) =>
  s >= 3600 ? `${(s / 3600).toFixed(1)} h` : s >= 60 ? `${(s / 60).toFixed(1)} min` : `${Math.round(s)} s`

export const renderPlan = (p: SweepPlan): string => {
  const out = [
    `dry run (nothing runs): ${p.combinations} combination(s) = ${p.combinations} engine start(s)${p.strategy === "adaptive" ? " at most (--strategy adaptive starts fewer: how many depends on what it measures)" : ""}, ${p.points_are_upper_bound ? "up to " : ""}${p.points_per_combination} load point(s) each, ${p.repeats} repeat(s): ${p.points_are_upper_bound || p.strategy === "adaptive" ? "at most " : ""}${p.runs} client run(s)`,
    "the first combination's command lines:",
    `  server: sh -c ${JSON.stringify(p.first.server_cmd)}`,
    ...p.first.client_cmds.map((c) => `  client: ${c}`)
  ]
  const left = p.session?._tag === "left" ? p.session : undefined
  if (p.session?._tag === "refused")
    out.push(
      `this session holds a different sweep: ${renderDifferences(p.session.differences)}; the run would be refused (exit 2)`
    )
  else if (left !== undefined)
    out.push(
      `this session: ${left.engine_starts} engine start(s) and ${left.upper_bound ? "at most " : ""}${left.runs} client run(s) left (everything measured is kept)${left.kept_repeats !== undefined ? `; --repeats ${p.repeats} is smaller than the session's ${left.kept_repeats}: the session's stands` : ""}`
    )
  out.push(
    p.estimate === null && p.host_sweeps_unlike !== undefined
      ? unlikeLine(p.host_sweeps_unlike)
      : p.estimate === null
        ? "estimate: none (give --estimate-start S and --estimate-run S; a resumed session estimates from its own measurements, else this host's recent sweeps)"
        : `estimate: ${dur(p.estimate.total_sec)}${left !== undefined ? (left.upper_bound ? " at most" : "") : p.strategy === "adaptive" || p.points_are_upper_bound ? " at most" : ""} = ${left?.engine_starts ?? p.combinations} × ${p.estimate.start_sec} s per engine start + ${left?.runs ?? p.runs} × ${p.estimate.run_sec} s per client run (${p.estimate.source === "options" ? "from --estimate-start/--estimate-run" : p.estimate.source === "host" ? hostSource(p.estimate) : "from this session's own measurements"})`
  )
  return out.join("\n")
}

/** What a session has measured of its time: every engine start's seconds to ready, every client run's. */
export interface MeasuredSession {
  readonly combinations: ReadonlyArray<{
    readonly engine_starts: ReadonlyArray<{ readonly ready_sec: number | null }>
    readonly points: ReadonlyArray<{ readonly runs: ReadonlyArray<{ readonly runtime_sec: number | null }> }>
  }>
}

/** The engine starts' seconds to ready and the client runs' seconds a session has measured. */
export const measuredTimes = (
  doc: MeasuredSession
): { readonly starts: ReadonlyArray<number>; readonly runs: ReadonlyArray<number> } => ({
  starts: doc.combinations.flatMap((c) =>
    c.engine_starts.flatMap((s) => (s.ready_sec === null ? [] : [s.ready_sec]))
  ),
  runs: doc.combinations.flatMap((c) =>
    c.points.flatMap((p) => p.runs.flatMap((r) => (r.runtime_sec === null ? [] : [r.runtime_sec])))
  )
})

/** The median of `xs` to a tenth of a second, as every estimate states it. */
export const medianSec = (xs: ReadonlyArray<number>): number => Math.round(median(xs) * 10) / 10

/** The median engine start (launch to ready) and client run a session has measured; null before both. */
export const sessionEstimate = (doc: MeasuredSession): Estimate | null => {
  const { runs, starts } = measuredTimes(doc)
  if (starts.length === 0 || runs.length === 0) return null
  return { start_sec: medianSec(starts), run_sec: medianSec(runs), source: "session" }
}
