/**
 * The statistics behind a trusted answer (docs/design.md#trusted-answers). Pure, no dependencies.
 *
 * - `describe`: per sample (one metric of one point over its repeats) the median, min, max, mean,
 *   sample standard deviation (n − 1), coefficient of variation (sd ÷ mean) and the 95 % confidence
 *   interval of the mean from Student's t with n − 1 degrees of freedom. With n < 2 there is no
 *   noise estimate: sd, cv and the interval are null.
 * - `tQuantile`: Student's t quantile for any (also fractional) degrees of freedom, from the
 *   regularized incomplete beta function (continued fraction, as Numerical Recipes docs/design.md#baselines-and-stop-rules.4) solved by
 *   bisection: exact to ~1e-9, where the normal approximation is 6× too narrow at df = 1.
 * - `welch`: Welch's unequal-variance t-test on two samples' summaries: the difference of the
 *   means, its standard error, the Welch–Satterthwaite degrees of freedom and the 95 % interval.
 * - `ratioChange`: the relative change B ÷ A − 1 with a 95 % interval: Fieller's interval under
 *   Welch's test (Welch–Satterthwaite degrees of freedom), which excludes 0 exactly when Welch's
 *   test finds the means differ.
 * - `geometricMeanChange`: the geometric mean of several points' ratios with its 95 % interval
 *   (the mean of the log ratios, each log ratio's variance by the delta method, degrees of freedom
 *   by Welch–Satterthwaite over every sample involved); over one point, that point's change.
 */

/** The confidence level everything here states. */
export const CONFIDENCE = 0.95

/** A point whose output-throughput coefficient of variation exceeds this is flagged noisy. */
export const NOISY_CV = 0.05

/** A coefficient of variation past NOISY_CV (none, with one value, is not noisy). */
export const noisyCv = (cv: number | null | undefined): boolean =>
  cv !== undefined && cv !== null && cv > NOISY_CV

export const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

export const mean = (xs: ReadonlyArray<number>): number => xs.reduce((a, b) => a + b, 0) / xs.length

/** The sample standard deviation (n − 1); null below two values. */
export const stdev = (xs: ReadonlyArray<number>): number | null => {
  if (xs.length < 2) return null
  const m = mean(xs)
  return Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1))
}

// ---------------------------------------------------------------------------------------------
// Student's t

const LANCZOS = [
  676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059, 12.507343278686905,
  -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7
]

/** ln Γ(x) for x > 0 (Lanczos, g = 7). */
export const lnGamma = (x: number): number => {
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - lnGamma(1 - x)
  const z = x - 1
  let a = 0.99999999999980993
  for (let i = 0; i < LANCZOS.length; i++) a += LANCZOS[i]! / (z + i + 1)
  const t = z + LANCZOS.length - 0.5
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(a)
}

/** The continued fraction of the incomplete beta function (modified Lentz). */
const betaFraction = (a: number, b: number, x: number): number => {
  const TINY = 1e-300
  let c = 1
  let d = 1 - ((a + b) * x) / (a + 1)
  if (Math.abs(d) < TINY) d = TINY
  d = 1 / d
  let h = d
  for (let m = 1; m <= 300; m++) {
    const m2 = 2 * m
    let aa = (m * (b - m) * x) / ((a + m2 - 1) * (a + m2))
    d = 1 + aa * d
    if (Math.abs(d) < TINY) d = TINY
    c = 1 + aa / c
    if (Math.abs(c) < TINY) c = TINY
    d = 1 / d
    h *= d * c
    aa = (-(a + m) * (a + b + m) * x) / ((a + m2) * (a + m2 + 1))
    d = 1 + aa * d
    if (Math.abs(d) < TINY) d = TINY
    c = 1 + aa / c
    if (Math.abs(c) < TINY) c = TINY
    d = 1 / d
    const del = d * c
    h *= del
    if (Math.abs(del - 1) < 1e-15) break
  }
  return h
}

/** The regularized incomplete beta function I_x(a, b). */
export const incompleteBeta = (x: number, a: number, b: number): number => {
  if (x <= 0) return 0
  if (x >= 1) return 1
  const front = Math.exp(lnGamma(a + b) - lnGamma(a) - lnGamma(b) + a * Math.log(x) + b * Math.log(1 - x))
  return x < (a + 1) / (a + b + 2)
    ? (front * betaFraction(a, b, x)) / a
    : 1 - (front * betaFraction(b, a, 1 - x)) / b
}

