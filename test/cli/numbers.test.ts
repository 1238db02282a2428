/**
 * Number options are strict decimal (docs/design.md#bad-input; issue 13 item 8): JavaScript's
 * Number() reads `0x10` as 16, `0b11` as 3, `1e1` as 10, ` 5` as 5 and `Infinity` as a number,
 * so `--gpus 0x10` asked Ray for 16 GPUs. Every integer and seconds option of every command must
 * refuse such values with one usage line (exit 2) and run nothing: no `ray` call, no CMD.
 *
 * Drives the real executable with a stand-in `ray` that records every call; no Ray needed.
 */

import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { bundleCliWithRecordingRay, runBundledAsync } from "../support/bundle.js"

let work: string
let cli: string
let fakeRay: string
let rayLog: string
let marker: string

beforeAll(async () => {
  ;({ work, cli, rayLog, marker, fakeRay } = await bundleCliWithRecordingRay())
}, 180_000)

afterAll(() => {
  fs.rmSync(work, { recursive: true, force: true })
})

/** Runs the CLI without blocking the test worker (a spawnSync per value starves vitest's RPC). */
const run = (args: ReadonlyArray<string>) => runBundledAsync(cli, work, args, { HYPERLOOM_RAY: fakeRay })

const lines = (text: string) => text.split("\n").filter((l) => l.trim() !== "")

const touch = ["--", "touch", "cmd-ran"] as const

/** Where each number option is given, with the other options its command requires. */
const integerOptions: ReadonlyArray<{ readonly name: string; readonly args: (v: string) => string[] }> = [
  { name: "--gpus", args: (v) => ["lease", "run", "--gpus", v, ...touch] },
  { name: "--nodes", args: (v) => ["lease", "run", "--gpus", "0", "--nodes", v, ...touch] },
  { name: "--gpus", args: (v) => ["baseline", "run", "--session", "s", "--gpus", v, ...touch] },
  {
    name: "--nodes",
    args: (v) => ["baseline", "run", "--session", "s", "--gpus", "0", "--nodes", v, ...touch]
  },
  { name: "--gpus", args: (v) => ["ray", "doctor", "--gpus", v] },
  { name: "--nodes", args: (v) => ["ray", "doctor", "--nodes", v] },
  { name: "--gpus", args: (v) => ["ray", "ensure", "--gpus", v] },
  { name: "--nodes", args: (v) => ["ray", "ensure", "--nodes", v] },
  { name: "--gpus", args: (v) => ["ray", "repair", "--dry-run", "--gpus", v] },
  { name: "--nodes", args: (v) => ["ray", "repair", "--dry-run", "--nodes", v] }
]

const secondsOptions: ReadonlyArray<{ readonly name: string; readonly args: (v: string) => string[] }> = [
  { name: "--timeout", args: (v) => ["lease", "run", "--gpus", "0", "--timeout", v, ...touch] },
  ...["--attempt-timeout", "--deadline", "--ready-timeout"].map((name) => ({
    name,
    args: (v: string) => ["baseline", "run", "--session", "s", "--gpus", "0", name, v, ...touch]
  }))
]

/**
 * Values JavaScript's Number() accepts that are not what a user means by a decimal number (the
 * whole list runs against `lease run --gpus`, two of them against every other option: each run
 * spawns the CLI; test/domain/Numbers.test.ts covers the parser itself).
 */
const notDecimal = ["0x10", "0b11", "1e1", " 5"]
const sample = ["0x10"]

const refused = async (args: ReadonlyArray<string>, option: string, value: string) => {
  const r = await run(args)
  assert.strictEqual(r.code, 2, `${args.join(" ")}: ${r.stderr}`)
  assert.strictEqual(lines(r.stderr).length, 1, r.stderr)
  assert.include(r.stderr, option)
  assert.include(r.stderr, "decimal")
  assert.include(r.stderr, `'${value}'`)
  assert.isFalse(fs.existsSync(rayLog), `ray was run for ${args.join(" ")}`)
  assert.isFalse(fs.existsSync(marker), "CMD ran")
  assert.isFalse(fs.existsSync(path.join(work, "s")), "a session was created")
}

describe("integer options are strict decimal whole numbers", () => {
  for (const o of integerOptions) {
    it(`${o.args("V").slice(0, 2).join(" ")} ${o.name}: ${sample.join(", ")} is refused`, async () => {
      for (const v of sample) await refused(o.args(v), o.name, v)
    }, 60_000)
  }

  it(`lease run --gpus: ${notDecimal.join(", ")} and 2.5 are refused (0x10 is not 16 GPUs asked of Ray)`, async () => {
    for (const v of [...notDecimal, "2.5"])
      await refused(["lease", "run", "--gpus", v, ...touch], "--gpus", v)
  }, 60_000)

  it("plain decimal values still parse (the lease is attempted and ray is asked)", async () => {
    for (const v of ["0", "016"]) {
      fs.rmSync(rayLog, { force: true })
      const r = await run(["lease", "run", "--gpus", v, "--timeout", "1.5", ...touch])
      assert.notStrictEqual(r.code, 2, r.stderr)
      assert.isTrue(fs.existsSync(rayLog), `ray was not asked for --gpus ${v}: ${r.stderr}`)
    }
    fs.rmSync(rayLog, { force: true })
  }, 60_000)
})

describe("seconds options are strict positive decimal numbers", () => {
  for (const o of secondsOptions) {
    it(`${o.args("V").slice(0, 2).join(" ")} ${o.name}: 1e1, Infinity and 0 are refused`, async () => {
      for (const v of ["1e1", "Infinity", "0"]) await refused(o.args(v), o.name, v)
    }, 60_000)
  }
})
