/**
 * The host's fair queue on a real head (docs/design.md#fair-queue), through the bundled CLI. One head for
 * the file (4 GPUs declared, the slot). A holder lease keeps the slot until the test lets it go;
 * waiters with mixed GPU requests (so Ray puts them in different scheduling classes, which it
 * serves in no fixed order) join one after another.
 *
 * On today's main, before the queue (measured on a host of its own, docs/reliability.md): six such
 * waiters arriving 0.7 s apart were granted in the order 4 2 1 5 6 3. With the queue they are
 * granted in arrival order; `hyperloom queue --json` shows the holder and the waiters in order; a
 * waiter SIGKILLed or Ctrl-C'd leaves the queue at once; `--wait S` fails naming the holder.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { cleanEnv, cliPath, runCli } from "../support/cli.js"
import { prepareRay, projectRoot, startHead, teardownRay, waitFor } from "../support/ray.js"

const PORT = 6404
const ENV = { HL_RAY_HEAD_PORT: String(PORT) }

let work = ""

beforeAll(async () => {
  await prepareRay()
  await startHead({ port: PORT, slot: true, numGpus: 4 })
  work = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-queue-"))
})

afterAll(async () => {
  await teardownRay()
  if (work !== "") fs.rmSync(work, { recursive: true, force: true })
})

interface Lease {
  readonly child: ChildProcess
  readonly stderr: () => string
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

/** `hyperloom lease run --gpus G [extra…] -- sh -c SCRIPT` in the background. */
const lease = (gpus: number, script: string, extra: ReadonlyArray<string> = []): Lease => {
  const child = spawn(
    process.execPath,
    [cliPath, "lease", "run", "--gpus", String(gpus), ...extra, "--", "sh", "-c", script],
    { cwd: projectRoot, env: cleanEnv(ENV), stdio: ["ignore", "ignore", "pipe"] }
  )
  let stderr = ""
  child.stderr!.on("data", (d) => (stderr += d))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal }))
  )
  return { child, stderr: () => stderr, exited }
}

const queueJson = async () => {
  const r = await runCli(["queue", "--json"], { env: ENV, timeoutMs: 30_000 })
  assert.strictEqual(r.code, 0, r.stderr)
  return r.json as {
    holders: Array<{ pid: number; gpus: number; command: string; user: string; lease_id: string }>
    waiters: Array<{
      position: number
      pid: number
      gpus: number
      user: string
      waited_sec: number
      in_ray: boolean | null
      passed_over: boolean
    }>
  }
}

/** Until `pid` is in the queue (holding or waiting); returns the queue then. */
const untilQueued = (pid: number, as: "holder" | "waiter") =>
  waitFor(
    `pid ${pid} in the host's queue as ${as}`,
    async () => {
      const q = await queueJson()
      return (as === "holder" ? q.holders : q.waiters).some((e) => e.pid === pid) ? q : undefined
    },
    120_000,
    250
  )

/** A command that records its start in `order`, then runs until `flag` is removed. */
const recorder = (order: string, name: string, flag?: string) =>
  flag === undefined
    ? `echo ${name} >> ${order}; sleep 0.3`
    : `echo ${name} >> ${order}; while [ -e ${flag} ]; do sleep 0.1; done`

/**
 * A holder lease with `gpus` GPUs whose command records itself in `<work>/order-<name>` and runs
 * until `release()`; resolves once it holds the slot in the queue.
 */
const startHolder = async (name: string, gpus: number) => {
  const order = path.join(work, `order-${name}`)
  const flag = path.join(work, `hold-${name}`)
  fs.writeFileSync(flag, "")
  const holder = lease(gpus, recorder(order, "holder", flag))
  try {
    await untilQueued(holder.child.pid!, "holder")
  } catch (e) {
    holder.child.kill("SIGKILL")
    throw e
  }
  return { order, holder, release: () => fs.rmSync(flag) }
}

