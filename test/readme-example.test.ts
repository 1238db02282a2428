/**
 * The README's "testing a program built on hyperloom" example, run as a test. The block between
 * the markers below must equal the README's block (imports from "hyperloom" there, from the
 * source here), imports and all, so that the README's block compiles as written: the first test
 * checks that, the example's own test runs it.
 */
import * as fs from "node:fs"
import * as path from "node:path"
// --- README example start
import { assert, it } from "@effect/vitest"
import { Effect } from "effect"
import { Lease, LeaseBridge, Testing } from "../src/index.js"

// The program under test: a benchmark step that must run under a serving lease.
const benchmark = Effect.gen(function* () {
  const result = yield* Lease.runLeased({
    request: { gpus: 1, servingSlot: true },
    argv: ["python", "bench.py"],
    env: {},
    cwd: "."
  })
  return result.exitCode === 0 ? "ok" : `failed with exit code ${result.exitCode}`
})

it.effect("reports a benchmark that fails under its lease", () =>
  Effect.gen(function* () {
    assert.strictEqual(yield* benchmark, "failed with exit code 3")
    const leases = yield* yield* LeaseBridge.FakeLeaseBridgeLog
    assert.strictEqual(leases.opened[0]?.gpus, 1)
    assert.strictEqual(leases.released, 1)
  }).pipe(Effect.provide(Testing.layer({ lease: () => ({ exitCode: 3 }) })))
)
// --- README example end

it("the README example is the README's block, verbatim", () => {
  const self = fs.readFileSync(import.meta.filename, "utf8")
  const mine = self.split("// --- README example start\n")[1]!.split("// --- README example end")[0]!
  const readme = fs.readFileSync(path.join(import.meta.dirname, "..", "README.md"), "utf8")
  const block = /<!-- readme-example -->\n```ts\n([\s\S]*?)```/.exec(readme)?.[1]
  assert.isDefined(block, "README.md has no <!-- readme-example --> block")
  assert.strictEqual(block, mine.replace('from "../src/index.js"', 'from "hyperloom"'))
})
