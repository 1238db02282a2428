import { assert, describe, it } from "@effect/vitest"
import { Either, FastCheck as fc } from "effect"
import {
  addPoint,
  ascendingLoads,
  beatsClearly,
  beginEngine,
  beginRun,
  checkPlaceholders,
  chooseBest,
  combinations,
  type Experiment,
  evaluationBound,
  experimentDiff,
  finishPoint,
  finishRun,
  inFlight,
  initialSweep,
  median,
  nextSearchStep,
  parseSearch,
  parseSlo,
  parseSweep,
  parseValues,
  placeholdersIn,
  recoverInterrupted,
  renderSummaryCsv,
  renderSweep,
  type SweepDoc,
  shellLine,
  statsOf,
  substitute,
  withSummary
} from "../../src/domain/Sweep.js"

const NOW = "2026-01-01T00:00:00.000Z"
/** `${HYPERLOOM_BASE_URL}`: a reference the runner expands, not a JavaScript template. */
const BASE_URL_REF = "$" + "{HYPERLOOM_BASE_URL}"
const PORT_REF = "$" + "{HYPERLOOM_PORT}"

const experiment = (over: Partial<Experiment> = {}): Experiment => ({
  server: "engine --max-num-seqs {seqs} --port $HYPERLOOM_PORT",
  client: ["client", "--max-concurrency", "{c}", "--base-url", BASE_URL_REF],
  params: [{ name: "seqs", values: ["4", "8"] }],
  load: { kind: "points", name: "c", values: ["8", "2", "inf", "4"] },
  slos: [{ metric: "p99_ttft_ms", op: "<=", bound: 500 }],
  repeats: 1,
  gpus: 0,
  nodes: 1,
  ...over
})

describe("grid and placeholders", () => {
  it("parses --param and --load values as written", () => {
    assert.deepStrictEqual(parseValues("--param", "max-num-seqs=8, 16,32"), {
      ok: true,
      value: { name: "max-num-seqs", values: ["8", "16", "32"] }
    })
    assert.isFalse(parseValues("--param", "x=").ok)
    assert.isFalse(parseValues("--param", "=1,2").ok)
    assert.isFalse(parseValues("--param", "x=1,1").ok)
    assert.isFalse(parseValues("--param", "x y=1").ok)
  })

  it("parses --search NAME[:MAX]", () => {
    assert.deepStrictEqual(parseSearch("c"), { ok: true, value: { name: "c", max: 1024 } })
    assert.deepStrictEqual(parseSearch("c:64"), { ok: true, value: { name: "c", max: 64 } })
    assert.isFalse(parseSearch("c:0").ok)
    assert.isFalse(parseSearch("c:1.5").ok)
    assert.isFalse(parseSearch("c:2:3").ok)
  })

  it("orders loads ascending with inf last", () => {
    assert.deepStrictEqual(ascendingLoads(["8", "inf", "2", "0.5", "16"]), ["0.5", "2", "8", "16", "inf"])
  })

  it("finds placeholders, never a $-reference nor JSON", () => {
    assert.deepStrictEqual(placeholdersIn(`a {x} ${PORT_REF} {y} {x} {"k": 1}`), ["x", "y"])
    assert.strictEqual(substitute(`--n {x} {z} ${PORT_REF}`, { x: "4" }), `--n 4 {z} ${PORT_REF}`)
  })

  it("refuses a placeholder without a value, a param used nowhere, a load missing from the client", () => {
    const e = experiment()
    assert.deepStrictEqual(checkPlaceholders(e), [])
    const errs = checkPlaceholders({
      ...e,
      server: "engine {seqs} {typo}",
      params: [...e.params, { name: "unused", values: ["1"] }],
      client: ["client", "{other}"]
    })
    assert.isTrue(errs.some((x) => x.includes("{typo}")))
    assert.isTrue(errs.some((x) => x.includes("--param unused appears nowhere")))
    assert.isTrue(errs.some((x) => x.includes("{other}")))
    assert.isTrue(errs.some((x) => x.includes("the load c is missing from the client")))
    assert.isTrue(
      checkPlaceholders({ ...e, server: "engine {seqs} {c}" }).some((x) => x.includes("client only"))
    )
  })

  it.prop(
    "the grid is the Cartesian product: size, distinctness, every value",
    [
      fc.array(fc.uniqueArray(fc.stringMatching(/^[a-z0-9]{1,3}$/), { minLength: 1, maxLength: 4 }), {
        minLength: 0,
        maxLength: 4
      })
    ],
    ([valueLists]) => {
      const params = valueLists.map((values, i) => ({ name: `p${i}`, values }))
      const grid = combinations(params)
      assert.strictEqual(
        grid.length,
        valueLists.reduce((n, v) => n * v.length, 1)
      )
      assert.strictEqual(new Set(grid.map((c) => JSON.stringify(c))).size, grid.length)
      for (const p of params) for (const v of p.values) assert.isTrue(grid.some((c) => c[p.name] === v))
      // the first param varies slowest
      if (params.length > 0) assert.strictEqual(grid[0]![params[0]!.name], params[0]!.values[0])
    }
  )

  it("prints argv as a line a shell runs as the same argv, $HYPERLOOM_* left live", () => {
    assert.strictEqual(
      shellLine([
        "vllm",
        "bench",
        "serve",
        "--port",
        "$HYPERLOOM_PORT",
        "--x",
        "a b",
        "it's",
        `${BASE_URL_REF}/v1`
      ]),
      `vllm bench serve --port "$HYPERLOOM_PORT" --x 'a b' 'it'"'"'s' "\${HYPERLOOM_BASE_URL}/v1"`
    )
  })
})

