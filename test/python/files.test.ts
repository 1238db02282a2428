/**
 * The files that travel with the actor classes (python/hyperloom/shipping.py SUPERVISOR_FILES,
 * RUNNER_FILES) are all that `python -I PYDIR supervise` and `python -I PYDIR serve|sweep`
 * import: a node that has only Ray runs them from a copy of exactly these files. A module that
 * starts importing another (the keeper importing cgroup, the runners the shared copy loop) must
 * join the list, or such a node fails with ModuleNotFoundError.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { anyPython, pythonDir } from "../support/lease.js"

const lists = JSON.parse(
  spawnSync(
    anyPython,
    [
      "-c",
      "import json, sys; sys.path.insert(0, sys.argv[1]); from hyperloom import shipping; print(json.dumps([shipping.SUPERVISOR_FILES, shipping.RUNNER_FILES]))",
      pythonDir
    ],
    { encoding: "utf8" }
  ).stdout
) as [ReadonlyArray<string>, ReadonlyArray<string>]

const copyOf = (files: ReadonlyArray<string>) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-files-"))
  for (const rel of files) {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true })
    fs.copyFileSync(path.join(pythonDir, rel), path.join(dir, rel))
  }
  return dir
}

describe("the Python files that travel with the actor classes", () => {
  for (const [name, files, command] of [
    ["SUPERVISOR_FILES", lists[0], "supervise"],
    ["RUNNER_FILES", lists[1], "serve"],
    // a sweep's engine on a node without the package runs the sweep runner from the same copy
    ["RUNNER_FILES", lists[1], "sweep"]
  ] as const) {
    it(`${name} alone run \`python -I PYDIR ${command}\` (a usage error, no missing module)`, () => {
      const dir = copyOf(files)
      try {
        const r = spawnSync(anyPython, ["-I", dir, command], { encoding: "utf8", timeout: 30_000 })
        assert.notMatch(r.stderr, /ModuleNotFoundError|ImportError|Traceback/, r.stderr)
        assert.strictEqual(r.status, 2, r.stderr)
      } finally {
        fs.rmSync(dir, { recursive: true, force: true })
      }
    })
  }
})
