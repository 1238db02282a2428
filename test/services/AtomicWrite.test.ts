import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { splitPath, writeFileAtomicallySync } from "../../src/services/AtomicWrite.js"

describe("the one atomic write", () => {
  it("the synchronous form (the host queue's history) replaces the file whole, with its mode, and a failed write leaves nothing", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-atomic-"))
    try {
      const file = path.join(dir, "history.jsonl")
      writeFileAtomicallySync(file, "one\n", 0o600)
      writeFileAtomicallySync(file, "two\n", 0o600)
      assert.strictEqual(fs.readFileSync(file, "utf8"), "two\n")
      assert.strictEqual(fs.statSync(file).mode & 0o777, 0o600)
      fs.mkdirSync(path.join(dir, "taken"))
      fs.writeFileSync(path.join(dir, "taken", "inside"), "")
      assert.throws(() => writeFileAtomicallySync(path.join(dir, "taken"), "x"))
      assert.deepStrictEqual(fs.readdirSync(dir).sort(), ["history.jsonl", "taken"])
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("splitPath: a path's folder and name", () => {
    assert.deepStrictEqual(splitPath("/a/b/c.json"), { dir: "/a/b", base: "c.json" })
    assert.deepStrictEqual(splitPath("/c.json"), { dir: "/", base: "c.json" })
    assert.deepStrictEqual(splitPath("c.json"), { dir: ".", base: "c.json" })
  })
})