/** P(T ≤ t) for Student's t with `df` degrees of freedom (df > 0, fractional allowed). */
export const tCdf = (t: number, df: number): number => {
  if (!Number.isFinite(t)) return t > 0 ? 1 : 0
  const tail = 0.5 * incompleteBeta(df / (df + t * t), df / 2, 0.5)
  return t >= 0 ? 1 - tail : tail
}

/** The p-quantile of Student's t with `df` degrees of freedom (0 < p < 1). */
export const tQuantile = (p: number, df: number): number => {
  if (p === 0.5) return 0
  if (p < 0.5) return -tQuantile(1 - p, df)
  let lo = 0
  let hi = 1
  while (tCdf(hi, df) < p) hi *= 2
  for (let i = 0; i < 200 && hi - lo > 1e-12 * Math.max(1, hi); i++) {
    const mid = (lo + hi) / 2
    if (tCdf(mid, df) < p) lo = mid
    else hi = mid
  }
  return (lo + hi) / 2
}

/** The two-sided 95 % critical value of Student's t. */
export const t95 = (df: number): number => tQuantile(1 - (1 - CONFIDENCE) / 2, df)

// ---------------------------------------------------------------------------------------------
// Samples

export interface Summary {
  readonly n: number
  readonly median: number
  readonly min: number
  readonly max: number
  readonly mean: number
  /** Sample standard deviation; null with one value. */
  readonly sd: number | null
  /** sd ÷ mean; null with one value or a zero mean. */
  readonly cv: number | null
  /** The 95 % confidence interval of the mean (Student's t, n − 1 df); null with one value. */
  readonly ci95: readonly [number, number] | null
}

export const describe = (xs: ReadonlyArray<number>): Summary => {
  const n = xs.length
  const m = mean(xs)
  const sd = stdev(xs)
  const half = sd === null ? null : (t95(n - 1) * sd) / Math.sqrt(n)
  return {
    n,
    median: median(xs),
    min: Math.min(...xs),
    max: Math.max(...xs),
    mean: m,
    sd,
    cv: sd === null || m === 0 ? null : sd / Math.abs(m),
    ci95: half === null ? null : [m - half, m + half]
  }
}

/** The part of a summary the tests below need. */
export type Moments = Pick<Summary, "n" | "mean" | "sd">

const varOfMean = (s: Moments) => (s.sd ?? 0) ** 2 / s.n

/** Welch–Satterthwaite degrees of freedom of Σ v_i, each v_i an estimated variance with df_i. */
const satterthwaite = (parts: ReadonlyArray<{ readonly v: number; readonly df: number }>): number => {
  const num = parts.reduce((a, p) => a + p.v, 0) ** 2
  const den = parts.reduce((a, p) => a + (p.df > 0 ? p.v ** 2 / p.df : 0), 0)
  return den === 0 ? Number.POSITIVE_INFINITY : num / den
}

const critical = (df: number) => (Number.isFinite(df) ? t95(df) : 1.959963984540054)

export interface Welch {
  /** mean(b) − mean(a). */
  readonly diff: number
  readonly se: number
  readonly df: number
  /** The 95 % interval of the difference. */
  readonly ci95: readonly [number, number]
  /** The interval excludes 0: the means differ beyond the noise at 95 %. */
  readonly significant: boolean
}

/**
 * Welch's t-test of b against a; null when either side has fewer than two values (no noise
 * estimate). Two samples without any spread differ significantly exactly when their means differ.
 */
export const welch = (a: Moments, b: Moments): Welch | null => {
  if (a.n < 2 || b.n < 2 || a.sd === null || b.sd === null) return null
  const va = varOfMean(a)
  const vb = varOfMean(b)
  const diff = b.mean - a.mean
  const se = Math.sqrt(va + vb)
  const df = satterthwaite([
    { v: va, df: a.n - 1 },
    { v: vb, df: b.n - 1 }
  ])
  const half = se === 0 ? 0 : critical(df) * se
  const ci95 = [diff - half, diff + half] as const
  return { diff, se, df, ci95, significant: se === 0 ? diff !== 0 : ci95[0] > 0 || ci95[1] < 0 }
}

export interface Change {
  /** mean(b) ÷ mean(a) − 1. */
  readonly change: number
  /** Its 95 % interval; null when either side has one value (no confidence can be claimed). */
  readonly ci95: readonly [number, number] | null
}

