/**
 * The executable's loader (scripts/cli-loader.mjs, assembled by scripts/bundle-cli.mjs): the CLI
 * runs the same with or without its V8 code cache, writes one per command, reuses it, and never
 * lets a bad or unwritable cache show.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { bundleCli } from "../../scripts/bundle-cli.mjs"
import { VERSION } from "../../src/version.js"

let work: string
let cli: string
let buildId: string

beforeAll(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-loader-"))
  cli = path.join(work, "hyperloom.mjs")
  buildId = (await bundleCli({ outfile: cli })).buildId
}, 120_000)

afterAll(() => {
  fs.rmSync(work, { recursive: true, force: true })
})

const run = (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const r = spawnSync(process.execPath, [cli, ...args], {
    env: { ...process.env, NODE_OPTIONS: "", ...env },
    encoding: "utf8",
    timeout: 60_000
  })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

/** `--version` through the bundle (`--version` alone is answered by the loader itself). */
const BUNDLED_VERSION = ["--version", "--json"]

const freshDir = (name: string) => path.join(fs.mkdtempSync(path.join(work, `${name}-`)), "cache")

const cacheFiles = (dir: string) => (fs.existsSync(dir) ? fs.readdirSync(dir).sort() : [])

describe("the executable's code cache", () => {
  it("is one ASCII file: the loader, then the bundle", () => {
    const text = fs.readFileSync(cli, "latin1")
    assert.isTrue(text.startsWith("#!/usr/bin/env node\n"))
    assert.notMatch(text, /[^\x00-\x7f]/)
    assert.include(text, buildId)
  })

  it("writes a cache per command on the first run and reuses it after", () => {
    const dir = freshDir("reuse")
    const first = run(BUNDLED_VERSION, { HYPERLOOM_CACHE_DIR: dir })
    assert.strictEqual(first.code, 0)
    assert.strictEqual(first.stdout.trim(), VERSION)
    assert.strictEqual(first.stderr, "")
    const files = cacheFiles(dir)
    assert.strictEqual(files.length, 1)
    assert.match(
      files[0]!,
      new RegExp(`^cli-${buildId}-${process.version}-${process.arch}-\\w+--\\.v8cache$`)
    )
    const file = path.join(dir, files[0]!)
    const before = fs.statSync(file)

    const second = run(BUNDLED_VERSION, { HYPERLOOM_CACHE_DIR: dir })
    assert.deepStrictEqual(second, first)
    const after = fs.statSync(file)
    assert.strictEqual(after.mtimeMs, before.mtimeMs, "a usable cache is not rewritten")

    // another command gets its own file; a bad option still fails with one line and exit 2
    const bad = run(["ray", "doctor", "--gpus", "x"], { HYPERLOOM_CACHE_DIR: dir })
    assert.strictEqual(bad.code, 2)
    assert.strictEqual(bad.stderr.trim().split("\n").length, 1)
    assert.isTrue(cacheFiles(dir).some((f) => f.endsWith("-ray-doctor.v8cache")))
    assert.deepStrictEqual(run(["ray", "doctor", "--gpus", "x"], { HYPERLOOM_CACHE_DIR: dir }), bad)
  })

  it("gives the same output without the cache, and writes none when turned off", () => {
    const dir = freshDir("off")
    const off = run(["--help"], { HYPERLOOM_CACHE_DIR: dir, HYPERLOOM_NO_CODE_CACHE: "1" })
    assert.strictEqual(off.code, 0)
    assert.include(off.stdout, "hyperloom")
    assert.deepStrictEqual(cacheFiles(dir), [])
    assert.deepStrictEqual(run(["--help"], { HYPERLOOM_CACHE_DIR: dir }), off)
    assert.deepStrictEqual(run(["--help"], { HYPERLOOM_CACHE_DIR: dir }), off)
    assert.strictEqual(cacheFiles(dir).length, 1)
  })

  it("replaces a corrupt cache silently", () => {
    const dir = freshDir("corrupt")
    const clean = run(BUNDLED_VERSION, { HYPERLOOM_CACHE_DIR: dir })
    const [name] = cacheFiles(dir)
    const file = path.join(dir, name!)
    const garbage = Buffer.alloc(4096, 7)
    fs.writeFileSync(file, garbage)
    assert.deepStrictEqual(run(BUNDLED_VERSION, { HYPERLOOM_CACHE_DIR: dir }), clean)
    assert.isFalse(fs.readFileSync(file).equals(garbage), "the rejected cache was rewritten")
    assert.deepStrictEqual(run(BUNDLED_VERSION, { HYPERLOOM_CACHE_DIR: dir }), clean)
  })

  it("runs as usual when the cache folder cannot be made", () => {
    const blocker = path.join(work, "not-a-folder")
    fs.writeFileSync(blocker, "")
    const r = run(BUNDLED_VERSION, { HYPERLOOM_CACHE_DIR: path.join(blocker, "cache") })
    assert.strictEqual(r.code, 0)
    assert.strictEqual(r.stderr, "")
    assert.deepStrictEqual(r, run(BUNDLED_VERSION, { HYPERLOOM_NO_CODE_CACHE: "1" }))
  })

  it("keeps the files of the two other builds written last and drops older ones", () => {
    const dir = freshDir("prune")
    fs.mkdirSync(dir, { recursive: true })
    const other = (build: string, ageSec: number) => {
      const file = path.join(dir, `cli-${build}-${process.version}-${process.arch}-0--.v8cache`)
      fs.writeFileSync(file, "old")
      const t = Date.now() / 1000 - ageSec
      fs.utimesSync(file, t, t)
      return path.basename(file)
    }
    const newest = other("aaaaaaaaaaaaaaaa", 10)
    const second = other("bbbbbbbbbbbbbbbb", 100)
    other("cccccccccccccccc", 1000)
    fs.writeFileSync(path.join(dir, "unrelated.txt"), "kept")
    assert.strictEqual(run(BUNDLED_VERSION, { HYPERLOOM_CACHE_DIR: dir }).code, 0)
    const left = cacheFiles(dir)
    assert.includeMembers(left, [newest, second, "unrelated.txt"])
    assert.isFalse(left.some((f) => f.includes("cccccccccccccccc")))
    assert.isTrue(left.some((f) => f.startsWith(`cli-${buildId}-`)))
  })
})

