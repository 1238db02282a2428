/**
 * Every usage error reads the same way: one stderr line that starts with `hyperloom: `, exit 2,
 * whoever found it (hyperloom's own checks, or @effect/cli's parser: a missing option, a value it
 * could not read, an argument it did not expect). Drives the bundled executable (the same bundle
 * as dist/hyperloom.mjs) with a stand-in `ray`; nothing may run.
 */
import * as fs from "node:fs"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { bundleCliWithRecordingRay, runBundledAsync } from "../support/bundle.js"

let work: string
let cli: string
let fakeRay: string
let rayLog: string

beforeAll(async () => {
  ;({ work, cli, rayLog, fakeRay } = await bundleCliWithRecordingRay())
}, 180_000)

afterAll(() => {
  fs.rmSync(work, { recursive: true, force: true })
})

const BAD: ReadonlyArray<ReadonlyArray<string>> = [
  ["bogus"],
  ["ray", "stauts"],
  ["ray", "status", "extra"],
  ["lease", "run"],
  ["lease", "run", "--gpus"],
  ["lease", "run", "--gpus", "x", "--", "true"],
  ["lease", "run", "--gpus", "1", "--gpus", "2", "--", "true"],
  ["lease", "run", "--gpus", "0", "--timeout", "abc", "--", "true"],
  ["ray", "ensure", "--gpus", "-1"],
  ["state", "show"],
  ["report"],
  ["queue", "--bogus"],
  ["baseline", "run", "--session", "s", "--gpus", "1", "--server"],
  ["sweep", "run", "--session", "s", "--gpus", "1", "--server", "x", "--param", "bad", "--", "true"],
  ["--log-level", "foo", "ray", "status"]
]

describe("usage errors", () => {
  it.each(BAD.map((args) => [args.join(" "), args] as const))(
    "hyperloom %s: exit 2, one line starting `hyperloom: `",
    async (_, args) => {
      const r = await runBundledAsync(cli, work, args, { HYPERLOOM_RAY: fakeRay })
      assert.strictEqual(r.code, 2, r.stderr)
      const lines = r.stderr.split("\n").filter((l) => l.trim() !== "")
      assert.strictEqual(lines.length, 1, r.stderr)
      assert.match(lines[0]!, /^hyperloom: \S/, r.stderr)
      assert.notMatch(lines[0]!, /^hyperloom: hyperloom: /)
      assert.isFalse(fs.existsSync(rayLog), "ray was run")
    }
  )
})
