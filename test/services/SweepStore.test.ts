/**
 * The live sweep store on disk (docs/design.md#what-a-sweep-keeps): sweep.json is versioned,
 * written atomically (nothing but sweep.json and summary.csv is left in the session), and a file it
 * cannot read (corrupt, from a newer hyperloom, not a file) is refused by load and by save and left
 * byte-identical: an unreadable sweep is never overwritten.
 */
import * as NodePath from "node:path"
import { FileSystem } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import {
  type Experiment,
  initialSweep,
  renderSweep,
  SUMMARY_CSV,
  SWEEP_FILE,
  SWEEP_SCHEMA_VERSION
} from "../../src/domain/Sweep.js"
import { layer, SweepStore } from "../../src/services/SweepStore.js"

const live = layer.pipe(Layer.provideMerge(NodeContext.layer))

const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) =>
  fs.makeTempDirectoryScoped({ prefix: "hyperloom-sweep-store-" })
)

const experiment: Experiment = {
  server: "engine --max-num-seqs {seqs}",
  client: ["client", "--max-concurrency", "{c}"],
  params: [{ name: "seqs", values: ["2", "4"] }],
  load: { kind: "points", name: "c", values: ["1", "2"] },
  slos: [{ metric: "p99_ttft_ms", op: "<=", bound: 300 }],
  repeats: 1,
  gpus: 0,
  nodes: 1
}
const doc = () => initialSweep(experiment, "2026-12-01T12:00:00.000Z")

/** A fresh session directory, the live store and the path of its sweep.json. */
const session = Effect.gen(function* () {
  const dir = yield* tempDir
  return {
    fs: yield* FileSystem.FileSystem,
    store: yield* SweepStore,
    dir,
    file: NodePath.join(dir, SWEEP_FILE)
  }
})

const listDir = (dir: string) =>
  Effect.map(
    Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readDirectory(dir)),
    (names) => [...names].sort()
  )

describe("SweepStore (live, on disk)", () => {
  it.scopedLive("saves a versioned document atomically: no temp file left, each save a new inode", () =>
    Effect.gen(function* () {
      const { fs, store, dir, file } = yield* session
      const first = doc()
      yield* store.save(dir, first)
      const text = yield* fs.readFileString(file)
      assert.strictEqual(JSON.parse(text).schema_version, SWEEP_SCHEMA_VERSION)
      assert.strictEqual(JSON.parse(text).kind, "hyperloom.sweep")
      const inode = (yield* fs.stat(file)).ino
      const second = { ...first, status: "done" as const, updated_at: "2026-12-01T12:01:00.000Z" }
      yield* store.save(dir, second)
      assert.notDeepEqual((yield* fs.stat(file)).ino, inode, "replaced by a rename, not rewritten in place")
      assert.deepStrictEqual(yield* listDir(dir), [SUMMARY_CSV, SWEEP_FILE])
      assert.deepStrictEqual(yield* store.load(dir), Option.some(second))
    }).pipe(Effect.provide(live))
  )

  const refused = [
    {
      name: "a truncated file (a write that never finished)",
      bytes: renderSweep(doc()).slice(0, 200),
      tag: "StateCorrupt",
      says: "invalid JSON"
    },
    {
      name: "a file that fails the schema",
      bytes: renderSweep(doc()).replace('"status": "running"', '"status": "finished"'),
      tag: "StateCorrupt",
      says: "status"
    },
    {
      name: "a file from a newer hyperloom",
      bytes: renderSweep(doc()).replace('"schema_version": 1', '"schema_version": 2'),
      tag: "StateFromFuture",
      says: "2"
    }
  ] as const

  for (const c of refused) {
    it.scopedLive(
      `${c.name}: load and save refuse it (${c.tag}); it stays byte-identical, no summary written`,
      () =>
        Effect.gen(function* () {
          const { fs, store, dir, file } = yield* session
          yield* fs.writeFileString(file, c.bytes)
          const loaded = yield* Effect.flip(store.load(dir))
          assert.strictEqual(loaded._tag, c.tag)
          assert.include(loaded.message, file)
          assert.include(loaded.message, c.says)
          const saved = yield* Effect.flip(store.save(dir, doc()))
          assert.strictEqual(saved._tag, c.tag)
          assert.strictEqual(yield* fs.readFileString(file), c.bytes)
          assert.deepStrictEqual(yield* listDir(dir), [SWEEP_FILE])
        }).pipe(Effect.provide(live))
    )
  }

  it.scopedLive(
    "a sweep.json that cannot be read at all (a directory): refused by load and save, left as it is",
    () =>
      Effect.gen(function* () {
        const { fs, store, dir, file } = yield* session
        yield* fs.makeDirectory(file)
        yield* fs.writeFileString(NodePath.join(file, "keep"), "x")
        // the bounded read refuses what is not a regular file (exit 8, as for state.json)
        assert.strictEqual((yield* Effect.flip(store.load(dir)))._tag, "StateCorrupt")
        assert.strictEqual((yield* Effect.flip(store.save(dir, doc())))._tag, "StateCorrupt")
        assert.deepStrictEqual(yield* listDir(file), ["keep"])
        assert.deepStrictEqual(yield* listDir(dir), [SWEEP_FILE])
      }).pipe(Effect.provide(live))
  )
})
