/**
 * The host's queue on real files and locks (docs/design.md#fair-queue): arrival order, a holder does not
 * block the next, leaving and dying free the place at once (the kernel released the member's
 * lock), the host's users meet in one queue in arrival order, and a foreign local user (uid
 * 65534) can neither forge a ticket nor keep a dead one alive nor jump the line.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Scope } from "effect"
import { blockers, splitQueue } from "../../src/domain/Queue.js"
import {
  HostQueue,
  isSharedSticky,
  layerIn,
  makeFileQueue,
  placeIn,
  type Ticket
} from "../../src/services/HostQueue.js"
import { userName } from "../../src/services/LockFile.js"
import * as Settings from "../../src/services/Settings.js"
import { bundle } from "../support/bundle.js"
import { canActAsForeignUser, FOREIGN_UID } from "../support/foreignUser.js"

let work = ""
let member = ""
const squatter = path.join(import.meta.dirname, "../support/queueSquatter.py")
beforeAll(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-queue-"))
  // The foreign user runs the member and reaches the queues in here.
  fs.chmodSync(work, 0o755)
  member = await bundle(
    path.join(import.meta.dirname, "../support/queueMember.ts"),
    path.join(work, "member.mjs")
  )
  fs.chmodSync(member, 0o644)
}, 60_000)
afterAll(() => {
  fs.rmSync(work, { recursive: true, force: true })
})

/** A queue of the test's own in a directory like /tmp: root's, world-writable, sticky. */
const freshQueue = () => {
  const dir = fs.mkdtempSync(path.join(work, "q-"))
  fs.chmodSync(dir, 0o1777)
  return { dir, queue: makeFileQueue(placeIn(dir)) }
}

const asForeign = (argv: ReadonlyArray<string>) =>
  spawn("setpriv", [`--reuid=${FOREIGN_UID}`, `--regid=${FOREIGN_UID}`, "--clear-groups", ...argv], {
    stdio: ["pipe", "pipe", "inherit"]
  })

/** Resolves with the first stdout line of `child` that matches `re`. */
const lineOf = (child: ChildProcess, re: RegExp) =>
  new Promise<RegExpExecArray>((resolve, reject) => {
    let out = ""
    child.stdout!.setEncoding("utf8")
    const onData = (d: string) => {
      out += d
      for (const line of out.split("\n")) {
        const m = re.exec(line)
        if (m !== null) {
          child.stdout!.off("data", onData)
          out = ""
          resolve(m)
          return
        }
      }
    }
    child.stdout!.on("data", onData)
    child.once("exit", (code) => reject(new Error(`exited with ${code} before ${re}: ${out}`)))
  })

/** Starts a member process in `dir` (as uid 65534 when `foreign`); resolves once it joined, with its lease id. */
const startMember = async (dir: string, gpus = 0, foreign = false) => {
  const child = foreign
    ? asForeign([process.execPath, member, dir, String(gpus)])
    : spawn(process.execPath, [member, dir, String(gpus)], { stdio: ["pipe", "pipe", "inherit"] })
  const m = await lineOf(child, /^joined (\S+)/)
  return { child, leaseId: m[1]! }
}

/** What a member says is ahead of it now. */
const aheadOf = async (m: { child: ChildProcess }) => {
  const said = lineOf(m.child, /^ahead (.*)$/)
  m.child.stdin!.write("look\n")
  return JSON.parse((await said)[1]!) as Array<string>
}

const exited = (child: ChildProcess) =>
  new Promise<void>((r) =>
    child.exitCode !== null || child.signalCode !== null ? r() : child.once("exit", () => r())
  )

const ahead = (t: Ticket) => Effect.map(t.look, (entries) => blockers(entries, t.entry).map((e) => e.leaseId))