describe("SLOs", () => {
  it("parses METRIC<=X / >=X on known metrics only", () => {
    assert.deepStrictEqual(parseSlo("p99_ttft_ms<=500"), {
      ok: true,
      slo: { metric: "p99_ttft_ms", op: "<=", bound: 500 }
    })
    assert.isTrue(parseSlo(" output_throughput >= 10.5 ").ok)
    assert.isFalse(parseSlo("p99_ttft<=500").ok)
    assert.isFalse(parseSlo("p99_ttft_ms<500").ok)
    assert.isFalse(parseSlo("p99_ttft_ms<=abc").ok)
  })

  it("the bound is a decimal number as every other number option's (issue 27 item 8)", () => {
    for (const bound of ["0x10", "0b11", "0o7", "1e3", "+5", "-5", "Infinity", "5."]) {
      const r = parseSlo(`p99_ttft_ms<=${bound}`)
      assert.isFalse(r.ok, bound)
      if (!r.ok) assert.include(r.error, "decimal", bound)
    }
    assert.deepStrictEqual(parseSlo("p99_ttft_ms<=0.5"), {
      ok: true,
      slo: { metric: "p99_ttft_ms", op: "<=", bound: 0.5 }
    })
  })
})

describe("search", () => {
  /** Runs the search against a monotone pass rule: a load passes when <= limit. */
  const search = (max: number, limit: number) => {
    const evaluated: Array<{ load: number; pass: boolean }> = []
    for (;;) {
      const step = nextSearchStep(max, evaluated)
      if (step._tag === "done") return { largest: step.largest, evaluated }
      assert.isFalse(
        evaluated.some((e) => e.load === step.load),
        `load ${step.load} evaluated twice`
      )
      evaluated.push({ load: step.load, pass: step.load <= limit })
    }
  }

  it("doubles, then bisects", () => {
    const r = search(1024, 11)
    assert.strictEqual(r.largest, 11)
    assert.deepStrictEqual(
      r.evaluated.map((e) => e.load),
      [1, 2, 4, 8, 16, 12, 10, 11]
    )
  })

  it("stops at MAX, and at 1 when nothing passes", () => {
    assert.deepStrictEqual(
      search(20, 1000).evaluated.map((e) => e.load),
      [1, 2, 4, 8, 16, 20]
    )
    assert.strictEqual(search(20, 1000).largest, 20)
    assert.deepStrictEqual(search(20, 0), { largest: null, evaluated: [{ load: 1, pass: false }] })
  })

  it.prop(
    "finds the largest passing load within the evaluation bound",
    [fc.integer({ min: 1, max: 5000 }), fc.integer({ min: 0, max: 6000 })],
    ([max, limit]) => {
      const r = search(max, limit)
      assert.strictEqual(r.largest, limit === 0 ? null : Math.min(limit, max))
      // the gap the bisection starts from: doubling's first fail minus the pass evaluated before it
      const firstFail = r.evaluated.findIndex((e) => !e.pass)
      const before = r.evaluated.slice(0, firstFail === -1 ? r.evaluated.length : firstFail)
      const lastPass = Math.max(0, ...before.filter((e) => e.pass).map((e) => e.load))
      const gap = firstFail === -1 ? 0 : r.evaluated[firstFail]!.load - lastPass
      assert.isAtMost(r.evaluated.length, evaluationBound(max, gap))
    },
    { fastCheck: { numRuns: 500 } }
  )
})

