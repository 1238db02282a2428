/**
 * `hyperloom compare A B` (docs/design.md#trusted-answers): two sweep sessions, or two baseline
 * sessions, side by side with confidence intervals and a verdict. Pure: the sessions' documents in,
 * the comparison out.
 *
 * - What differs between the two sessions' records (engine and client command lines, node facts,
 *   hyperloom version, repeats, SLOs) comes first: a difference in speed means little without it.
 * - Points match on their params and load (two baselines match as a whole). Per matched point and
 *   metric: A, B (mean, 95 % interval, runs), the change B ÷ A − 1 with its 95 % interval (Welch:
 *   Stats.ratioChange) and a verdict: faster, slower, or no difference beyond the noise. With one
 *   run on a side no confidence can be claimed: the raw change is shown, the verdict says so.
 * - Overall, per metric: the geometric mean of the changes over the points both measured `ok`,
 *   with its interval; and best against best (each session's reported best point).
 * - Points only one session has are listed, never dropped.
 * - `--fail-on 'METRIC<-3%'` / `'METRIC>+5%'`: a gate on the overall change. It fails when the
 *   whole 95 % interval lies past the threshold; with one run per point on a side it judges the raw
 *   change (and says that no confidence can be claimed); with nothing both measured `ok` it fails:
 *   a gate that cannot judge must not pass.
 */
import {
  METRIC_KEYS,
  type MetricKey,
  type Metrics,
  sweepWorkload,
  type Workload,
  workloadFacts
} from "./Results.js"
import type { EnvironmentRecord, NodeFacts } from "./Serving.js"
import type { SessionState } from "./State.js"
import {
  type Change,
  describe,
  geometricMeanChange,
  noisyCv,
  ratioChange,
  type Summary,
  significantChange
} from "./Stats.js"
import { countsRun } from "./Sweep/Validity.js"
import { comboLabel, type SweepDoc, shellLine } from "./Sweep.js"
import { renderFinding } from "./Validity.js"

/** One side's point: its key (params and load), whether it measured `ok`, each metric's runs. */
export interface ComparePoint {
  readonly key: string
  readonly status: string
  readonly ok: boolean
  readonly samples: { readonly [K in MetricKey]?: ReadonlyArray<number> }
  /**
   * Why the point is `invalid` (docs/trust.md#is-the-number-valid): no change is called on it;
   * absent otherwise.
   */
  readonly invalid?: ReadonlyArray<string> | undefined
}

export interface CompareSide {
  readonly name: string
  readonly kind: "sweep" | "baseline"
  /** The record's facts, in the order they are listed: label → value (null: not recorded). */
  readonly facts: ReadonlyArray<readonly [string, string | null]>
  readonly points: ReadonlyArray<ComparePoint>
  /** The key of the session's reported best point (a sweep's best or tie's best; a baseline's one). */
  readonly best: string | null
  /**
   * What its client sent (Results.ts `workloadFacts`; docs/clients.md#the-workload-on-record);
   * undefined when the session recorded none (an older session, a client that does not say).
   */
  readonly workload?: ReturnType<typeof workloadFacts> | undefined
}

/** Higher is better for throughputs and counts; lower for latencies (`…_ms`). */
export const higherIsBetter = (m: MetricKey): boolean => !m.endsWith("_ms")

export type PointVerdict = "faster" | "slower" | "no difference beyond the noise" | "no confidence: one run"

export interface PointComparison {
  readonly key: string
  readonly statusA: string
  readonly statusB: string
  readonly a: Summary | null
  readonly b: Summary | null
  readonly change: Change | null
  /** null when the point was not measured `ok` on both sides (it is left out of the overall). */
  readonly verdict: PointVerdict | null
  /**
   * The sides on which the point is noisy (its output-throughput CV over 5 %, as a sweep flags
   * it): its interval is wide, so "no difference" there says little. Welch's test weighs the
   * noise already; the flag says why a verdict could not be had.
   */
  readonly noisy: ReadonlyArray<"A" | "B">
  /** The sides on which the point is invalid, with why: compare calls no change on it and says so. */
  readonly invalid?: { readonly a?: ReadonlyArray<string>; readonly b?: ReadonlyArray<string> } | undefined
}

