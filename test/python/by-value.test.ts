/**
 * The Python side is pickled by value (issue 14 item 5): what a lease sends to its actor's node
 * loads and runs in `python -I` from a folder without the hyperloom package, the supervisor
 * placed from the files that travel with the actor class. The control pickles by reference and
 * fails to load there (`No module named 'hyperloom'`), as rank 1 on a host without the package did.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { pythonDir } from "../support/lease.js"
import { projectRoot, rayPython } from "../support/ray.js"

const here = path.join(projectRoot, "test", "python", "by-value")
const work = fs.mkdtempSync(path.join(os.tmpdir(), "hl-by-value-"))
afterAll(() => fs.rmSync(work, { recursive: true, force: true }))

/** Pickles on the bridge's side (the package on sys.path, as `python PYDIR bridge` has it). */
const pickle = (file: string, mode: "by-value" | "by-reference") => {
  const r = spawnSync(rayPython, [path.join(here, "pickle_lease.py"), file, "/nonexistent/hl-pydir", mode], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", PYTHONPATH: pythonDir },
    encoding: "utf8"
  })
  assert.strictEqual(r.status, 0, r.stderr)
}

/** Loads on a node's side: `python -I`, in an empty folder, its temporary directory `tmp`. */
const load = (file: string, tmp: string) => {
  const cwd = fs.mkdtempSync(path.join(work, "node-"))
  return spawnSync(rayPython, ["-I", path.join(here, "load_lease.py"), file], {
    cwd,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", TMPDIR: tmp },
    encoding: "utf8"
  })
}

describe("the Python side pickled by value", () => {
  it("loads and runs the supervisor in `python -I` where the package is not", () => {
    const file = path.join(work, "by-value.pkl")
    pickle(file, "by-value")
    const tmp = fs.mkdtempSync(path.join(work, "tmp-"))
    const r = load(file, tmp)
    assert.strictEqual(r.status, 0, r.stderr)
    const got = JSON.parse(r.stdout.trim().split("\n").pop()!)
    assert.isFalse(got.importable, "the loading side has no hyperloom package")
    assert.deepStrictEqual(got.in_modules, [], "nothing imported hyperloom: it came by value")
    assert.strictEqual(got.class, "HyperloomLease")
    assert.strictEqual(got.instance, "HyperloomLease")
    assert.isTrue(
      got.pydir.startsWith(path.join(tmp, `hyperloom-py-${process.getuid!()}`) + path.sep),
      got.pydir
    )
    assert.deepStrictEqual(got.argv.slice(1, 4), ["-I", got.pydir, "supervise"])
    assert.strictEqual(got.stdout, "from the copy\n")
    assert.strictEqual(got.code, 0)
    assert.match(got.status[0], /^pid \d+$/)
    assert.strictEqual(got.status[1], "exit 0")
    assert.strictEqual((fs.statSync(path.dirname(got.pydir)).mode & 0o777).toString(8), "700")
    // A second lease on that node reuses the copy.
    const again = JSON.parse(load(file, tmp).stdout.trim().split("\n").pop()!)
    assert.strictEqual(again.pydir, got.pydir)
    assert.strictEqual(fs.readdirSync(path.dirname(got.pydir)).length, 1)
  })

  it("the control: pickled by reference, it fails there with No module named 'hyperloom'", () => {
    const file = path.join(work, "by-reference.pkl")
    pickle(file, "by-reference")
    const r = load(file, fs.mkdtempSync(path.join(work, "tmp-")))
    assert.notStrictEqual(r.status, 0)
    assert.include(r.stderr, "No module named 'hyperloom'")
  })
})
