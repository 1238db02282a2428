// A larger Effect program built on hyperloom, as a user writes it: its own service beside
// hyperloom's, hyperloom's program inside its own, tested against the package's test layers.
// Run by test/consumer/consumer.test.ts after `tsc` against the packed, installed package.
import { Context, Effect, Layer } from "effect"
import { Inspect, Lease, LeaseBridge, type RayClusterInfeasible, Testing } from "hyperloom"

class Results extends Context.Tag("consumer/Results")<
  Results,
  { readonly record: (line: string) => Effect.Effect<void> }
>() {}

const recorded: Array<string> = []
const ResultsTest = Layer.succeed(Results, { record: (line) => Effect.sync(() => void recorded.push(line)) })

// The program: run a benchmark under a lease, record its outcome, fail typed on an infeasible cluster.
const benchmark = (gpus: number) =>
  Effect.gen(function* () {
    const results = yield* Results
    const run = yield* Lease.runLeased({
      request: { gpus, servingSlot: true },
      argv: ["python", "bench.py"],
      env: {},
      cwd: "."
    })
    yield* results.record(`exit ${run.exitCode}`)
    return run.exitCode
  })

const check = (what: string, ok: boolean) => {
  if (!ok) throw new Error(`consumer: ${what}`)
  console.log(`ok ${what}`)
}

const main = Effect.gen(function* () {
  const code = yield* benchmark(1).pipe(
    Effect.provide(Layer.merge(ResultsTest, Testing.layer({ lease: () => ({ exitCode: 3 }) })))
  )
  check("a scripted lease's exit code reaches the program", code === 3 && recorded[0] === "exit 3")

  const opened = yield* Effect.gen(function* () {
    yield* benchmark(1)
    return (yield* yield* LeaseBridge.FakeLeaseBridgeLog).opened.length
  }).pipe(Effect.provide(Layer.merge(ResultsTest, Testing.layer())))
  check("the default test head grants a lease", opened === 1)

  const refused = yield* benchmark(2).pipe(
    Effect.catchTag("RayClusterInfeasible", (e: RayClusterInfeasible) => Effect.succeed(e.reason)),
    Effect.provide(Layer.merge(ResultsTest, Testing.layer()))
  )
  check("two GPUs on the one-GPU test head is a typed infeasibility", refused === "insufficient_gpus")

  const report = yield* Inspect.doctor({ gpus: 1, servingSlot: true }).pipe(Effect.provide(Testing.layer()))
  check("doctor on the default test head: feasible", report.feasible)
  check(
    `doctor on the default test head: every repair guard holds (${report.repair.guards
      .filter((g) => !g.ok)
      .map((g) => g.id)
      .join(", ")})`,
    report.repair.allowed
  )
})

Effect.runPromise(main).then(
  () => console.log("consumer: all checks passed"),
  (e) => {
    console.error(e)
    process.exit(1)
  }
)