describe("HostQueue on files (live)", () => {
  it.live(
    "a lease that names no command is told by the Settings layer's command line, not process.argv",
    () =>
      Effect.gen(function* () {
        const dir = fs.mkdtempSync(path.join(work, "q-"))
        fs.chmodSync(dir, 0o1777)
        const queue = yield* HostQueue.pipe(
          Effect.provide(
            layerIn(dir).pipe(
              Layer.provide(Settings.layerTest({ commandLine: ["lease", "run", "--gpus", "1", "--", "x"] }))
            )
          )
        )
        const ticket = yield* queue.join({ gpus: 1 })
        assert.strictEqual(ticket.entry.command, "hyperloom lease run --gpus 1 -- x")
        assert.deepStrictEqual(
          (yield* queue.view).entries.map((e) => e.command),
          ["hyperloom lease run --gpus 1 -- x"]
        )
      }).pipe(Effect.scoped)
  )

  it.live(
    "a secret in the command line is redacted in the world-readable ticket and the view (issue 27 item 7)",
    () =>
      Effect.gen(function* () {
        const dir = fs.mkdtempSync(path.join(work, "q-"))
        fs.chmodSync(dir, 0o1777)
        const commandLine = [
          "sweep",
          "run",
          "--server",
          "HF_TOKEN=hf_abcdefghijkl vllm serve m --api-key sk-abcdefgh12345678"
        ]
        const queue = yield* HostQueue.pipe(
          Effect.provide(layerIn(dir).pipe(Layer.provide(Settings.layerTest({ commandLine }))))
        )
        const own = yield* queue.join({ gpus: 1 })
        const named = yield* queue.join({ gpus: 0, command: "bench --token s3cr3tvalue" })
        const want = "hyperloom sweep run --server HF_TOKEN=REDACTED vllm serve m --api-key REDACTED"
        assert.strictEqual(own.entry.command, want)
        assert.strictEqual(named.entry.command, "bench --token REDACTED")
        assert.deepStrictEqual(
          (yield* queue.view).entries.map((e) => e.command),
          [want, "bench --token REDACTED"]
        )
        const onDisk = fs
          .readdirSync(dir, { recursive: true })
          .map((f) => path.join(dir, String(f)))
          .filter((f) => fs.statSync(f).isFile())
          .map((f) => fs.readFileSync(f, "utf8"))
          .join("\n")
        for (const secret of ["hf_abcdefghijkl", "sk-abcdefgh12345678", "s3cr3tvalue"])
          assert.notInclude(onDisk, secret)
      }).pipe(Effect.scoped)
  )

  it.live("joins in arrival order; a holder does not block the next; leaving frees the place", () =>
    Effect.gen(function* () {
      const { dir, queue } = freshQueue()
      const scopes = [yield* Scope.make(), yield* Scope.make(), yield* Scope.make()]
      const tickets: Array<Ticket> = []
      for (const [i, scope] of scopes.entries()) {
        tickets.push(yield* Scope.extend(queue.join({ gpus: i, command: `lease ${i}` }), scope))
      }
      const ids = tickets.map((t) => t.entry.leaseId)
      assert.strictEqual(new Set(ids).size, 3)
      // Each ticket a file of its own in the shared directory, readable by all, written by its owner.
      const files = fs.readdirSync(dir).filter((n) => n.startsWith(".hyperloom-queue."))
      assert.strictEqual(files.length, 3)
      for (const f of files) {
        assert.match(
          f,
          new RegExp(`^\\.hyperloom-queue\\.${process.geteuid!()}\\.${process.pid}\\.[0-9a-f]{8}$`)
        )
        assert.strictEqual(fs.lstatSync(path.join(dir, f)).mode & 0o777, 0o644)
      }
      assert.deepStrictEqual(yield* ahead(tickets[2]!), [ids[0], ids[1]])
      assert.deepStrictEqual(yield* ahead(tickets[0]!), [])
      yield* tickets[0]!.markHolding("actor-1")
      assert.deepStrictEqual(yield* ahead(tickets[2]!), [ids[1]])
      const view = yield* queue.view
      assert.isTrue(view.shared)
      // The holders, then the waiters in arrival order.
      const { holders, waiters } = splitQueue(view.entries)
      assert.deepStrictEqual(
        [...holders, ...waiters].map((e) => [e.leaseId, e.holding?.actorId ?? null, e.command, e.gpus]),
        [
          [ids[0], "actor-1", "lease 0", 0],
          [ids[1], null, "lease 1", 1],
          [ids[2], null, "lease 2", 2]
        ]
      )
      yield* Scope.close(scopes[1]!, Exit.void)
      assert.deepStrictEqual(yield* ahead(tickets[2]!), [])
      // The holder's end goes into the user's history (for the estimates).
      yield* Scope.close(scopes[0]!, Exit.void)
      const after = yield* queue.view
      assert.deepStrictEqual(
        after.entries.map((e) => e.leaseId),
        [ids[2]]
      )
      assert.strictEqual(after.history.length, 1)
      // A new lease arrives after every earlier one that is still there.
      const late = yield* Effect.scoped(Effect.flatMap(queue.join({ gpus: 0 }), ahead))
      assert.deepStrictEqual(late, [ids[2]])
      yield* Scope.close(scopes[2]!, Exit.void)
      assert.deepStrictEqual((yield* queue.view).entries, [])
      assert.deepStrictEqual(
        fs.readdirSync(dir).filter((n) => n.startsWith(".hyperloom-queue.")),
        []
      )
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
        assert.deepStrictEqual(yield* ahead(mine), [first.leaseId, second.leaseId])
        first.child.kill("SIGKILL")
        yield* Effect.promise(() => exited(first.child))
        const started = Date.now()
        // Its keeper (reading the member's pipe) ends with it; until then the ticket is its lock's.
        let now: Array<string> = []
        for (let i = 0; i < 50; i++) {
          now = [...(yield* ahead(mine))]
          if (now.length === 1) break
          yield* Effect.sleep("20 millis")
        }
        assert.deepStrictEqual(now, [second.leaseId])
        assert.isBelow(Date.now() - started, 1_000)
        // Its ticket went with it (removed by whoever saw it dead first).
        const pid = first.child.pid!
        assert.isFalse(fs.readdirSync(dir).some((n) => n.includes(`.${pid}.`)))
        // A member that ends normally (its stdin closed) leaves too.
        second.child.stdin!.end()
        yield* Effect.promise(() => exited(second.child))
        assert.deepStrictEqual(yield* ahead(mine), [])
        yield* Scope.close(scope, Exit.void)
      } finally {
        first.child.kill("SIGKILL")
        second.child.kill("SIGKILL")
      }
    })
  )

  it.live(
    "the queue is shared only in a directory of root's that is sticky and world-writable, never through a symlink",
    () =>
      Effect.sync(() => {
        const d = fs.mkdtempSync(path.join(work, "s-"))
        fs.chmodSync(d, 0o755)
        assert.isFalse(isSharedSticky(d))
        fs.chmodSync(d, 0o777)
        assert.isFalse(isSharedSticky(d))
        fs.chmodSync(d, 0o1777)
        assert.isTrue(isSharedSticky(d))
        fs.symlinkSync(d, `${d}-link`)
        assert.isFalse(isSharedSticky(`${d}-link`))
        fs.chownSync(d, FOREIGN_UID, FOREIGN_UID)
        assert.isFalse(isSharedSticky(d))
      })
  )
})

