// Bundles the CLI into one file (dist/hyperloom.mjs, the package's bin: see bundle-cli.mjs) and
// compiles the library (dist/lib) with its type declarations. The proto and the Python bridge are
// read from the package's proto/ and python/ folders at run time, so they ship beside dist/.
//
//   node scripts/build.mjs [--bundle-only | --lib-only]
//
// npm test makes the two halves apart: the bundle (seconds) before the real-Ray tests, which run
// it, and the library (tsc, a minute on a loaded machine) beside them, for the consumer test.
import { execFileSync } from "node:child_process"
import { rmSync } from "node:fs"
import { bundleCli } from "./bundle-cli.mjs"

const bundleOnly = process.argv.includes("--bundle-only")
const libOnly = process.argv.includes("--lib-only")
if (!bundleOnly && !libOnly) rmSync("dist", { recursive: true, force: true })
if (!libOnly) await bundleCli({ outfile: "dist/hyperloom.mjs" })
if (!bundleOnly) {
  if (libOnly) rmSync("dist/lib", { recursive: true, force: true })
  execFileSync("npx", ["tsc", "-p", "tsconfig.build.json"], { stdio: "inherit" })
}
