import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Scope } from "effect"
import { holdLockFile } from "../../src/services/LockFile.js"

const tempLock = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-lock-")), "x.lock")

describe("holdLockFile", () => {
  it.live("holds the lock for its scope, with our pid inside, and removes it on release", () =>
    Effect.gen(function* () {
      const file = tempLock()
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* holdLockFile(file)
          assert.strictEqual(fs.readFileSync(file, "utf8"), `${process.pid}\n`)
          const second = yield* Effect.scoped(holdLockFile(file)).pipe(Effect.flip)
          assert.strictEqual(second._tag, "LockHeld")
          assert.strictEqual(second._tag === "LockHeld" ? second.holderPid : undefined, process.pid)
        })
      )
      assert.isFalse(fs.existsSync(file))
      assert.deepStrictEqual(fs.readdirSync(path.dirname(file)), [], "no temp file left behind")
    }).pipe(Effect.provide(NodeFileSystem.layer))
  )

  it.live("a waiter says once whom it waits for and gets the lock when the holder lets go", () =>
    Effect.gen(function* () {
      const file = tempLock()
      const holder = yield* Scope.make()
      yield* Scope.extend(holdLockFile(file), holder)
      const waited: number[] = []
      const waiter = yield* Effect.fork(
        Effect.scoped(
          Effect.zipRight(
            holdLockFile(file, { waitMs: 5_000, onWait: (pid) => Effect.sync(() => waited.push(pid)) }),
            Effect.sync(() => fs.readFileSync(file, "utf8"))
          )
        )
      )
      yield* Effect.sleep(Duration.millis(400))
      yield* Scope.close(holder, Exit.void)
      const content = yield* Fiber.join(waiter)
      assert.strictEqual(content, `${process.pid}\n`)
      assert.deepStrictEqual(waited, [process.pid])
    }).pipe(Effect.provide(NodeFileSystem.layer))
  )

  it.live("a stale lock (dead pid, or not a pid) is taken over", () =>
    Effect.gen(function* () {
      for (const stale of ["2147483646\n", "", "garbage"]) {
        const file = tempLock()
        fs.writeFileSync(file, stale)
        yield* Effect.scoped(
          Effect.sync(() => undefined).pipe(
            Effect.zipLeft(holdLockFile(file)),
            Effect.tap(() => assert.strictEqual(fs.readFileSync(file, "utf8"), `${process.pid}\n`))
          )
        )
      }
    }).pipe(Effect.provide(NodeFileSystem.layer))
  )
})
