/**
 * Global setup of the unit project (vitest.config.ts): at the end of the run, removes the folders
 * its worker threads built the test executable in (test/support/bundle.ts `builtOnce`). They are
 * named after this process, which runs the threads, and a thread's end runs none of its handlers.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { buildDirPrefix } from "./bundle.js"

export default () => () => {
  const prefix = buildDirPrefix(process.pid)
  for (const entry of fs.readdirSync(os.tmpdir())) {
    if (entry.startsWith(prefix)) fs.rmSync(path.join(os.tmpdir(), entry), { recursive: true, force: true })
  }
}
