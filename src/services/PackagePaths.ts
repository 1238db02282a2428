import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

let cached: string | undefined

/**
 * The package's root folder: the nearest ancestor of this module holding hyperloom's
 * package.json. Works from the sources (tests), the bundled CLI and the compiled library alike,
 * which sit at different depths.
 */
export const packageRoot = (): string => {
  if (cached !== undefined) return cached
  let dir = path.dirname(fileURLToPath(import.meta.url))
  for (;;) {
    const manifest = path.join(dir, "package.json")
    try {
      if (JSON.parse(fs.readFileSync(manifest, "utf8")).name === "hyperloom") {
        cached = dir
        return dir
      }
    } catch {
      // not here: keep walking up
    }
    const parent = path.dirname(dir)
    if (parent === dir) throw new Error("hyperloom: cannot find the package root (package.json)")
    dir = parent
  }
}

/** A file shipped inside the package (proto/, python/, examples/). */
export const packageFile = (...segments: ReadonlyArray<string>): string =>
  path.join(packageRoot(), ...segments)

/** The Python side's commands (`python/__main__.py`): the bridges, the serving runner. */
export type PythonCommand = "bridge" | "gpus" | "group" | "serve" | "sweep" | "tidy"

/**
 * How a Python runs one of them, after the interpreter: `python <package>/python <command>`
 * (running the folder puts the `hyperloom` Python package on its path, nothing installed).
 */
export const pythonEntry = (command: PythonCommand): ReadonlyArray<string> => [packageFile("python"), command]
