/**
 * The one lease entry: a plain argv or a serving command, on one node or as a group, decided once
 * from the settings; the serving runner always gets every flag (the defaults live in domain/Serving).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger, LogLevel } from "effect"
import { LeasedCommand, RUNNER_DEFAULTS, readiness, runnerArgs } from "../../src/domain/Serving.js"
import { runLeasedCommand } from "../../src/programs/Leased.js"
import * as LeaseBridge from "../../src/services/LeaseBridge.js"
import * as ServingRunner from "../../src/services/ServingRunner.js"
import * as Testing from "../../src/Testing.js"

const serving = LeasedCommand.Serving({
  server: "engine --port $HYPERLOOM_PORT",
  readiness: readiness("ready"),
  client: ["bench", "--n", "3"],
  dir: "/s/attempts/1"
})

describe("the serving runner's flags", () => {
  it("every flag is given, the defaults filled in from one table; the path starts with /", () => {
    assert.deepStrictEqual(runnerArgs(serving, "/work"), [
      "--server",
      "engine --port $HYPERLOOM_PORT",
      "--ready-path",
      "/ready",
      "--ready-timeout",
      String(RUNNER_DEFAULTS.readyTimeoutSec),
      "--stop-grace",
      String(RUNNER_DEFAULTS.stopGraceSec),
      "--progress-every",
      String(RUNNER_DEFAULTS.progressEverySec),
      "--check",
      "",
      "--warmup",
      String(RUNNER_DEFAULTS.warmup),
      "--dir",
      "/s/attempts/1",
      "--cwd",
      "/work",
      "--",
      "bench",
      "--n",
      "3"
    ])
    // a sweep's engine: the same flags, no client
    const engine = LeasedCommand.Engine({ server: serving.server, readiness: serving.readiness, dir: "/s/e" })
    assert.deepStrictEqual(runnerArgs(engine, "/work"), [
      ...runnerArgs(serving, "/work").slice(0, runnerArgs(serving, "/work").indexOf("--dir")),
      "--dir",
      "/s/e",
      "--cwd",
      "/work"
    ])
    assert.deepStrictEqual(readiness(), { path: "/health", timeoutSec: 1800 })
    assert.deepStrictEqual(readiness("/h", 5), { path: "/h", timeoutSec: 5 })
  })
})

describe("runLeasedCommand on one node", () => {
  const spec = (command: LeasedCommand) => ({
    request: { gpus: 1, servingSlot: true },
    command,
    env: {},
    cwd: "/work"
  })

  it.effect("a plain argv is leased as it is", () =>
    Effect.gen(function* () {
      const r = yield* runLeasedCommand(spec(LeasedCommand.Argv({ argv: ["echo", "hi"] })))
      assert.strictEqual(r.exitCode, 0)
      const opened = (yield* Effect.flatten(LeaseBridge.FakeLeaseBridgeLog)).opened
      assert.deepStrictEqual(
        opened.map((o) => o.argv),
        [["echo", "hi"]]
      )
    }).pipe(Effect.provide(Testing.layer()), Logger.withMinimumLogLevel(LogLevel.None))
  )

  const engine = LeasedCommand.Engine({ server: "engine", readiness: readiness(), dir: "/s/e" })
  for (const [what, command, runner] of [
    ["a serving command is leased as the serving runner", serving, "serve.py"],
    ["a sweep's engine is leased as the sweep runner", engine, "sweep.py"]
  ] as const) {
    it.effect(`${what} with its flags`, () =>
      Effect.gen(function* () {
        yield* runLeasedCommand(spec(command))
        const opened = (yield* Effect.flatten(LeaseBridge.FakeLeaseBridgeLog)).opened
        assert.deepStrictEqual(
          opened.map((o) => o.argv),
          [["py", runner, ...runnerArgs(command, "/work")]]
        )
      }).pipe(
        Effect.provide(Testing.layer()),
        Effect.provide(ServingRunner.layerTest()),
        Logger.withMinimumLogLevel(LogLevel.None)
      )
    )
  }
})