/** Why no change is called on a matched point: its invalid sides, else the sides not measured ok. */
export const notComparedWhy = (p: PointComparison): string => {
  const inv = p.invalid
  if (inv?.a !== undefined || inv?.b !== undefined)
    return `not compared: invalid on ${[
      ...(inv.a !== undefined ? [`A (${inv.a.join("; ") || "no valid run"})`] : []),
      ...(inv.b !== undefined ? [`B (${inv.b.join("; ") || "no valid run"})`] : [])
    ].join(" and ")}: an invalid measurement is never compared`
  return `not compared: not ok on both sides (A ${p.statusA}, B ${p.statusB})`
}

export interface MetricComparison {
  readonly metric: MetricKey
  readonly higherIsBetter: boolean
  readonly points: ReadonlyArray<PointComparison>
  /** The geometric mean change over the points both measured `ok`; null when there is none. */
  readonly overall: (Change & { readonly points: number; readonly verdict: PointVerdict }) | null
  readonly best: {
    readonly a: string
    readonly b: string
    readonly sa: Summary
    readonly sb: Summary
    readonly change: Change
    readonly verdict: PointVerdict
  } | null
}

export interface Difference {
  readonly what: string
  readonly a: string | null
  readonly b: string | null
}

export interface Comparison {
  readonly a: { readonly name: string; readonly kind: CompareSide["kind"] }
  readonly b: { readonly name: string; readonly kind: CompareSide["kind"] }
  /** Workload differences first (`workload: …`), then the records'. */
  readonly differences: ReadonlyArray<Difference>
  /**
   * The two sessions sent different workloads (a field of what the client was asked differs, both
   * recorded): no verdict is given unless `allowed` (`--allow-workload-change`).
   */
  readonly workload: { readonly changed: ReadonlyArray<string>; readonly allowed: boolean }
  readonly metrics: ReadonlyArray<MetricComparison>
  readonly unmatched: { readonly onlyA: ReadonlyArray<string>; readonly onlyB: ReadonlyArray<string> }
  /** Every point both measured `ok` has two or more runs on both sides: intervals exist. */
  readonly confidence: boolean
}

const verdictOf = (c: Change, higher: boolean): PointVerdict => {
  if (c.ci95 === null) return "no confidence: one run"
  if (!significantChange(c)) return "no difference beyond the noise"
  return c.change > 0 === higher ? "faster" : "slower"
}

/** The point's output-throughput CV exceeds 5 % (a noisy point, docs/trust.md; Sweep/Best.ts isNoisy). */
const isNoisy = (p: ComparePoint): boolean => noisyCv(summaryOf(p, "output_throughput")?.cv)

const summaryOf = (p: ComparePoint | undefined, m: MetricKey): Summary | null => {
  const xs = p?.samples[m]
  return xs === undefined || xs.length === 0 ? null : describe(xs)
}

/** The workload facts that differ (label `workload: X`), and which of them were asked. */
const workloadDifferences = (a: CompareSide, b: CompareSide) => {
  if (a.workload === undefined && b.workload === undefined) return { differences: [], changed: [] }
  const fa = new Map((a.workload ?? []).map((f) => [f.what, f]))
  const fb = new Map((b.workload ?? []).map((f) => [f.what, f]))
  const labels = [...new Set([...fa.keys(), ...fb.keys()])]
  const differences: Array<Difference> = []
  const changed: Array<string> = []
  for (const what of labels) {
    const va = fa.get(what)?.value ?? null
    const vb = fb.get(what)?.value ?? null
    if (va === vb) continue
    differences.push({
      what: `workload: ${what}`,
      a: a.workload === undefined ? "not recorded" : va,
      b: b.workload === undefined ? "not recorded" : vb
    })
    // both sessions recorded their workload, and what the client was asked differs
    if (
      a.workload !== undefined &&
      b.workload !== undefined &&
      (fa.get(what) ?? fb.get(what))?.asked === true
    )
      changed.push(what)
  }
  return { differences, changed }
}

