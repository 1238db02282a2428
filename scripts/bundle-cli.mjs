// Builds the CLI executable (dist/hyperloom.mjs, the package's bin) for a fast cold start
// (docs/performance.md):
// - the CLI (src/cli/main.ts) is bundled as minified CommonJS and stored in a comment at the end of
//   a small ES module loader (scripts/cli-loader.mjs) that compiles it with a V8 code cache;
// - the GCS methods are static code generated from proto/gcs.proto (scripts/gcs-codec.mjs) in
//   place of src/services/GcsProto.ts, which parses the proto at run time;
// - each top-level command's modules are evaluated only when that command runs (src/cli/Cli.ts
//   imports them with import(), which esbuild bundles as modules initialised on first use), and
//   the sources' imports from the "effect" and "@effect/platform" barrels are bundled as imports
//   of the modules they name, so that initialising a module never initialises a whole barrel.
// The proto and the Python bridge are still read from the package's proto/ and python/ folders.
import { createHash } from "node:crypto"
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { build } from "esbuild"
import { generateGcsCodecModule } from "./gcs-codec.mjs"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const protoFile = path.join(root, "proto", "gcs.proto")

/** Static GCS methods in place of the run-time proto loading. */
const staticGcsProto = {
  name: "static-gcs-proto",
  setup(b) {
    b.onLoad({ filter: /[\\/]src[\\/]services[\\/]GcsProto\.ts$/ }, (args) => ({
      contents: generateGcsCodecModule(protoFile),
      loader: "js",
      resolveDir: path.dirname(args.path),
      watchFiles: [protoFile]
    }))
  }
}

/** The barrels whose named imports the bundle takes from the modules they re-export. */
const BARRELS = ["effect", "@effect/platform"]

/**
 * A barrel's re-exports: `Effect` → `import * as Effect from "effect/Effect"` (a namespace),
 * `pipe` → `import { pipe } from "effect/Function"` (a name).
 */
const barrelExports = (barrel) => {
  const require = createRequire(path.join(root, "package.json"))
  const dir = path.dirname(require.resolve(`${barrel}/package.json`))
  const index = readFileSync(path.join(dir, "dist/esm/index.js"), "utf8").replace(/\/\*[\s\S]*?\*\//g, "")
  const exports = new Map()
  for (const [, name, file] of index.matchAll(/export \* as (\w+) from "\.\/(\w+)\.js"/g)) {
    exports.set(name, { from: `${barrel}/${file}`, namespace: true })
  }
  for (const [, names, file] of index.matchAll(/export \{([^}]*)\} from "\.\/(\w+)\.js"/g)) {
    for (const name of names
      .split(",")
      .map((n) => n.trim())
      .filter((n) => n !== "")) {
      exports.set(name, { from: `${barrel}/${file}`, namespace: false })
    }
  }
  if (exports.size === 0) throw new Error(`bundle-cli: no re-exports found in ${barrel}'s index`)
  return exports
}

/**
 * The sources' `import { Effect, Layer, pipe } from "effect"` as imports of the modules named. A
 * barrel's module that lazily loaded code imports is initialised on first use, with every module
 * it re-exports (esbuild cannot tree-shake what an initialiser runs): a hundred modules of Effect
 * and the whole of @effect/platform for a command that needs a few of them.
 */
