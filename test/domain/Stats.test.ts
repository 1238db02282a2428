import { assert, describe, it } from "@effect/vitest"
import {
  describe as describeSample,
  geometricMeanChange,
  ratioChange,
  significantChange,
  stdev,
  t95,
  tCdf,
  tQuantile,
  welch
} from "../../src/domain/Stats.js"

describe("Student's t", () => {
  it("matches the printed table's two-sided 95 % values, small df included", () => {
    // Any statistics textbook's t table, column t(0.975):
    const table: ReadonlyArray<readonly [number, number]> = [
      [1, 12.706],
      [2, 4.303],
      [3, 3.182],
      [4, 2.776],
      [5, 2.571],
      [6, 2.447],
      [9, 2.262],
      [10, 2.228],
      [20, 2.086],
      [30, 2.042],
      [100, 1.984]
    ]
    for (const [df, t] of table) assert.closeTo(t95(df), t, 0.0005, `df = ${df}`)
    // More digits where the quantile has a closed form: df = 1 (Cauchy) is tan(π (p − ½)),
    assert.closeTo(t95(1), Math.tan(0.475 * Math.PI), 1e-9)
    // df = 2 is q √2 / √(1 − q²) with q = 2p − 1
    const q = 2 * 0.975 - 1
    assert.closeTo(t95(2), (q * Math.sqrt(2)) / Math.sqrt(1 - q * q), 1e-9)
    // the normal limit
    assert.closeTo(t95(1e7), 1.959964, 1e-5)
  })

  it("takes fractional df (Welch's) and is symmetric", () => {
    // between its integer neighbours, monotone
    assert.isTrue(t95(2.5) < t95(2) && t95(2.5) > t95(3))
    assert.closeTo(t95(2.5), 3.5747, 0.0005)
    assert.closeTo(tQuantile(0.025, 7), -tQuantile(0.975, 7), 1e-12)
    assert.closeTo(tCdf(tQuantile(0.9, 3.7), 3.7), 0.9, 1e-9)
    assert.strictEqual(tQuantile(0.5, 4), 0)
  })
})

describe("a point's statistics", () => {
  it("median, min, max, mean, sd, CV and the 95 % interval of the mean, by hand", () => {
    // 10, 12, 14: mean 12; squares of deviations 4 + 0 + 4 = 8; sd = √(8 / 2) = 2; CV = 2/12;
    // half-width = t(0.975, 2) · 2 / √3 = 4.302653 · 1.154701 = 4.968275
    const s = describeSample([14, 10, 12])
    assert.strictEqual(s.n, 3)
    assert.strictEqual(s.median, 12)
    assert.strictEqual(s.min, 10)
    assert.strictEqual(s.max, 14)
    assert.strictEqual(s.mean, 12)
    assert.closeTo(s.sd!, 2, 1e-12)
    assert.closeTo(s.cv!, 1 / 6, 1e-12)
    assert.closeTo(s.ci95![0], 12 - 4.968275, 1e-6)
    assert.closeTo(s.ci95![1], 12 + 4.968275, 1e-6)
  })

  it("one value: no noise estimate", () => {
    const s = describeSample([7])
    assert.deepStrictEqual([s.sd, s.cv, s.ci95], [null, null, null])
    assert.isNull(stdev([7]))
  })
})

