/**
 * Interleaved repeats (docs/design.md#trusted-answers): a combination's load points run in rounds,
 * and a point interrupted by a dead process keeps the runs it finished (only the run in flight is
 * lost).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import { sessionLeft } from "../../src/domain/Sweep/Left.js"
import { renderPlan, sweepPlan } from "../../src/domain/Sweep/Plan.js"
import {
  type Experiment,
  nextRoundPoint,
  nextRun,
  parseSweep,
  type SweepDoc
} from "../../src/domain/Sweep.js"
import { runSweep, type SweepOptions } from "../../src/programs/Sweep.js"
import { flag, model, seqsOf, setup, sweepExperiment, sweepOptions } from "../support/sweep.js"

const DIR = "/s/rounds"

const experiment = (over: Partial<Experiment> = {}): Experiment =>
  sweepExperiment({
    params: [{ name: "seqs", values: ["4", "8"] }],
    load: { kind: "points", name: "c", values: ["4", "1", "2"] },
    slos: [],
    repeats: 3,
    ...over
  })

const options = (e: Experiment = experiment()): SweepOptions => sweepOptions(DIR, e)

const docOf = (text: string | undefined): SweepDoc => {
  const d = parseSweep(text!)
  if (d._tag !== "Right") throw new Error("unreadable sweep.json")
  return d.right
}

describe("interleaved repeats", () => {
  it.effect("the run order shows the rounds: every point once, then again", () =>
    Effect.gen(function* () {
      const order: Array<string> = []
      const report = yield* runSweep(options()).pipe(
        Effect.provide(
          setup({
            run: (s, a) => {
              order.push(`${seqsOf(s)}/${flag(a, "--max-concurrency")}`)
              return model(s, a)
            }
          })
        )
      )
      const rounds = ["1", "2", "4", "1", "2", "4", "1", "2", "4"]
      assert.deepStrictEqual(order, [...rounds.map((c) => `4/${c}`), ...rounds.map((c) => `8/${c}`)])
      const p = report.doc.combinations[0]!.points
      assert.deepStrictEqual(
        p.map((x) => [x.load, x.status, x.runs.map((r) => r.repeat).join("")]),
        [
          ["1", "ok", "123"],
          ["2", "ok", "123"],
          ["4", "ok", "123"]
        ]
      )
      // the scripted engine repeats itself exactly: no noise, an interval of zero width
      assert.deepStrictEqual(p[0]!.stats.output_throughput?.ci95, [40, 40])
      assert.strictEqual(p[0]!.noisy, false)
    })
  )

  it.effect("--search runs a point's repeats in a row: it needs the point's verdict to go on", () =>
    Effect.gen(function* () {
      const order: Array<string> = []
      yield* runSweep(
        options(
          experiment({
            params: [{ name: "seqs", values: ["2"] }],
            load: { kind: "search", name: "c", max: 4 },
            slos: [{ metric: "p99_ttft_ms", op: "<=", bound: 300 }],
            repeats: 2
          })
        )
      ).pipe(
        Effect.provide(
          setup({
            run: (s, a) => {
              order.push(String(flag(a, "--max-concurrency")))
              return model(s, a)
            }
          })
        )
      )
      assert.deepStrictEqual(order, ["1", "1", "2", "2", "4", "4", "3", "3"])
    })
  )

  it.effect(
    "SIGKILL mid-round: the point in flight keeps the runs it finished, only the run in flight runs again",
    () =>
      Effect.gen(function* () {
        const files = new Map<string, string>()
        // the second round's c=2 on seqs=4 hangs: the process "dies" there (a SIGKILL leaves
        // sweep.json as it was saved when that run began)
        let calls = 0
        const first = yield* Effect.fork(
          runSweep(options()).pipe(
            Effect.provide(
              setup(
                {
                  run: (s, a) =>
                    ++calls === 5 && seqsOf(s) === 4 && flag(a, "--max-concurrency") === 2
                      ? { hang: true }
                      : model(s, a)
                },
                files
              )
            )
          )
        )
        yield* TestClock.adjust("1 second")
        yield* Effect.yieldNow()
        const killed = files.get(`${DIR}/sweep.json`)!
        yield* Fiber.interrupt(first)
        files.set(`${DIR}/sweep.json`, killed)
        const mid = docOf(killed).combinations[0]!.points
        assert.deepStrictEqual(
          mid.map(
            (p) => `${p.load}:${p.runs.map((r) => (r.ended_at === null ? "open" : r.status)).join(",")}`
          ),
          ["1:ok,ok", "2:ok,open", "4:ok"]
        )

        const order: Array<string> = []
        const second = yield* runSweep(options()).pipe(
          Effect.provide(
            setup(
              {
                run: (s, a) => {
                  order.push(`${seqsOf(s)}/${flag(a, "--max-concurrency")}`)
                  return model(s, a)
                }
              },
              files
            )
          )
        )
        // seqs=4 owes c=2 and c=4 their 2nd runs (the round in flight), then a 3rd round of all
        assert.deepStrictEqual(order.slice(0, 5), ["4/2", "4/4", "4/1", "4/2", "4/4"])
        assert.strictEqual(order.length, 5 + 9)
        const p = second.doc.combinations[0]!.points.find((x) => x.load === "2")!
        assert.deepStrictEqual(
          p.runs.map((r) => [r.repeat, r.status]),
          [
            [1, "ok"],
            [2, "ok"],
            [3, "ok"]
          ]
        )
        assert.deepStrictEqual(
          p.interrupted_runs.map((r) => [r.repeat, r.status]),
          [[2, "interrupted"]]
        )
        assert.strictEqual(second.doc.status, "done")
      })
  )

  it.effect(
    "a larger --repeats on a finished session runs only the new runs, in rounds; stats over all runs; a smaller one keeps what is there",
    () =>
      Effect.gen(function* () {
        const files = new Map<string, string>()
        // each point's k-th run measures 40, 42, 38 tok/s (c=4 on seqs=8 fails its SLO throughout)
        const seen = new Map<string, number>()
        const order: Array<string> = []
        const script = {
          run: (s: string, a: ReadonlyArray<string>) => {
            const key = `${seqsOf(s)}/${flag(a, "--max-concurrency")}`
            const k = (seen.get(key) ?? 0) + 1
            seen.set(key, k)
            order.push(key)
            const c = flag(a, "--max-concurrency")
            return {
              metrics: {
                output_throughput: [40, 42, 38][k - 1]!,
                p99_ttft_ms: seqsOf(s) === 8 && c === 4 ? 900 : 100,
                p99_tpot_ms: 20,
                completed: 10
              }
            }
          }
        }
        const e = (repeats: number) =>
          experiment({ repeats, slos: [{ metric: "p99_ttft_ms", op: "<=", bound: 300 }] })
        const go = (repeats: number) =>
          runSweep(options(e(repeats))).pipe(Effect.provide(setup(script, files)))
        const first = yield* go(1)
        assert.strictEqual(first.clientRuns, 6)
        const before = first.doc.combinations.map((c) => c.points.map((p) => p.runs[0]))
        assert.include(first.doc.summary.statement ?? "", "one run per point: no noise estimate")
        order.length = 0
        // --dry-run on the session: what the grown command would still run there
        assert.deepStrictEqual(sessionLeft(first.doc, e(3), "grid", 3), {
          _tag: "left",
          engine_starts: 2,
          runs: 12,
          upper_bound: false,
          kept_repeats: undefined
        })
        const plan = renderPlan(
          sweepPlan(
            e(3),
            "grid",
            { start_sec: 60, run_sec: 30, source: "options" },
            sessionLeft(first.doc, e(3), "grid", 3)
          )
        )
        assert.include(
          plan,
          "this session: 2 engine start(s) and 12 client run(s) left (everything measured is kept)"
        )
        assert.include(plan, "estimate: 8.0 min = 2 × 60 s per engine start + 12 × 30 s per client run")
        const refused = sessionLeft(
          first.doc,
          { ...e(3), server: "engine2 --max-num-seqs {seqs}" },
          "grid",
          3
        )
        assert.deepStrictEqual(refused._tag === "refused" ? refused.differences.map((d) => d.field) : [], [
          "--server"
        ])

        const grown = yield* go(3)
        // two new runs per point, one engine start per combination, in rounds; nothing measured twice
        assert.strictEqual(grown.engineStarts, 2)
        assert.strictEqual(grown.clientRuns, 12)
        const rounds = ["1", "2", "4", "1", "2", "4"]
        assert.deepStrictEqual(order, [...rounds.map((c) => `4/${c}`), ...rounds.map((c) => `8/${c}`)])
        assert.strictEqual(grown.doc.experiment.repeats, 3)
        assert.strictEqual(grown.doc.status, "done")
        assert.deepStrictEqual(
          grown.doc.combinations.map((c) => c.points.map((p) => p.runs[0])),
          before
        )
        assert.deepStrictEqual(
          grown.doc.combinations.map((c) =>
            c.points.map((p) => `${p.load}:${p.status}:${p.runs.map((r) => r.repeat).join("")}`)
          ),
          [
            ["1:ok:123", "2:ok:123", "4:ok:123"],
            ["1:ok:123", "2:ok:123", "4:slo_failed:123"]
          ]
        )
        // recomputed over 40, 42, 38: mean 40, sd 2, CV 5 %, t(0.975, 2) = 4.303 → 40 ± 4.969
        const st = grown.doc.combinations[0]!.points[0]!.stats.output_throughput!
        assert.deepStrictEqual([st.n, st.median, st.min, st.max, st.mean, st.sd], [3, 40, 38, 42, 40, 2])
        assert.closeTo(st.cv!, 0.05, 1e-12)
        assert.closeTo(st.ci95![0], 40 - (4.302653 * 2) / Math.sqrt(3), 1e-4)
        assert.closeTo(st.ci95![1], 40 + (4.302653 * 2) / Math.sqrt(3), 1e-4)
        // every point is now measured three times: the verdict is a test, not "one run per point"
        assert.notInclude(grown.doc.summary.statement ?? "", "no noise estimate")
        assert.strictEqual(grown.doc.summary.verdict, "tie")

        // a smaller --repeats keeps what is there: nothing runs, nothing is dropped
        order.length = 0
        const fewer = yield* go(2)
        assert.strictEqual(fewer.clientRuns, 0)
        assert.strictEqual(fewer.engineStarts, 0)
        assert.strictEqual(fewer.doc.experiment.repeats, 3)
        assert.deepStrictEqual(fewer.doc.combinations, grown.doc.combinations)
        assert.deepStrictEqual(sessionLeft(fewer.doc, e(2), "grid", 3), {
          _tag: "left",
          engine_starts: 0,
          runs: 0,
          upper_bound: false,
          kept_repeats: 3
        })
        // anything else changed with it is still refused, naming that
        const other = yield* Effect.flip(
          runSweep(options({ ...e(4), server: "engine2 --max-num-seqs {seqs}" })).pipe(
            Effect.provide(setup(script, files))
          )
        )
        assert.include(other.message, "--server")
        assert.notInclude(other.message, "--repeats")
      })
  )

  it.effect(
    "a larger --repeats on a --search session repeats the points it judged, then the search goes on",
    () =>
      Effect.gen(function* () {
        const files = new Map<string, string>()
        const order: Array<string> = []
        const e = (repeats: number) =>
          experiment({
            params: [{ name: "seqs", values: ["2"] }],
            load: { kind: "search", name: "c", max: 4 },
            slos: [{ metric: "p99_ttft_ms", op: "<=", bound: 300 }],
            repeats
          })
        const script = {
          run: (s: string, a: ReadonlyArray<string>) => {
            order.push(String(flag(a, "--max-concurrency")))
            return model(s, a)
          }
        }
        const first = yield* runSweep(options(e(1))).pipe(Effect.provide(setup(script, files)))
        const judged = first.doc.combinations[0]!.points.map((p) => `${p.load}:${p.status}`)
        order.length = 0
        const grown = yield* runSweep(options(e(2))).pipe(Effect.provide(setup(script, files)))
        // one more run of each point the search judged, in the order it judged them; no new point
        assert.deepStrictEqual(
          order,
          first.doc.combinations[0]!.points.map((p) => p.load)
        )
        assert.deepStrictEqual(
          grown.doc.combinations[0]!.points.map((p) => `${p.load}:${p.status}`),
          judged
        )
        assert.isTrue(grown.doc.combinations[0]!.points.every((p) => p.runs.length === 2))
        assert.strictEqual(grown.doc.status, "done")
      })
  )

  it.live(
    "issue 33 item 6: a sweep grown after a pause accounts its time on its own clock: every figure adds up, the combinations within the total, the best within it",
    () =>
      Effect.gen(function* () {
        const files = new Map<string, string>()
        const e = (values: ReadonlyArray<string>) =>
          experiment({ repeats: 1, load: { kind: "points", name: "c", values } })
        // each run a few real milliseconds; the larger load is the better: the grown point becomes the best
        const script = {
          startFor: 0.02,
          run: (s: string, a: ReadonlyArray<string>) => ({ ...model(s, a), runFor: 0.01 })
        }
        const go = (values: ReadonlyArray<string>) =>
          runSweep(options(e(values))).pipe(Effect.provide(setup(script, files)))
        yield* go(["1", "2"])
        // the user's pause between the two runs
        yield* Effect.sleep("600 millis")
        const grown = yield* go(["1", "2", "4"])
        const doc = grown.doc
        assert.strictEqual(doc.summary.best?.load, "4")
        assert.lengthOf(doc.invocations ?? [], 2)
        const t = doc.summary.time!
        const sum = (x: typeof t.total) =>
          x.lease_wait_sec +
          x.engine_start_sec +
          x.client_sec +
          x.between_sec +
          x.own_sec -
          (x.at_once_sec ?? 0)
        for (const c of [t.total, ...t.combinations])
          assert.closeTo(sum(c), c.wall_sec, 1e-9, JSON.stringify(c))
        assert.isAtMost(
          t.combinations.reduce((n, c) => n + c.wall_sec, 0),
          t.total.wall_sec,
          JSON.stringify(t)
        )
        assert.isAtMost(t.time_to_best_sec!, t.total.wall_sec, JSON.stringify(t))
        // the pause is nowhere in it
        assert.isBelow(t.total.wall_sec, 0.6)
      })
  )

  it("nextRun: the next repeat, the retry a failed run is owed, none once R runs measured", () => {
    const run = (repeat: number, t: number, status: "ok" | "failed") =>
      ({
        repeat,
        try: t,
        status,
        ended_at: "x"
      }) as unknown as SweepDoc["combinations"][number]["points"][number]["runs"][number]
    const point = (runs: ReadonlyArray<ReturnType<typeof run>>) =>
      ({
        load: "1",
        status: "pending",
        runs
      }) as unknown as SweepDoc["combinations"][number]["points"][number]
    assert.deepStrictEqual(nextRun(point([]), 2), { repeat: 1, try: 1 })
    assert.deepStrictEqual(nextRun(point([run(1, 1, "ok")]), 2), { repeat: 2, try: 1 })
    assert.deepStrictEqual(nextRun(point([run(1, 1, "ok"), run(2, 1, "failed")]), 2), { repeat: 2, try: 2 })
    assert.isNull(nextRun(point([run(1, 1, "ok"), run(2, 1, "failed"), run(2, 2, "ok")]), 2))
    const pts = [point([run(1, 1, "ok")]), point([]), point([])].map((p, i) => ({ ...p, load: String(i) }))
    assert.strictEqual(nextRoundPoint(pts, () => false)?.load, "1")
    assert.strictEqual(nextRoundPoint(pts, (p) => p.load !== "0")?.load, "0")
    assert.isUndefined(nextRoundPoint(pts, () => true))
  })
})
