import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Clock, Duration, Effect, Exit, Fiber, Logger, Option, Scope, TestClock } from "effect"
import { holdLockFile, hostDir, type LockHeld } from "../../src/services/LockFile.js"
import { canActAsForeignUser, startSquatter } from "../support/foreignUser.js"
import { lockHolderProcess } from "../support/lockHolder.js"

const tempLock = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-lock-")), "x.lock")

/** A lock no other test (or test run) uses. */
const freshName = tempLock

/** Real time passes (the lock's socket I/O is real) until `cond` holds, or fails after `ms`. */
const realUntil = (what: string, cond: Effect.Effect<boolean>, ms = 5_000) =>
  Effect.gen(function* () {
    const end = Date.now() + ms
    while (!(yield* cond)) {
      if (Date.now() > end) return yield* Effect.dieMessage(`not within ${ms} ms (real time): ${what}`)
      yield* Effect.promise(() => new Promise((r) => setTimeout(r, 5)))
    }
  })

/**
 * Until a waiter sleeps between two tries: a sleep due within 0.5 s on the TestClock (asking the
 * holder who it is also starts a 1 s timeout there, which stays listed after the holder answered).
 */
const waiterSleeps = realUntil(
  "a waiter sleeping between two tries on the TestClock",
  Effect.zipWith(TestClock.sleeps(), Clock.currentTimeMillis, (due, now) =>
    Chunk.some(due, (t) => t - now <= 500)
  )
)

