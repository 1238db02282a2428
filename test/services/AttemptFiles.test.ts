import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { AttemptFiles, layer } from "../../src/services/AttemptFiles.js"

describe("AttemptFiles (live, on disk)", () => {
  it.live(
    "scanLog feeds every line and returns the tail of the whole file; a missing file is undefined",
    () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-files-"))
      const file = path.join(dir, "server.log")
      const lines = Array.from({ length: 5000 }, (_, i) => `line ${i} of the server log`)
      fs.writeFileSync(file, `${lines.join("\n")}\n`)
      return Effect.gen(function* () {
        const files = yield* AttemptFiles
        const seen: Array<string> = []
        const tail = yield* files.scanLog(file, (l) => seen.push(l), 100)
        assert.strictEqual(seen.length, 5000)
        assert.strictEqual(seen[0], "line 0 of the server log")
        assert.isDefined(tail)
        assert.isTrue(tail!.endsWith("line 4999 of the server log\n"), tail)
        assert.isAtMost(tail!.length, 100)
        assert.isUndefined(yield* files.scanLog(path.join(dir, "nope.log"), () => undefined, 100))
        fs.writeFileSync(
          path.join(dir, "r.json"),
          '{"backend": "sglang", "dataset_name": "random", "output_throughput": 5}\n'
        )
        const parsed = yield* files.readResult(path.join(dir, "r.json"))
        assert.strictEqual(parsed?.format, "sglang")
      }).pipe(
        Effect.provide(layer),
        Effect.provide(NodeFileSystem.layer),
        Effect.ensuring(Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
      )
    }
  )

  it.live(
    "writeJson and writeText replace a file whole, and a write that fails leaves no temp file behind (AtomicWrite.ts)",
    () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-files-"))
      return Effect.gen(function* () {
        const files = yield* AttemptFiles
        const doc = path.join(dir, "environment.json")
        yield* files.writeJson(doc, { a: 1 })
        yield* files.writeJson(doc, { a: 2 })
        assert.deepStrictEqual(JSON.parse(fs.readFileSync(doc, "utf8")), { a: 2 })
        yield* files.writeText(path.join(dir, "report.html"), "<p>x</p>")
        assert.deepStrictEqual(fs.readdirSync(dir).sort(), ["environment.json", "report.html"])
        // a folder where the file should go: the rename fails, and nothing of the write stays
        fs.mkdirSync(path.join(dir, "taken"))
        fs.writeFileSync(path.join(dir, "taken", "inside"), "")
        const failed = yield* Effect.either(files.writeJson(path.join(dir, "taken"), { a: 3 }))
        assert.strictEqual(failed._tag, "Left")
        const failedText = yield* Effect.either(files.writeText(path.join(dir, "taken"), "x"))
        assert.strictEqual(failedText._tag, "Left")
        assert.deepStrictEqual(fs.readdirSync(dir).sort(), ["environment.json", "report.html", "taken"])
      }).pipe(
        Effect.provide(layer),
        Effect.provide(NodeFileSystem.layer),
        Effect.ensuring(Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
      )
    }
  )

  it.live(
    "fileFacts: a file's size and SHA-256, read once per content (path, size, mtime); a changed file is read again",
    () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-facts-"))
      const file = path.join(dir, "prompts.jsonl")
      const sha = (text: string) => createHash("sha256").update(text).digest("hex")
      const when = new Date("2026-12-01T00:00:00Z")
      fs.writeFileSync(file, "aaaa\n")
      fs.utimesSync(file, when, when)
      return Effect.gen(function* () {
        const files = yield* AttemptFiles
        assert.deepStrictEqual(yield* files.fileFacts(file), { bytes: 5, sha256: sha("aaaa\n") })
        // the same size and time: taken as the same content, not read again
        fs.writeFileSync(file, "bbbb\n")
        fs.utimesSync(file, when, when)
        assert.deepStrictEqual(yield* files.fileFacts(file), { bytes: 5, sha256: sha("aaaa\n") })
        // changed (another time, another size): read again
        fs.writeFileSync(file, "cccccc\n")
        assert.deepStrictEqual(yield* files.fileFacts(file), { bytes: 7, sha256: sha("cccccc\n") })
        assert.isUndefined(yield* files.fileFacts(dir))
      }).pipe(
        Effect.provide(layer),
        Effect.provide(NodeFileSystem.layer),
        Effect.ensuring(Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
      )
    }
  )
})
