/**
 * Names of the Python side's modules stay true: the module list in python/hyperloom/__init__.py
 * names every module of the package and only those, and every `hyperloom.<module>` (or
 * `hyperloom_<x>.py`) that the code, the tests and the docs name is one. A newcomer who follows a
 * name must find the file.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"

const root = path.resolve(import.meta.dirname, "../..")
const pkg = path.join(root, "python/hyperloom")
const modules = fs
  .readdirSync(pkg)
  .filter((f) => f.endsWith(".py") && f !== "__init__.py")
  .map((f) => f.slice(0, -3))
  .sort()

const TEXT = /\.(?:[cm]?[jt]s|py|md|sh)$/
const SKIPPED_DIRS = new Set(["node_modules", "__pycache__", ".venv", "dist"])
const walk = (dir: string, out: Array<string>): Array<string> => {
  if (!fs.existsSync(dir)) return out
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) {
      if (!SKIPPED_DIRS.has(entry.name)) walk(full, out)
    } else if (entry.isFile() && TEXT.test(entry.name)) out.push(full)
  }
  return out
}

// `hyperloom.mjs` (the CLI bundle) and `hyperloom.fish` (completions) are files, not modules;
// `hyperloom.compare` is the kind of `compare --json`'s document.
const NOT_MODULES = new Set(["mjs", "fish", "compare"])

describe("the Python side's module names", () => {
  it("__init__.py's module list names every module of the package, and only those", () => {
    const text = fs.readFileSync(path.join(pkg, "__init__.py"), "utf8")
    const block = text.slice(
      text.indexOf("One job per module:"),
      text.indexOf("\n\n", text.indexOf("One job per module:") + 20)
    )
    const listed = [...block.matchAll(/^ {4}(\w+) {2,}/gm)].map((m) => m[1]!).sort()
    assert.deepStrictEqual(listed, modules)
  })

  it("every hyperloom.<module> named in src/, python/, test/, docs/ and README.md is a module of the package", () => {
    const files = [
      ...["src", "python", "test", "docs"].flatMap((d) => walk(path.join(root, d), [])),
      path.join(root, "README.md")
    ]
    const stale: Array<string> = []
    for (const file of files) {
      fs.readFileSync(file, "utf8")
        .split("\n")
        .forEach((line, i) => {
          for (const m of line.matchAll(/\bhyperloom(?:\.([a-z_]+)\b|_(\w+)\.py\b)/g)) {
            const name = m[1] ?? `hyperloom_${m[2]!}`
            if (!modules.includes(name) && !NOT_MODULES.has(name)) {
              stale.push(`${path.relative(root, file)}:${i + 1}: ${m[0]}`)
            }
          }
        })
    }
    assert.deepStrictEqual(stale, [])
  })
})