export const compareSessions = (
  a: CompareSide,
  b: CompareSide,
  metrics: ReadonlyArray<MetricKey>,
  options: { readonly allowWorkloadChange?: boolean } = {}
): Comparison => {
  const work = workloadDifferences(a, b)
  const allowed = options.allowWorkloadChange === true
  // different workloads are different experiments: no verdict unless asked
  const judge = work.changed.length === 0 || allowed
  const byKeyB = new Map(b.points.map((p) => [p.key, p]))
  const keysA = new Set(a.points.map((p) => p.key))
  const matched = a.points.filter((p) => byKeyB.has(p.key))
  const labels = [...new Set([...a.facts.map(([k]) => k), ...b.facts.map(([k]) => k)])]
  const factA = new Map(a.facts)
  const factB = new Map(b.facts)
  const differences = [
    ...work.differences,
    ...labels.flatMap((what) => {
      const va = factA.get(what) ?? null
      const vb = factB.get(what) ?? null
      return va === vb ? [] : [{ what, a: va, b: vb }]
    })
  ]
  let confidence = true
  const perMetric = metrics.map((metric): MetricComparison => {
    const higher = higherIsBetter(metric)
    const points = matched.map((pa): PointComparison => {
      const pb = byKeyB.get(pa.key)!
      const sa = summaryOf(pa, metric)
      const sb = summaryOf(pb, metric)
      const both = judge && pa.ok && pb.ok && sa !== null && sb !== null && sa.mean !== 0
      const change = both ? ratioChange(sa, sb) : null
      return {
        key: pa.key,
        statusA: pa.status,
        statusB: pb.status,
        a: sa,
        b: sb,
        change,
        verdict: change === null ? null : verdictOf(change, higher),
        noisy: [...(isNoisy(pa) ? (["A"] as const) : []), ...(isNoisy(pb) ? (["B"] as const) : [])],
        ...(pa.invalid !== undefined || pb.invalid !== undefined
          ? {
              invalid: {
                ...(pa.invalid !== undefined ? { a: pa.invalid } : {}),
                ...(pb.invalid !== undefined ? { b: pb.invalid } : {})
              }
            }
          : {})
      }
    })
    const pairs = points.flatMap((p) => (p.change !== null ? [{ a: p.a!, b: p.b! }] : []))
    if (pairs.some((p) => p.a.n < 2 || p.b.n < 2)) confidence = false
    const g = pairs.length === 0 ? null : geometricMeanChange(pairs)
    const ba = a.best === null ? undefined : a.points.find((p) => p.key === a.best)
    const bb = b.best === null ? undefined : b.points.find((p) => p.key === b.best)
    const sba = summaryOf(ba, metric)
    const sbb = summaryOf(bb, metric)
    const bestChange = judge && sba !== null && sbb !== null && sba.mean !== 0 ? ratioChange(sba, sbb) : null
    return {
      metric,
      higherIsBetter: higher,
      points,
      overall: g === null ? null : { ...g, points: pairs.length, verdict: verdictOf(g, higher) },
      best:
        bestChange === null
          ? null
          : {
              a: a.best!,
              b: b.best!,
              sa: sba!,
              sb: sbb!,
              change: bestChange,
              verdict: verdictOf(bestChange, higher)
            }
    }
  })
  return {
    a: { name: a.name, kind: a.kind },
    b: { name: b.name, kind: b.kind },
    differences,
    workload: { changed: work.changed, allowed },
    metrics: perMetric,
    unmatched: {
      onlyA: a.points.filter((p) => !byKeyB.has(p.key)).map((p) => p.key),
      onlyB: b.points.filter((p) => !keysA.has(p.key)).map((p) => p.key)
    },
    confidence
  }
}

// ---------------------------------------------------------------------------------------------
// The gate

export interface Gate {
  readonly metric: MetricKey
  readonly op: "<" | ">"
  /** The threshold as a fraction (−0.03 for `-3%`). */
  readonly threshold: number
  /** As written. */
  readonly text: string
}

/** `METRIC<-3%` or `METRIC>+5%` (a known metric, a signed percentage). */
export const parseGate = (text: string): { ok: true; gate: Gate } | { ok: false; error: string } => {
  const m = /^\s*([a-z0-9_]+)\s*([<>])\s*([+-]?\d+(?:\.\d+)?)\s*%\s*$/.exec(text)
  if (m === null)
    return {
      ok: false,
      error: `--fail-on must look like 'output_throughput<-3%' or 'p99_ttft_ms>+5%', got '${text}'`
    }
  const metric = m[1]! as MetricKey
  if (!METRIC_KEYS.includes(metric))
    return { ok: false, error: `--fail-on: unknown metric '${m[1]}' (known: ${METRIC_KEYS.join(", ")})` }
  return {
    ok: true,
    gate: { metric, op: m[2] as "<" | ">", threshold: Number(m[3]) / 100, text: text.trim() }
  }
}

