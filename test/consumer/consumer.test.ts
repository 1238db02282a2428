/**
 * hyperloom as a package a larger Effect program installs: `npm pack`, then a consumer project
 * (test/consumer/project) installs the tarball beside a different 3.x patch of effect than the one
 * hyperloom is developed against, typechecks against the published declarations and runs against
 * the exported test layers. One copy of effect must serve both (peer dependencies); the installed
 * CLI bundle must run on its own and tell a user without Ray how to get it.
 *
 * Needs the build (`node scripts/build.mjs`) and the package registry (or its answers in the npm
 * cache kept under node_modules/.cache, which makes a second run one quick install).
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"

const root = path.resolve(import.meta.dirname, "..", "..")
/** A patch of effect other than the one in devDependencies (3.22.4), inside the peer range. */
const CONSUMER_EFFECT = "3.22.3"
const cache = path.join(root, "node_modules", ".cache", "hyperloom-consumer", "npm")

/** Runs a command to its end (asynchronously: a minute-long install must not block the worker). */
const run = (cmd: string, args: ReadonlyArray<string>, cwd: string, env: NodeJS.ProcessEnv = process.env) =>
  new Promise<{ code: number | null; stdout: string; stderr: string; all: string }>((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    child.on("error", reject)
    child.on("close", (code) => resolve({ code, stdout, stderr, all: `${stdout}\n${stderr}` }))
  })

/** Every installed copy of `name` under a node_modules tree: its path and version. */
const copiesOf = (dir: string, name: string): Array<string> => {
  const found: Array<string> = []
  const walk = (modules: string) => {
    if (!fs.existsSync(modules)) return
    for (const entry of fs.readdirSync(modules)) {
      if (entry.startsWith(".")) continue
      const names = entry.startsWith("@")
        ? fs.readdirSync(path.join(modules, entry)).map((n) => `${entry}/${n}`)
        : [entry]
      for (const n of names) {
        const pkg = path.join(modules, n)
        if (n === name) {
          const { version } = JSON.parse(fs.readFileSync(path.join(pkg, "package.json"), "utf8"))
          found.push(`${path.relative(dir, pkg)}@${version}`)
        }
        walk(path.join(pkg, "node_modules"))
      }
    }
  }
  walk(path.join(dir, "node_modules"))
  return found
}

let work = ""

beforeAll(async () => {
  assert.isTrue(
    fs.existsSync(path.join(root, "dist", "lib", "index.d.ts")) &&
      fs.existsSync(path.join(root, "dist", "hyperloom.mjs")),
    "the consumer test needs the build: node scripts/build.mjs"
  )
  work = fs.mkdtempSync(path.join(os.tmpdir(), "hl-consumer-"))
  const packed = await run("npm", ["pack", "--silent", "--pack-destination", work], root)
  assert.strictEqual(packed.code, 0, `npm pack failed:\n${packed.all}`)
  const tarball = packed.stdout.trim().split("\n").at(-1)!
  fs.cpSync(path.join(import.meta.dirname, "project"), work, { recursive: true })
  fs.writeFileSync(
    path.join(work, "package.json"),
    JSON.stringify(
      {
        name: "hyperloom-consumer",
        private: true,
        type: "module",
        dependencies: {
          "@types/node": "20.19.43",
          effect: CONSUMER_EFFECT,
          hyperloom: `file:./${tarball}`
        }
      },
      null,
      2
    )
  )
  const installed = await run(
    "npm",
    ["install", "--no-audit", "--no-fund", "--ignore-scripts", "--prefer-offline", "--cache", cache],
    work
  )
  assert.strictEqual(installed.code, 0, `npm install failed:\n${installed.all}`)
}, 300_000)

afterAll(() => {
  if (work !== "") fs.rmSync(work, { recursive: true, force: true })
})

describe("a consumer project on another patch of effect", () => {
  it("gets one copy of effect, its own", () => {
    assert.deepStrictEqual(copiesOf(work, "effect"), [`node_modules/effect@${CONSUMER_EFFECT}`])
  })

  it("typechecks against the published declarations", async () => {
    const tsc = await run(
      process.execPath,
      [path.join(root, "node_modules", "typescript", "bin", "tsc"), "-p", "."],
      work
    )
    assert.strictEqual(tsc.code, 0, `tsc failed:\n${tsc.all}`)
  }, 120_000)

  it("runs against the exported test layers", async () => {
    const main = await run(process.execPath, ["out/main.js"], work)
    assert.strictEqual(main.code, 0, `the consumer program failed:\n${main.all}`)
    assert.include(main.stdout, "consumer: all checks passed")
  }, 60_000)

  it("the installed CLI runs on its own and says how to get Ray", async () => {
    const bin = path.join(work, "node_modules", "hyperloom", "dist", "hyperloom.mjs")
    const env = { PATH: path.dirname(process.execPath), HOME: work }
    const help = await run(process.execPath, [bin, "--help"], work, env)
    assert.strictEqual(help.code, 0, help.all)
    const noRay = await run(process.execPath, [bin, "ray", "ensure"], work, env)
    assert.strictEqual(noRay.code, 3, noRay.all)
    assert.include(noRay.stderr, "pip install")
    assert.notInclude(noRay.all, "scripts/setup-ray.sh")
  }, 60_000)
})
