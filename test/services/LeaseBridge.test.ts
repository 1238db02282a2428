/**
 * The live LeaseBridge service against a scripted stand-in for the Python bridge (no Ray): the
 * protocol handling, error mapping, bounded release (TERM → KILL of a bridge that ignores the
 * release), a bridge that dies, and the scripted fake layer for programs' tests.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Either, Fiber, Layer, TestClock } from "effect"
import * as LeaseBridge from "../../src/services/LeaseBridge.js"
import * as Settings from "../../src/services/Settings.js"
import { isAlive } from "../support/lease.js"
import { assertStubbornBridgeKilled, requestsIn, scriptedBridge } from "../support/scriptedBridge.js"

/** Stands in for `python PYDIR bridge`: behaviour chosen by FAKE_BRIDGE_MODE. */
const { dir, layerFor } = scriptedBridge(LeaseBridge.layer, {
  prelude: `const started = () => { out({ event: "connected", job_id: "01000000" }); out({ event: "submitted", actor_id: "ab".repeat(16) }); out({ event: "started", pid: 4242, pgid: 4241, actor_pid: 4000, node_id: "cd".repeat(28), cuda_visible_devices: "0" }) }`,
  cases: `      case "normal":
        started(); out({ event: "output", stream: "stdout", line: "hello" }); out({ event: "output", stream: "stderr", line: "oops" }); out({ event: "output", stream: "stdout", line: "bye" }); out({ event: "exit", code: 3 }); break
      case "stubborn": started(); break
      case "crash": started(); process.stderr.write("Traceback (most recent call last):\\nRuntimeError: boom\\n"); process.exit(1)
      case "garbage": process.stdout.write("this is not a protocol line\\n"); break
      case "rayinit": out({ event: "error", kind: "ray_init", message: "ConnectionError: nope" }); out({ event: "released" }); process.exit(1)
      case "died": started(); setTimeout(() => { out({ event: "error", kind: "actor_died", message: "ActorDiedError: gone" }); out({ event: "released" }); process.exit(1) }, 50); break
      case "silent": break`
})

const spec: LeaseBridge.LeaseSpec = {
  gcsAddress: "192.0.2.9:6379",
  gpus: 1,
  servingSlot: true,
  argv: ["vllm", "serve", "m"],
  env: { PATH: "/usr/bin", UNSET: undefined },
  cwd: "/tmp",
  name: "lease-1"
}