const deepBarrelImports = () => {
  const barrels = new Map(BARRELS.map((b) => [b, barrelExports(b)]))
  const pattern = new RegExp(
    `import\\s+\\{([^}]*)\\}\\s+from\\s+"(${BARRELS.map((b) => b.replace("/", "\\/")).join("|")})"`,
    "g"
  )
  return {
    name: "deep-barrel-imports",
    setup(b) {
      b.onLoad({ filter: /[\\/]src[\\/].*\.ts$/ }, (args) => {
        const source = readFileSync(args.path, "utf8")
        const contents = source.replace(pattern, (statement, specifiers, barrel) => {
          const exports = barrels.get(barrel)
          const imports = []
          for (const specifier of specifiers
            .split(",")
            .map((s) => s.trim())
            .filter((s) => s !== "")) {
            if (specifier.startsWith("type ")) continue
            const [name, alias = name] = specifier.split(/\s+as\s+/)
            const target = exports.get(name)
            if (target === undefined) throw new Error(`bundle-cli: ${barrel} has no ${name} (${args.path})`)
            imports.push(
              target.namespace
                ? `import * as ${alias} from "${target.from}"`
                : `import { ${name} as ${alias} } from "${target.from}"`
            )
          }
          // A statement of types only stays one (the TypeScript loader drops it); the lines stay
          // where they were, for the source map.
          const lines = statement.split("\n").length - 1
          return imports.length === 0 ? statement : `${imports.join("; ")};${"\n".repeat(lines)}`
        })
        return { contents, loader: "ts" }
      })
    }
  }
}

/**
 * Writes the executable to `outfile` (an .mjs) and its source map beside it (`<outfile>.map`).
 * `define`: more esbuild defines (the unit tests' bundle names its own host lock with one).
 * Returns the bundle's hash and esbuild's metafile (its modules and their imports).
 */
export const bundleCli = async ({ outfile, define = {} }) => {
  const result = await build({
    entryPoints: [path.join(root, "src/cli/main.ts")],
    outfile,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "cjs",
    minify: true,
    sourcemap: "external",
    legalComments: "none",
    logLevel: "warning",
    write: false,
    metafile: true,
    plugins: [staticGcsProto, deepBarrelImports()],
    // PackagePaths.ts finds the package from import.meta.url: the loader passes its own.
    define: { ...define, "import.meta.url": "__hyperloomImportMetaUrl" },
    // The bundle is one function expression the loader calls, like Node's CommonJS wrapper. Stack
    // positions are the bundle's own, so the source map applies to them as they are.
    banner: { js: "(function (exports, require, module, __filename, __dirname, __hyperloomImportMetaUrl) {" },
    footer: { js: "})" }
  })
  const output = (map) => {
    const file = result.outputFiles.find((f) => f.path.endsWith(".map") === map)
    if (file === undefined) throw new Error(`bundle-cli: esbuild wrote no ${map ? "source map" : "bundle"}`)
    return file.text
  }
  // esbuild escapes non-ASCII in strings but not in regular expressions: escape the rest, so that
  // the file is ASCII (the loader reads it as latin1, and a one-byte string is half the memory).
  const app = output(false).replace(
    /[\u0080-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`
  )
  if (app.includes("\u0001") || app.includes("\u0002")) {
    throw new Error("bundle-cli: the bundle contains \\u0001 or \\u0002, which the loader uses as markers")
  }
  const buildId = createHash("sha256").update(app).digest("hex").slice(0, 16)
  const version = /export const VERSION = "([^"]+)"/.exec(
    readFileSync(path.join(root, "src/version.ts"), "utf8")
  )?.[1]
  if (version === undefined) throw new Error("bundle-cli: src/version.ts has no VERSION")
  const loader = readFileSync(path.join(root, "scripts/cli-loader.mjs"), "utf8")
    .replace("__HYPERLOOM_BUILD__", buildId)
    .replace("__HYPERLOOM_VERSION__", version)
  if (!loader.includes(buildId) || !loader.includes(`"${version}"`)) {
    throw new Error("bundle-cli: the loader lacks its build or version placeholder")
  }
  // The comment must not close early: "*/" in the bundle is stored as "*\u0001/".
  const bin = `${loader}\n/*\u0002\n${app.replaceAll("*/", "*\u0001/")}*/\n`
  if (/[^\x00-\x7f]/.test(bin)) throw new Error("bundle-cli: the executable must be ASCII")
  mkdirSync(path.dirname(outfile), { recursive: true })
  writeFileSync(outfile, bin)
  writeFileSync(`${outfile}.map`, output(true))
  chmodSync(outfile, 0o755)
  return { buildId, metafile: result.metafile }
}