export interface GateResult {
  readonly gate: string
  readonly failed: boolean
  /** Judged on the 95 % interval (true) or on the raw change (one run per point on a side). */
  readonly confident: boolean
  readonly change: number | null
  readonly ci95: readonly [number, number] | null
  readonly reason: string
}

const pct = (x: number) => `${x > 0 ? "+" : ""}${(Math.round(x * 1000) / 10).toFixed(1)} %`

export const judgeGate = (c: Comparison, gate: Gate): GateResult => {
  const m = c.metrics.find((x) => x.metric === gate.metric)?.overall ?? null
  const past = (x: number) => (gate.op === "<" ? x < gate.threshold : x > gate.threshold)
  if (m === null)
    return {
      gate: gate.text,
      failed: true,
      confident: false,
      change: null,
      ci95: null,
      reason:
        c.workload.changed.length > 0 && !c.workload.allowed
          ? `cannot judge: the two sessions sent different workloads (${c.workload.changed.join(", ")}); a gate that cannot judge does not pass`
          : `cannot judge: no point both sessions measured ok with ${gate.metric}; a gate that cannot judge does not pass`
    }
  if (m.ci95 === null) {
    const failed = past(m.change)
    return {
      gate: gate.text,
      failed,
      confident: false,
      change: m.change,
      ci95: null,
      reason: `one run per point on a side: no confidence can be claimed; judged on the raw change ${pct(m.change)}: ${failed ? "past" : "within"} ${pct(gate.threshold)}`
    }
  }
  // past the threshold with 95 % confidence: the whole interval lies beyond it
  const failed = gate.op === "<" ? m.ci95[1] < gate.threshold : m.ci95[0] > gate.threshold
  return {
    gate: gate.text,
    failed,
    confident: true,
    change: m.change,
    ci95: m.ci95,
    reason: `${pct(m.change)} [95 % CI ${pct(m.ci95[0])} … ${pct(m.ci95[1])}] over ${m.points} point(s): ${
      failed
        ? `past ${pct(gate.threshold)} with 95 % confidence`
        : past(m.change)
          ? `past ${pct(gate.threshold)}, but not with 95 % confidence`
          : `not past ${pct(gate.threshold)}`
    }`
  }
}

export const formatChange = pct

// ---------------------------------------------------------------------------------------------
// Building a side

/** Each metric's values over the measured runs. */
export const samplesOf = (runs: ReadonlyArray<Metrics>): ComparePoint["samples"] => {
  const out: { [K in MetricKey]?: Array<number> } = {}
  for (const k of METRIC_KEYS) {
    const xs = runs.flatMap((m) => (m[k] === undefined ? [] : [m[k]]))
    if (xs.length > 0) out[k] = xs
  }
  return out
}

/** A node's facts as one line (sorted engines), for listing what differs. */
export const nodeLine = (n: NodeFacts): string => {
  const engines = Object.entries(n.engines ?? {})
    .sort(([x], [y]) => x.localeCompare(y))
    .map(([k, v]) => `${k} ${v}`)
  const gpus = n.gpus ?? []
  return [
    n.hostname ?? "?",
    gpus.length === 0 ? "no GPU" : `${gpus.length} GPU(s): ${[...new Set(gpus)].join(", ")}`,
    ...(n.ray_version !== undefined ? [`ray ${n.ray_version}`] : []),
    ...engines
  ].join(", ")
}

const keyOf = (params: Readonly<Record<string, string>>, loadName: string, load: string) =>
  Object.keys(params).length === 0 ? `${loadName}=${load}` : `${comboLabel(params)} ${loadName}=${load}`

