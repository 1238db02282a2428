import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { packageRoot } from "../../src/services/PackagePaths.js"
import { interpreterOf, rayExecutable, rayPython } from "../../src/services/RayInstall.js"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-rayinstall-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

const file = (rel: string, text: string, mode = 0o755) => {
  const p = path.join(dir, rel)
  fs.mkdirSync(path.dirname(p), { recursive: true })
  fs.writeFileSync(p, text, { mode })
  return p
}

const python = file("venv/bin/python3", "#!/bin/sh\n")
const binDir = path.dirname(python)
const settings = (fields: { rayExecutable?: string; rayPython?: string; PATH?: string }) => ({
  rayExecutable: fields.rayExecutable,
  rayPython: fields.rayPython,
  env: { PATH: fields.PATH ?? "/nonexistent" }
})

describe("RayInstall", () => {
  it.effect("HYPERLOOM_RAY is used as given, and is an error (no fallback) when it is not executable", () =>
    Effect.gen(function* () {
      const ray = file("a/ray", `#!${python}\nimport ray\n`)
      assert.strictEqual(yield* rayExecutable(settings({ rayExecutable: ray })), ray)
      const error = yield* Effect.flip(
        rayExecutable(settings({ rayExecutable: path.join(dir, "missing/ray") }))
      )
      assert.strictEqual(error._tag, "RayNotFound")
      assert.include(error.message, `HYPERLOOM_RAY=${path.join(dir, "missing/ray")}`)
      const notExec = file("b/ray", `#!${python}\n`, 0o644)
      assert.isTrue(
        Effect.runSync(Effect.either(rayExecutable(settings({ rayExecutable: notExec }))))._tag === "Left"
      )
    })
  )

  it.effect("without HYPERLOOM_RAY: the package's .venv, else ray on PATH", () =>
    Effect.gen(function* () {
      const venvRay = path.join(packageRoot(), ".venv", "bin", "ray")
      const onPath = file("path/ray", `#!${python}\n`)
      const found = yield* rayExecutable(settings({ PATH: `/nonexistent:${path.dirname(onPath)}` }))
      assert.strictEqual(found, fs.existsSync(venvRay) ? venvRay : onPath)
    })
  )

  it.effect("the Python comes from the ray script's #! line (plain, env, pip's sh launcher)", () =>
    Effect.gen(function* () {
      const plain = file("c/ray", `#!${python}\n# -*- coding: utf-8 -*-\n`)
      assert.strictEqual(yield* rayPython(settings({ rayExecutable: plain })), python)
      const viaEnv = file("d/ray", "#!/usr/bin/env -S python3 -u\n")
      assert.strictEqual(yield* rayPython(settings({ rayExecutable: viaEnv, PATH: binDir })), python)
      const launcher = file("e/ray", `#!/bin/sh\n'''exec' "${python}" "$0" "$@"\n' '''\nimport ray\n`)
      assert.strictEqual(yield* rayPython(settings({ rayExecutable: launcher })), python)
    })
  )

  it.effect("HYPERLOOM_RAY_PYTHON wins (a bare name is looked up on PATH)", () =>
    Effect.gen(function* () {
      assert.strictEqual(yield* rayPython(settings({ rayPython: python })), python)
      assert.strictEqual(yield* rayPython(settings({ rayPython: "python3", PATH: binDir })), python)
      const error = yield* Effect.flip(rayPython(settings({ rayPython: "/nonexistent/python" })))
      assert.strictEqual(error._tag, "RayNotFound")
    })
  )

  it.effect("a ray script naming no usable Python is RayNotFound saying so", () =>
    Effect.gen(function* () {
      const noShebang = file("f/ray", "echo hi\n")
      const e1 = yield* Effect.flip(rayPython(settings({ rayExecutable: noShebang })))
      assert.include(e1.message, "names no Python; set HYPERLOOM_RAY_PYTHON")
      const gone = file("g/ray", `#!${path.join(dir, "gone/python")}\n`)
      const e2 = yield* Effect.flip(rayPython(settings({ rayExecutable: gone })))
      assert.include(e2.message, "not an executable")
      assert.isUndefined(interpreterOf(path.join(dir, "nope"), {}))
    })
  )
})