describe("LeaseBridge (live, scripted bridge)", () => {
  it.live("sends the lease request and maps the events to a session", () => {
    const log = path.join(dir, "normal.log")
    return Effect.gen(function* () {
      const bridge = yield* LeaseBridge.LeaseBridge
      const seen: string[] = []
      const result = yield* Effect.scoped(
        Effect.gen(function* () {
          const s = yield* bridge.open({
            ...spec,
            onOutput: (o) => Effect.sync(() => seen.push(`${o.stream}:${o.line}`))
          })
          return { s, started: yield* s.awaitStarted, exit: yield* s.awaitExit }
        })
      )
      assert.strictEqual(result.s.jobId, "01000000")
      assert.strictEqual(result.s.actorId, "ab".repeat(16))
      assert.deepStrictEqual(result.started, {
        pid: 4242,
        pgid: 4241,
        actorPid: 4000,
        nodeId: "cd".repeat(28),
        cudaVisibleDevices: "0"
      })
      assert.deepStrictEqual(result.exit, { exitCode: 3, stdoutTail: "hello\nbye", stderrTail: "oops" })
      assert.deepStrictEqual(seen, ["stdout:hello", "stderr:oops", "stdout:bye"])
      assert.deepStrictEqual(requestsIn(log), [
        {
          op: "lease",
          address: "192.0.2.9:6379",
          gpus: 1,
          serving_slot: true,
          argv: ["vllm", "serve", "m"],
          env: { PATH: "/usr/bin" },
          cwd: "/tmp",
          name: "lease-1",
          stop_grace_sec: 3,
          gpu_clean_timeout_sec: 30
        },
        { op: "release" }
      ])
      assert.isFalse(isAlive(result.s.bridgePid))
    }).pipe(Effect.provide(layerFor("normal", { FAKE_BRIDGE_LOG: log })))
  })

  it.live("a bridge that ignores the release is TERMed, then KILLed, within bounds", () =>
    Effect.flatMap(LeaseBridge.LeaseBridge, (bridge) =>
      assertStubbornBridgeKilled(
        (releaseTimeoutSec) => bridge.open({ ...spec, releaseTimeoutSec }),
        (s) => s.awaitStarted
      )
    ).pipe(Effect.provide(layerFor("stubborn")))
  )

  it.live("interrupting a fiber blocked in awaitExit releases the lease", () =>
    Effect.gen(function* () {
      const bridge = yield* LeaseBridge.LeaseBridge
      const log = path.join(dir, "interrupt.log")
      const fiber = yield* Effect.fork(
        Effect.scoped(Effect.flatMap(bridge.open({ ...spec, releaseTimeoutSec: 0.3 }), (s) => s.awaitExit))
      )
      yield* Effect.sleep(Duration.millis(500))
      yield* Fiber.interrupt(fiber)
      assert.isTrue(fs.existsSync(log) && fs.readFileSync(log, "utf8").includes('"op":"release"'))
    }).pipe(Effect.provide(layerFor("stubborn", { FAKE_BRIDGE_LOG: path.join(dir, "interrupt.log") })))
  )

  it.live("a bridge that dies mid-lease fails awaitExit with its stderr tail", () =>
    Effect.gen(function* () {
      const bridge = yield* LeaseBridge.LeaseBridge
      const error = yield* Effect.scoped(Effect.flatMap(bridge.open(spec), (s) => Effect.flip(s.awaitExit)))
      assert.strictEqual(error._tag, "LeaseBridgeProtocolError")
      assert.strictEqual(
        error.message,
        "lease bridge failed: the bridge exited with code 1 before the lease ended: Traceback (most recent call last): | RuntimeError: boom"
      )
    }).pipe(Effect.provide(layerFor("crash")))
  )

  it.live(
    "a bridge that dies mid-lease is tidied after (its job's leftovers ended, its group removed); one that released is not",
    () => {
      const died = path.join(dir, "tidy-died.log")
      const released = path.join(dir, "tidy-released.log")
      const lease = Effect.flatMap(LeaseBridge.LeaseBridge, (bridge) =>
        Effect.scoped(Effect.flatMap(bridge.open(spec), (s) => Effect.either(s.awaitExit)))
      )
      return Effect.gen(function* () {
        const crashed = yield* lease.pipe(Effect.provide(layerFor("crash", { FAKE_TIDY_LOG: died })))
        assert.isTrue(Either.isLeft(crashed))
        assert.strictEqual(fs.readFileSync(died, "utf8"), "tidy --address 192.0.2.9:6379 --job 01000000\n")
        const exited = yield* lease.pipe(Effect.provide(layerFor("normal", { FAKE_TIDY_LOG: released })))
        assert.isTrue(Either.isRight(exited))
        assert.isFalse(fs.existsSync(released), "a bridge that released is not tidied after")
      })
    }
  )

  it.live("a non-protocol line fails open with LeaseBridgeProtocolError", () =>
    Effect.gen(function* () {
      const bridge = yield* LeaseBridge.LeaseBridge
      const error = yield* Effect.flip(Effect.scoped(bridge.open(spec)))
      assert.strictEqual(error._tag, "LeaseBridgeProtocolError")
      assert.include(error.message, "this is not a protocol line")
    }).pipe(Effect.provide(layerFor("garbage")))
  )

  it.live("error events map to typed errors: ray_init fails open, actor_died fails the session", () =>
    Effect.gen(function* () {
      const init = yield* Effect.flip(
        Effect.scoped(Effect.flatMap(LeaseBridge.LeaseBridge, (b) => b.open(spec)))
      ).pipe(Effect.provide(layerFor("rayinit")))
      assert.strictEqual(init._tag, "LeaseRayInitFailed")
      assert.strictEqual(init.message, "cannot connect a Ray driver to 192.0.2.9:6379: ConnectionError: nope")
      const died = yield* Effect.scoped(
        Effect.gen(function* () {
          const s = yield* (yield* LeaseBridge.LeaseBridge).open(spec)
          yield* s.awaitStarted
          return yield* Effect.flip(s.awaitExit)
        })
      ).pipe(Effect.provide(layerFor("died")))
      assert.strictEqual(died._tag, "LeaseActorFailed")
      assert.strictEqual(died.message, `the lease actor ${"ab".repeat(16)} died: ActorDiedError: gone`)
    })
  )

  it.live("a bridge that never answers fails open after connectTimeoutSec", () =>
    Effect.gen(function* () {
      const bridge = yield* LeaseBridge.LeaseBridge
      const error = yield* Effect.flip(Effect.scoped(bridge.open({ ...spec, connectTimeoutSec: 0.5 })))
      assert.strictEqual(error._tag, "LeaseRayInitFailed")
      assert.include(error.message, "no answer within")
    }).pipe(Effect.provide(layerFor("silent")))
  )

  it.live("no usable Python is RayNotFound", () =>
    Effect.gen(function* () {
      const bridge = yield* LeaseBridge.LeaseBridge
      const error = yield* Effect.flip(Effect.scoped(bridge.open(spec)))
      assert.strictEqual(error._tag, "RayNotFound")
      assert.include(error.message, "HYPERLOOM_RAY_PYTHON=/nonexistent/python3")
    }).pipe(
      Effect.provide(
        LeaseBridge.layer.pipe(
          Layer.provide(
            Layer.merge(Settings.layerTest({ rayPython: "/nonexistent/python3" }), NodeContext.layer)
          )
        )
      )
    )
  )
})

