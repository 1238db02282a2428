// Bundles the CLI into one file (dist/hyperloom.mjs, the package's bin: see bundle-cli.mjs) and
// compiles the library (dist/lib) with its type declarations. The proto and the Python bridge are
// read from the package's proto/ and python/ folders at run time, so they ship beside dist/.
//
//   node scripts/build.mjs [--bundle-only]
import { execFileSync } from "node:child_process"
import { rmSync } from "node:fs"
import { bundleCli } from "./bundle-cli.mjs"

if (!process.argv.includes("--bundle-only")) rmSync("dist", { recursive: true, force: true })
await bundleCli({ outfile: "dist/hyperloom.mjs" })
if (!process.argv.includes("--bundle-only")) {
  execFileSync("npx", ["tsc", "-p", "tsconfig.build.json"], { stdio: "inherit" })
}
