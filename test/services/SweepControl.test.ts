/**
 * The sweep runner's channel on hyperloom's side (services/SweepControl.ts): the runner's messages
 * are taken out of its output (also a group's rank 0 lines), its files written under the engine's
 * folder or a run's folder as they come, and nothing elsewhere; requests go to its stdin.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { NodeFileSystem } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { RUNNER_MESSAGE_PREFIX } from "../../src/domain/Sweep/Runner.js"
import { layer, makeChannel, memoryFiles, SweepControl } from "../../src/services/SweepControl.js"

const msg = (m: unknown) => ({
  stream: "stdout" as const,
  line: `${RUNNER_MESSAGE_PREFIX}${JSON.stringify(m)}`
})
const b64 = (s: string) => Buffer.from(s).toString("base64")
const status = {
  version: 1,
  state: "ready",
  outcome: null,
  port: 1234,
  base_url: "http://127.0.0.1:1234",
  ready_sec: 0.5,
  exit_code: null,
  runtime_sec: null,
  gone: false
}

describe("SweepControl's channel", () => {
  it.scoped(
    "takes the runner's messages, writes its files under the sweep's folders only, passes other lines",
    () =>
      Effect.gen(function* () {
        const files = new Map<string, string>()
        const ch = yield* makeChannel("/s/c1/engine-1", memoryFiles(files))
        const sent: Array<string> = []
        ch.stdin.on("data", (d: Buffer) => sent.push(d.toString()))
        assert.isFalse(yield* ch.take({ stream: "stdout", line: "a client line" }))
        assert.isFalse(yield* ch.take({ stream: "stderr", line: msg({ engine: status }).line }))
        assert.isTrue(yield* ch.take(msg({ engine: { ...status, state: "starting" } })))
        assert.isTrue(yield* ch.take({ stream: "stdout", line: `[rank 0] ${msg({ engine: status }).line}` }))
        assert.strictEqual((yield* ch.awaitEngine).port, 1234)
        assert.isTrue(yield* ch.take(msg({ file: "/s/c1/engine-1/server.log", at: 0, data: b64("one\n") })))
        assert.isTrue(yield* ch.take(msg({ file: "/s/c1/engine-1/server.log", at: 4, data: b64("two\n") })))
        // a run's folder is one only once a request named it
        assert.isTrue(yield* ch.take(msg({ file: "/s/c1/run-1/client.log", at: 0, data: b64("early") })))
        yield* ch.send(1, { argv: ["c"], dir: "/s/c1/run-1", env: {}, between: null, timeout_sec: null })
        assert.isTrue(yield* ch.take(msg({ file: "/s/c1/run-1/client.log", at: 0, data: b64("x") })))
        assert.isTrue(
          yield* ch.take(msg({ file: "/s/c1/run-1/../../../etc/passwd", at: 0, data: b64("no") }))
        )
        assert.isTrue(yield* ch.take(msg({ file: "/etc/passwd", at: 0, data: b64("no") })))
        assert.deepStrictEqual(Object.fromEntries(files), {
          // the engine's last status, kept beside its files
          "/s/c1/engine-1/engine.json": `${JSON.stringify(status)}\n`,
          "/s/c1/engine-1/server.log": "one\ntwo\n",
          "/s/c1/run-1/client.log": "x"
        })
        assert.isUndefined(yield* ch.done(1))
        const answer = {
          seq: 1,
          exit_code: 0,
          timed_out: false,
          runtime_sec: 1,
          between_exit_code: null,
          between_sec: null,
          engine_alive: true,
          engine_exit_code: null,
          client_started: 1,
          client_ended: 2
        }
        assert.isTrue(yield* ch.take(msg({ done: answer })))
        assert.deepStrictEqual(yield* ch.awaitDone(1), answer)
        assert.deepStrictEqual(JSON.parse(files.get("/s/c1/engine-1/control/1.done.json")!), answer)
        yield* ch.send(2, { stop: true })
        assert.deepStrictEqual(
          sent
            .join("")
            .trim()
            .split("\n")
            .map((l) => JSON.parse(l)),
          [
            { seq: 1, argv: ["c"], dir: "/s/c1/run-1", env: {}, between: null, timeout_sec: null },
            { seq: 2, stop: true }
          ]
        )
      })
  )

  it.scoped(
    "on disk: a session folder deleted under a running sweep is not made again by a run's files",
    () =>
      Effect.gen(function* () {
        const session = fs.mkdtempSync(path.join(os.tmpdir(), "hl-control-"))
        const engineDir = path.join(session, "combinations", "0", "engine-1")
        const runDir = path.join(session, "combinations", "0", "runs", "1-c_2")
        const ch = yield* Effect.flatMap(SweepControl, (c) => c.open(engineDir))
        fs.mkdirSync(runDir, { recursive: true })
        yield* ch.send(1, { argv: ["c"], dir: runDir, env: {}, between: null, timeout_sec: null })
        assert.isTrue(yield* ch.take(msg({ file: path.join(runDir, "client.log"), at: 0, data: b64("x") })))
        assert.strictEqual(fs.readFileSync(path.join(runDir, "client.log"), "utf8"), "x")
        // a file a client wrote deeper in its run's folder still comes back, its folders made
        const deep = path.join(runDir, "out", "2026", "r.json")
        assert.isTrue(yield* ch.take(msg({ file: deep, at: 0, data: b64("{}") })))
        assert.strictEqual(fs.readFileSync(deep, "utf8"), "{}")
        fs.rmSync(session, { recursive: true, force: true })
        assert.isTrue(yield* ch.take(msg({ file: path.join(runDir, "result.json"), at: 0, data: b64("{}") })))
        assert.isFalse(fs.existsSync(session), "the deleted session folder was made again")
      }).pipe(Effect.provide(layer), Effect.provide(NodeFileSystem.layer))
  )
})
