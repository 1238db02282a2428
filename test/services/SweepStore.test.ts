/**
 * The live sweep store on the real file system: sweep.json and summary.csv are written through
 * the one atomic write (services/AtomicWrite), read back as saved, no temp file left behind; an
 * unreadable sweep.json is never overwritten.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { initialSweep, SUMMARY_CSV, SWEEP_FILE } from "../../src/domain/Sweep.js"
import * as SweepStore from "../../src/services/SweepStore.js"

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "hl-sweep-store-"))
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }))

const live = SweepStore.layer.pipe(Layer.provideMerge(NodeContext.layer))

const doc = initialSweep(
  {
    server: "engine --max-num-seqs {seqs}",
    client: ["client", "--max-concurrency", "{c}"],
    params: [{ name: "seqs", values: ["2", "4"] }],
    load: { kind: "points", name: "c", values: ["1", "2"] },
    slos: [],
    repeats: 1,
    gpus: 0,
    nodes: 1
  },
  "2026-12-01T00:00:00.000Z"
)

describe("SweepStore on the file system", () => {
  it.effect("save then load: the same document, summary.csv beside it, no temp file left", () =>
    Effect.gen(function* () {
      const store = yield* SweepStore.SweepStore
      const dir = path.join(tmp, "s1")
      yield* store.save(dir, doc)
      yield* store.save(dir, doc)
      const loaded = yield* store.load(dir)
      assert.deepStrictEqual(Option.getOrThrow(loaded), doc)
      assert.deepStrictEqual(fs.readdirSync(dir).sort(), [SUMMARY_CSV, SWEEP_FILE].sort())
    }).pipe(Effect.provide(live))
  )

  it.effect("an unreadable sweep.json is refused and left as it was", () =>
    Effect.gen(function* () {
      const store = yield* SweepStore.SweepStore
      const dir = path.join(tmp, "s2")
      fs.mkdirSync(dir)
      fs.writeFileSync(path.join(dir, SWEEP_FILE), "{not json")
      const error = yield* Effect.flip(store.save(dir, doc))
      assert.strictEqual(error._tag, "StateCorrupt")
      assert.strictEqual(fs.readFileSync(path.join(dir, SWEEP_FILE), "utf8"), "{not json")
      assert.deepStrictEqual(fs.readdirSync(dir), [SWEEP_FILE])
    }).pipe(Effect.provide(live))
  )
})
