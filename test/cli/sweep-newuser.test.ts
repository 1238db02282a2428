/**
 * What a new user meets when they look for sweeps (issue 27, item 9): the top-level help, the
 * package's description, the README's commands table, `report --help`, `sweep run --help`, a
 * `sweep show` on a folder without a sweep and a missing required option. Drives the bundled
 * executable; no Ray needed (a stand-in `ray` that fails).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { bundleCli, root, runBundled } from "../support/bundle.js"

let work: string
let cli: string

beforeAll(async () => {
  ;({ work, cli } = await bundleCli())
  fs.writeFileSync(path.join(work, "ray"), "#!/bin/sh\nexit 1\n", { mode: 0o755 })
}, 180_000)

afterAll(() => {
  fs.rmSync(work, { recursive: true, force: true })
})

const run = (args: ReadonlyArray<string>) =>
  runBundled(cli, work, args, { HYPERLOOM_RAY: path.join(work, "ray"), COLUMNS: "100" })

/** A help page's DESCRIPTION paragraph(s), joined to one line. */
const description = (page: string) => {
  const lines = page.split("\n")
  const at = lines.indexOf("DESCRIPTION")
  const end = lines.findIndex((l, i) => i > at && /^[A-Z][A-Z ]+$/.test(l))
  return lines
    .slice(at + 1, end < 0 ? undefined : end)
    .join(" ")
    .replace(/\s+/g, " ")
}

describe("sweeps are said to exist", () => {
  it("the top-level --help's description names sweeps", () => {
    const r = run(["--help"])
    assert.strictEqual(r.code, 0, r.stderr)
    const about = description(r.stdout).split("Environment:")[0]!
    assert.match(about, /sweep/i)
    assert.match(about, /SLO/)
  })

  it("package.json's description names sweeps", () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"))
    assert.match(pkg.description, /sweep/i)
  })

  it("the README's commands table has sweep run, sweep show, report on sweeps", () => {
    const readme = fs.readFileSync(path.join(root, "README.md"), "utf8")
    const table = readme.slice(
      readme.indexOf("## Commands"),
      readme.indexOf("\n## ", readme.indexOf("## Commands") + 5)
    )
    const rows = table.split("\n").filter((l) => l.startsWith("| `hyperloom"))
    assert.isTrue(
      rows.some((r) => r.startsWith("| `hyperloom sweep run")),
      table
    )
    assert.isTrue(
      rows.some((r) => r.startsWith("| `hyperloom sweep show")),
      table
    )
    const report = rows.find((r) => r.startsWith("| `hyperloom report"))
    assert.match(report ?? "", /sweep/)
  })

  it("report --help speaks of sweep sessions, and prints --out's text once", () => {
    const r = run(["report", "--help"])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.match(description(r.stdout), /sweep/)
    const out = r.stdout.slice(r.stdout.indexOf("\n--out FILE\n"), r.stdout.indexOf("\n--json\n"))
    assert.notInclude(out, "A file.")
    assert.strictEqual(out.split("Where to write").length, 2, out)
  })

  it("sweep run --help's --session holds sweep.json, not state.json and attempts", () => {
    const r = run(["sweep", "run", "--help"])
    assert.strictEqual(r.code, 0, r.stderr)
    const block = r.stdout.slice(r.stdout.indexOf("--session DIR\n"), r.stdout.indexOf("--gpus N\n"))
    assert.include(block, "sweep.json")
    assert.notInclude(block, "state.json")
    assert.notInclude(block, "attempt")
  })

  it("sweep show on a folder without a sweep names the sweep and how to start one", () => {
    const r = run(["sweep", "show", "--session", "missing"])
    assert.strictEqual(r.code, 8, r.stderr)
    assert.notInclude(r.stderr, "baseline")
    assert.include(r.stderr, "no sweep session")
    assert.include(r.stderr, "hyperloom sweep run --session")
  })

  it("a missing --gpus says what it is and where to read more, in one line", () => {
    const r = run([
      "sweep",
      "run",
      "--session",
      "s",
      "--server",
      "x {a}",
      "--param",
      "a=1",
      "--load",
      "c=1",
      "--",
      "c",
      "{c}"
    ])
    assert.strictEqual(r.code, 2, r.stderr)
    const lines = r.stderr.split("\n").filter((l) => l.trim() !== "")
    assert.strictEqual(lines.length, 1, r.stderr)
    assert.notInclude(lines[0], "Expected to find option")
    assert.include(lines[0], "--gpus N is required")
    assert.include(lines[0], "hyperloom sweep run --help")
  })
})

describe("grids as people write them (CLI)", () => {
  const sweep = (...extra: ReadonlyArray<string>) =>
    run(["sweep", "run", "--session", "s", "--gpus", "0", "--server", "x {seqs}", ...extra, "--", "c", "{c}"])

  it("--combo with --param is one clear usage error", () => {
    const r = sweep("--param", "seqs=1,2", "--combo", "seqs=4", "--load", "c=1")
    assert.strictEqual(r.code, 2, r.stderr)
    assert.include(r.stderr, "not both")
  })

  it("--link-vars that leaves a combination without a load point is refused, naming it", () => {
    const r = sweep("--param", "seqs=2,32", "--link-vars", "seqs=c", "--load", "c=1,2,4")
    assert.strictEqual(r.code, 2, r.stderr)
    assert.include(r.stderr, "seqs=32 without a load point")
  })

  it("sweep run --help offers --reset-prefix-cache and says repeats without a reset can be flattered", () => {
    const r = run(["sweep", "run", "--help"])
    const block = r.stdout.slice(r.stdout.indexOf("\n--reset-prefix-cache"), r.stdout.indexOf("\n--load"))
    assert.include(block, "/reset_prefix_cache")
    assert.include(block, "/flush_cache")
    assert.match(block.replace(/\s+/g, " "), /look better than a cold engine/)
    assert.include(r.stdout, "--combo")
    assert.include(r.stdout, "--link-vars")
  })
})