describe("the host's queue for the serving slot (real head)", () => {
  it("waiters with mixed GPU requests are granted in arrival order; `hyperloom queue` shows them in order", async () => {
    const { order, holder, release } = await startHolder("1", 1)
    const waiters: Array<Lease> = []
    try {
      // Each joins only once the one before it is in the queue: a well-defined arrival order.
      const gpus = [2, 0, 3, 1]
      for (const [i, g] of gpus.entries()) {
        const w = lease(g, recorder(order, `w${i + 1}`))
        waiters.push(w)
        await untilQueued(w.child.pid!, "waiter")
      }
      const q = await queueJson()
      assert.deepStrictEqual(
        q.holders.map((h) => [h.pid, h.gpus]),
        [[holder.child.pid, 1]]
      )
      assert.include(q.holders[0]!.command, "hyperloom lease run --gpus 1")
      assert.strictEqual(q.holders[0]!.user, os.userInfo().username)
      assert.deepStrictEqual(
        q.waiters.map((w) => [w.position, w.pid, w.gpus]),
        waiters.map((w, i) => [i + 1, w.child.pid, gpus[i]])
      )
      // Only the head asks Ray (its actor, named for its lease id, waits for the slot in the GCS).
      const asking = await waitFor(
        "the head's lease shown asking Ray",
        async () => {
          const now = await queueJson()
          return now.waiters[0]?.in_ray === true ? now : undefined
        },
        60_000,
        500
      )
      assert.deepStrictEqual(
        asking.waiters.map((w) => [w.in_ray, w.passed_over]),
        [
          [true, false],
          [false, false],
          [false, false],
          [false, false]
        ]
      )
      release()
      const ends = await Promise.all([holder.exited, ...waiters.map((w) => w.exited)])
      assert.deepStrictEqual(
        ends.map((e) => e.code),
        [0, 0, 0, 0, 0],
        [holder, ...waiters].map((l) => l.stderr()).join("\n---\n")
      )
      assert.deepStrictEqual(fs.readFileSync(order, "utf8").trim().split("\n"), [
        "holder",
        "w1",
        "w2",
        "w3",
        "w4"
      ])
      const after = await queueJson()
      assert.deepStrictEqual([after.holders, after.waiters], [[], []])
    } finally {
      for (const l of [holder, ...waiters]) l.child.kill("SIGKILL")
    }
  })

  it("a waiter SIGKILLed or Ctrl-C'd leaves the queue at once; --wait fails naming the holder", async () => {
    const { order, holder, release } = await startHolder("2", 0)
    const others: Array<Lease> = []
    try {
      const killed = lease(1, recorder(order, "killed"))
      const interrupted = lease(2, recorder(order, "interrupted"))
      const last = lease(0, recorder(order, "last"))
      others.push(killed, interrupted, last)
      await untilQueued(killed.child.pid!, "waiter")
      await untilQueued(interrupted.child.pid!, "waiter")
      await untilQueued(last.child.pid!, "waiter")
      killed.child.kill("SIGKILL")
      await killed.exited
      // At once: the kernel released its ticket's lock with the process.
      const q1 = await queueJson()
      assert.notInclude(
        q1.waiters.map((w) => w.pid),
        killed.child.pid
      )
      assert.deepStrictEqual(
        q1.waiters.map((w) => w.position),
        [1, 2]
      )
      interrupted.child.kill("SIGINT")
      const int = await interrupted.exited
      assert.strictEqual(int.code, 130, interrupted.stderr())
      const q2 = await queueJson()
      assert.deepStrictEqual(
        q2.waiters.map((w) => w.pid),
        [last.child.pid]
      )
      // --wait: not granted in time, the holder named, nothing run.
      const started = Date.now()
      const r = await runCli(
        ["lease", "run", "--gpus", "0", "--wait", "2", "--", "sh", "-c", recorder(order, "waited")],
        {
          env: ENV,
          timeoutMs: 120_000
        }
      )
      assert.strictEqual(r.code, 125, r.stderr)
      assert.include(r.stderr, "lease_wait_expired: the lease was not granted within --wait 2 s")
      assert.include(r.stderr, `pid ${holder.child.pid}`)
      assert.include(r.stderr, "(hyperloom exit code 15)")
      assert.isBelow(Date.now() - started, 60_000)
      release()
      assert.strictEqual((await holder.exited).code, 0, holder.stderr())
      assert.strictEqual((await last.exited).code, 0, last.stderr())
      assert.deepStrictEqual(fs.readFileSync(order, "utf8").trim().split("\n"), ["holder", "last"])
    } finally {
      for (const l of [holder, ...others]) l.child.kill("SIGKILL")
    }
  })
})
