/** The report page's drawing (src/cli/RenderReport.ts, pure): many sessions stay readable. */
import { assert, describe, it } from "@effect/vitest"
import { lineChart, type ReportSession, renderReport } from "../../src/cli/RenderReport.js"
import { type AttemptRecord, initialState } from "../../src/domain/State.js"

const failed = (n: number, error: string): AttemptRecord => ({
  number: n,
  started_at: "2024-06-01T12:00:00.000Z",
  ended_at: "2024-06-01T12:05:00.000Z",
  runtime_sec: 60,
  error_class: "kv_cache_oom",
  exit_code: 1,
  error,
  signature: null,
  throughput: null,
  result_format: null,
  metrics: null
})

const session = (i: number, attempts: ReadonlyArray<AttemptRecord> = [failed(1, "boom")]): ReportSession => ({
  name: `sessions/run-${i}`,
  state: {
    ...initialState(),
    status: "stopped",
    stop_reason: "baseline_failed",
    baseline_attempts: [...attempts]
  },
  environment: undefined
})

/** Each session's colour, from its swatch in the side-by-side table's header. */
const swatches = (html: string) => {
  const header = html.split("<h2>Sessions side by side</h2>")[1]!.split("</tr>")[0]!
  return [...header.matchAll(/background:([^"]+)"/g)].map((m) => m[1]!)
}

describe("renderReport with many sessions", () => {
  it("gives every session a colour of its own (none repeats after the palette's end)", () => {
    for (const n of [10, 11, 24]) {
      const colors = swatches(
        renderReport(
          Array.from({ length: n }, (_, i) => session(i)),
          "now"
        )
      )
      assert.strictEqual(colors.length, n)
      assert.strictEqual(new Set(colors).size, n, `${n} sessions: ${colors.join(" ")}`)
    }
  })

  it("the legend never squeezes the plot: it keeps its height whatever the number of series", () => {
    const plotHeight = (series: number) => {
      const svg = lineChart(
        "t",
        "ms",
        Array.from({ length: series }, (_, i) => ({
          name: `s${i}`,
          color: "#000",
          points: [{ x: 1, y: 1, label: "" }]
        }))
      )
      const axis = /<line x1="(\d+)" x2="\1" y1="([\d.]+)" y2="([\d.]+)" class="axisline"\/>/.exec(svg)!
      return Number(axis[3]) - Number(axis[2])
    }
    const one = plotHeight(1)
    assert.isAtLeast(one, 200)
    for (const n of [6, 20, 40]) assert.strictEqual(plotHeight(n), one, `${n} series`)
  })

  it("the error column shows the root cause, not only the first line", () => {
    const html = renderReport(
      [
        session(1, [
          failed(
            1,
            "the server exited with code 1 after 52.3 s, before it was ready\nroot cause: ValueError: No available memory for the cache blocks"
          )
        ])
      ],
      "now"
    )
    const cell = html.split('<td class="err">')[1]!.split("</td>")[0]!
    assert.include(cell, "No available memory for the cache blocks")
  })
})
