import { execFileSync } from "node:child_process"
import { projectRoot } from "../support/ray.js"

/** Real-Ray tests drive the bundled CLI as users do: bundle it once before they start. */
export default function setup() {
  execFileSync(process.execPath, ["scripts/build.mjs", "--bundle-only"], {
    cwd: projectRoot,
    stdio: "inherit"
  })
}
