/** Bundles the real executable into a temp folder, for CLI tests that need no Ray (unit project). */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { build } from "esbuild"

export const root = path.resolve(import.meta.dirname, "../..")

/** Builds `<temp dir>/hyperloom.mjs` from src/cli/main.ts; returns the dir and the bundle's path. */
export const bundleCli = async (): Promise<{ readonly work: string; readonly cli: string }> => {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-cli-"))
  const cli = path.join(work, "hyperloom.mjs")
  await build({
    entryPoints: [path.join(root, "src/cli/main.ts")],
    outfile: cli,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "esm",
    logLevel: "warning",
    banner: {
      js: "import { createRequire as __hyperloomRequire } from 'node:module';\nconst require = __hyperloomRequire(import.meta.url);"
    }
  })
  return { work, cli }
}