describe("LeaseBridge.prestart (the bridge started while the cluster is ensured)", () => {
  const startsIn = (file: string) =>
    fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter(Boolean).map(Number) : []
  const started = (file: string) =>
    Effect.promise(async () => {
      for (let i = 0; i < 200 && startsIn(file).length === 0; i++) await new Promise((r) => setTimeout(r, 25))
      return startsIn(file)
    })

  it.live("the next open takes the process started ahead: one bridge process, the lease as usual", () => {
    const starts = path.join(dir, "prestart-used.starts")
    return Effect.gen(function* () {
      const bridge = yield* LeaseBridge.LeaseBridge
      yield* bridge.prestart
      yield* bridge.prestart // a second call keeps the one spare
      const [pid] = yield* started(starts)
      const exit = yield* Effect.scoped(
        Effect.gen(function* () {
          const s = yield* bridge.open(spec)
          assert.strictEqual(s.bridgePid, pid, "open used the prestarted process")
          return yield* s.awaitExit
        })
      )
      assert.strictEqual(exit.exitCode, 3)
      assert.deepStrictEqual(startsIn(starts), [pid], "exactly one bridge process was started")
    }).pipe(Effect.provide(layerFor("normal", { FAKE_BRIDGE_STARTS: starts })))
  })

  it.live("an unused prestarted bridge is stopped with the layer, having been sent nothing", () => {
    const starts = path.join(dir, "prestart-unused.starts")
    const log = path.join(dir, "prestart-unused.log")
    return Effect.gen(function* () {
      const pid = yield* Effect.scoped(
        Effect.gen(function* () {
          const bridge = yield* LeaseBridge.LeaseBridge
          yield* bridge.prestart
          const [p] = yield* started(starts)
          assert.isTrue(isAlive(p!))
          return p!
        }).pipe(Effect.provide(layerFor("normal", { FAKE_BRIDGE_STARTS: starts, FAKE_BRIDGE_LOG: log })))
      )
      yield* Effect.promise(async () => {
        for (let i = 0; i < 200 && isAlive(pid); i++) await new Promise((r) => setTimeout(r, 25))
      })
      assert.isFalse(isAlive(pid), "the spare bridge outlived its layer")
      assert.isFalse(fs.existsSync(log) && fs.readFileSync(log, "utf8").includes('"op":"lease"'))
    })
  })
})

describe("LeaseBridge.layerTest (the scripted fake)", () => {
  it.effect("follows its script on the Clock and counts releases", () =>
    Effect.gen(function* () {
      const bridge = yield* LeaseBridge.LeaseBridge
      const log = yield* LeaseBridge.FakeLeaseBridgeLog
      const fiber = yield* Effect.fork(
        Effect.scoped(
          Effect.gen(function* () {
            const s = yield* bridge.open(spec)
            const started = yield* s.awaitStarted
            return { started, exit: yield* s.awaitExit }
          })
        )
      )
      yield* TestClock.adjust(Duration.seconds(5))
      assert.strictEqual((yield* log).active, 1)
      yield* TestClock.adjust(Duration.seconds(10))
      const { started, exit } = yield* Fiber.join(fiber)
      assert.strictEqual(started.cudaVisibleDevices, "0")
      assert.deepStrictEqual(exit, { exitCode: 1, stdoutTail: "", stderrTail: "unrecognized arguments: --x" })
      const after = yield* log
      assert.strictEqual(after.released, 1)
      assert.strictEqual(after.active, 0)
      const second = yield* Effect.either(Effect.scoped(bridge.open(spec)))
      assert.isTrue(Either.isLeft(second))
    }).pipe(
      Effect.provide(
        LeaseBridge.layerTest((_, n) =>
          n === 0
            ? {
                startAfter: Duration.seconds(3),
                runFor: Duration.seconds(10),
                output: [{ stream: "stderr", line: "unrecognized arguments: --x" }],
                exitCode: 1
              }
            : { openError: new LeaseBridge.LeaseRayInitFailed({ address: spec.gcsAddress, reason: "down" }) }
        )
      )
    )
  )
})
