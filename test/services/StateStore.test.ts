import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as NodePath from "node:path"
import { FileSystem } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Option, Scope } from "effect"
import { foldSignature } from "../../src/domain/Signature.js"
import { beginAttempt, initialState, renderState, type SessionState } from "../../src/domain/State.js"
import { LOCK_FILE, layer, layerTest, STATE_FILE, StateStore } from "../../src/services/StateStore.js"
import { lockHolderProcess } from "../support/lockHolder.js"

const live = layer.pipe(Layer.provideMerge(NodeContext.layer))

/** A fresh temp dir for the test, removed at the end of its scope. */
const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) =>
  fs.makeTempDirectoryScoped({ prefix: "hyperloom-state-" })
)

const sample = (): SessionState => ({
  ...beginAttempt(initialState(), "2024-06-01T12:00:00.000Z"),
  baseline_failure_streak: 1,
  baseline_total_failures: 1,
  baseline_last_failure_signature: foldSignature("worker 3 died")
})

const V1_TEXT = JSON.stringify({
  schema_version: 1,
  status: "running",
  stop_reason: null,
  stop_ts: null,
  baseline_tput: null,
  baseline_failure_streak: 1,
  baseline_arg_error_streak: 0,
  baseline_total_failures: 1,
  baseline_failure_signature: "worker <n> died",
  baseline_attempts: [
    {
      number: 1,
      started_at: "2024-06-01T12:00:00.000Z",
      ended_at: "2024-06-01T12:01:00.000Z",
      runtime_sec: 60,
      error_class: "subprocess_nonzero",
      exit_code: 1,
      error: "worker 3 died",
      throughput: null
    }
  ]
})

/** A pid that no process has: a child that has already exited. */
const deadPid = (): number => {
  const r = spawnSync(process.execPath, ["-e", ""])
  assert.isNumber(r.pid)
  return r.pid!
}

const listDir = (dir: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readDirectory(dir)).pipe(
    Effect.map((xs) => [...xs].sort())
  )

