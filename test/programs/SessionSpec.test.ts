/**
 * A session is one experiment (issue 15): a later `baseline run` on it with another command,
 * lease or server is refused (SessionSpecMismatch, exit 2) naming what differs; the same command
 * resumes as before. The pure comparison (domain/SessionSpec.ts) and the baseline program over
 * the package's test layers.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer, Logger, LogLevel } from "effect"
import { baselineSpec, specDifferences } from "../../src/domain/SessionSpec.js"
import { AttemptRunner, Baseline, Testing } from "../../src/index.js"

const SESSION = "/sessions/s"
const options = (argv: ReadonlyArray<string>, gpus = 1): Baseline.BaselineOptions => ({
  sessionDir: SESSION,
  request: { gpus, servingSlot: true },
  argv,
  env: {},
  cwd: "/srv",
  onOutput: () => Effect.void
})

describe("specDifferences", () => {
  it("names each difference with both values; run controls are not part of the spec", () => {
    const a = baselineSpec({ argv: ["echo", "same"], request: { gpus: 1, servingSlot: true } })
    assert.deepStrictEqual(specDifferences(a, a), [])
    const b = baselineSpec({
      argv: ["echo", "different"],
      request: { gpus: 3, servingSlot: true },
      serving: { server: "vllm serve m", readiness: { path: "/health" } }
    })
    assert.deepStrictEqual(specDifferences(a, b), [
      "the command (session: -- echo same; now: -- echo different)",
      "--gpus (session: 1; now: 3)",
      "--server (session: none; now: vllm serve m)"
    ])
  })
})

describe("baseline run on a finished session", () => {
  it.effect(
    "with other arguments: refused naming what differs, nothing runs; the same command shows the old result",
    () =>
      Effect.gen(function* () {
        const first = yield* Baseline.runBaseline(options(["echo", "same"]))
        assert.strictEqual(first.state.status, "succeeded")
        const other = yield* Effect.either(Baseline.runBaseline(options(["echo", "different"], 3)))
        assert.isTrue(Either.isLeft(other))
        if (Either.isLeft(other)) {
          assert.strictEqual(other.left._tag, "SessionSpecMismatch")
          assert.include(other.left.message, "the command (session: -- echo same; now: -- echo different)")
          assert.include(other.left.message, "--gpus (session: 1; now: 3)")
        }
        const log = yield* yield* AttemptRunner.FakeAttemptRunnerLog
        assert.strictEqual(log.specs.length, 1, "the refused run ran no attempt")
        const again = yield* Baseline.runBaseline(options(["echo", "same"]))
        assert.isTrue(again.alreadyEnded)
        assert.strictEqual(again.state.baseline_tput, 42)
      }).pipe(
        Effect.provide(
          AttemptRunner.layerTest(() => ({ exitCode: 0, throughput: 42 })).pipe(
            Layer.provideMerge(Testing.layer())
          )
        ),
        Logger.withMinimumLogLevel(LogLevel.None)
      )
  )
})
