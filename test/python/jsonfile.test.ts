/**
 * hyperloom.jsonfile, the runners' one atomic write of a status document (serve.json,
 * engine.json, a sweep's control replies): a new file replaces the old in one rename, and a
 * write that fails leaves the old document and no temp file.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { anyPython, pythonDir } from "../support/lease.js"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-jsonfile-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

/** Runs `code` with hyperloom.jsonfile imported as `jsonfile` and `path` the document's path. */
const py = (file: string, code: string) =>
  spawnSync(
    anyPython,
    [
      "-I",
      "-c",
      `import sys; sys.path.insert(0, sys.argv[1]); from hyperloom import jsonfile; path = sys.argv[2]\n${code}`,
      pythonDir,
      file
    ],
    { encoding: "utf8", timeout: 30_000 }
  )

describe("hyperloom.jsonfile", () => {
  it("write replaces the document in one rename (a new inode, no temp file left); read gives it back", () => {
    const here = fs.mkdtempSync(path.join(dir, "w-"))
    const file = path.join(here, "serve.json")
    fs.writeFileSync(file, '{"old": true}\n')
    const before = fs.statSync(file).ino
    const w = py(
      file,
      'jsonfile.write(path, {"version": 1, "outcome": "ok"}); print(jsonfile.read(path)["outcome"])'
    )
    assert.strictEqual(w.status, 0, w.stderr)
    assert.strictEqual(w.stdout, "ok\n")
    assert.deepStrictEqual(JSON.parse(fs.readFileSync(file, "utf8")), { version: 1, outcome: "ok" })
    assert.notStrictEqual(fs.statSync(file).ino, before)
    assert.deepStrictEqual(fs.readdirSync(here), ["serve.json"])
  })

  it("a write that fails leaves the old document and no temp file; read of a part-written or missing file is None", () => {
    const here = fs.mkdtempSync(path.join(dir, "f-"))
    const file = path.join(here, "engine.json")
    fs.writeFileSync(file, '{"old": true}\n')
    fs.writeFileSync(path.join(here, "half.json"), '{"version": 1, "sta')
    const w = py(
      file,
      [
        "try:",
        '    jsonfile.write(path, {"bad": object()})',
        "except TypeError:",
        '    print("failed")',
        'print(jsonfile.read(path + ".missing"), jsonfile.read(path.replace("engine", "half")))'
      ].join("\n")
    )
    assert.strictEqual(w.status, 0, w.stderr)
    assert.strictEqual(w.stdout, "failed\nNone None\n")
    assert.strictEqual(fs.readFileSync(file, "utf8"), '{"old": true}\n')
    assert.deepStrictEqual(fs.readdirSync(here).sort(), ["engine.json", "half.json"])
  })
})