describe("`hyperloom --version` alone", () => {
  it("is answered by the loader as the CLI answers it, without compiling the bundle", () => {
    const dir = freshDir("version")
    const fast = run(["--version"], { HYPERLOOM_CACHE_DIR: dir })
    assert.deepStrictEqual(fast, { code: 0, stdout: `${VERSION}\n\n`, stderr: "" })
    // nothing compiled: no code cache written for it
    assert.deepStrictEqual(cacheFiles(dir), [])
    // byte for byte what the CLI prints (through the bundle: other words on the command line)
    assert.deepStrictEqual(run(BUNDLED_VERSION, { HYPERLOOM_NO_CODE_CACHE: "1" }), fast)
    assert.deepStrictEqual(run(["--log-level", "info", "--version"], { HYPERLOOM_NO_CODE_CACHE: "1" }), fast)
  })

  it("ends as the CLI does when stdout is closed", () => {
    const closed = (args: ReadonlyArray<string>) => {
      const r = spawnSync("sh", ["-c", 'exec "$@" >&-', "sh", process.execPath, cli, ...args], {
        env: { ...process.env, NODE_OPTIONS: "", HYPERLOOM_NO_CODE_CACHE: "1" },
        encoding: "utf8",
        timeout: 60_000
      })
      return { code: r.status, stderr: r.stderr }
    }
    assert.deepStrictEqual(closed(["--version"]), closed(BUNDLED_VERSION))
  })
})
