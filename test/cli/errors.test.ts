/**
 * Bad input an operator can give without any Ray running: each is one clear line on stderr and a
 * documented exit code, never a stack trace (docs/design.md#bad-input). Drives the real executable.
 */
import * as fs from "node:fs"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { bundleCli, runBundled } from "../support/bundle.js"

let work: string
let cli: string

beforeAll(async () => {
  ;({ work, cli } = await bundleCli())
}, 180_000)

afterAll(() => {
  fs.rmSync(work, { recursive: true, force: true })
})

const run = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  runBundled(cli, work, args, env)

/** Exactly one non-empty stderr line, no stack frame, containing every fragment. */
const oneLine = (stderr: string, ...fragments: ReadonlyArray<string>) => {
  const lines = stderr.split("\n").filter((l) => l.trim() !== "")
  assert.strictEqual(lines.length, 1, `expected one line, got:\n${stderr}`)
  assert.notMatch(stderr, /\n\s+at /)
  for (const f of fragments) assert.include(lines[0], f)
}

describe("bad input: one line and a documented exit code", () => {
  it("no ray executable: exit 3 naming HYPERLOOM_RAY", () => {
    const r = run(["ray", "ensure"], { HYPERLOOM_RAY: "/nonexistent/hl/ray" })
    assert.strictEqual(r.code, 3)
    oneLine(r.stderr, "no ray executable found", "HYPERLOOM_RAY")
  })

  it("a bad setting: exit 2, one line naming the variable and its value (HYPERLOOM_DEBUG too)", () => {
    for (const [name, value] of [
      ["HYPERLOOM_DEBUG", "maybe"],
      ["HYPERLOOM_RAY_STATUS_TIMEOUT_SEC", "soon"],
      ["HYPERLOOM_TEST_REPAIR_PAUSE", "before_lunch"]
    ] as const) {
      const r = run(["ray", "status"], { [name]: value, HYPERLOOM_RAY: "/nonexistent/hl/ray" })
      assert.strictEqual(r.code, 2, `${name}: ${r.stderr}`)
      oneLine(r.stderr, `invalid ${name} "${value}": expected`)
    }
  })

  it("HYPERLOOM_DEBUG=0 is off: an error has no debug trail", () => {
    const r = run(["ray", "ensure"], { HYPERLOOM_DEBUG: "0", HYPERLOOM_RAY: "/nonexistent/hl/ray" })
    assert.strictEqual(r.code, 3)
    oneLine(r.stderr, "no ray executable found")
  })

  it("a malformed RAY_ADDRESS: exit 2", () => {
    const r = run(["ray", "doctor"], { RAY_ADDRESS: "not an address" })
    assert.strictEqual(r.code, 2)
    oneLine(r.stderr, "invalid Ray address", "not an address")
  })

  it("a port out of range: exit 2", () => {
    const r = run(["ray", "status"], { RAY_ADDRESS: "10.0.0.1:99999" })
    assert.strictEqual(r.code, 2)
    oneLine(r.stderr, "99999")
  })

  it("a ray:// Ray Client URL: exit 2, asking for the GCS host:port", () => {
    for (const command of [
      ["ray", "doctor"],
      ["ray", "ensure"]
    ]) {
      const r = run(command, { RAY_ADDRESS: "ray://10.0.0.1:10001" })
      assert.strictEqual(r.code, 2, r.stderr)
      oneLine(r.stderr, "ray://10.0.0.1:10001", "host:port")
    }
  })

  it("a malformed HYPERLOOM_NODES is an error, never silently single-node: exit 2", () => {
    const r = run(["ray", "doctor"], { HYPERLOOM_NODES: "2x" })
    assert.strictEqual(r.code, 2)
    oneLine(r.stderr, "HYPERLOOM_NODES", "2x")
  })

  it("bad option values: exit 2", () => {
    for (const args of [
      ["ray", "doctor", "--gpus", "x"],
      ["ray", "doctor", "--gpus", "-1"],
      ["ray", "doctor", "--nodes", "0"],
      ["lease", "run", "--gpus", "0", "--timeout", "0", "--", "true"]
    ]) {
      const r = run(args)
      assert.strictEqual(r.code, 2, `${args.join(" ")}: ${r.stderr}`)
      oneLine(r.stderr)
    }
  })

  it("a bad timeout setting: exit 2", () => {
    const r = run(["ray", "ensure"], { HYPERLOOM_RAY_STATUS_TIMEOUT_SEC: "soon" })
    assert.strictEqual(r.code, 2)
    oneLine(r.stderr, "HYPERLOOM_RAY_STATUS_TIMEOUT_SEC")
  })

  it("--help lists every command and the exit codes", () => {
    const r = run(["--help"])
    assert.strictEqual(r.code, 0)
    for (const word of ["ray", "lease", "baseline", "state", "Exit codes", "130", "RAY_ADDRESS"]) {
      assert.include(r.stdout, word)
    }
  })
})
