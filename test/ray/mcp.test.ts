/**
 * `hyperloom mcp` on a real head (docs/agents.md), driven by the official SDK's client as an agent
 * would: over stdio a whole sweep (doctor, plan, start with progress and logging notifications,
 * status, show, compare, cancel), `notifications/cancelled` stopping a sweep cleanly, a client
 * that goes away mid-sweep (`--on-disconnect cancel` and `continue`), and a second server, over
 * streamable HTTP, whose sweep shares the host's FIFO queue with the first's (their engines never
 * overlap on the one slot); a baseline against an engine through baseline_run. The stand-in engine
 * and client, tiny loads; the tests share one head.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { CallToolResultSchema, LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import { afterAll, assert, describe, it } from "vitest"
import { cleanEnv, cliPath } from "../support/cli.js"
import { freePort } from "../support/freePort.js"
import { pidsWithArg, waitGone } from "../support/lease.js"
import { projectRoot, sleep, waitFor } from "../support/ray.js"
import { assertSlotFree, client, engine, newTag, SLO, useSweepHead } from "../support/sweepOnHead.js"

const sessions = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-mcp-"))
afterAll(() => fs.rmSync(sessions, { recursive: true, force: true }))

const serverArgs = (extra: ReadonlyArray<string> = []) => [
  cliPath,
  "mcp",
  "--sessions",
  sessions,
  "--allow-server",
  "node",
  ...extra
]

interface Connected {
  readonly client: Client
  readonly logs: Array<string>
  readonly pid: () => number | null
}

const connect = async (extra: ReadonlyArray<string> = []): Promise<Connected> => {
  const c = new Client({ name: "hyperloom-ray-test", version: "0.0.0" })
  const logs: Array<string> = []
  c.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    logs.push(String(n.params.data))
  })
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: serverArgs(extra),
    env: cleanEnv() as Record<string, string>,
    cwd: projectRoot,
    stderr: "inherit"
  })
  await c.connect(transport)
  return { client: c, logs, pid: () => transport.pid }
}

/** The stand-in's sweep: `seqs` values, one load point, `repeats`, `prompts` requests a run. */
const experiment = (tag: string, seqs: string, repeats: number, prompts: number) => ({
  server: engine(tag, "--max-num-seqs {s}"),
  client: client(prompts),
  params: [`s=${seqs}`],
  load: "c=2",
  slo: [SLO],
  repeats,
  gpus: 1,
  // the stand-in has no cold start to warm
  warmup: 0
})

const call = async (c: Client, name: string, args: Record<string, unknown>, options: object = {}) => {
  const r = (await c.callTool({ name, arguments: args }, CallToolResultSchema, {
    timeout: 170_000,
    ...options
  })) as { readonly isError?: boolean; readonly structuredContent?: any }
  assert.isFalse(r.isError ?? false, `${name}: ${JSON.stringify(r.structuredContent)}`)
  return r.structuredContent
}

const docOf = (session: string) =>
  JSON.parse(fs.readFileSync(path.join(sessions, session, "sweep.json"), "utf8"))

const engineUp = (tag: string) =>
  waitFor(`engine ${tag}`, () => (pidsWithArg(`--tag=${tag}`).length > 0 ? true : undefined), 60_000, 100)

