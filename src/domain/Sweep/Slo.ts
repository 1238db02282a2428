/**
 * Service-level objectives of a sweep (docs/design.md#slo-and-search): `--slo 'p99_ttft_ms<=500'`,
 * any serving metric (docs/design.md#results-and-metrics), `<=` or `>=`, repeatable; all must hold,
 * judged on the median over a point's repeats. Pure.
 */
import { parseDecimal } from "../Numbers.js"
import { METRIC_KEYS, type MetricKey, type Metrics } from "../Results.js"

export interface Slo {
  readonly metric: MetricKey
  readonly op: "<=" | ">="
  readonly bound: number
}

export type SloParse =
  | { readonly ok: true; readonly slo: Slo }
  | { readonly ok: false; readonly error: string }

/** `METRIC<=X` or `METRIC>=X` (spaces allowed around the parts). */
export const parseSlo = (text: string): SloParse => {
  const m = /^\s*([a-z0-9_]+)\s*(<=|>=)\s*([^\s]+)\s*$/.exec(text)
  if (m === null)
    return { ok: false, error: `--slo expects METRIC<=X or METRIC>=X, got ${JSON.stringify(text)}` }
  const metric = m[1]!
  if (!(METRIC_KEYS as ReadonlyArray<string>).includes(metric))
    return {
      ok: false,
      error: `--slo: unknown metric ${JSON.stringify(metric)}; one of ${METRIC_KEYS.join(", ")}`
    }
  // Decimal digits only, as every number option (Numbers.ts): Number() read `0x10` as 16.
  const bound = parseDecimal(m[3]!)
  if (bound === undefined)
    return {
      ok: false,
      error: `--slo ${metric}: the bound must be a decimal number (digits, one optional '.'), got ${JSON.stringify(m[3])}`
    }
  return { ok: true, slo: { metric: metric as MetricKey, op: m[2] as "<=" | ">=", bound } }
}

export const renderSlo = (s: Slo): string => `${s.metric}${s.op}${s.bound}`

export interface SloVerdict {
  readonly slo: string
  readonly value: number | null
  readonly ok: boolean
}

/** Each SLO judged on the given (median) metrics; a metric the result lacks fails its SLO. */
export const judgeSlos = (slos: ReadonlyArray<Slo>, medians: Metrics): ReadonlyArray<SloVerdict> =>
  slos.map((s) => {
    const value = medians[s.metric]
    const ok = value !== undefined && (s.op === "<=" ? value <= s.bound : value >= s.bound)
    return { slo: renderSlo(s), value: value ?? null, ok }
  })

export const allHold = (verdicts: ReadonlyArray<SloVerdict>): boolean => verdicts.every((v) => v.ok)
