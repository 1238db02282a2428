/**
 * Two sweeps of the small stand-in model (test/support/sweep.ts) for the compare tests: a seeded
 * noise on every measured metric (a run's throughput × (1 + cv·z), z standard normal from a
 * seeded generator) and a slow-down factor (throughput ÷ slow, latencies × slow).
 */
import { Effect } from "effect"
import type { SweepDoc } from "../../src/domain/Sweep.js"
import { runSweep } from "../../src/programs/Sweep.js"
import { model, setup, sweepExperiment, sweepOptions } from "./sweep.js"

/** mulberry32: a small seeded generator, so a test's "noise" is the same on every run. */
export const seeded = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** A standard normal draw (Box–Muller) from a seeded uniform generator. */
export const normal = (u: () => number) => () =>
  Math.sqrt(-2 * Math.log(1 - u())) * Math.cos(2 * Math.PI * u())

export const noisySweep = (o: {
  readonly dir: string
  readonly repeats: number
  readonly seed: number
  readonly slow?: number
  readonly cv?: number
  readonly loads?: ReadonlyArray<string>
  readonly server?: string
  readonly files?: Map<string, string>
}): Effect.Effect<SweepDoc, unknown> => {
  const z = normal(seeded(o.seed))
  const slow = o.slow ?? 1
  const cv = o.cv ?? 0.02
  return runSweep(
    sweepOptions(
      o.dir,
      sweepExperiment({
        server: o.server ?? "engine --max-num-seqs {seqs}",
        params: [{ name: "seqs", values: ["2", "8"] }],
        load: { kind: "points", name: "c", values: [...(o.loads ?? ["1", "2", "4"])] },
        slos: [],
        repeats: o.repeats,
        gpus: 1
      }),
      { request: { gpus: 1, servingSlot: true }, version: "0.1.0" }
    )
  ).pipe(
    Effect.map((r) => r.doc),
    Effect.provide(
      setup(
        {
          run: (server, argv) => {
            const m = model(server, argv).metrics!
            const f = 1 + cv * z()
            return {
              metrics: {
                ...m,
                output_throughput: (m.output_throughput! * f) / slow,
                p99_ttft_ms: m.p99_ttft_ms! * slow,
                p99_tpot_ms: m.p99_tpot_ms! * slow
              }
            }
          }
        },
        o.files
      )
    )
  )
}