describe("hyperloom mcp on a real head", () => {
  useSweepHead()

  it("a whole sweep over stdio: doctor, plan, start with progress, status, show, compare, cancel", async () => {
    const { client: c, logs } = await connect(["--max-engine-starts", "4"])
    try {
      const doctor = await call(c, "doctor", { gpus: 1 })
      assert.isTrue(doctor.feasible)
      assert.include(doctor.repair.refused, "--allow-repair")
      assert.strictEqual(doctor.budget.left.engine_starts, 4)

      const tag = newTag()
      // the engine's answers checked once per start, as `sweep run --check` does
      const sweep = {
        ...experiment(tag, "8,16", 2, 4),
        check: "node examples/known-answers.mjs",
        max_failed: 2
      }
      const plan = await call(c, "plan_sweep", { session: "a", ...sweep })
      assert.deepInclude(plan, { combinations: 2, runs: 4, allowed: true, refused: null })

      const progress: Array<{ progress: number; total?: number; message?: string }> = []
      const done = await call(
        c,
        "start_sweep",
        { session: "a", ...sweep, wait: true },
        {
          onprogress: (p: { progress: number; total?: number; message?: string }) => progress.push(p),
          resetTimeoutOnProgress: true
        }
      )
      assert.strictEqual(done.run, "finished")
      assert.strictEqual(done.status, "done")
      assert.deepStrictEqual(done.progress, { runs_done: 4, runs_planned: 4 })
      assert.isAtLeast(progress.length, 2, JSON.stringify(progress))
      assert.strictEqual(progress.at(-1)?.progress, 4)
      assert.isTrue(progress.every((p, i) => i === 0 || p.progress >= progress[i - 1]!.progress))
      assert.isTrue(
        logs.some((l) => l.startsWith("a: ")),
        `a status line as a log: ${logs.join(" | ")}`
      )
      assert.strictEqual(done.budget.left.engine_starts, 2, "two engines started of four")
      assert.include(["significant", "tie", "none"], done.trust.confidence)
      assert.strictEqual(done.trust.repeats, 2)
      // the validity settings reached the sweep: the check ran (and passed) on each engine start,
      // no warm-up was sent, and the failed-request bound is the fraction of the percentage given
      const doc = docOf("a")
      assert.deepStrictEqual(doc.validity, {
        check: "node examples/known-answers.mjs",
        warmup: 0,
        max_failed: 0.02
      })
      for (const c of doc.combinations) {
        const start = c.engine_starts.at(-1)
        assert.strictEqual(start.check?.exit_code, 0, JSON.stringify(start))
        assert.notOk(start.warmup, JSON.stringify(start))
      }

      const status = await call(c, "sweep_status", { session: "a" })
      assert.strictEqual(status.run, "finished")
      const shown = await call(c, "show", { session: "a" })
      assert.strictEqual(shown.document.summary.verdict, done.summary.verdict)
      assert.deepStrictEqual(shown.document, docOf("a"))
      assert.isString(shown.document.summary.statement)
      // the same sweep against itself: no difference beyond the noise, point by point
      const compared = await call(c, "compare", { a: "a", b: "a" })
      assert.strictEqual(compared.kind, "hyperloom.compare")
      assert.isTrue(
        compared.metrics[0].points.every(
          (p: { verdict: string }) => p.verdict === "no difference beyond the noise"
        ),
        JSON.stringify(compared.metrics[0].points)
      )
      // the budget: a third and fourth engine start are left, a two-combination sweep more is not
      const tagB = newTag()
      const refused = (await c.callTool({
        name: "start_sweep",
        arguments: { session: "x", ...experiment(tagB, "8,16,32", 1, 6) }
      })) as any
      assert.isTrue(refused.isError)
      assert.strictEqual(refused.structuredContent.error.tag, "BudgetExceeded")
      assert.include(
        refused.structuredContent.error.message,
        "needs 3 engine start(s) and the server's budget has 2 left"
      )
      const started = await call(c, "start_sweep", { session: "b", ...experiment(tagB, "8", 1, 2000) })
      assert.strictEqual(started.run, "running")
      await engineUp(tagB)
      const cancelled = await call(c, "cancel", { session: "b" })
      assert.strictEqual(cancelled.run, "cancelled")
      assert.strictEqual(docOf("b").status, "cancelled")
      assert.deepStrictEqual(pidsWithArg(`--tag=${tagB}`), [], "the engine was stopped")
    } finally {
      await c.close()
    }
  })

  it("notifications/cancelled stops a waited-on sweep cleanly: engine stopped, lease released, session cancelled", async () => {
    const { client: c } = await connect()
    try {
      const tag = newTag()
      const abort = new AbortController()
      const pending = c
        .callTool(
          { name: "start_sweep", arguments: { session: "c", ...experiment(tag, "8", 1, 2000), wait: true } },
          CallToolResultSchema,
          {
            signal: abort.signal,
            timeout: 170_000
          }
        )
        .catch((e: Error) => e)
      // the engine is up within the call's first 1.5 s (no warm-up, a 0.2 s load): the cancel
      // lands before the call's first status, where it once went unheard
      await engineUp(tag)
      abort.abort("the agent changed its mind")
      assert.instanceOf(await pending, Error)
      await waitFor("c cancelled", () => (docOf("c").status === "cancelled" ? true : undefined), 30_000, 200)
      await waitGone(`engine ${tag}`, () => pidsWithArg(`--tag=${tag}`), 20_000)
      const status = await call(c, "sweep_status", { session: "c" })
      assert.strictEqual(status.run, "cancelled")
      await assertSlotFree()
      // a baseline against an engine through the same server: leased, measured, shown
      const baseTag = newTag()
      const base = await call(c, "baseline_run", {
        session: "base",
        server: engine(baseTag, "--max-num-seqs 4"),
        command: [
          process.execPath,
          "examples/fake-bench-client.mjs",
          "--num-prompts",
          "4",
          "--max-concurrency",
          "2",
          "--output-len",
          "16"
        ],
        gpus: 1,
        warmup: 2,
        max_failed: 5,
        wait: true
      })
      assert.strictEqual(base.run, "finished", JSON.stringify(base))
      const shown = await call(c, "show", { session: "base" })
      assert.strictEqual(shown.kind, "baseline")
      assert.strictEqual(shown.document.status, "succeeded")
      const attempt = shown.document.baseline_attempts[0]
      assert.isAbove(attempt.throughput, 0)
      assert.deepInclude(attempt.warmup, { requests: 2, ok: 2 })
      // judged with the --max-failed asked, kept for `check` to judge again with
      assert.strictEqual(attempt.max_failed, 0.05)
      assert.deepStrictEqual(pidsWithArg(`--tag=${baseTag}`), [], "the engine is gone")
    } finally {
      await c.close()
    }
  })

  it("a client that goes away mid-sweep: cancelled with --on-disconnect cancel, run to its end with continue; the server exits after", async () => {
    const exited = (pid: number) =>
      waitGone(`server ${pid}`, () => (fs.existsSync(`/proc/${pid}`) ? [pid] : []), 90_000)
    // cancel (the default), with the SDK's own close: stdin ended (then SIGTERM, SIGKILL if it lingers)
    const one = await connect()
    const tag = newTag()
    await call(one.client, "start_sweep", { session: "d", ...experiment(tag, "8", 1, 2000) })
    await engineUp(tag)
    const pid = one.pid()!
    await one.client.close()
    await exited(pid)
    assert.strictEqual(docOf("d").status, "cancelled")
    assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [], "no orphaned engine")
    // continue: the pipe closes under a sweep (the client went away, nothing killed the server):
    // the sweep runs to its end, then the server exits
    const server = spawn(process.execPath, serverArgs(["--on-disconnect", "continue"]), {
      env: cleanEnv(),
      cwd: projectRoot,
      stdio: ["pipe", "pipe", "inherit"]
    })
    const two = new Client({ name: "hyperloom-ray-test-pipe", version: "0.0.0" })
    // the SDK's stdio transport over the server's pipes, which this test closes itself
    await two.connect(new StdioServerTransport(server.stdout!, server.stdin!))
    const tag2 = newTag()
    await call(two, "start_sweep", { session: "e", ...experiment(tag2, "8", 1, 16) })
    await engineUp(tag2)
    server.stdin!.end()
    await exited(server.pid!)
    assert.strictEqual(server.exitCode, 0)
    assert.strictEqual(docOf("e").status, "done")
    assert.deepStrictEqual(pidsWithArg(`--tag=${tag2}`), [])
    await assertSlotFree()
  })

  it("two servers (stdio and streamable HTTP) share the host's FIFO queue: their engines never hold the slot at once", async () => {
    const port = await freePort()
    const http: ChildProcess = spawn(process.execPath, serverArgs(["--http", String(port)]), {
      env: cleanEnv(),
      cwd: projectRoot,
      stdio: ["ignore", "ignore", "inherit"]
    })
    const { client: a } = await connect()
    const b = new Client({ name: "hyperloom-ray-test-http", version: "0.0.0" })
    try {
      for (let i = 0; i < 100; i++) {
        try {
          await b.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)))
          break
        } catch {
          await sleep(200)
        }
      }
      const tagA = newTag()
      const tagB = newTag()
      await call(a, "start_sweep", { session: "f", ...experiment(tagA, "8", 1, 24) })
      await engineUp(tagA)
      await call(b, "start_sweep", { session: "g", ...experiment(tagB, "8", 1, 6) })
      // B waits in the queue behind A: the queue tool (either server's) shows it
      const queue = await waitFor(
        "a waiter",
        async () => {
          const q = await call(b, "queue", {})
          return q.waiters.length > 0 ? q : undefined
        },
        30_000,
        200
      )
      assert.strictEqual(queue.holders.length, 1)
      for (const [client, session] of [
        [a, "f"],
        [b, "g"]
      ] as const) {
        const s = await call(client, "sweep_status", { session, wait_sec: 120 })
        assert.strictEqual(s.run, "finished", JSON.stringify(s))
      }
      // g's engine was ready (its lease granted) only after f's engine had stopped
      const engineOf = (session: string) => docOf(session).combinations[0].engine_starts[0]
      const [f, g] = [engineOf("f"), engineOf("g")]
      assert.isAtMost(
        Date.parse(f.ended_at),
        Date.parse(g.ready_at),
        `engines overlapped: ${JSON.stringify([f, g])}`
      )
    } finally {
      await b.close().catch(() => undefined)
      await a.close()
      http.kill("SIGTERM")
      await new Promise((r) => (http.exitCode === null ? http.once("exit", r) : r(undefined)))
    }
  })
})
