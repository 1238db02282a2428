/**
 * The Python group bridge (python/hyperloom/group.py) spoken to directly over stdio, for what
 * needs no cluster: bad requests are protocol errors, a release before any group ends cleanly, a
 * dead address fails fast. (Groups on a real two-node cluster: group.test.ts.)
 */
import { spawn } from "node:child_process"
import * as path from "node:path"
import { afterEach, assert, describe, it } from "@effect/vitest"
import { DEFAULT_GPU_CLEAN_TIMEOUT_SEC } from "../../src/domain/GpuHolders.js"
import { DEFAULT_STOP_GRACE_SEC } from "../../src/services/BridgeProcess.js"
import { projectRoot, rayPython } from "../support/ray.js"

const entry = [path.join(projectRoot, "python"), "group"]
const DEAD_PORT = 6403

interface Run {
  readonly code: number | null
  readonly events: ReadonlyArray<Record<string, any>>
  readonly junk: ReadonlyArray<string>
  readonly ms: number
}

const children: ReturnType<typeof spawn>[] = []
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL")
})

/** Sends `lines` (then EOF) to a fresh group bridge and collects what it says until it exits. */
const talk = (lines: ReadonlyArray<string>): Promise<Run> =>
  new Promise((resolve) => {
    const t0 = Date.now()
    const child = spawn(rayPython, entry, { stdio: ["pipe", "pipe", "pipe"] })
    children.push(child)
    let out = ""
    child.stdout!.on("data", (d) => (out += d))
    child.stderr!.resume()
    for (const l of lines) child.stdin!.write(`${l}\n`)
    child.stdin!.end()
    child.on("exit", (code) => {
      const events: Record<string, any>[] = []
      const junk: string[] = []
      for (const line of out.split("\n").filter((l) => l !== "")) {
        try {
          events.push(JSON.parse(line))
        } catch {
          junk.push(line)
        }
      }
      resolve({ code, events, junk, ms: Date.now() - t0 })
    })
  })

const group = (fields: Record<string, unknown>) =>
  JSON.stringify({
    op: "group",
    address: `127.0.0.1:${DEAD_PORT}`,
    nodes: 2,
    gpus: 1,
    argv: ["true"],
    env: { PATH: "/usr/bin:/bin" },
    cwd: "/",
    stop_grace_sec: DEFAULT_STOP_GRACE_SEC,
    gpu_clean_timeout_sec: DEFAULT_GPU_CLEAN_TIMEOUT_SEC,
    ...fields
  })

describe("group bridge protocol without a cluster", () => {
  it("a line that is not JSON: protocol error, released, exit 1; stdout carries protocol lines only", async () => {
    const r = await talk(["not json"])
    assert.strictEqual(r.code, 1)
    assert.deepStrictEqual(
      r.events.map((e) => e.event),
      ["error", "released"]
    )
    assert.strictEqual(r.events[0]!.kind, "protocol")
    assert.deepStrictEqual(r.junk, [])
  })

  it("a group without a node count, or with an empty bundle, is a protocol error naming what is wrong", async () => {
    const noNodes = await talk([group({ nodes: undefined })])
    assert.strictEqual(noNodes.code, 1)
    assert.include(noNodes.events[0]!.message, "nodes")
    const empty = await talk([group({ gpus: 0, serving_slot: false })])
    assert.strictEqual(empty.code, 1)
    assert.include(empty.events[0]!.message, "GPUs or the serving slot")
  })

  it("release (or EOF) before any group: released, exit 0", async () => {
    const r = await talk([JSON.stringify({ op: "release" })])
    assert.strictEqual(r.code, 0)
    assert.deepStrictEqual(
      r.events.map((e) => e.event),
      ["released"]
    )
    const eof = await talk([])
    assert.strictEqual(eof.code, 0)
  })

  it("a dead address fails fast with kind ray_init", async () => {
    const r = await talk([group({})])
    assert.strictEqual(r.code, 1)
    assert.strictEqual(r.events[0]!.kind, "ray_init")
    assert.include(r.events[0]!.message, "Connection refused")
    assert.isBelow(r.ms, 15_000)
  })
})
