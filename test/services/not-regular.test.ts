/**
 * A state or result file that is not a regular file (issue 13 item 8): a FIFO hung hyperloom
 * (Node's read blocks a thread-pool thread; Ctrl-C did not end it) and `/dev/zero` ate ~10 GB of
 * memory in 30 s. StateStore and AttemptFiles open without blocking, refuse anything but a regular
 * file and bound the size they read; the file is never replaced.
 *
 * Each case runs under a 5 s bound; afterwards a writer opens and closes every FIFO, so a read
 * that did hang (on old code) gets its end of file instead of wedging the test worker.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { afterEach, assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Layer } from "effect"
import { initialState } from "../../src/domain/State.js"
import * as AttemptFilesLive from "../../src/services/AttemptFiles.js"
import { AttemptFiles } from "../../src/services/AttemptFiles.js"
import { layer, STATE_FILE, StateStore } from "../../src/services/StateStore.js"
import * as SweepStoreLive from "../../src/services/SweepStore.js"
import { SweepStore } from "../../src/services/SweepStore.js"

const live = Layer.mergeAll(layer, AttemptFilesLive.layer, SweepStoreLive.layer).pipe(
  Layer.provideMerge(NodeContext.layer)
)

const fifos: string[] = []
const dirs: string[] = []

afterEach(() => {
  for (const f of fifos.splice(0)) {
    try {
      fs.closeSync(fs.openSync(f, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK))
    } catch {
      // no reader was left waiting on it
    }
  }
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true })
})

const session = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-notregular-"))
  dirs.push(dir)
  return dir
}

const mkfifo = (file: string) => {
  assert.strictEqual(spawnSync("mkfifo", [file]).status, 0)
  fifos.push(file)
}

/** The effect's exit within 5 s (a hang is a failure, not a stuck test). */
const bounded = <A, E>(effect: Effect.Effect<A, E, StateStore | AttemptFiles | SweepStore>) =>
  effect.pipe(
    Effect.timeoutFail({ duration: Duration.seconds(5), onTimeout: () => "hung" as const }),
    Effect.exit,
    Effect.provide(live)
  )

const failureMessage = (exit: Exit.Exit<unknown, unknown>): string => {
  assert.isTrue(Exit.isFailure(exit), "expected a refusal")
  const e = Exit.isFailure(exit) ? (exit.cause as { error?: unknown }).error : undefined
  assert.notStrictEqual(e, "hung", "the read hung")
  return String((e as { message?: string } | undefined)?.message ?? e)
}

describe("state.json that is not a regular file", () => {
  it.live("a FIFO is refused at once (StateCorrupt, exit 8) and left in place", () =>
    Effect.gen(function* () {
      const dir = session()
      const file = path.join(dir, STATE_FILE)
      mkfifo(file)
      const loaded = yield* bounded(Effect.flatMap(StateStore, (s) => s.load(dir)))
      const message = failureMessage(loaded)
      assert.include(message, "not a regular file")
      assert.include(message, "left untouched")
      const saved = yield* bounded(Effect.flatMap(StateStore, (s) => s.save(dir, initialState())))
      assert.include(failureMessage(saved), "not a regular file")
      assert.isTrue(fs.lstatSync(file).isFIFO(), "the FIFO was replaced")
    })
  )

  it.live("a link to /dev/zero is refused at once, without reading it", () =>
    Effect.gen(function* () {
      const dir = session()
      fs.symlinkSync("/dev/zero", path.join(dir, STATE_FILE))
      const before = process.memoryUsage().rss
      const loaded = yield* bounded(Effect.flatMap(StateStore, (s) => s.load(dir)))
      assert.include(failureMessage(loaded), "not a regular file")
      assert.isBelow(process.memoryUsage().rss - before, 64 * 1024 * 1024)
    })
  )

  it.live("a state file over the size bound is refused, not read whole", () =>
    Effect.gen(function* () {
      const dir = session()
      const file = path.join(dir, STATE_FILE)
      fs.writeFileSync(file, "")
      fs.truncateSync(file, 64 * 1024 * 1024 + 1)
      const loaded = yield* bounded(Effect.flatMap(StateStore, (s) => s.load(dir)))
      assert.include(failureMessage(loaded), "larger than")
      assert.strictEqual(fs.statSync(file).size, 64 * 1024 * 1024 + 1)
    })
  )
})

describe("result files that are not regular files", () => {
  it.live("a FIFO or /dev/zero as the result file reads as no report, at once", () =>
    Effect.gen(function* () {
      const dir = session()
      const fifo = path.join(dir, "result.json")
      mkfifo(fifo)
      const zero = path.join(dir, "zero.json")
      fs.symlinkSync("/dev/zero", zero)
      for (const file of [fifo, zero]) {
        for (const read of [
          Effect.flatMap(AttemptFiles, (f) => f.readResult(file)),
          Effect.flatMap(AttemptFiles, (f) => f.readThroughput(file)),
          Effect.flatMap(AttemptFiles, (f) => f.readJson(file)),
          Effect.flatMap(AttemptFiles, (f) => f.readServeStatus(file)),
          Effect.flatMap(AttemptFiles, (f) => f.scanLog(file, () => {}, 100))
        ]) {
          const exit = yield* bounded(read)
          assert.deepStrictEqual(exit, Exit.succeed(undefined), `${file}: ${String(exit)}`)
        }
      }
    })
  )
})

describe("sweep.json that is not a regular file (issue 27 item 3)", () => {
  it.live(
    "a FIFO is refused at once (exit 8: sweep show, sweep run and report load it) and never replaced",
    () =>
      Effect.gen(function* () {
        const dir = session()
        const file = path.join(dir, "sweep.json")
        mkfifo(file)
        const message = failureMessage(yield* bounded(Effect.flatMap(SweepStore, (s) => s.load(dir))))
        assert.include(message, "not a regular file")
        assert.include(message, "left untouched")
        assert.isTrue(fs.lstatSync(file).isFIFO(), "the FIFO was replaced")
      })
  )

  it.live("a link to /dev/zero is refused at once, without reading it", () =>
    Effect.gen(function* () {
      const dir = session()
      fs.symlinkSync("/dev/zero", path.join(dir, "sweep.json"))
      const before = process.memoryUsage().rss
      const message = failureMessage(yield* bounded(Effect.flatMap(SweepStore, (s) => s.load(dir))))
      assert.include(message, "not a regular file")
      assert.isBelow(process.memoryUsage().rss - before, 64 * 1024 * 1024)
    })
  )
})
