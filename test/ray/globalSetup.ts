import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { projectRoot } from "../support/ray.js"

/**
 * Real-Ray tests drive the bundled CLI as users do: bundle it once before they start. npm test
 * bundles it before it runs the files side by side (HYPERLOOM_TEST_BUNDLED=1), so that no run
 * rewrites the bundle while another one's tests execute it.
 */
export default function setup() {
  if (
    process.env.HYPERLOOM_TEST_BUNDLED === "1" &&
    fs.existsSync(path.join(projectRoot, "dist/hyperloom.mjs"))
  ) {
    return
  }
  execFileSync(process.execPath, ["scripts/build.mjs", "--bundle-only"], {
    cwd: projectRoot,
    stdio: "inherit"
  })
}
