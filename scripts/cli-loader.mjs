#!/usr/bin/env node
// hyperloom's executable (dist/hyperloom.mjs), made by scripts/bundle-cli.mjs from this template:
// this small loader, then the whole bundled CLI (CommonJS, minified) in the comment that ends the
// file.
//
// Compiling the bundle is ~80 ms of a cold `hyperloom ray doctor` (docs/performance.md). The
// loader compiles it with node:vm and a V8 code cache kept per user ($XDG_CACHE_HOME/hyperloom,
// else ~/.cache/hyperloom), one per command (`ray doctor`, `lease run`, ...: the functions that
// command ran), keyed by this build, the Node version and the V8 options. Without a usable cache it
// compiles as usual and writes one when the process exits. Any cache problem (unwritable folder,
// rejected data) falls back silently to a plain compile. HYPERLOOM_NO_CODE_CACHE=1 turns it off;
// HYPERLOOM_CACHE_DIR moves it.
import {
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeFileSync,
  writeSync
} from "node:fs"
import { createRequire } from "node:module"
import { homedir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { Script } from "node:vm"

/** Replaced by the build with a hash of the bundled CLI. */
const BUILD = "__HYPERLOOM_BUILD__"
/** Replaced by the build with src/version.ts's VERSION. */
const VERSION = "__HYPERLOOM_VERSION__"
/** The line that opens the comment holding the bundle (written escaped here so that only the real one matches). */
const MARK = "\n/*\u0002\n"

// `hyperloom --version` alone is answered here, as the CLI answers it (test/cli/loader.test.ts
// checks both alike), without reading or compiling the bundle: that is most of its cost. A failed
// write falls through to the CLI, which maps a failed stdout to its exit code.
let answered = false
if (process.argv.length === 3 && process.argv[2] === "--version") {
  try {
    writeSync(1, `${VERSION}\n\n`)
    answered = true
  } catch {
    // the CLI below writes it again and reports the failure
  }
}
if (!answered) load()

function load() {
  const file = fileURLToPath(import.meta.url)
  const self = readFileSync(file, "latin1")
  const start = self.indexOf(MARK) + MARK.length
  // "*/" inside the bundle is stored as "*\u0001/" to keep the comment open.
  const code = self.slice(start, self.lastIndexOf("*/")).replaceAll("*\u0001/", "*/")

  let cachePath
  let cached
  if (!process.env.HYPERLOOM_NO_CODE_CACHE) {
    try {
      // The command's words (`ray doctor`), not its options or their values.
      const words = []
      for (const arg of process.argv.slice(2)) {
        if (arg === "--" || words.length === 2) break
        if (/^[a-z][a-z-]{0,31}$/.test(arg)) words.push(arg)
        else if (!arg.startsWith("-")) break
      }
      const dir =
        process.env.HYPERLOOM_CACHE_DIR ||
        join(process.env.XDG_CACHE_HOME || join(homedir(), ".cache"), "hyperloom")
      // V8 rejects a cache made under other V8 flags (NODE_OPTIONS, node's own options): one per set.
      let flags = 0
      for (const c of [...process.execArgv, process.env.NODE_OPTIONS ?? ""].join(" ").trim()) {
        flags = (Math.imul(flags, 31) + c.charCodeAt(0)) | 0
      }
      const runtime = `${process.version}-${process.arch}-${(flags >>> 0).toString(36)}`
      const command = words.join("-") || "-"
      cachePath = join(dir, `cli-${BUILD}-${runtime}-${command}.v8cache`)
      cached = readFileSync(cachePath)
    } catch {
      // no cache yet (or no home): compile as usual
    }
  }

  const script = new Script(code, { filename: file, cachedData: cached })

  if (cachePath !== undefined && (cached === undefined || script.cachedDataRejected)) {
    process.once("exit", () => {
      try {
        const dir = dirname(cachePath)
        mkdirSync(dir, { recursive: true })
        const names = readdirSync(dir).filter((n) => n.startsWith("cli-") && n.endsWith(".v8cache"))
        // One file per command: a handful per build. Keep the files of the two other builds written
        // last (another install, the previous build); drop older builds' files.
        if (names.filter((n) => n.startsWith(`cli-${BUILD}-`)).length >= 24) return
        const lastWritten = new Map()
        for (const name of names) {
          const build = name.split("-")[1]
          if (build === BUILD) continue
          const t = statSync(join(dir, name)).mtimeMs
          if (!(lastWritten.get(build) >= t)) lastWritten.set(build, t)
        }
        const keep = [...lastWritten]
          .sort((a, b) => b[1] - a[1])
          .slice(0, 2)
          .map(([build]) => build)
        for (const name of names) {
          const build = name.split("-")[1]
          if (build !== BUILD && !keep.includes(build)) unlinkSync(join(dir, name))
        }
        const temp = `${cachePath}.${process.pid}.tmp`
        writeFileSync(temp, script.createCachedData())
        renameSync(temp, cachePath)
      } catch {
        // a cache is only an optimisation
      }
    })
  }

  const module = { exports: {} }
  script.runInThisContext()(module.exports, createRequire(file), module, file, dirname(file), import.meta.url)
}