/** A sweep session as one side: its points by params and load; `nodes` from its engines' records. */
export const sweepSide = (name: string, doc: SweepDoc, nodes: ReadonlyArray<string>): CompareSide => {
  const e = doc.experiment
  const loadName = e.load.name
  return {
    name,
    kind: "sweep",
    facts: [
      ["engine command", e.server],
      ["client command", shellLine(e.client)],
      ["hyperloom version", doc.hyperloom_version ?? null],
      ["node", nodes.length === 0 ? null : [...new Set(nodes)].sort().join("; ")],
      ["GPUs per lease", String(e.gpus)],
      ["repeats", String(e.repeats)],
      ["SLO", e.slos.length === 0 ? "none" : e.slos.join(" and ")]
    ],
    points: doc.combinations.flatMap((c) =>
      c.points.map((p) => ({
        key: keyOf(c.params, loadName, p.load),
        status: p.status,
        ok: p.status === "ok",
        // only runs that count (docs/trust.md#is-the-number-valid)
        samples: samplesOf(p.runs.flatMap((r) => (countsRun(r) ? [r.metrics as Metrics] : []))),
        ...(p.status === "invalid" ? { invalid: p.validity?.reasons ?? [] } : {})
      }))
    ),
    best:
      doc.summary.best === null
        ? null
        : keyOf(
            doc.combinations.find((c) => c.index === doc.summary.best!.combination)?.params ?? {},
            loadName,
            doc.summary.best.load
          ),
    workload: sweepWorkload(
      doc.combinations.flatMap((c) =>
        c.points.flatMap((p) =>
          p.runs.flatMap((r) =>
            r.status === "ok" && r.workload !== undefined ? [r.workload as Workload] : []
          )
        )
      )
    )?.facts
  }
}

/** A baseline's workload: its last measured attempt's (rate and concurrency included: one point). */
const baselineWorkload = (state: SessionState) => {
  const w = [...state.baseline_attempts]
    .reverse()
    .find((a) => a.error_class === null && a.workload !== undefined)?.workload
  return w === undefined ? undefined : workloadFacts(w as Workload, true)
}

/** The key two baseline sessions match on: they match as a whole. */
export const BASELINE_KEY = "baseline"

/** A baseline session as one side: one point, its successful attempts as the runs. */
export const baselineSide = (
  name: string,
  state: SessionState,
  env: EnvironmentRecord | undefined
): CompareSide => {
  const measured = state.baseline_attempts.flatMap((a) =>
    a.ended_at !== null && a.error_class === null
      ? [
          a.metrics !== null && a.metrics.output_throughput !== undefined
            ? (a.metrics as Metrics)
            : a.throughput !== null
              ? ({ ...(a.metrics ?? {}), output_throughput: a.throughput } as Metrics)
              : ((a.metrics ?? {}) as Metrics)
        ]
      : []
  )
  const node =
    env === undefined
      ? null
      : `${env.node.hostname ?? "?"}, ${env.node.gpu_count} GPU(s)${env.node.accelerators.length > 0 ? `: ${[...new Set(env.node.accelerators)].join(", ")}` : ""}${env.ray_version !== null ? `, ray ${env.ray_version}` : ""}${Object.entries(
          env.engines
        )
          .sort(([x], [y]) => x.localeCompare(y))
          .map(([k, v]) => `, ${k} ${v}`)
          .join("")}`
  // measured, but judged invalid (docs/trust.md#is-the-number-valid): said, never compared
  const invalid = state.baseline_attempts.flatMap((a) =>
    a.validity?.verdict === "invalid" ? a.validity.findings.map(renderFinding) : []
  )
  return {
    name,
    kind: "baseline",
    facts: [
      ["engine command", env?.server_argv == null ? null : shellLine(env.server_argv)],
      ["client command", env === undefined ? null : shellLine(env.client_argv)],
      ["hyperloom version", env?.hyperloom_version ?? null],
      ["node", node]
    ],
    points: [
      {
        key: BASELINE_KEY,
        status: measured.length === 0 && invalid.length > 0 ? "invalid" : state.status,
        ok: measured.length > 0,
        samples: samplesOf(measured),
        ...(measured.length === 0 && invalid.length > 0 ? { invalid: [...new Set(invalid)] } : {})
      }
    ],
    best: measured.length > 0 ? BASELINE_KEY : null,
    workload: baselineWorkload(state)
  }
}
