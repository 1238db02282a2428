/**
 * The host's queue on real files and locks (SPEC §13 "Fair"): arrival order, a holder does not
 * block the next, leaving and dying free the place at once (the kernel released the member's
 * lock), and a foreign local user can neither look in nor join.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { blockers } from "../../src/domain/Queue.js"
import { makeFileQueue, type Ticket } from "../../src/services/HostQueue.js"
import { bundle } from "../support/bundle.js"
import { canActAsForeignUser } from "../support/foreignUser.js"

let work = ""
let member = ""
beforeAll(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-queue-"))
  member = await bundle(
    path.join(import.meta.dirname, "../support/queueMember.ts"),
    path.join(work, "member.mjs")
  )
}, 60_000)
afterAll(() => {
  fs.rmSync(work, { recursive: true, force: true })
})

const freshQueue = () => {
  const dir = path.join(fs.mkdtempSync(path.join(work, "q-")), "queue")
  return { dir, queue: makeFileQueue(Effect.succeed(dir)) }
}

/** Starts a member process in `dir`; resolves once it joined, with its ticket. */
const startMember = (dir: string, gpus = 0) =>
  new Promise<{ child: ChildProcess; ticket: number }>((resolve, reject) => {
    const child = spawn(process.execPath, [member, dir, String(gpus)], { stdio: ["pipe", "pipe", "inherit"] })
    child.stdout!.setEncoding("utf8")
    child.stdout!.once("data", (line: string) => {
      const m = /^joined (\d+)/.exec(line)
      if (m) resolve({ child, ticket: Number(m[1]) })
      else reject(new Error(line))
    })
    child.once("exit", (code) => reject(new Error(`member exited with ${code}`)))
  })

const exited = (child: ChildProcess) => new Promise<void>((r) => child.once("exit", () => r()))

describe("HostQueue on files (live)", () => {
  it.live("joins in arrival order; a holder does not block the next; leaving frees the place", () =>
    Effect.gen(function* () {
      const { dir, queue } = freshQueue()
      const scopes = [yield* Scope.make(), yield* Scope.make(), yield* Scope.make()]
      const tickets: Array<Ticket> = []
      for (const [i, scope] of scopes.entries()) {
        tickets.push(yield* Scope.extend(queue.join({ gpus: i, command: `lease ${i}` }), scope))
      }
      assert.deepStrictEqual(
        tickets.map((t) => t.entry.ticket),
        [1, 2, 3]
      )
      assert.strictEqual(fs.statSync(dir).mode & 0o777, 0o700)
      const ahead = (n: number) =>
        Effect.map(tickets[n]!.look, (entries) =>
          blockers(entries, tickets[n]!.entry.ticket).map((e) => e.ticket)
        )
      assert.deepStrictEqual(yield* ahead(2), [1, 2])
      assert.deepStrictEqual(yield* ahead(0), [])
      yield* tickets[0]!.markHolding("actor-1")
      assert.deepStrictEqual(yield* ahead(2), [2])
      const view = yield* queue.view
      assert.deepStrictEqual(
        view.entries.map((e) => [e.ticket, e.holding?.actorId ?? null, e.command, e.gpus]),
        [
          [1, "actor-1", "lease 0", 0],
          [2, null, "lease 1", 1],
          [3, null, "lease 2", 2]
        ]
      )
      yield* Scope.close(scopes[1]!, Exit.void)
      assert.deepStrictEqual(yield* ahead(2), [])
      // The holder's end goes into the host's history (for the estimates).
      yield* Scope.close(scopes[0]!, Exit.void)
      const after = yield* queue.view
      assert.deepStrictEqual(
        after.entries.map((e) => e.ticket),
        [3]
      )
      assert.strictEqual(after.history.length, 1)
      yield* Scope.close(scopes[2]!, Exit.void)
      assert.deepStrictEqual((yield* queue.view).entries, [])
      // Numbers keep growing: a new lease arrives after every earlier one.
      assert.strictEqual(yield* Effect.scoped(Effect.map(queue.join({ gpus: 0 }), (t) => t.entry.ticket)), 4)
    })
  )

  it.live("a member SIGKILLed while waiting leaves the queue at once: the next look no longer sees it", () =>
    Effect.gen(function* () {
      const { dir, queue } = freshQueue()
      const first = yield* Effect.promise(() => startMember(dir, 1))
      const second = yield* Effect.promise(() => startMember(dir, 2))
      try {
        const scope = yield* Scope.make()
        const mine = yield* Scope.extend(queue.join({ gpus: 0 }), scope)
        assert.deepStrictEqual(
          blockers(yield* mine.look, mine.entry.ticket).map((e) => e.ticket),
          [first.ticket, second.ticket]
        )
        first.child.kill("SIGKILL")
        yield* Effect.promise(() => exited(first.child))
        const started = Date.now()
        assert.deepStrictEqual(
          blockers(yield* mine.look, mine.entry.ticket).map((e) => e.ticket),
          [second.ticket]
        )
        assert.isBelow(Date.now() - started, 1_000)
        // Its files went with it (removed by whoever saw it dead first).
        assert.isFalse(fs.readdirSync(dir).some((n) => n.startsWith(String(first.ticket).padStart(12, "0"))))
        // A member that ends normally (its stdin closed) leaves too.
        second.child.stdin!.end()
        yield* Effect.promise(() => exited(second.child))
        assert.deepStrictEqual(blockers(yield* mine.look, mine.entry.ticket), [])
        yield* Scope.close(scope, Exit.void)
      } finally {
        first.child.kill("SIGKILL")
        second.child.kill("SIGKILL")
      }
    })
  )

  it.live.skipIf(!canActAsForeignUser())(
    "a foreign local user (uid 65534) can neither look in nor join",
    () =>
      Effect.gen(function* () {
        const { dir, queue } = freshQueue()
        fs.chmodSync(path.dirname(dir), 0o755)
        yield* Effect.scoped(
          Effect.gen(function* () {
            yield* queue.join({ gpus: 0 })
            const tryAs = spawnSync(
              "setpriv",
              [
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "sh",
                "-c",
                `ls ${dir}; echo '{"ticket":0,"lease_id":"x","pid":1,"uid":65534,"command":"made-up","gpus":0,"joined_at":0}' > ${dir}/000000000000.ticket`
              ],
              { encoding: "utf8" }
            )
            assert.notStrictEqual(tryAs.status, 0)
            assert.include(tryAs.stderr, "Permission denied")
            assert.deepStrictEqual(
              (yield* queue.view).entries.map((e) => e.command),
              [`hyperloom ${process.argv.slice(2).join(" ")}`.trim().slice(0, 300)]
            )
          })
        )
      })
  )
})
