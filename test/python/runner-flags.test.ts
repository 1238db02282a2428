/**
 * The runners' flags have one home, domain/Serving.ts (`RUNNER_DEFAULTS`, `runnerArgs`): the
 * serving runner (`python PYDIR serve`) and the sweep runner (`python PYDIR sweep`) keep no
 * defaults of their own. Every flag is required, so a flag the TypeScript side forgot is a usage
 * error (exit 2 naming it), never a default Python picked; the argv the TypeScript side builds
 * is accepted as it is. Without Ray: the runners are run directly, with a server that exits at
 * once (so an accepted argv ends quickly with "the server exited", exit 3).
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import { LeasedCommand, readiness, runnerArgs } from "../../src/domain/Serving.js"
import { anyPython, pythonDir } from "../support/lease.js"

const work = fs.mkdtempSync(path.join(os.tmpdir(), "hl-runner-flags-"))
afterAll(() => fs.rmSync(work, { recursive: true, force: true }))

const run = (entry: "serve" | "sweep", args: ReadonlyArray<string>) =>
  new Promise<{ readonly status: number | null; readonly stderr: string }>((resolve) => {
    execFile(
      anyPython,
      ["-I", pythonDir, entry, ...args],
      { encoding: "utf8", timeout: 30_000 },
      (error, _stdout, stderr) =>
        resolve({ status: error === null ? 0 : typeof error.code === "number" ? error.code : null, stderr })
    )
  })

const FLAGS = [
  "--server",
  "--ready-path",
  "--ready-timeout",
  "--stop-grace",
  "--progress-every",
  "--check",
  "--warmup",
  "--dir",
  "--cwd"
]

/** `args` without `flag` and its value. */
const without = (args: ReadonlyArray<string>, flag: string) => {
  const i = args.indexOf(flag)
  return [...args.slice(0, i), ...args.slice(i + 2)]
}

const commands = {
  serve: LeasedCommand.Serving({
    server: "exit 0",
    readiness: readiness("/health", 5),
    client: ["true"],
    dir: path.join(work, "serve")
  }),
  sweep: LeasedCommand.Engine({
    server: "exit 0",
    readiness: readiness("/health", 5),
    dir: path.join(work, "sweep")
  })
} as const

describe.each(["serve", "sweep"] as const)("the %s runner's flags", (entry) => {
  const args = runnerArgs(commands[entry], work)

  it("the argv the TypeScript side builds carries every flag the runner requires, and is accepted", async () => {
    for (const flag of FLAGS) assert.include(args, flag)
    const r = await run(entry, args)
    assert.strictEqual(r.status, 3, `accepted, and the server exited at once: ${r.stderr}`)
    assert.notMatch(r.stderr, /usage|required/)
  })

  it.each(FLAGS)("without %s: a usage error (exit 2) naming it, no default taken", async (flag) => {
    const r = await run(entry, without(args, flag))
    assert.strictEqual(r.status, 2, r.stderr)
    assert.include(r.stderr, flag)
    assert.match(r.stderr, /required/)
  })
})