describe("StateStore.layer", () => {
  it.scopedLive("load of a session without state is none", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const store = yield* StateStore
      assert.isTrue(Option.isNone(yield* store.load(NodePath.join(dir, "never-created"))))
      assert.isTrue(Option.isNone(yield* store.load(dir)))
    }).pipe(Effect.provide(live))
  )

  it.scopedLive("save creates the directory, writes atomically and leaves no temp file", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const store = yield* StateStore
      const session = NodePath.join(yield* tempDir, "a", "b", "session")
      const s1 = sample()
      yield* store.save(session, s1)
      assert.deepStrictEqual(yield* listDir(session), [STATE_FILE])
      assert.strictEqual(yield* fs.readFileString(NodePath.join(session, STATE_FILE)), renderState(s1))
      assert.deepStrictEqual(yield* store.load(session), Option.some(s1))

      // Replaced by a rename, not rewritten in place: the file is a new inode.
      const inodeBefore = (yield* fs.stat(NodePath.join(session, STATE_FILE))).ino
      const s2: SessionState = {
        ...s1,
        status: "stopped",
        stop_reason: "baseline_failed",
        stop_ts: "2024-06-01T13:00:00Z"
      }
      yield* store.save(session, s2)
      assert.isTrue(Option.isSome(inodeBefore))
      assert.notDeepEqual((yield* fs.stat(NodePath.join(session, STATE_FILE))).ino, inodeBefore)
      assert.deepStrictEqual(yield* listDir(session), [STATE_FILE])
      assert.deepStrictEqual(yield* store.load(session), Option.some(s2))
    }).pipe(Effect.provide(live))
  )

  it.scopedLive("a corrupt file is refused, left byte-identical, and never overwritten", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const store = yield* StateStore
      const dir = yield* tempDir
      const file = NodePath.join(dir, STATE_FILE)
      const bytes = '{"schema_version": 2, "status": "runn'
      yield* fs.writeFileString(file, bytes)

      const loaded = yield* Effect.flip(store.load(dir))
      assert.strictEqual(loaded._tag, "StateCorrupt")
      assert.include(loaded.message, file)
      assert.include(loaded.message, "invalid JSON")
      assert.notInclude(loaded.message, "\n")

      const saved = yield* Effect.flip(store.save(dir, sample()))
      assert.strictEqual(saved._tag, "StateCorrupt")
      assert.strictEqual(yield* fs.readFileString(file), bytes)
      assert.deepStrictEqual(yield* listDir(dir), [STATE_FILE])
    }).pipe(Effect.provide(live))
  )

  it.scopedLive("a file that fails the schema is corrupt, with the field named", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const store = yield* StateStore
      const dir = yield* tempDir
      const bytes = JSON.stringify({ ...initialState(), baseline_total_failures: "two" })
      yield* fs.writeFileString(NodePath.join(dir, STATE_FILE), bytes)
      const e = yield* Effect.flip(store.load(dir))
      assert.strictEqual(e._tag, "StateCorrupt")
      assert.include(e.message, "baseline_total_failures")
      assert.strictEqual(yield* fs.readFileString(NodePath.join(dir, STATE_FILE)), bytes)
    }).pipe(Effect.provide(live))
  )

  it.scopedLive("a newer schema_version is refused and left untouched", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const store = yield* StateStore
      const dir = yield* tempDir
      const file = NodePath.join(dir, STATE_FILE)
      const bytes = JSON.stringify({ schema_version: 4, status: "running", future_field: [1, 2] })
      yield* fs.writeFileString(file, bytes)

      const loaded = yield* Effect.flip(store.load(dir))
      assert.strictEqual(loaded._tag, "StateFromFuture")
      if (loaded._tag === "StateFromFuture") {
        assert.strictEqual(loaded.version, 4)
        assert.strictEqual(loaded.supported, 3)
      }
      assert.include(loaded.message, "schema_version 4")
      const saved = yield* Effect.flip(store.save(dir, sample()))
      assert.strictEqual(saved._tag, "StateFromFuture")
      assert.strictEqual(yield* fs.readFileString(file), bytes)
    }).pipe(Effect.provide(live))
  )

  it.scopedLive("a version 1 file is migrated on load, left as is until the next save writes version 2", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const store = yield* StateStore
      const dir = yield* tempDir
      const file = NodePath.join(dir, STATE_FILE)
      yield* fs.writeFileString(file, V1_TEXT)

      const loaded = yield* store.load(dir)
      assert.isTrue(Option.isSome(loaded))
      const s = Option.getOrThrow(loaded)
      assert.strictEqual(s.schema_version, 3)
      assert.strictEqual(s.baseline_last_failure_signature, "v1:worker <n> died")
      assert.strictEqual(s.baseline_attempts[0]!.signature, foldSignature("worker 3 died"))
      assert.strictEqual(yield* fs.readFileString(file), V1_TEXT)

      yield* store.save(dir, s)
      const written = JSON.parse(yield* fs.readFileString(file))
      assert.strictEqual(written.schema_version, 3)
      assert.notProperty(written, "baseline_failure_signature")
      assert.deepStrictEqual(yield* store.load(dir), Option.some(s))
    }).pipe(Effect.provide(live))
  )

  it.scopedLive("a session that is a file cannot be saved to: one clear line", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const store = yield* StateStore
      const dir = yield* tempDir
      const notADir = NodePath.join(dir, "plain-file")
      yield* fs.writeFileString(notADir, "x")
      const e = yield* Effect.flip(store.save(notADir, sample()))
      assert.strictEqual(e._tag, "StateIoFailed")
      assert.include(e.message, notADir)
      assert.notInclude(e.message, "\n")
    }).pipe(Effect.provide(live))
  )
})