describe("holdLockFile: a lock the kernel releases", () => {
  it.scoped("a waiter waits on the Clock: TestClock drives it to its waitMs, and not a moment sooner", () =>
    Effect.gen(function* () {
      // 10 s on the Clock, while this test gives real time only 3 s: a wait timed by Date.now()
      // (or by real timers) could not end here, and one that gave up early fails the check at 9 s.
      // Every retry's bind and question to the holder is real socket I/O, and TestClock.adjust
      // wakes each retry in turn on its way (~90 of them).
      const name = freshName()
      yield* holdLockFile(name, { label: "L", what: "holding it" })
      const waited: Array<LockHeld> = []
      const waiter = yield* Effect.fork(
        Effect.scoped(
          holdLockFile(name, { label: "L", waitMs: 10_000, onWait: (h) => Effect.sync(() => waited.push(h)) })
        )
      )
      yield* waiterSleeps
      assert.deepStrictEqual(
        waited.map((h) => h.holderWhat),
        ["holding it"]
      )
      yield* TestClock.adjust(Duration.seconds(9))
      yield* waiterSleeps
      assert.isTrue(Option.isNone(yield* Fiber.poll(waiter)), "gave up before its 10 s on the Clock")
      yield* TestClock.adjust(Duration.seconds(2))
      yield* realUntil(
        "the waiter giving up once 10 s passed on the TestClock",
        Effect.map(Fiber.poll(waiter), Option.isSome),
        3_000
      )
      const e = yield* Effect.flip(Fiber.join(waiter))
      assert.strictEqual(e._tag, "LockHeld")
      assert.strictEqual(waited.length, 1, "told once whom it waits for")
    })
  )

  it.live("holds the lock for its scope; a second taker is refused and told who holds it and why", () =>
    Effect.gen(function* () {
      const name = freshName()
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* holdLockFile(name, { label: "the test lock", what: "holding it for the test" })
          const second = yield* Effect.scoped(holdLockFile(name, { label: "the test lock" })).pipe(
            Effect.flip
          )
          assert.strictEqual(second._tag, "LockHeld")
          if (second._tag === "LockHeld") {
            assert.strictEqual(second.holderPid, process.pid)
            assert.strictEqual(second.holderWhat, "holding it for the test")
            assert.strictEqual(
              second.message,
              `the test lock is held by process ${process.pid} (holding it for the test)`
            )
          }
        })
      )
      // Released with the scope: the next taker gets it at once.
      yield* Effect.scoped(holdLockFile(name, { label: "the test lock" }))
    })
  )

  it.live("a waiter says once whom it waits for and gets the lock when the holder lets go", () =>
    Effect.gen(function* () {
      const name = freshName()
      const holder = yield* Scope.make()
      yield* Scope.extend(holdLockFile(name, { label: "L", what: "first" }), holder)
      const waited: Array<LockHeld> = []
      const waiter = yield* Effect.fork(
        Effect.scoped(
          holdLockFile(name, { label: "L", waitMs: 5_000, onWait: (h) => Effect.sync(() => waited.push(h)) })
        )
      )
      yield* Effect.sleep(Duration.millis(400))
      yield* Scope.close(holder, Exit.void)
      yield* Fiber.join(waiter)
      assert.deepStrictEqual(
        waited.map((h) => [h.holderPid, h.holderWhat]),
        [[process.pid, "first"]]
      )
    })
  )

  it.live("a holder given no `what` says nothing of itself: this process's argv is not read", () =>
    Effect.gen(function* () {
      const name = freshName()
      yield* holdLockFile(name, { label: "L" })
      const e = yield* Effect.flip(Effect.scoped(holdLockFile(name, { label: "L" })))
      assert.strictEqual(e._tag, "LockHeld")
      if (e._tag === "LockHeld") assert.isUndefined(e.holderWhat)
    }).pipe(Effect.scoped)
  )

  it.live("a waiter gives up after waitMs with LockHeld", () =>
    Effect.gen(function* () {
      const name = freshName()
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* holdLockFile(name, { label: "L" })
          const started = Date.now()
          const e = yield* Effect.flip(Effect.scoped(holdLockFile(name, { label: "L", waitMs: 300 })))
          assert.strictEqual(e._tag, "LockHeld")
          assert.isAtLeast(Date.now() - started, 250)
        })
      )
    })
  )

  it.live("the holder in another process is named, and its SIGKILL frees the lock at once", () =>
    Effect.gen(function* () {
      const name = freshName()
      const scope = yield* Scope.make()
      const child = yield* Scope.extend(lockHolderProcess(name, "another run"), scope)
      const e = yield* Effect.flip(Effect.scoped(holdLockFile(name, { label: "L" })))
      assert.strictEqual(e._tag, "LockHeld")
      if (e._tag === "LockHeld") {
        assert.strictEqual(e.holderPid, child.pid)
        assert.strictEqual(e.holderWhat, "another run")
      }
      const exited = Effect.async<void>((resume) => {
        child.once("exit", () => resume(Effect.void))
      })
      child.kill("SIGKILL")
      yield* exited
      // Nothing stale to judge: no file, no pid; the kernel freed the name with the process.
      const started = Date.now()
      yield* Effect.scoped(holdLockFile(name, { label: "L", waitMs: 2_000 }))
      assert.isBelow(Date.now() - started, 1_000)
      yield* Scope.close(scope, Exit.void)
    })
  )

  it.live("children started while the lock is held do not inherit it", () =>
    Effect.gen(function* () {
      // `ray start` leaves daemons running: an inherited socket would hold the lock forever.
      const name = freshName()
      const child = yield* Effect.scoped(
        Effect.gen(function* () {
          yield* holdLockFile(name, { label: "L" })
          return spawn("sleep", ["30"], { stdio: "ignore", detached: true })
        })
      )
      try {
        yield* Effect.scoped(holdLockFile(name, { label: "L" }))
      } finally {
        child.kill("SIGKILL")
      }
    })
  )

  it.live(
    "waiters racing for a lock whose holder was SIGKILLed never hold it together",
    () =>
      Effect.gen(function* () {
        let inside = 0
        let most = 0
        let entered = 0
        for (let round = 0; round < 10; round++) {
          const name = freshName()
          const scope = yield* Scope.make()
          const holder = yield* Scope.extend(lockHolderProcess(name), scope)
          const waiter = Effect.scoped(
            Effect.gen(function* () {
              yield* holdLockFile(name, { label: "L", waitMs: 10_000 })
              inside += 1
              entered += 1
              most = Math.max(most, inside)
              yield* Effect.sleep(Duration.millis(5))
              inside -= 1
            })
          )
          const waiters = yield* Effect.fork(
            Effect.all(
              Array.from({ length: 6 }, () => waiter),
              { concurrency: "unbounded" }
            )
          )
          yield* Effect.sleep(Duration.millis(50))
          holder.kill("SIGKILL")
          yield* Fiber.join(waiters)
          yield* Scope.close(scope, Exit.void)
        }
        assert.strictEqual(entered, 60)
        assert.strictEqual(most, 1, "two waiters held the lock at once")
      }),
    // Ten rounds, each starting a holder process: give a loaded machine time (the test itself is fast).
    60_000
  )
})

