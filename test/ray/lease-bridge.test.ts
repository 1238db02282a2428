/**
 * The LeaseBridge service on real heads: exit codes, live output, device variables, cwd/env,
 * a missing command, the slot's hand-over under contention, and release on every path
 * (scope end, fiber interruption, SIGKILL of the process holding the lease, SIGKILL of the
 * actor's worker). No scenario restarts or stops the head (they lease, run and release), so the
 * file's scenarios share one head, started in beforeAll and torn down in afterAll; after each
 * scenario no lease actor may be left alive, so none inherits another's slot.
 */

import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { afterAll, afterEach, assert, beforeAll, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, Option, Scope } from "effect"
import * as LeaseBridge from "../../src/services/LeaseBridge.js"
import * as Settings from "../../src/services/Settings.js"
import { bundle } from "../support/bundle.js"
import {
  closeGcs,
  gcsActors,
  isAlive,
  markerSleep,
  pidsWithArg,
  waitGone,
  waitNoLeaseActor
} from "../support/lease.js"
import { type Head, prepareRay, projectRoot, startHead, teardownRay, waitFor } from "../support/ray.js"

const PORT = 6394
/** A port where no GCS listens. */
const DEAD_PORT = 6395

const settingsLayer = Settings.layerTest({
  env: process.env,
  rayExecutable: process.env.HYPERLOOM_RAY,
  rayPython: process.env.HYPERLOOM_RAY_PYTHON
})
const layer = LeaseBridge.layer.pipe(Layer.provide(Layer.merge(settingsLayer, NodeContext.layer)))

const specFor =
  (head: Head) =>
  (argv: ReadonlyArray<string>, extra: Partial<LeaseBridge.LeaseSpec> = {}): LeaseBridge.LeaseSpec => ({
    gcsAddress: head.gcsAddress,
    gpus: 1,
    servingSlot: true,
    argv,
    env: { PATH: process.env.PATH },
    cwd: projectRoot,
    ...extra
  })

const since = (t0: number) => Date.now() - t0
const promise = <A>(f: () => Promise<A>) => Effect.promise(f)

let head: Head

