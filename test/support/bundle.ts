/** Bundles for tests: the real executable into a temp folder (CLI tests without Ray), or a test helper. */

import { execFile, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { build } from "esbuild"
import { bundleCli as bundleExecutable } from "../../scripts/bundle-cli.mjs"
import { cleanEnv } from "./cli.js"

export const root = path.resolve(import.meta.dirname, "../..")

/**
 * The host lock a CLI or helper bundled here takes (stand-in `ray`, no head): one of its own name,
 * never the one the real-Ray tests hold while both run (src/services/WorkGate.ts).
 */
const hostLock = `hyperloom-unit-tests-${process.pid}`

/** Bundles one entry point into an ES module with a `require` (grpc-js and friends need one). */
export const bundle = async (entry: string, outfile: string): Promise<string> => {
  await build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "esm",
    logLevel: "warning",
    define: { __HYPERLOOM_TEST_HOST_LOCK__: JSON.stringify(hostLock) },
    banner: {
      js: "import { createRequire as __hyperloomRequire } from 'node:module';\nconst require = __hyperloomRequire(import.meta.url);"
    }
  })
  return outfile
}

/**
 * Gives `<temp dir>/hyperloom.mjs`, built as the package's executable is built
 * (scripts/bundle-cli.mjs: the loader and its V8 code cache, the static GCS codec), naming a host
 * lock of its own; returns the dir and the executable's path. `runBundled` keeps its code cache
 * beside the build (builtOnce), so that the many CLI starts compile the bundle once per command,
 * not once per start.
 */
export const bundleCli = async (): Promise<{ readonly work: string; readonly cli: string }> => {
  const built = await builtOnce()
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-cli-"))
  const cli = path.join(work, "hyperloom.mjs")
  fs.copyFileSync(built, cli)
  fs.copyFileSync(`${built}.map`, `${cli}.map`)
  fs.chmodSync(cli, 0o755)
  codeCaches.set(cli, path.join(path.dirname(built), "code-cache"))
  return { work, cli }
}

/**
 * The executable, built once per test worker (the unit files share theirs: vitest.config.ts) into
 * a folder of its own, removed when the worker exits; each `bundleCli` copies it into the test's
 * folder and their CLI starts share its code cache (the same bundle: the same cache key). Building
 * it took seconds of CPU, once per CLI test file.
 */
let building: Promise<string> | undefined
const builtOnce = () => {
  building ??= (async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), buildDirPrefix(process.pid)))
    // A worker process's end (forks) runs this; worker threads' folders are removed by the unit
    // project's global setup (test/support/unitGlobalSetup.ts).
    process.once("exit", () => fs.rmSync(dir, { recursive: true, force: true }))
    const cli = path.join(dir, "hyperloom.mjs")
    await bundleExecutable({
      outfile: cli,
      define: { __HYPERLOOM_TEST_HOST_LOCK__: JSON.stringify(hostLock) }
    })
    return cli
  })()
  return building
}

/** The start of the name of the folders `builtOnce` builds in, in process `pid`. */
export const buildDirPrefix = (pid: number) => `hyperloom-cli-build-${pid}-`

/** The code cache of each executable `bundleCli` gave (the build's, shared). */
const codeCaches = new Map<string, string>()

/** A bundled CLI's environment: the test's own (`cleanEnv`) with the code cache beside the bundle. */
export const bundledEnv = (cli: string, env: Record<string, string>) =>
  cleanEnv({
    HYPERLOOM_CACHE_DIR: codeCaches.get(cli) ?? path.join(path.dirname(cli), "code-cache"),
    ...env
  })

/**
 * The bundled CLI beside a stand-in `ray` that records every call in `rayLog` (and fails), and
 * `marker`, a path a test's CMD would create: for tests that check that nothing ran.
 */
export const bundleCliWithRecordingRay = async () => {
  const { work, cli } = await bundleCli()
  const rayLog = path.join(work, "ray-calls.log")
  const marker = path.join(work, "cmd-ran")
  const fakeRay = path.join(work, "ray")
  fs.writeFileSync(fakeRay, `#!/bin/sh\necho "$@" >> '${rayLog}'\nexit 1\n`, { mode: 0o755 })
  return { work, cli, rayLog, marker, fakeRay }
}

/** Runs a bundled CLI to completion, without any RAY_ADDRESS / HYPERLOOM_NODES of the test's own. */
export const runBundled = (
  cli: string,
  cwd: string,
  args: ReadonlyArray<string>,
  env: Record<string, string> = {}
) => {
  const r = spawnSync(process.execPath, [cli, ...args], {
    env: bundledEnv(cli, env),
    encoding: "utf8",
    cwd,
    timeout: 30_000
  })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

/**
 * `runBundled` without blocking the test's worker: many CLI starts in a row (spawnSync) can hold
 * a worker past vitest's own RPC deadline on a loaded machine.
 */
export const runBundledAsync = (
  cli: string,
  cwd: string,
  args: ReadonlyArray<string>,
  env: Record<string, string> = {}
): Promise<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }> =>
  new Promise((resolve) => {
    execFile(
      process.execPath,
      [cli, ...args],
      { env: bundledEnv(cli, env), encoding: "utf8", cwd, timeout: 30_000 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : null
        resolve({ code, stdout, stderr })
      }
    )
  })
