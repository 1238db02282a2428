import { assert, describe, it } from "@effect/vitest"
import { renderTimeParts, sweepTime, type TimedDoc } from "../../src/domain/Sweep/Time.js"

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
})
