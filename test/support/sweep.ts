/**
 * A sweep document made by the sweep program against a scripted engine, for the renderers' tests.
 * The model: throughput 200·b/(4+b) at batch b = min(c, B), p99 TTFT jumping once c > B; the
 * engine with B = 2 dies at c = 4. Params `seqs` = 2, 4, 8; loads `c` = 1, 2, 4, 8; the SLO
 * p99_ttft_ms<=300; the best is seqs=8 at c=8.
 */
import { Effect, Layer } from "effect"
import type { Experiment, SweepDoc } from "../../src/domain/Sweep.js"
import { runSweep, type SweepOptions } from "../../src/programs/Sweep.js"
import * as SweepEngine from "../../src/programs/SweepEngine.js"
import * as AttemptFiles from "../../src/services/AttemptFiles.js"
import * as StateStore from "../../src/services/StateStore.js"
import * as SweepStore from "../../src/services/SweepStore.js"

export const flag = (argv: ReadonlyArray<string>, name: string) => Number(argv[argv.indexOf(name) + 1])
export const seqsOf = (server: string) => Number(/--max-num-seqs (\d+)/.exec(server)![1])

/**
 * The tests' experiment: `engine --max-num-seqs {seqs}` with seqs = 2, 4, 8, the client at
 * `--max-concurrency {c}` with c = 1, 2, 4, 8, the SLO p99_ttft_ms<=300, one run per point, no GPU,
 * one node; `over` replaces any of it (the keys keep this order).
 */
export const sweepExperiment = (over: Partial<Experiment> = {}): Experiment => ({
  server: "engine --max-num-seqs {seqs}",
  client: ["client", "--max-concurrency", "{c}"],
  params: [{ name: "seqs", values: ["2", "4", "8"] }],
  load: { kind: "points", name: "c", values: ["1", "2", "4", "8"] },
  slos: [{ metric: "p99_ttft_ms", op: "<=", bound: 300 }],
  repeats: 1,
  gpus: 0,
  nodes: 1,
  ...over
})

/** The sweep program's options for `experiment` in `sessionDir`: no GPU, ready at /health within 10 s, no env, cwd /; `over` adds or replaces. */
export const sweepOptions = (
  sessionDir: string,
  experiment: Experiment,
  over: Partial<SweepOptions> = {}
): SweepOptions => ({
  sessionDir,
  experiment,
  request: { gpus: 0, servingSlot: true },
  readiness: { path: "/health", timeoutSec: 10 },
  env: {},
  cwd: "/",
  ...over
})

/** The stand-in model in small: throughput 200·b/(4+b), b = min(c, B); TTFT jumps once c > B. */
export const model = (server: string, argv: ReadonlyArray<string>): SweepEngine.FakeRun => {
  const B = seqsOf(server)
  const c = flag(argv, "--max-concurrency")
  const b = Math.min(c, B)
  return {
    metrics: {
      output_throughput: (200 * b) / (4 + b),
      p99_ttft_ms: c > B ? 900 : 20 + 5 * b,
      p99_tpot_ms: 20 + 5 * b,
      completed: 2 * c
    }
  }
}

/** The sweep program's services: the scripted engine, memory files, the test stores (`files` shared across runs). */
export const setup = (
  script: Parameters<typeof SweepEngine.layerTest>[0],
  files = new Map<string, string>(),
  attemptFiles = AttemptFiles.makeMemoryAttemptFiles()
) =>
  Layer.mergeAll(
    SweepEngine.layerTest(script).pipe(Layer.provideMerge(AttemptFiles.layerTest(attemptFiles))),
    StateStore.layerTest(),
    SweepStore.layerTest(files)
  )

export const scriptedSweep = (o: {
  /** Must hold `--max-num-seqs {seqs}`. */
  readonly server: string
  /** Must hold `--max-concurrency {c}`. */
  readonly client: ReadonlyArray<string>
  readonly gpus: number
  readonly cwd?: string | undefined
}): Effect.Effect<SweepDoc, unknown> =>
  Effect.gen(function* () {
    const r = yield* runSweep(
      sweepOptions("/s/scripted", sweepExperiment({ server: o.server, client: o.client, gpus: o.gpus }), {
        request: { gpus: o.gpus, servingSlot: true },
        cwd: o.cwd ?? "/"
      })
    )
    return r.doc
  }).pipe(
    Effect.provide(
      setup({
        run: (server, argv) =>
          seqsOf(server) === 2 && flag(argv, "--max-concurrency") === 4
            ? { engineDies: true, exitCode: 1 }
            : model(server, argv)
      })
    )
  )