describe("LeaseBridge on a real head", () => {
  beforeAll(async () => {
    await prepareRay()
    head = await startHead({ numGpus: 2, slot: true, port: PORT })
  })
  // Each scenario releases what it leased: none may leave a lease actor for the next one.
  afterEach(async () => {
    await waitNoLeaseActor(head, 10_000)
  })
  afterAll(async () => {
    closeGcs()
    await teardownRay()
  })

  it.live("returns CMD's exit code (0 and non-zero) and frees the slot for the next lease", () =>
    Effect.gen(function* () {
      const spec = specFor(head)
      const bridge = yield* LeaseBridge.LeaseBridge
      const run = (argv: ReadonlyArray<string>) =>
        Effect.gen(function* () {
          const t0 = Date.now()
          const exit = yield* Effect.scoped(
            Effect.flatMap(bridge.open(spec(argv)), (session) => session.awaitExit)
          )
          return { exit, ms: since(t0) }
        })
      const ok = yield* run(["true"])
      assert.strictEqual(ok.exit.exitCode, 0)
      const failed = yield* run(["sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 42"])
      assert.strictEqual(failed.exit.exitCode, 42)
      assert.strictEqual(failed.exit.stdoutTail, "to-stdout")
      assert.strictEqual(failed.exit.stderrTail, "to-stderr")
      // The second lease got the slot: the first released it. Nothing is left alive.
      yield* promise(() => waitNoLeaseActor(head, 5_000))
      const third = yield* run(["true"])
      console.log(
        `lease round trip through the service (open → exit → released), trivial command: ${ok.ms} ms, ${failed.ms} ms, ${third.ms} ms`
      )
      assert.isBelow(third.ms, 10_000)
    }).pipe(Effect.provide(layer))
  )

  it.live("streams output live: a line arrives while CMD still runs", () =>
    Effect.gen(function* () {
      const bridge = yield* LeaseBridge.LeaseBridge
      const first = yield* Deferred.make<number>()
      const lines: string[] = []
      const t0 = Date.now()
      const result = yield* Effect.scoped(
        Effect.gen(function* () {
          const session = yield* bridge.open(
            specFor(head)(["sh", "-c", "echo first; sleep 3; echo second"], {
              onOutput: (o) =>
                Effect.sync(() => lines.push(`${o.stream}:${o.line}`)).pipe(
                  Effect.zipRight(o.line === "first" ? Deferred.succeed(first, since(t0)) : Effect.void)
                )
            })
          )
          const started = yield* session.awaitStarted
          const firstAt = yield* Deferred.await(first)
          const aliveAtFirst = started.pid !== undefined && isAlive(started.pid)
          const exit = yield* session.awaitExit
          return { firstAt, aliveAtFirst, exitAt: since(t0), exit }
        })
      )
      assert.isTrue(result.aliveAtFirst, "CMD was still running when its first line arrived")
      assert.isAtLeast(result.exitAt - result.firstAt, 2_000)
      assert.deepStrictEqual(lines, ["stdout:first", "stdout:second"])
      assert.strictEqual(result.exit.exitCode, 0)
    }).pipe(Effect.provide(layer))
  )

  it.live("CMD sees the actor's CUDA_VISIBLE_DEVICES over the caller's empty one, and its cwd and env", () =>
    Effect.gen(function* () {
      const bridge = yield* LeaseBridge.LeaseBridge
      const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "hl-lease-cwd-")))
      const script = 'echo "cvd=$CUDA_VISIBLE_DEVICES"; echo "pwd=$(pwd)"; echo "probe=$HL_PROBE"'
      const env = { PATH: process.env.PATH, CUDA_VISIBLE_DEVICES: "", HL_PROBE: "a b=c" }
      const one = yield* Effect.scoped(
        Effect.gen(function* () {
          const session = yield* bridge.open(specFor(head)(["sh", "-c", script], { env, cwd: dir }))
          return { started: yield* session.awaitStarted, exit: yield* session.awaitExit }
        })
      )
      const out = one.exit.stdoutTail.split("\n")
      assert.match(out[0]!, /^cvd=\d+$/, one.exit.stdoutTail)
      assert.strictEqual(out[0], `cvd=${one.started.cudaVisibleDevices}`)
      assert.strictEqual(out[1], `pwd=${dir}`)
      assert.strictEqual(out[2], "probe=a b=c")
      const two = yield* Effect.scoped(
        Effect.flatMap(
          bridge.open(specFor(head)(["sh", "-c", script], { env, cwd: dir, gpus: 2 })),
          (s) => s.awaitExit
        )
      )
      assert.match(two.stdoutTail.split("\n")[0]!, /^cvd=\d+,\d+$/)
      fs.rmSync(dir, { recursive: true, force: true })
    }).pipe(Effect.provide(layer))
  )

  it.live("a command that does not exist exits 127 with a clear line", () =>
    Effect.gen(function* () {
      const bridge = yield* LeaseBridge.LeaseBridge
      const { started, exit } = yield* Effect.scoped(
        Effect.gen(function* () {
          const session = yield* bridge.open(specFor(head)(["hyperloom-no-such-command", "--x"]))
          return { started: yield* session.awaitStarted, exit: yield* session.awaitExit }
        })
      )
      assert.strictEqual(exit.exitCode, 127)
      assert.isUndefined(started.pid)
      assert.strictEqual(exit.stderrTail, "hyperloom: command not found: hyperloom-no-such-command")
    }).pipe(Effect.provide(layer))
  )

  it.live("contention: B waits while A holds the slot and starts promptly once A is released", () =>
    Effect.gen(function* () {
      const spec = specFor(head)
      const bridge = yield* LeaseBridge.LeaseBridge
      const markerA = markerSleep()
      const scopeA = yield* Scope.make()
      const a = yield* bridge.open(spec(["sleep", markerA])).pipe(Scope.extend(scopeA))
      yield* a.awaitStarted
      const scopeB = yield* Scope.make()
      const b = yield* bridge.open(spec(["sh", "-c", "echo B got it"])).pipe(Scope.extend(scopeB))
      const early = yield* b.awaitStarted.pipe(Effect.timeout(Duration.seconds(4)), Effect.option)
      assert.isTrue(Option.isNone(early), "B must not start while A holds the slot")
      const pending = (yield* promise(() => gcsActors(head))).find((x) => x.actorId === b.actorId)
      assert.strictEqual(pending?.state, "PENDING_CREATION")

      const t0 = Date.now()
      yield* Scope.close(scopeA, Exit.void)
      const releaseMs = since(t0)
      assert.deepStrictEqual(pidsWithArg(markerA), [], "A's command is gone once A is released")
      yield* b.awaitStarted
      const handOverMs = since(t0)
      const exit = yield* b.awaitExit
      assert.strictEqual(exit.stdoutTail, "B got it")
      yield* Scope.close(scopeB, Exit.void)
      console.log(
        `contention hand-over: release of A took ${releaseMs} ms; B started ${handOverMs - releaseMs} ms after A's release returned (${handOverMs} ms after it began)`
      )
      // "Promptly once A is released": B's start is timed from A's release returning (2.3 s on a
      // quiet machine, where the whole hand-over took 3.4 s). The whole hand-over measured 9.1 s on
      // a loaded clean-clone run and failed a bound of 8 s on the sum, which mostly timed A's
      // release (TERM, grace, the GPU wait): that has its own bound here.
      assert.isBelow(handOverMs - releaseMs, 8_000)
      assert.isBelow(releaseMs, 15_000)
    }).pipe(Effect.provide(layer))
  )

  it.live(
    "interrupting the fiber mid-lease leaves no actor and no CMD (also while waiting for the slot)",
    () =>
      Effect.gen(function* () {
        const spec = specFor(head)
        const bridge = yield* LeaseBridge.LeaseBridge
        const marker = markerSleep()
        const started = yield* Deferred.make<LeaseBridge.LeaseStarted>()
        const bridgePid = yield* Deferred.make<number>()
        const fiber = yield* Effect.fork(
          Effect.scoped(
            Effect.gen(function* () {
              const session = yield* bridge.open(spec(["sleep", marker]))
              yield* Deferred.succeed(bridgePid, session.bridgePid)
              yield* Deferred.succeed(started, yield* session.awaitStarted)
              return yield* session.awaitExit
            })
          )
        )
        const st = yield* Deferred.await(started)
        assert.isTrue(st.pid !== undefined && isAlive(st.pid))
        // A second lease waiting for the slot, interrupted too.
        const waiting = yield* Effect.fork(
          Effect.scoped(Effect.flatMap(bridge.open(spec(["true"])), (s) => s.awaitStarted))
        )
        yield* promise(() =>
          waitFor("the second lease to be pending", async () =>
            (await gcsActors(head)).some((a) => a.state === "PENDING_CREATION") ? true : undefined
          )
        )
        const t0 = Date.now()
        yield* Fiber.interrupt(waiting)
        yield* Fiber.interrupt(fiber)
        const ms = since(t0)
        assert.deepStrictEqual(pidsWithArg(marker), [], "CMD and its supervisor are gone")
        assert.isFalse(isAlive(yield* Deferred.await(bridgePid)), "the bridge is gone")
        yield* promise(() => waitNoLeaseActor(head, 5_000))
        console.log(`interrupting two leases (one running, one pending) took ${ms} ms`)
      }).pipe(Effect.provide(layer))
  )

  it.live("SIGKILL of the actor's worker: the supervisor kills CMD; the lease fails with actor_died", () =>
    Effect.gen(function* () {
      const bridge = yield* LeaseBridge.LeaseBridge
      const marker = markerSleep()
      const result = yield* Effect.scoped(
        Effect.gen(function* () {
          const session = yield* bridge.open(specFor(head)(["sleep", marker]))
          const started = yield* session.awaitStarted
          process.kill(started.actorPid, "SIGKILL")
          const t0 = Date.now()
          yield* promise(() =>
            waitGone("CMD after its actor worker was killed", () => pidsWithArg(marker), 5_000)
          )
          const goneMs = since(t0)
          return { goneMs, exit: yield* Effect.either(session.awaitExit) }
        })
      )
      assert.isTrue(result.exit._tag === "Left")
      const error = (result.exit as { left: LeaseBridge.LeaseBridgeError }).left
      assert.strictEqual(error._tag, "LeaseActorFailed")
      assert.strictEqual((error as LeaseBridge.LeaseActorFailed).kind, "actor_died")
      assert.notInclude(error.message, "\n")
      console.log(`CMD gone ${result.goneMs} ms after SIGKILL of the actor worker; error: ${error.message}`)
      yield* promise(() => waitNoLeaseActor(head, 5_000))
    }).pipe(Effect.provide(layer))
  )

  it.live("SIGKILL of the process holding the lease: bridge, CMD and actor go away", () =>
    Effect.gen(function* () {
      const childJs = yield* promise(buildLeaseChild)
      const marker = markerSleep()
      const spec = specFor(head)(["sleep", marker])
      const child = spawn(process.execPath, [childJs, JSON.stringify(spec)], {
        stdio: ["ignore", "pipe", "pipe"],
        env: process.env
      })
      let out = ""
      let err = ""
      child.stdout!.on("data", (d) => {
        out += d
      })
      child.stderr!.on("data", (d) => {
        err += d
      })
      const lines = () =>
        out
          .split("\n")
          .filter((l) => l.trim() !== "")
          .map((l) => JSON.parse(l))
      const started = yield* promise(() =>
        waitFor(
          `the child's lease to start (stderr: ${err.slice(-500)})`,
          () => lines().find((l) => l.started !== undefined)?.started,
          60_000
        )
      )
      const opened = lines().find((l) => l.opened !== undefined).opened
      assert.isTrue(isAlive(started.pid) && isAlive(opened.bridgePid))
      child.kill("SIGKILL")
      const t0 = Date.now()
      yield* promise(() => waitGone("CMD", () => pidsWithArg(marker), 10_000))
      yield* promise(() =>
        waitGone("the bridge", () => (isAlive(opened.bridgePid) ? [opened.bridgePid] : []), 10_000)
      )
      yield* promise(() => waitNoLeaseActor(head, 10_000))
      console.log(`after SIGKILL of the lease holder: CMD, bridge and actor gone within ${since(t0)} ms`)
    }).pipe(Effect.provide(layer))
  )
})

describe("LeaseBridge errors", () => {
  it.live("a dead address fails open with LeaseRayInitFailed, at once", () =>
    Effect.gen(function* () {
      const bridge = yield* LeaseBridge.LeaseBridge
      const t0 = Date.now()
      const error = yield* Effect.flip(
        Effect.scoped(
          bridge.open({
            gcsAddress: `127.0.0.1:${DEAD_PORT}`,
            gpus: 0,
            servingSlot: true,
            argv: ["true"],
            env: {},
            cwd: projectRoot
          })
        )
      )
      assert.strictEqual(error._tag, "LeaseRayInitFailed")
      assert.strictEqual(
        error.message,
        `cannot connect a Ray driver to 127.0.0.1:${DEAD_PORT}: cannot reach the GCS: Connection refused`
      )
      assert.isBelow(since(t0), 10_000)
    }).pipe(Effect.provide(layer))
  )
})

/** Bundles test/support/leaseChild.ts inside the package tree (so it finds the package root). */
const buildLeaseChild = (): Promise<string> =>
  bundle(
    path.join(projectRoot, "test", "support", "leaseChild.ts"),
    path.join(projectRoot, "node_modules", ".cache", "hyperloom-test", "lease-child.mjs")
  )
