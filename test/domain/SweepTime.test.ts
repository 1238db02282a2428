import { assert, describe, it } from "@effect/vitest"
import * as fc from "effect/FastCheck"
import {
  renderTimeParts,
  renderTimeToBest,
  shownTenths,
  sweepTime,
  type TimedDoc
} from "../../src/domain/Sweep/Time.js"

const at = (s: number) => new Date(Date.UTC(2026, 0, 1) + s * 1000).toISOString()
const run = (start: number, end: number, runtime: number, between: number | null, status = "ok") => ({
  started_at: at(start),
  ended_at: at(end),
  status,
  runtime_sec: runtime,
  between_sec: between
})

/**
 * Combination 0: asked for its lease at 0 s, ready at 12 s after a 9 s launch (3 s of lease wait),
 * two runs of 10 s each with 1 s of --between, one interrupted run of 2 s, ended at 40 s.
 * Combination 1: a start that failed before ready (40 → 45 s), its retry ready at 53 s after 6 s
 * (2 s of wait), one run of 20 s finished at 75 s (the best's first measurement), ended at 76 s.
 */
const doc: TimedDoc = {
  created_at: at(0),
  updated_at: at(90),
  wall_sec: 80,
  combinations: [
    {
      index: 0,
      engine_starts: [{ started_at: at(0), ended_at: at(40), ready_sec: 9, ready_at: at(12) }],
      points: [
        { load: "1", runs: [run(13, 24, 10, 1)], interrupted_runs: [run(25, 27, 2, null, "interrupted")] },
        { load: "2", runs: [run(27, 38, 10, 1)], interrupted_runs: [] }
      ]
    },
    {
      index: 1,
      engine_starts: [
        { started_at: at(40), ended_at: at(45), ready_sec: null },
        { started_at: at(45), ended_at: at(76), ready_sec: 6, ready_at: at(53) }
      ],
      points: [{ load: "1", runs: [run(54, 75, 20, null)], interrupted_runs: [] }]
    }
  ],
  summary: { best: { combination: 1, load: "1" } }
}