describe("StateStore.layer lock", () => {
  it.scopedLive(
    "holds the session's lock (a 0600 file), refuses a second holder, releases on scope close",
    () =>
      Effect.gen(function* () {
        const store = yield* StateStore
        const session = NodePath.join(yield* tempDir, "s")

        const scope = yield* Scope.make()
        yield* Scope.extend(store.lock(session), scope)
        const second = yield* Effect.flip(Effect.scoped(store.lock(session)))
        assert.strictEqual(second._tag, "SessionLocked")
        if (second._tag === "SessionLocked") assert.strictEqual(second.pid, process.pid)
        assert.include(second.message, `process ${process.pid}`)
        assert.include(second.message, NodePath.join(session, LOCK_FILE))
        // The lock is the kernel's on this file, open to nobody else: a killed holder leaves only a
        // file whose lock went with it.
        assert.deepStrictEqual(yield* listDir(session), [LOCK_FILE])
        assert.strictEqual(fs.statSync(NodePath.join(session, LOCK_FILE)).mode & 0o777, 0o600)

        yield* Scope.close(scope, Exit.void)
        yield* Effect.scoped(store.lock(session))
      }).pipe(Effect.provide(live))
  )

  it.scopedLive("a lock held by another live process is refused with its pid; its death frees it", () =>
    Effect.gen(function* () {
      const store = yield* StateStore
      const session = yield* tempDir
      const child = yield* lockHolderProcess(
        NodePath.join(session, LOCK_FILE),
        "baseline run --session elsewhere"
      )
      const e = yield* Effect.flip(Effect.scoped(store.lock(session)))
      assert.strictEqual(e._tag, "SessionLocked")
      if (e._tag === "SessionLocked") assert.strictEqual(e.pid, child.pid)
      const exited = Effect.async<void>((resume) => {
        child.once("exit", () => resume(Effect.void))
      })
      child.kill("SIGKILL")
      yield* exited
      yield* Effect.scoped(store.lock(session))
    }).pipe(Effect.provide(live))
  )

  const leftovers: ReadonlyArray<readonly [string, () => string]> = [
    ["a dead pid", () => `${deadPid()}\n`],
    ["our own pid", () => `${process.pid}\n`],
    ["garbage", () => "not a pid"],
    ["an empty file", () => ""]
  ]
  it.scopedLive.each(leftovers)(
    "a .lock file left by an older hyperloom holding %s never blocks",
    ([_name, content]) =>
      Effect.gen(function* () {
        const fs = yield* FileSystem.FileSystem
        const store = yield* StateStore
        const session = yield* tempDir
        const lockPath = NodePath.join(session, LOCK_FILE)
        yield* fs.writeFileString(lockPath, content())
        yield* Effect.scoped(store.lock(session))
      }).pipe(Effect.provide(live))
  )
})

describe("StateStore.layerTest", () => {
  it.effect("saves and loads in memory", () =>
    Effect.gen(function* () {
      const store = yield* StateStore
      assert.isTrue(Option.isNone(yield* store.load("sessions/one")))
      yield* store.save("sessions/one", sample())
      assert.deepStrictEqual(yield* store.load("sessions/one/"), Option.some(sample()))
    }).pipe(Effect.provide(layerTest()))
  )

  it.effect("is fresh for every test", () =>
    Effect.gen(function* () {
      const store = yield* StateStore
      assert.isTrue(Option.isNone(yield* store.load("sessions/one")))
    }).pipe(Effect.provide(layerTest()))
  )

  it.effect("refuses seeded corrupt and future files like the live store, and never overwrites them", () =>
    Effect.gen(function* () {
      const store = yield* StateStore
      assert.strictEqual((yield* Effect.flip(store.load("bad")))._tag, "StateCorrupt")
      assert.strictEqual((yield* Effect.flip(store.save("bad", sample())))._tag, "StateCorrupt")
      assert.strictEqual((yield* Effect.flip(store.load("new")))._tag, "StateFromFuture")
      assert.strictEqual((yield* Effect.flip(store.save("new", sample())))._tag, "StateFromFuture")
      const migrated = Option.getOrThrow(yield* store.load("old"))
      assert.strictEqual(migrated.schema_version, 3)
    }).pipe(Effect.provide(layerTest({ bad: "{", new: JSON.stringify({ schema_version: 7 }), old: V1_TEXT })))
  )

  it.scoped("one lock per session", () =>
    Effect.gen(function* () {
      const store = yield* StateStore
      yield* store.lock("s1")
      yield* store.lock("s2")
      assert.strictEqual((yield* Effect.flip(Effect.scoped(store.lock("s1"))))._tag, "SessionLocked")
    }).pipe(Effect.provide(layerTest()))
  )
})