describe("best and ties", () => {
  const c = (combination: number, samples: ReadonlyArray<number>, point = 0) => ({
    combination,
    point,
    throughput: median(samples),
    spread: Math.max(...samples) - Math.min(...samples),
    samples
  })

  it("one run per point: the highest is the best, and it claims no significance", () => {
    assert.deepStrictEqual(chooseBest([]), { _tag: "none" })
    assert.deepStrictEqual(chooseBest([c(0, [100]), c(1, [100.5])]), {
      _tag: "best",
      best: c(1, [100.5]),
      significant: false,
      rivals: 1
    })
  })

  it("with repeats, Welch's t-test at 95 % decides: beyond the noise a best, within it a tie", () => {
    // 110 ± 1 against 100 ± 1 (n = 3 each): t ≈ 12, far beyond t(0.975, 4) = 2.78
    assert.deepStrictEqual(chooseBest([c(0, [99, 100, 101]), c(1, [109, 110, 111])]), {
      _tag: "best",
      best: c(1, [109, 110, 111]),
      significant: true,
      rivals: 1
    })
    // 104 vs 100 with ±5 noise: the larger median does not win
    const tie = chooseBest([c(0, [95, 100, 105]), c(1, [99, 104, 109])])
    assert.strictEqual(tie._tag, "tie")
    assert.deepStrictEqual(tie._tag === "tie" && tie.tiedWith.map((t) => t.combination), [0])
    // 12 apart with a max − min spread of 20 each (one outlier per side): the spread rule called
    // this a tie; Welch (se 2.67, t 4.5 on 14 df) sees a clear win
    const spreadRule = chooseBest([
      c(0, [90, 100, 100, 100, 100, 100, 100, 110]),
      c(1, [102, 112, 112, 112, 112, 112, 112, 122])
    ])
    assert.strictEqual(spreadRule._tag, "best")
    // the same combination's other points never tie with it
    assert.strictEqual(chooseBest([c(0, [100, 100.2], 0), c(0, [99.9, 100], 1)])._tag, "best")
    assert.isTrue(beatsClearly(c(1, [110, 111]), c(0, [100, 101])))
    assert.isUndefined(beatsClearly(c(1, [110]), c(0, [100, 101])))
  })

  it("median and stats, with the noise of docs/design.md#trusted-answers", () => {
    assert.strictEqual(median([3, 1, 2]), 2)
    assert.strictEqual(median([4, 1, 2, 3]), 2.5)
    const s = statsOf([{ output_throughput: 10 }, { output_throughput: 30 }, {}])
    assert.deepStrictEqual(Object.keys(s), ["output_throughput"])
    const t = s.output_throughput!
    assert.deepStrictEqual([t.median, t.min, t.max, t.n, t.mean], [20, 10, 30, 2, 20])
    // sd = √((100 + 100) / 1) = 14.142; CV = 0.7071; half-width = 12.706 · 14.142 / √2 = 127.06
    assert.closeTo(t.sd!, Math.SQRT2 * 10, 1e-9)
    assert.closeTo(t.cv!, Math.SQRT1_2, 1e-9)
    assert.closeTo(t.ci95![1] - 20, 127.062, 1e-3)
  })
})

describe("experiment identity", () => {
  it("names every difference", () => {
    const a = experiment()
    assert.deepStrictEqual(experimentDiff(a, experiment()), [])
    const d = experimentDiff(a, {
      ...a,
      params: [{ name: "seqs", values: ["4", "16"] }],
      slos: [{ metric: "p99_ttft_ms", op: "<=", bound: 400 }]
    })
    assert.deepStrictEqual(
      d.map((x) => x.field),
      ["--param", "--slo"]
    )
    assert.include(d[0]!.was, "seqs=4,8")
    assert.include(d[0]!.now, "seqs=4,16")
    assert.deepStrictEqual(
      experimentDiff(a, { ...a, load: { kind: "search", name: "c", max: 64 } }).map((x) => x.field),
      ["--load/--search"]
    )
  })
})