describe("Welch", () => {
  it("the difference, its standard error and the Welch–Satterthwaite df, by hand", () => {
    // a = 10, 12, 14 (sd 2); b = 20, 22, 24, 26 (sd √(20/3)): Var(mean a) = 4/3, Var(mean b) = 5/3,
    // se = √3; df = 3² / ((4/3)²/2 + (5/3)²/3) = 9 / 1.814815 = 4.959184
    const a = describeSample([10, 12, 14])
    const b = describeSample([20, 22, 24, 26])
    const w = welch(a, b)!
    assert.strictEqual(w.diff, 11)
    assert.closeTo(w.se, Math.sqrt(3), 1e-12)
    assert.closeTo(w.df, 4.959184, 1e-6)
    // t = 11 / √3 = 6.35 ≫ t(0.975, 4.96) = 2.577: significant
    assert.closeTo(w.ci95[0], 11 - 2.576958 * Math.sqrt(3), 1e-5)
    assert.isTrue(w.significant)
    // within the noise: not significant
    assert.isFalse(welch(describeSample([100, 104, 96]), describeSample([101, 97, 105]))!.significant)
    // one run on a side: no test
    assert.isNull(welch(describeSample([1]), b))
  })

  it("the relative change and its interval; the geometric mean over points", () => {
    const a = describeSample([100, 100, 100])
    const b = describeSample([90, 90, 90])
    const c = ratioChange(a, b)
    assert.closeTo(c.change, -0.1, 1e-12)
    assert.deepStrictEqual(c.ci95, [c.change, c.change])
    assert.isTrue(significantChange(c))
    // one run on a side: the raw change, no interval, never significant
    const raw = ratioChange(describeSample([100]), b)
    assert.isNull(raw.ci95)
    assert.isFalse(significantChange(raw))
    // geometric mean of ×0.5 and ×2 is ×1
    const g = geometricMeanChange([
      { a: describeSample([10, 10]), b: describeSample([5, 5]) },
      { a: describeSample([10, 10]), b: describeSample([20, 20]) }
    ])
    assert.closeTo(g.change, 0, 1e-12)
    // a noisy pair: the interval holds the change and is wider than zero
    const n = ratioChange(describeSample([100, 110, 90]), describeSample([95, 105, 85]))
    assert.closeTo(n.change, -0.05, 1e-12)
    assert.isTrue(n.ci95![0] < -0.05 && n.ci95![1] > -0.05)
    assert.isFalse(significantChange(n))
  })
  it("a change's verdict is Welch's test: its interval (Fieller's) excludes 0 exactly when Welch's does", () => {
    // The delta method's interval of B ÷ A scales A's variance by (B ÷ A)²: for a 10 % drop it is
    // ~5 % narrower than Welch's, so near the boundary it called "slower" what the sweep's Welch
    // test calls a tie. Fieller's interval is the set of ratios ρ that Welch's statistic
    // |B − ρA| ÷ √(Var B + ρ² Var A) does not reject: at ρ = 1 it is Welch's test itself.
    const disagree: Array<string> = []
    for (const n of [2, 3, 5])
      for (const sdA of [1, 3, 6])
        for (const sdB of [1, 3, 6])
          for (let mb = 80; mb <= 100; mb += 0.5) {
            const a = { n, mean: 100, sd: sdA }
            const b = { n, mean: mb, sd: sdB }
            if (significantChange(ratioChange(a, b)) !== welch(a, b)!.significant)
              disagree.push(`n ${n} A 100±${sdA} B ${mb}±${sdB}`)
          }
    assert.deepStrictEqual(disagree, [])
    // by hand: A 100, 102, 98 (sd 2), B 90, 91, 89 (sd 1): Var A = 4/3, Var B = 1/3 (of the means),
    // df = (5/3)² ÷ ((4/3)²/2 + (1/3)²/2) = 50/17; ρ = (A·B ± t·√(Var A·B² + Var B·A² − t²·Var A·Var B)) ÷ (A² − t²·Var A)
    const t = t95(50 / 17)
    const qa = 100 ** 2 - (t ** 2 * 4) / 3
    const root = t * Math.sqrt((4 / 3) * 90 ** 2 + (1 / 3) * 100 ** 2 - (t ** 2 * 4) / 9)
    const c = ratioChange(describeSample([100, 102, 98]), describeSample([90, 91, 89]))
    assert.closeTo(c.change, -0.1, 1e-12)
    assert.closeTo(c.ci95![0], (9000 - root) / qa - 1, 1e-12)
    assert.closeTo(c.ci95![1], (9000 + root) / qa - 1, 1e-12)
    assert.isTrue(significantChange(c))
    // the overall of one point is that point's change (two baselines match as one point)
    assert.deepStrictEqual(
      geometricMeanChange([{ a: describeSample([100, 102, 98]), b: describeSample([90, 91, 89]) }]),
      c
    )
  })
})
