/**
 * A stand-in for a hyperloom process holding a lease, for tests that SIGKILL it: bundled with
 * esbuild by `buildLeaseChild()` and run as `node lease-child.mjs '<LeaseSpec JSON>'`. Prints
 * one JSON line per step on stdout ({"opened"}, {"started"}, {"exit"}), then holds on.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer } from "effect"
import * as LeaseBridge from "../../src/services/LeaseBridge.js"
import * as Settings from "../../src/services/Settings.js"

export const main = (specJson: string) => {
  const spec = JSON.parse(specJson) as LeaseBridge.LeaseSpec
  const say = (o: object) => Effect.sync(() => process.stdout.write(`${JSON.stringify(o)}\n`))
  const program = Effect.gen(function* () {
    const bridge = yield* LeaseBridge.LeaseBridge
    const session = yield* bridge.open(spec)
    yield* say({ opened: { jobId: session.jobId, actorId: session.actorId, bridgePid: session.bridgePid } })
    yield* say({ started: yield* session.awaitStarted })
    yield* say({ exit: yield* session.awaitExit })
    yield* Effect.never
  }).pipe(Effect.scoped)
  const layer = LeaseBridge.layer.pipe(Layer.provide(Layer.merge(Settings.layer, NodeContext.layer)))
  NodeRuntime.runMain(program.pipe(Effect.provide(layer)))
}

if (process.argv[2] !== undefined) main(process.argv[2])
