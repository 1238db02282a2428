/**
 * A scripted stand-in for a Python bridge (no Ray), for the live LeaseBridge and GroupBridge
 * services' unit tests: a Node script installed as the Ray Python. It reads the JSON-lines
 * requests (appending each to FAKE_BRIDGE_LOG when set), answers the first request that is not
 * a release with the case FAKE_BRIDGE_MODE names, and on `{"op": "release"}` or EOF says
 * `released` and exits — except in mode "stubborn", which ignores both and SIGTERM. Its pid is
 * appended to FAKE_BRIDGE_STARTS when set. Run as `tidy`, it appends its arguments to
 * FAKE_TIDY_LOG and prints tidy's line (FAKE_TIDY_LEFT: a group it could not remove).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { afterAll, assert } from "@effect/vitest"
import { Effect, Exit, Layer, Scope } from "effect"
import * as Settings from "../../src/services/Settings.js"
import { isAlive } from "./lease.js"

/**
 * Writes the stand-in as `dir/python`: `prelude` (script text defining helpers; `out(o)` writes
 * an event, `release()` ends) and `cases` (the `case "mode": …` arms of the answer).
 */
export const writeScriptedBridge = (
  dir: string,
  script: { readonly prelude: string; readonly cases: string }
) => {
  const python = path.join(dir, "python")
  const text = `#!/usr/bin/env node
const fs = require("node:fs")
const mode = process.env.FAKE_BRIDGE_MODE
if (process.env.FAKE_BRIDGE_STARTS) fs.appendFileSync(process.env.FAKE_BRIDGE_STARTS, process.pid + "\\n")
const out = (o) => process.stdout.write(JSON.stringify(o) + "\\n")
// \`python PYDIR tidy …\` (after a bridge died): its argv to FAKE_TIDY_LOG, then its one line.
if (process.argv[3] === "tidy") {
  if (process.env.FAKE_TIDY_LOG) fs.appendFileSync(process.env.FAKE_TIDY_LOG, process.argv.slice(3).join(" ") + "\\n")
  out({ removed: 1, left: process.env.FAKE_TIDY_LEFT ? [process.env.FAKE_TIDY_LEFT] : [] })
  process.exit(0)
}
const release = () => { out({ event: "released" }); process.exit(0) }
${script.prelude}
let buf = ""
let asked = false
if (mode === "stubborn") process.on("SIGTERM", () => {})
process.stdin.on("data", (d) => {
  buf += d
  let nl
  while ((nl = buf.indexOf("\\n")) >= 0) {
    const line = buf.slice(0, nl); buf = buf.slice(nl + 1)
    const msg = JSON.parse(line)
    if (process.env.FAKE_BRIDGE_LOG) fs.appendFileSync(process.env.FAKE_BRIDGE_LOG, line + "\\n")
    if (msg.op === "release") { if (mode !== "stubborn") release(); continue }
    if (asked) continue
    asked = true
    switch (mode) {
${script.cases}
    }
  }
})
process.stdin.on("end", () => { if (mode !== "stubborn") release() })
setInterval(() => {}, 1000)
`
  fs.writeFileSync(python, text, { mode: 0o755 })
  return python
}

/**
 * The stand-in in a temporary `dir` of its own (removed after the file's tests), and `layerFor`:
 * `layer` (a bridge service's live layer) running it in `mode`, on the Node platform.
 */
export const scriptedBridge = <A, E>(
  layer: Layer.Layer<A, E, Settings.Settings | CommandExecutor.CommandExecutor>,
  script: { readonly prelude: string; readonly cases: string }
) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-scripted-bridge-"))
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))
  const python = writeScriptedBridge(dir, script)
  const layerFor = (mode: string, extraEnv: Record<string, string> = {}): Layer.Layer<A, E> =>
    layer.pipe(
      Layer.provide(NodeContext.layer),
      Layer.provide(
        Settings.layerTest({
          rayPython: python,
          env: { ...process.env, FAKE_BRIDGE_MODE: mode, ...extraEnv }
        })
      )
    )
  return { dir, layerFor }
}

/** The requests the stand-in logged to `log` (its FAKE_BRIDGE_LOG), parsed. */
export const requestsIn = (log: string): Array<unknown> =>
  fs
    .readFileSync(log, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l))

/**
 * Opens a hold in a scope of its own on a "stubborn" bridge (`open` gets a 0.3 s release timeout),
 * waits until it started, closes the scope and checks that the bridge was TERMed, then KILLed:
 * gone, after the release timeout and the TERM wait, and within bounds.
 */
export const assertStubbornBridgeKilled = <S extends { readonly bridgePid: number }, E, R>(
  open: (releaseTimeoutSec: number) => Effect.Effect<S, E, R | Scope.Scope>,
  awaitStarted: (session: S) => Effect.Effect<unknown, E>
) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const s = yield* open(0.3).pipe(Scope.extend(scope))
    yield* awaitStarted(s)
    const t0 = Date.now()
    yield* Scope.close(scope, Exit.void)
    const ms = Date.now() - t0
    assert.isFalse(isAlive(s.bridgePid))
    assert.isAtLeast(ms, 2_000, "waited the release timeout and the TERM grace")
    assert.isBelow(ms, 6_000)
  })
