/**
 * `lease run` hands its command the environment (and the working directory) the Settings layer
 * read, not this process's own:
 * a test layer's environment is what reaches the lease's spawn (the live layer reads process.env,
 * so users see no change).
 */
import * as Command from "@effect/cli/Command"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { leaseRun } from "../../src/cli/commands/lease.js"
import { CommandLine } from "../../src/cli/Run.js"
import * as LeaseBridge from "../../src/services/LeaseBridge.js"
import * as Testing from "../../src/Testing.js"

describe("lease run's environment", () => {
  it.scoped(
    "is the Settings layer's (its environment and working directory), not process.env and process.cwd()",
    () =>
      Effect.gen(function* () {
        const layerEnv = { PATH: "/layer/bin", HYPERLOOM_T_LAYER_ONLY: "from-the-layer" }
        const cwd = "/layer/work"
        process.env.HYPERLOOM_T_PROCESS_ONLY = "from-process-env"
        yield* Effect.addFinalizer(() => Effect.sync(() => delete process.env.HYPERLOOM_T_PROCESS_ONLY))
        const services = yield* Layer.build(Testing.layer({ settings: { env: layerEnv, cwd } }))
        const args = ["--gpus", "0", "--", "env"]
        yield* Command.run(leaseRun, { name: "run", version: "test" })(["node", "run", ...args]).pipe(
          Effect.provideService(CommandLine, { args, json: false }),
          Effect.provide(services),
          Effect.provide(NodeContext.layer)
        )
        const opened = (yield* Effect.flatten(Effect.provide(LeaseBridge.FakeLeaseBridgeLog, services)))
          .opened
        assert.strictEqual(opened.length, 1)
        assert.deepStrictEqual(opened[0]!.argv, ["env"])
        assert.deepStrictEqual(opened[0]!.env, layerEnv)
        assert.notProperty(opened[0]!.env, "HYPERLOOM_T_PROCESS_ONLY")
        assert.strictEqual(opened[0]!.cwd, cwd, "and the layer's working directory")
      }).pipe(Logger.withMinimumLogLevel(LogLevel.None))
  )
})
