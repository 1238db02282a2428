/**
 * No import circles in src/ (type-only imports included): scripts/import-cycles.mjs finds the
 * strongly connected components of the import graph. It is shown failing on a made-up circle.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"

const root = path.resolve(import.meta.dirname, "../..")
const run = (dir: string) =>
  spawnSync(process.execPath, [path.join(root, "scripts/import-cycles.mjs"), dir], {
    cwd: root,
    encoding: "utf8"
  })

describe("import cycles", () => {
  it("src/ has none", () => {
    const r = run("src")
    assert.strictEqual(r.status, 0, r.stdout + r.stderr)
    assert.match(r.stdout, /, 0 import cycle\(s\)\n$/)
  })

  it("a circle of type-only imports is found and fails", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-cycles-"))
    try {
      fs.mkdirSync(path.join(dir, "cli"))
      fs.writeFileSync(path.join(dir, "cli/a.ts"), 'import type { B } from "./b.js"\nexport type A = B\n')
      fs.writeFileSync(path.join(dir, "cli/b.ts"), 'import type { A } from "./a.js"\nexport type B = A | 1\n')
      fs.writeFileSync(path.join(dir, "c.ts"), 'import type { A } from "./cli/a.js"\nexport type C = A\n')
      const r = run(dir)
      assert.strictEqual(r.status, 1)
      assert.include(r.stdout, "cli/a.ts <-> ")
      assert.include(r.stdout, "cli/b.ts")
      assert.notInclude(r.stdout, "c.ts <->")
      assert.include(r.stdout, "3 modules, 1 import cycle(s)")
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