describe("holdLockFile", () => {
  it.live("one file reached by two paths is one lock; the file is 0600", () =>
    Effect.gen(function* () {
      const file = tempLock()
      const dir = path.dirname(file)
      const link = `${dir}-link`
      fs.symlinkSync(dir, link)
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* holdLockFile(file)
          assert.strictEqual(fs.statSync(file).mode & 0o777, 0o600)
          const e = yield* Effect.flip(Effect.scoped(holdLockFile(path.join(link, "x.lock"))))
          assert.strictEqual(e._tag, "LockHeld")
          // Another file name in the same directory is another lock.
          yield* Effect.scoped(holdLockFile(path.join(dir, "y.lock")))
        })
      )
      fs.unlinkSync(link)
    }).pipe(Effect.provide(NodeFileSystem.layer))
  )

  it.live("a lock file left by an older hyperloom (even with our own pid) never blocks", () =>
    Effect.gen(function* () {
      // The pid-file lock made a waiter wait 300 s on a reused or its own pid.
      for (const leftover of [`${process.pid}\n`, "2147483646\n", "garbage"]) {
        const file = tempLock()
        fs.writeFileSync(file, leftover, { mode: 0o644 })
        yield* Effect.scoped(holdLockFile(file))
        // Ours, and open to others: made 0600, so nobody else can open it to lock it.
        assert.strictEqual(fs.statSync(file).mode & 0o777, 0o600)
      }
    }).pipe(Effect.provide(NodeFileSystem.layer))
  )

  it.live("the lock another process holds on the same file is refused with its pid", () =>
    Effect.gen(function* () {
      const file = tempLock()
      const child = yield* lockHolderProcess(file)
      const e = yield* Effect.flip(Effect.scoped(holdLockFile(file)))
      assert.strictEqual(e._tag, "LockHeld")
      if (e._tag === "LockHeld") assert.strictEqual(e.holderPid, child.pid)
    }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer))
  )
})

describe("a foreign local user cannot squat or lie through a lock (docs/design.md#fair-queue)", () => {
  it.live.skipIf(!canActAsForeignUser())(
    "a session lock: uid 65534 claiming it first (its old abstract name, the file) is neither obeyed nor quoted",
    () =>
      Effect.gen(function* () {
        const file = tempLock()
        const dir = path.dirname(file)
        // A session directory as users make them: readable by everyone.
        fs.chmodSync(dir, 0o755)
        // An earlier run of ours left whatever the lock leaves in it.
        yield* Effect.scoped(holdLockFile(file))
        const st = fs.statSync(dir)
        // The name the abstract-socket lock of this file had: anyone could bind it first.
        const squat = yield* Effect.promise(() =>
          startSquatter([`hyperloom-lock:${st.dev}:${st.ino}/x.lock`], [file])
        )
        try {
          assert.notInclude(squat.got.join("\n"), `locked ${file}`, "the foreign user holds our lock file")
          const got = yield* Effect.either(Effect.scoped(holdLockFile(file, { waitMs: 1_000 })))
          assert.isTrue(
            got._tag === "Right",
            `a foreign user's squat kept the lock: ${got._tag === "Left" ? got.left.message : ""}`
          )
        } finally {
          squat.child.kill("SIGKILL")
        }
      }).pipe(Effect.provide(NodeFileSystem.layer))
  )
})