/** The change is beyond the noise: its interval excludes 0 (never without an interval). */
export const significantChange = (c: Change): boolean => c.ci95 !== null && (c.ci95[0] > 0 || c.ci95[1] < 0)

/**
 * The relative change of b against a with its 95 % interval: Fieller's interval of the ratio of
 * the means under Welch's test, the set of ratios ρ that |B − ρA| ÷ √(Var B + ρ² Var A) (the
 * means' variances, Welch–Satterthwaite df of B − A) does not reject. At ρ = 1 that statistic is
 * Welch's t itself, so the interval excludes a change of 0 exactly when Welch's test finds the
 * means differ: the verdict here and the sweep's best-or-tie (Sweep/Best.ts) are one test. The
 * roots of (A² − t² Var A) ρ² − 2AB ρ + (B² − t² Var B) = 0. When A's own mean lies within its
 * noise of 0 (A² ≤ t² Var A) the set is unbounded; then the first-order (delta method) interval
 * is given, which is the same test to first order.
 */
export const ratioChange = (a: Moments, b: Moments): Change => {
  const ratio = b.mean / a.mean
  if (a.n < 2 || b.n < 2 || a.sd === null || b.sd === null) return { change: ratio - 1, ci95: null }
  const va = varOfMean(a)
  const vb = varOfMean(b)
  const df = satterthwaite([
    { v: va, df: a.n - 1 },
    { v: vb, df: b.n - 1 }
  ])
  const t = critical(df)
  const qa = a.mean ** 2 - t ** 2 * va
  if (qa > 0) {
    const root = t * Math.sqrt(Math.max(0, va * b.mean ** 2 + vb * a.mean ** 2 - t ** 2 * va * vb))
    const ab = a.mean * b.mean
    // A < 0 (a mean below zero) flips the order of the roots
    const [lo, hi] = [(ab - root) / qa, (ab + root) / qa].sort((x, y) => x - y) as [number, number]
    return { change: ratio - 1, ci95: [lo - 1, hi - 1] }
  }
  // Var(B/A) ≈ Var(B)/A² + B²·Var(A)/A⁴ (means of the repeats).
  const se = Math.sqrt(vb / a.mean ** 2 + (b.mean ** 2 * va) / a.mean ** 4)
  const half = se === 0 ? 0 : t * se
  return { change: ratio - 1, ci95: [ratio - 1 - half, ratio - 1 + half] }
}

/**
 * The geometric mean of the points' ratios B ÷ A, as a change, with its 95 % interval: the mean
 * of ln(B/A) over the k points, Var(ln B/A) ≈ Var(B)/B² + Var(A)/A² per point, divided by k².
 * The interval is null when any side of any point has one value.
 */
export const geometricMeanChange = (
  pairs: ReadonlyArray<{ readonly a: Moments; readonly b: Moments }>
): Change => {
  const k = pairs.length
  // one point (two baselines): that point's change, so its overall verdict is the point's
  if (k === 1) return ratioChange(pairs[0]!.a, pairs[0]!.b)
  const logs = pairs.map((p) => Math.log(p.b.mean / p.a.mean))
  const g = Math.exp(mean(logs))
  if (pairs.some((p) => p.a.n < 2 || p.b.n < 2 || p.a.sd === null || p.b.sd === null))
    return { change: g - 1, ci95: null }
  const parts = pairs.flatMap((p) => [
    { v: varOfMean(p.a) / p.a.mean ** 2 / k ** 2, df: p.a.n - 1 },
    { v: varOfMean(p.b) / p.b.mean ** 2 / k ** 2, df: p.b.n - 1 }
  ])
  const se = Math.sqrt(parts.reduce((a, p) => a + p.v, 0))
  const half = se === 0 ? 0 : critical(satterthwaite(parts)) * se
  const l = mean(logs)
  return { change: g - 1, ci95: [Math.exp(l - half) - 1, Math.exp(l + half) - 1] }
}

/**
 * The q-th percentile (0–100) by linear interpolation between the closest ranks: numpy's default
 * `np.percentile`, the method vLLM's and AIPerf's aggregates use (docs/clients.md#percentiles).
 * NaN for no values.
 */
export const percentileLinear = (xs: ReadonlyArray<number>, q: number): number => {
  if (xs.length === 0) return Number.NaN
  const s = [...xs].sort((a, b) => a - b)
  const rank = (q / 100) * (s.length - 1)
  const lo = Math.floor(rank)
  const hi = Math.ceil(rank)
  return s[lo]! + (s[hi]! - s[lo]!) * (rank - lo)
}
