/**
 * The user's recent sweeps file (`sweeps.jsonl` beside the host queue's history): appended under
 * the history's mutex, trimmed to the last SWEEPS_KEEP, corrupt lines skipped, a missing file none.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as nodePath from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { SweepRecord } from "../../src/domain/Sweep/HostEstimate.js"
import { appendSweep, readSweeps, SWEEPS_KEEP } from "../../src/services/HostQueue/Sweeps.js"
import { makeFileQueue, placeIn } from "../../src/services/HostQueue.js"

const rec = (i: number): SweepRecord => ({
  endedAt: 1_000 + i,
  session: `/s/${i}`,
  startSec: 60 + i,
  runSec: i % 2 === 0 ? 30 : null,
  engineStarts: 2,
  clientRuns: i % 2 === 0 ? 6 : 0,
  engine: { program: "vllm", model: i % 3 === 0 ? null : `m${i}` }
})

const tmp = () => fs.mkdtempSync(nodePath.join(os.tmpdir(), "hyperloom-sweeps-"))

describe("sweeps.jsonl", () => {
  it("a missing file is no history; corrupt or partial lines are skipped, never an error", () => {
    const dir = tmp()
    try {
      const file = nodePath.join(dir, "sweeps.jsonl")
      assert.deepStrictEqual(readSweeps(file), [])
      fs.writeFileSync(
        file,
        [
          "not json",
          JSON.stringify({
            ended_at: 5,
            session: "/s/a",
            start_sec: 60,
            run_sec: 30,
            engine_starts: 1,
            client_runs: 2
          }),
          JSON.stringify({
            ended_at: 6,
            session: "/s/b",
            start_sec: "60",
            run_sec: 30,
            engine_starts: 1,
            client_runs: 2
          }),
          JSON.stringify({
            ended_at: 7,
            session: "/s/c",
            start_sec: -1,
            run_sec: 30,
            engine_starts: 1,
            client_runs: 2
          }),
          '{"ended_at": 8, "sess',
          "null",
          ""
        ].join("\n")
      )
      assert.deepStrictEqual(readSweeps(file), [
        { endedAt: 5, session: "/s/a", startSec: 60, runSec: 30, engineStarts: 1, clientRuns: 2 }
      ])
      // a directory where the file should be: none
      assert.deepStrictEqual(readSweeps(dir), [])
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("appends one line per sweep run (0600) and keeps the last SWEEPS_KEEP once it doubles", () => {
    const dir = tmp()
    try {
      const file = nodePath.join(dir, "sweeps.jsonl")
      for (let i = 0; i < 2 * SWEEPS_KEEP; i++) appendSweep(file, rec(i))
      assert.strictEqual(readSweeps(file).length, 2 * SWEEPS_KEEP)
      assert.deepStrictEqual(readSweeps(file)[1], rec(1))
      assert.strictEqual(fs.statSync(file).mode & 0o777, 0o600)
      appendSweep(file, rec(2 * SWEEPS_KEEP))
      const kept = readSweeps(file)
      assert.strictEqual(kept.length, SWEEPS_KEEP)
      assert.deepStrictEqual(kept.at(-1), rec(2 * SWEEPS_KEEP))
      assert.deepStrictEqual(kept[0], rec(SWEEPS_KEEP + 1))
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it.effect("the live host queue keeps them in the user's own directory, beside history.jsonl", () =>
    Effect.gen(function* () {
      const dir = tmp()
      try {
        const q = makeFileQueue(placeIn(dir), [])
        assert.deepStrictEqual(yield* q.recentSweeps, [])
        yield* q.recordSweep(rec(0))
        yield* q.recordSweep(rec(1))
        assert.deepStrictEqual(yield* q.recentSweeps, [rec(0), rec(1)])
        const own = fs.readdirSync(dir).find((n) => n.startsWith(".own-"))!
        assert.isTrue(fs.existsSync(nodePath.join(dir, own, "sweeps.jsonl")))
        // corrupt: still none, never an error
        fs.writeFileSync(nodePath.join(dir, own, "sweeps.jsonl"), "\u0000garbage\n")
        assert.deepStrictEqual(yield* q.recentSweeps, [])
      } finally {
        fs.rmSync(dir, { recursive: true, force: true })
      }
    })
  )
})