describe("the sweep document", () => {
  const run = (doc: SweepDoc, index: number, load: string, metrics: Record<string, number>) => {
    let d = beginRun(doc, index, load, {
      repeat: 1,
      try: 1,
      dir: `/s/c${index}/${load}`,
      client_argv: ["client"],
      started_at: NOW
    })
    d = finishRun(d, index, load, {
      ended_at: NOW,
      status: "ok",
      class: null,
      error: null,
      exit_code: 0,
      runtime_sec: 1,
      throughput: metrics.output_throughput ?? null,
      metrics,
      engine_died: false
    })
    return finishPoint(d, index, load)
  }

  it("lays out combinations and ascending points, fills placeholders", () => {
    const doc = initialSweep(experiment(), NOW)
    assert.strictEqual(doc.combinations.length, 2)
    assert.strictEqual(doc.combinations[1]!.server_cmd, "engine --max-num-seqs 8 --port $HYPERLOOM_PORT")
    assert.deepStrictEqual(
      doc.combinations[0]!.points.map((p) => p.load),
      ["2", "4", "8", "inf"]
    )
    assert.deepStrictEqual(doc.combinations[0]!.points[0]!.client_argv, [
      "client",
      "--max-concurrency",
      "2",
      "--base-url",
      BASE_URL_REF
    ])
    assert.strictEqual(doc.summary.verdict, "none")
  })

  it("round-trips through its file, refuses a corrupt or newer one", () => {
    let doc = initialSweep(experiment(), NOW)
    doc = run(doc, 0, "2", { output_throughput: 50, p99_ttft_ms: 100, completed: 10 })
    const back = parseSweep(renderSweep(doc))
    assert.isTrue(Either.isRight(back))
    assert.deepStrictEqual(Either.getOrThrow(back), doc)
    assert.deepStrictEqual(
      Either.getLeft(parseSweep("{")).pipe((o) => o._tag === "Some" && o.value.kind),
      "corrupt"
    )
    const future = renderSweep(doc).replace('"schema_version": 1', '"schema_version": 2')
    assert.deepStrictEqual(
      Either.getLeft(parseSweep(future)).pipe((o) => o._tag === "Some" && o.value),
      {
        kind: "future",
        version: 2
      }
    )
  })

  it("judges SLOs on medians and picks the best with its runnable command lines", () => {
    let doc = initialSweep(experiment(), NOW)
    doc = run(doc, 0, "2", { output_throughput: 50, p99_ttft_ms: 100 })
    doc = run(doc, 0, "4", { output_throughput: 90, p99_ttft_ms: 600 })
    doc = withSummary(run(doc, 1, "2", { output_throughput: 70, p99_ttft_ms: 200 }))
    const c0 = doc.combinations[0]!
    assert.deepStrictEqual(
      c0.points.map((p) => p.status),
      ["ok", "slo_failed", "pending", "pending"]
    )
    assert.strictEqual(doc.summary.verdict, "best")
    assert.strictEqual(doc.summary.best?.combination, 1)
    assert.strictEqual(doc.summary.best?.server_cmd, "engine --max-num-seqs 8 --port $HYPERLOOM_PORT")
    assert.strictEqual(
      doc.summary.best?.client_cmd,
      `client --max-concurrency 2 --base-url "${BASE_URL_REF}"`
    )
    assert.deepStrictEqual(doc.summary.combinations[0], {
      index: 0,
      label: "seqs=4",
      status: "pending",
      largest_passing_load: "2",
      peak_output_throughput: 90,
      points: 4
    })
    const csv = renderSummaryCsv(doc).split("\n")
    assert.isTrue(csv[0]!.startsWith("combination,seqs,c,status,class,runs_ok,request_throughput_median"))
    assert.strictEqual(csv.length, 2 + 8)
  })

  it("resume: a run in flight is marked interrupted and its point is run again; finished points stay", () => {
    let doc = initialSweep(experiment(), NOW)
    doc = run(doc, 0, "2", { output_throughput: 50, p99_ttft_ms: 100 })
    doc = beginEngine(doc, 0, "/s/c0/engine-1", NOW)
    doc = beginRun(doc, 0, "4", { repeat: 1, try: 1, dir: "/s/x", client_argv: [], started_at: NOW })
    assert.strictEqual(inFlight(doc), 2)
    const r = recoverInterrupted(doc, NOW)
    assert.strictEqual(inFlight(r), 0)
    const c0 = r.combinations[0]!
    assert.strictEqual(c0.status, "pending")
    assert.strictEqual(c0.engine_starts[0]!.outcome, "interrupted")
    assert.strictEqual(c0.points[0]!.status, "ok")
    assert.strictEqual(c0.points[1]!.status, "pending")
    assert.deepStrictEqual(c0.points[1]!.runs, [])
    assert.strictEqual(c0.points[1]!.interrupted_runs[0]!.status, "interrupted")
  })

  it("search points are appended once", () => {
    let doc = initialSweep(experiment({ load: { kind: "search", name: "c", max: 16 } }), NOW)
    assert.strictEqual(doc.combinations[0]!.points.length, 0)
    doc = addPoint(addPoint(doc, 0, "1"), 0, "1")
    assert.strictEqual(doc.combinations[0]!.points.length, 1)
  })
})
