// Bundles the CLI into one ESM file (dist/hyperloom.mjs, the package's bin) and compiles the
// library (dist/lib) with its type declarations. The proto and the Python bridge are read from
// the package's proto/ and python/ folders at run time, so they ship beside dist/.
import { execFileSync } from "node:child_process"
import { chmodSync, rmSync } from "node:fs"
import { build } from "esbuild"

if (!process.argv.includes("--bundle-only")) rmSync("dist", { recursive: true, force: true })
await build({
  entryPoints: ["src/cli/main.ts"],
  outfile: "dist/hyperloom.mjs",
  bundle: true,
  platform: "node",
  target: "node20",
  format: "esm",
  minify: false,
  sourcemap: "linked",
  legalComments: "none",
  logLevel: "warning",
  // CommonJS dependencies (grpc-js) call require(): give the ESM bundle one.
  banner: {
    js: "#!/usr/bin/env node\nimport { createRequire as __hyperloomRequire } from 'node:module';\nconst require = __hyperloomRequire(import.meta.url);"
  }
})
chmodSync("dist/hyperloom.mjs", 0o755)
if (!process.argv.includes("--bundle-only")) {
  execFileSync("npx", ["tsc", "-p", "tsconfig.build.json"], { stdio: "inherit" })
}