describe.skipIf(!canActAsForeignUser())("HostQueue across the host's users (uid 65534, live)", () => {
  it.live("two users' waiters meet in one queue in arrival order", () =>
    Effect.gen(function* () {
      const { dir, queue } = freshQueue()
      const scopes = [yield* Scope.make(), yield* Scope.make()]
      const children: Array<ChildProcess> = []
      try {
        const first = yield* Scope.extend(queue.join({ gpus: 1, command: "root's first" }), scopes[0]!)
        const foreign = yield* Effect.promise(() => startMember(dir, 2, true))
        children.push(foreign.child)
        const last = yield* Scope.extend(queue.join({ gpus: 0, command: "root's last" }), scopes[1]!)
        // Everyone sees the same line: root's first, then uid 65534's, then root's last.
        assert.deepStrictEqual(yield* ahead(last), [first.entry.leaseId, foreign.leaseId])
        assert.deepStrictEqual(yield* Effect.promise(() => aheadOf(foreign)), [first.entry.leaseId])
        const view = yield* queue.view
        assert.deepStrictEqual(
          view.entries.map((e) => [e.uid, e.user, e.command]),
          [
            [0, userName(0), "root's first"],
            [FOREIGN_UID, userName(FOREIGN_UID), `member ${foreign.child.pid}`],
            [0, userName(0), "root's last"]
          ]
        )
        // The first one holds: the foreign waiter is the head for root's last.
        yield* first.markHolding("actor-1")
        assert.deepStrictEqual(yield* ahead(last), [foreign.leaseId])
        assert.deepStrictEqual(yield* Effect.promise(() => aheadOf(foreign)), [])
        // It leaves (SIGKILL): root's last is next at once.
        foreign.child.kill("SIGKILL")
        yield* Effect.promise(() => exited(foreign.child))
        let now = yield* ahead(last)
        for (let i = 0; i < 50 && now.length > 0; i++) {
          yield* Effect.sleep("20 millis")
          now = yield* ahead(last)
        }
        assert.deepStrictEqual(now, [])
      } finally {
        for (const c of children) c.kill("SIGKILL")
        for (const s of scopes) yield* Scope.close(s, Exit.void)
      }
    })
  )

  it.live(
    "a foreign user's forged tickets do not count: another uid in the name, a symlink, a dead ticket it keeps locked, a backdated record",
    () =>
      Effect.gen(function* () {
        const { dir, queue } = freshQueue()
        const children: Array<ChildProcess> = []
        const scope = yield* Scope.make()
        const squat = (args: ReadonlyArray<string>) =>
          Effect.promise(async () => {
            const child = asForeign(["/usr/bin/python3", squatter, ...args])
            children.push(child)
            const m = await lineOf(child, /^locked (\d+)/)
            return { child, pid: Number(m[1]) }
          })
        const record = (uid: number, leaseRand: string, command = "made-up story") =>
          JSON.stringify({
            lease_id: `${os.hostname()}-${uid}-{pid}-${leaseRand}`,
            pid: "{pid}",
            uid,
            user: "made-up",
            command,
            gpus: 0,
            joined_at: 0,
            joined_us: 0
          }).replace('"{pid}"', "{pid}")
        try {
          const mine = yield* Scope.extend(queue.join({ gpus: 0, command: "root's" }), scope)
          // 1. A ticket named for root (uid 0), locked by its maker: the file is uid 65534's.
          yield* squat(["ticket", dir, ".hyperloom-queue.0.{pid}.aaaaaaaa", record(0, "aaaaaaaa")])
          // 2. A symlink named as a ticket of its own, to a locked file whose record matches the name.
          const target = yield* squat(["ticket", dir, "target-{pid}", record(FOREIGN_UID, "bbbbbbbb")])
          const linked = path.join(dir, `.hyperloom-queue.${FOREIGN_UID}.${target.pid}.bbbbbbbb`)
          const ln = yield* Effect.promise(
            () =>
              new Promise<number | null>((r) =>
                asForeign(["ln", "-s", path.join(dir, `target-${target.pid}`), linked]).once("exit", r)
              )
          )
          assert.strictEqual(ln, 0)
          // 3. A dead ticket of root's that it keeps locked: it waits for the lock of root's member
          //    and takes it the moment the member dies (flock works on its read-only descriptor).
          const victim = yield* Effect.promise(() => startMember(dir, 0))
          children.push(victim.child)
          const victimFile = fs
            .readdirSync(dir)
            .find((n) => n.startsWith(`.hyperloom-queue.0.${victim.child.pid}.`))!
          const holdChild = asForeign(["/usr/bin/python3", squatter, "hold", path.join(dir, victimFile)])
          children.push(holdChild)
          const held = lineOf(holdChild, /^locked (\d+)/)
          // Root's viewer must not remove the dead ticket before the squatter holds it: nobody looks
          // until then (the member's keeper ends with it, then the squatter's flock is granted).
          victim.child.kill("SIGKILL")
          yield* Effect.promise(() => held)
          assert.isTrue(fs.existsSync(path.join(dir, victimFile)))
          // 4. A ticket of its own made after root's, its record backdated to the epoch.
          const late = yield* squat([
            "ticket",
            dir,
            `.hyperloom-queue.${FOREIGN_UID}.{pid}.cccccccc`,
            record(FOREIGN_UID, "cccccccc", "honest but late")
          ])
          const view = yield* queue.view
          // Only root's own ticket and the honest (late) one count, in arrival order.
          assert.deepStrictEqual(
            view.entries.map((e) => e.leaseId),
            [mine.entry.leaseId, `${os.hostname()}-${FOREIGN_UID}-${late.pid}-cccccccc`]
          )
          assert.deepStrictEqual(yield* ahead(mine), [])
          assert.notInclude(JSON.stringify(view.entries.map((e) => [e.command, e.user])), "made-up")
          // The dead ticket is gone (root may remove it), whoever keeps it locked.
          assert.isFalse(fs.existsSync(path.join(dir, victimFile)))
        } finally {
          for (const c of children) c.kill("SIGKILL")
          yield* Scope.close(scope, Exit.void)
        }
      })
  )
})