describe("the host's directory: ours alone, never trusted when someone else made it", () => {
  const base = () => fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-base-"))
  const uid = process.geteuid!()

  it.live("is made 0700 and reused; one open to others is closed to them", () =>
    Effect.gen(function* () {
      const b = base()
      const dir = yield* hostDir(b)
      assert.strictEqual(dir, path.join(b, `hyperloom-${uid}`))
      assert.strictEqual(fs.statSync(dir).mode & 0o777, 0o700)
      fs.chmodSync(dir, 0o755)
      assert.strictEqual(yield* hostDir(b), dir)
      assert.strictEqual(fs.statSync(dir).mode & 0o777, 0o700)
    })
  )

  it.live("a symlink in its place is refused, never followed", () =>
    Effect.gen(function* () {
      const b = base()
      fs.symlinkSync(
        fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-elsewhere-")),
        path.join(b, `hyperloom-${uid}`)
      )
      const e = yield* Effect.flip(hostDir(b))
      assert.strictEqual(e._tag, "LockUnavailable")
      assert.include(e.message, "not a directory")
    })
  )

  it.live.skipIf(!canActAsForeignUser())(
    "made first by uid 65534: a fallback of the user's own is used (one warning naming the squatter) and its lock works; refused naming that user only when no fallback is safe",
    () =>
      Effect.gen(function* () {
        const b = base()
        fs.chmodSync(b, 0o1777)
        const squatted = path.join(b, `hyperloom-${uid}`)
        const made = spawnSync("setpriv", [
          "--reuid=65534",
          "--regid=65534",
          "--clear-groups",
          "sh",
          "-c",
          `mkdir -m 700 ${squatted} && echo '{"pid":1,"what":"made-up story"}' > ${squatted}/host.lock`
        ])
        assert.strictEqual(made.status, 0, String(made.stderr))
        // The first fallback's root is not ours (made by the squatter too): the next one is used.
        const theirRoot = path.join(b, "their-run")
        const mineRoot = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-home-"))
        fs.chmodSync(mineRoot, 0o700)
        fs.mkdirSync(theirRoot, { mode: 0o700 })
        fs.chownSync(theirRoot, 65534, 65534)
        const fallbacks = [
          { root: theirRoot, path: path.join(theirRoot, "hyperloom") },
          { root: mineRoot, path: path.join(mineRoot, ".cache", "hyperloom", "host-x") }
        ]
        const logs: Array<string> = []
        const logger = Logger.make(({ message }) => {
          logs.push(String(message))
        })
        const dir = yield* hostDir(b, fallbacks).pipe(
          Effect.provide(Logger.replace(Logger.defaultLogger, logger))
        )
        assert.strictEqual(dir, fallbacks[1]!.path)
        assert.strictEqual(fs.statSync(dir).mode & 0o777, 0o700)
        assert.strictEqual(fs.statSync(path.dirname(dir)).mode & 0o777, 0o700)
        assert.strictEqual(logs.length, 1, logs.join("\n"))
        assert.include(logs[0], "uid 65534")
        assert.include(logs[0], `using ${dir} instead`)
        // Every process of the user picks the same one; the warning is said once per process.
        assert.strictEqual(
          yield* hostDir(b, fallbacks).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger))),
          dir
        )
        assert.strictEqual(logs.length, 1)
        // It works: the host lock is held there, the squatter's story is never read.
        const lock = path.join(dir, "host.lock")
        yield* Effect.scoped(holdLockFile(lock, { what: "mine" }))
        // No safe fallback: refused at once, naming the squatter.
        const e = yield* Effect.flip(hostDir(b, [fallbacks[0]!]))
        assert.strictEqual(e._tag, "LockUnavailable")
        assert.include(e.message, "uid 65534")
        assert.include(e.message, "another user made it first")
        assert.include(e.message, "no fallback directory of yours is safe")
        // A lock file of a foreign user (in a directory of ours) is not trusted either.
        const mine = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-mine-"))
        const theirs = path.join(mine, "x.lock")
        fs.writeFileSync(theirs, '{"pid":1,"what":"made-up story"}\n')
        fs.chownSync(theirs, 65534, 65534)
        const f = yield* Effect.flip(Effect.scoped(holdLockFile(theirs)))
        assert.strictEqual(f._tag, "LockUnavailable")
        assert.notInclude(f.message, "made-up story")
      })
  )
})
