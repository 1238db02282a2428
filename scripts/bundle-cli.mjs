// Builds the CLI executable (dist/hyperloom.mjs, the package's bin) for a fast cold start
// (docs/performance.md):
// - the CLI (src/cli/main.ts) is bundled as minified CommonJS and stored in a comment at the end of
//   a small ES module loader (scripts/cli-loader.mjs) that compiles it with a V8 code cache;
// - the GCS methods are static code generated from proto/gcs.proto (scripts/gcs-codec.mjs) in
//   place of src/services/GcsProto.ts, which parses the proto at run time.
// The proto and the Python bridge are still read from the package's proto/ and python/ folders.
import { createHash } from "node:crypto"
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
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

/**
 * Writes the executable to `outfile` (an .mjs) and its source map beside it (`<outfile>.map`).
 * `define`: more esbuild defines (the unit tests' bundle names its own host lock with one).
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
    plugins: [staticGcsProto],
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
  return { buildId }
}