describe("where a sweep's time went", () => {
  it("per combination and in total, hand-computed; the rest of the wall time is hyperloom's own", () => {
    const t = sweepTime(doc)
    assert.deepStrictEqual(t.combinations, [
      {
        index: 0,
        wall_sec: 40,
        lease_wait_sec: 3,
        engine_start_sec: 9,
        client_sec: 22,
        between_sec: 2,
        own_sec: 4
      },
      {
        index: 1,
        wall_sec: 36,
        lease_wait_sec: 2,
        engine_start_sec: 11,
        client_sec: 20,
        between_sec: 0,
        own_sec: 3
      }
    ])
    assert.deepStrictEqual(t.total, {
      wall_sec: 80,
      lease_wait_sec: 5,
      engine_start_sec: 20,
      client_sec: 42,
      between_sec: 2,
      own_sec: 11
    })
    assert.strictEqual(t.time_to_best_sec, 75)
    assert.strictEqual(t.engine_starts, 3)
    assert.strictEqual(t.client_runs, 4)
    assert.strictEqual(
      renderTimeParts(t.total),
      "wall 80.0 s: lease wait 5.0 s, engine starts 20.0 s, client runs 42.0 s, --between 2.0 s, hyperloom's own 11.0 s"
    )
  })

  it("an older document (no ready_at, between_sec, wall_sec) accounts what it can: its span as the wall", () => {
    const old: TimedDoc = {
      ...doc,
      wall_sec: undefined,
      combinations: doc.combinations.map((c) => ({
        ...c,
        engine_starts: c.engine_starts.map(({ ready_at: _r, ...s }) => s),
        points: c.points.map((p) => ({
          ...p,
          runs: p.runs.map(({ between_sec: _b, ...r }) => r),
          interrupted_runs: p.interrupted_runs.map(({ between_sec: _b, ...r }) => r)
        }))
      }))
    }
    const t = sweepTime(old)
    assert.strictEqual(t.total.wall_sec, 90)
    assert.strictEqual(t.total.lease_wait_sec, 0)
    assert.strictEqual(t.total.engine_start_sec, 20)
    assert.strictEqual(t.total.between_sec, 0)
    assert.strictEqual(t.total.own_sec, 90 - 20 - 42)
  })

  it("no best: no time to it", () => {
    assert.isNull(sweepTime({ ...doc, summary: { best: null } }).time_to_best_sec)
  })

  /**
   * Issue 33 item 6, seen on a grown sweep: one combination measured in a first `sweep run`
   * (0 → 10.3 s of its own time), then grown (`--load` 2 added) by a second one that began 89.5 s
   * later on the calendar (the user's pause) and took 10.2 s. The combination's times summed to more
   * than the total (its span ran across the pause), and the time to the best (load 2, first
   * measured in the second run) counted the pause.
   */
  const grown: TimedDoc = {
    created_at: at(0),
    updated_at: at(110),
    wall_sec: 20.5,
    invocations: [
      { started_at: at(0), wall_before_sec: 0 },
      { started_at: at(99.8), wall_before_sec: 10.3 }
    ],
    combinations: [
      {
        index: 0,
        engine_starts: [
          { started_at: at(0.1), ended_at: at(10.1), ready_sec: 1.5, ready_at: at(2.1) },
          { started_at: at(99.9), ended_at: at(109.9), ready_sec: 1.5, ready_at: at(101.9) }
        ],
        points: [
          { load: "1", runs: [run(2.2, 9.2, 7, null)], interrupted_runs: [] },
          { load: "2", runs: [run(102, 109, 7, null)], interrupted_runs: [] }
        ]
      }
    ],
    summary: { best: { combination: 0, load: "2" } }
  }

  it("a grown sweep: a combination's wall is its engine starts' own spans, never the pause between two runs", () => {
    const t = sweepTime(grown)
    assert.deepStrictEqual(t.combinations, [
      {
        index: 0,
        wall_sec: 20,
        lease_wait_sec: 1,
        engine_start_sec: 3,
        client_sec: 14,
        between_sec: 0,
        own_sec: 2
      }
    ])
    assert.deepStrictEqual(t.total, {
      wall_sec: 20.5,
      lease_wait_sec: 1,
      engine_start_sec: 3,
      client_sec: 14,
      between_sec: 0,
      own_sec: 2.5
    })
    // the best (load 2) was first measured 9.2 s into the second run: 10.3 + 9.2 on the sweep's own clock
    assert.strictEqual(t.time_to_best_sec, 19.5)
    assert.isAtMost(t.time_to_best_sec!, t.total.wall_sec)
    assert.strictEqual(
      renderTimeToBest(t),
      "the best first measured 19.5 s into the sweep (its own running time)"
    )
  })

  it("a span a killed run left open ends where that run's own time ended, not at the resume", () => {
    // the first run was killed 12 s in with its engine start open; the resume (at 300 s) closed it
    const killed: TimedDoc = {
      ...grown,
      wall_sec: 22.2,
      invocations: [
        { started_at: at(0), wall_before_sec: 0 },
        { started_at: at(299.9), wall_before_sec: 12 }
      ],
      combinations: [
        {
          index: 0,
          engine_starts: [
            { started_at: at(0.1), ended_at: at(300), ready_sec: 1.5, ready_at: at(2.1) },
            { started_at: at(300), ended_at: at(310), ready_sec: 1.5, ready_at: at(302) }
          ],
          points: [{ load: "2", runs: [run(302.1, 309.1, 7, null)], interrupted_runs: [] }]
        }
      ]
    }
    const t = sweepTime(killed)
    // 11.9 s of the first start (0.1 → 12 on its run's clock) and 10 s of the second
    assert.strictEqual(t.combinations[0]!.wall_sec, 21.9)
    assert.isAtMost(t.combinations[0]!.wall_sec, t.total.wall_sec)
    assert.strictEqual(t.time_to_best_sec, 12 + 9.2)
  })

  it("combinations at once (--parallel): the time they overlapped is said, and the total adds up", () => {
    const parallel: TimedDoc = {
      created_at: at(0),
      updated_at: at(11),
      wall_sec: 11,
      combinations: [0, 1].map((index) => ({
        index,
        engine_starts: [{ started_at: at(0.5), ended_at: at(10.5), ready_sec: 2, ready_at: at(3) }],
        points: [{ load: "1", runs: [run(3, 10, 7, null)], interrupted_runs: [] }]
      })),
      summary: { best: { combination: 1, load: "1" } }
    }
    const t = sweepTime(parallel)
    assert.deepStrictEqual(t.total, {
      wall_sec: 11,
      lease_wait_sec: 1,
      engine_start_sec: 4,
      client_sec: 14,
      between_sec: 0,
      own_sec: 2,
      at_once_sec: 10
    })
    const sumOf = (x: typeof t.total) =>
      x.lease_wait_sec + x.engine_start_sec + x.client_sec + x.between_sec + x.own_sec - (x.at_once_sec ?? 0)
    assert.strictEqual(sumOf(t.total), t.total.wall_sec)
    assert.strictEqual(
      renderTimeParts(t.total),
      "wall 11.0 s: lease wait 1.0 s, engine starts 4.0 s, client runs 14.0 s, --between 0.0 s, hyperloom's own 2.0 s, less 10.0 s of combinations run at once (--parallel)"
    )
  })

  it.prop(
    "the figures shown add up to the wall shown, whatever their digits",
    [
      fc.array(fc.integer({ min: 0, max: 500_000 }), { minLength: 4, maxLength: 4 }),
      fc.integer({ min: 0, max: 9_999 })
    ],
    ([ms, own]) => {
      const [lease, engine, client, between] = ms as [number, number, number, number]
      const wall = lease + engine + client + between + own
      const shown = shownTenths({
        wall_sec: wall / 1000,
        lease_wait_sec: lease / 1000,
        engine_start_sec: engine / 1000,
        client_sec: client / 1000,
        between_sec: between / 1000,
        own_sec: own / 1000
      })
      const tenths = (x: string) => Math.round(Number(x) * 10)
      return (
        tenths(shown.lease_wait_sec) +
          tenths(shown.engine_start_sec) +
          tenths(shown.client_sec) +
          tenths(shown.between_sec) +
          tenths(shown.own_sec) ===
        tenths(shown.wall_sec)
      )
    }
  )
})
