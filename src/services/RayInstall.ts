/**
 * Finding the Ray installation: the `ray` executable and the Python that runs it (the lease bridge
 * must run with Ray's own Python). Small resolvers over the file system; no service of their own.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"
import { RayNotFound } from "../domain/Errors.js"
import { packageRoot } from "./PackagePaths.js"
import type { SettingsShape } from "./Settings.js"

type Env = Readonly<Record<string, string | undefined>>

const isExecutableFile = (file: string): boolean => {
  try {
    if (!fs.statSync(file).isFile()) return false
    fs.accessSync(file, fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** The first executable `name` on `PATH` (as in `env`), if any. */
export const findOnPath = (name: string, env: Env): string | undefined => {
  for (const dir of (env.PATH ?? "").split(path.delimiter)) {
    if (dir === "") continue
    const candidate = path.join(dir, name)
    if (isExecutableFile(candidate)) return candidate
  }
  return undefined
}

const projectVenvRay = (): string | undefined => {
  try {
    return path.join(packageRoot(), ".venv", "bin", "ray")
  } catch {
    return undefined
  }
}

/**
 * The `ray` executable: HYPERLOOM_RAY when set (no fallback if it is wrong: the operator chose
 * it), else the package's own `.venv/bin/ray` (scripts/setup-ray.sh), else `ray` on PATH.
 */
export const rayExecutable = (
  settings: Pick<SettingsShape, "rayExecutable" | "env">
): Effect.Effect<string, RayNotFound> =>
  Effect.suspend(() => {
    if (settings.rayExecutable !== undefined) {
      const chosen = path.resolve(settings.rayExecutable)
      return isExecutableFile(chosen)
        ? Effect.succeed(chosen)
        : Effect.fail(new RayNotFound({ searched: [`HYPERLOOM_RAY=${settings.rayExecutable}`] }))
    }
    const venv = projectVenvRay()
    if (venv !== undefined && isExecutableFile(venv)) return Effect.succeed(venv)
    const onPath = findOnPath("ray", settings.env)
    if (onPath !== undefined) return Effect.succeed(onPath)
    return Effect.fail(new RayNotFound({ searched: [...(venv !== undefined ? [venv] : []), "ray on PATH"] }))
  })

/**
 * The interpreter a script's `#!` line names. Understands `#!/path/python`, `#!/usr/bin/env
 * [-S] python3` (looked up on PATH) and pip's `#!/bin/sh` + `'''exec' "/path/python" "$0" "$@"`
 * launcher (used for long or spaced paths). Undefined when the script names none.
 */
export const interpreterOf = (script: string, env: Env): string | undefined => {
  let head: string
  try {
    const fd = fs.openSync(script, "r")
    try {
      const buf = Buffer.alloc(4096)
      head = buf.subarray(0, fs.readSync(fd, buf, 0, buf.length, 0)).toString("utf8")
    } finally {
      fs.closeSync(fd)
    }
  } catch {
    return undefined
  }
  const lines = head.split("\n")
  const first = lines[0] ?? ""
  if (!first.startsWith("#!")) return undefined
  const words = first
    .slice(2)
    .trim()
    .split(/\s+/)
    .filter((w) => w !== "")
  const program = words[0]
  if (program === undefined) return undefined
  if (path.basename(program) === "sh") {
    const exec = /^'''exec' "([^"]+)" "\$0" "\$@"/m.exec(lines.slice(1, 4).join("\n"))
    return exec?.[1]
  }
  if (path.basename(program) === "env") {
    const name = words.slice(1).find((w) => !w.startsWith("-") && !w.includes("="))
    if (name === undefined) return undefined
    return name.includes("/") ? name : findOnPath(name, env)
  }
  return program
}

/** The Python of the Ray installation: HYPERLOOM_RAY_PYTHON, else the `ray` script's interpreter. */
export const rayPython = (
  settings: Pick<SettingsShape, "rayExecutable" | "rayPython" | "env">
): Effect.Effect<string, RayNotFound> =>
  Effect.gen(function* () {
    if (settings.rayPython !== undefined) {
      const chosen = settings.rayPython.includes("/")
        ? path.resolve(settings.rayPython)
        : findOnPath(settings.rayPython, settings.env)
      if (chosen !== undefined && isExecutableFile(chosen)) return chosen
      return yield* new RayNotFound({
        what: "python",
        searched: [`HYPERLOOM_RAY_PYTHON=${settings.rayPython}`]
      })
    }
    const ray = yield* rayExecutable(settings)
    const python = interpreterOf(ray, settings.env)
    if (python !== undefined && isExecutableFile(python)) return python
    return yield* new RayNotFound({
      what: "python",
      searched: [
        python === undefined
          ? `${ray} (its first line names no Python; set HYPERLOOM_RAY_PYTHON)`
          : `${python} (named by ${ray}, not an executable)`
      ]
    })
  })
