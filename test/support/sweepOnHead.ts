/**
 * What the real-Ray sweep files on one head (test/ray/sweep.test.ts, sweep-lifecycle.test.ts)
 * share: the stand-in engine and client (examples/engine-model.mjs's performance model), their
 * sessions, `sweep run` through the bundled CLI, the one-line `[sweep scenario]` account, and the
 * model's closed form. Each file starts its own head (its tests share it); the two files run on
 * hosts of their own at once, where one file of them all took the longest lane.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, beforeAll } from "vitest"
import { modelFlags, predict } from "../../examples/engine-model.mjs"
import { runCli } from "./cli.js"
import { type Head, prepareRay, projectRoot, startHead, teardownRay } from "./ray.js"

export const PORT = 6399
export const SLO = "p99_ttft_ms<=1000"
export const engine = (tag: string, extra = "") =>
  `${process.execPath} ${path.join(projectRoot, "examples/fake-engine.mjs")} --load-sec 0.2 --queue-ms 1500 --tag=${tag} ${extra}`.trim()
export const client = (prompts: number) => [
  process.execPath,
  "examples/fake-bench-client.mjs",
  "--num-prompts",
  String(prompts),
  "--max-concurrency",
  "{c}",
  "--output-len",
  "16"
]

const sessions: Array<string> = []
export const newSession = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-sweep-"))
  sessions.push(dir)
  return dir
}
/** Removes the sessions the file made (its afterAll). */
export const removeSessions = () => {
  for (const s of sessions.splice(0)) fs.rmSync(s, { recursive: true, force: true })
}
let tagN = 0
export const newTag = () => `hl-sweep-${process.pid}-${Date.now()}-${tagN++}`
export const readSweep = (dir: string) => JSON.parse(fs.readFileSync(path.join(dir, "sweep.json"), "utf8"))

/**
 * `sweep run` of `server` and `cmd` with `args`. No warm-up unless `args` asks for one: the
 * stand-in engine has no cold start to warm (but for `--fail=cold-start`), and with its 1500 ms
 * queue cost the default 8 requests at once take ~10 s per engine start at --max-num-seqs 1.
 */
export const sweepArgs = (
  session: string,
  server: string,
  args: ReadonlyArray<string>,
  cmd: ReadonlyArray<string>
) => [
  "sweep",
  "run",
  "--session",
  session,
  "--gpus",
  "1",
  "--server",
  server,
  ...(args.includes("--warmup") ? [] : ["--warmup", "0"]),
  ...args,
  "--",
  ...cmd
]
export const sweep = (...a: Parameters<typeof sweepArgs>) => runCli(sweepArgs(...a), { timeoutMs: 240_000 })

export const scenario = (name: string, doc: any, ms: number) =>
  console.log(
    `[sweep scenario] ${name}: ${doc?.status ?? "?"}, verdict ${doc?.summary?.verdict ?? "?"}, ` +
      `${doc?.combinations?.reduce((n: number, c: any) => n + c.engine_starts.length, 0) ?? "?"} engine start(s), ${(ms / 1000).toFixed(1)} s`
  )

/** `sweep run`, then the session's sweep.json, its one-line account logged as NAME. */
export const sweepScenario = async (name: string, ...a: Parameters<typeof sweepArgs>) => {
  const r = await sweep(...a)
  const doc = readSweep(a[0])
  scenario(name, doc, r.ms)
  return { r, doc }
}

export const assertSlotFree = async () => {
  const r = await runCli(["lease", "run", "--gpus", "1", "--", "true"], { timeoutMs: 60_000 })
  assert.strictEqual(r.code, 0, r.stderr)
  assert.isBelow(r.ms, 20_000, r.stderr)
}

/** The model's closed form for a combination's engine argv at concurrency c. */
export const expected = (server: string, c: number, prompts: number) =>
  predict(modelFlags(server.split(/\s+/)), {
    concurrency: c,
    numPrompts: prompts,
    inputLen: 32,
    outputLen: 16
  })

/**
 * The file's one head (PORT, the slot, one GPU), started before its tests and stopped after them,
 * its sessions removed: call inside the file's describe. Returns the head once it is up.
 */
export const useSweepHead = (): (() => Head) => {
  let head: Head | undefined
  beforeAll(async () => {
    await prepareRay()
    head = await startHead({ port: PORT, slot: true, numGpus: 1 })
  }, 120_000)
  afterAll(async () => {
    await teardownRay()
    removeSessions()
  }, 120_000)
  return () => {
    if (head === undefined) throw new Error("the sweep head is not up")
    return head
  }
}
