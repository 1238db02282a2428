import { createHash } from "node:crypto"
import * as net from "node:net"
import * as nodePath from "node:path"
import { FileSystem } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Data, Duration, Effect, Option, Schedule } from "effect"
import { lockRetry } from "../domain/Schedules.js"

/**
 * The one lock primitive (the host's Ray lock, a session's lock): a lock the kernel releases when
 * its holder dies, so there is nothing stale to judge.
 *
 * A lock is a Linux *abstract-namespace* Unix socket (`\0<name>`): only one socket can be bound to
 * a name, binding is atomic, there is no file at all (nothing left behind by a SIGKILLed holder,
 * nothing another user owns in a sticky /tmp), and the kernel frees the name when the last
 * descriptor of the bound socket closes (its holder exited, whatever the signal). Node opens
 * sockets close-on-exec, so children (`ray start` and the daemons it leaves running) never
 * inherit the lock. A waiter that finds the name taken connects to it: the holder answers with
 * its pid and what it does, so the waiter can say whom it waits for.
 *
 * Limits (documented in docs/reliability.md): abstract names are per *network namespace*: a
 * process in another network namespace (a container with its own network, `ip netns exec`) does
 * not see this lock. Such a process normally also has its own PID namespace, where
 * `ray stop --force` cannot see or kill this host's Ray either. Linux only (hyperloom reads /proc).
 * The pid a holder reports is a pid in *its* PID namespace.
 */

/** Who holds a lock, as the holder itself answered (undefined when it did not answer in time). */
export interface LockHolder {
  readonly pid: number | undefined
  readonly what: string | undefined
}

/** A lock is held by another live process (or by another part of this one). */
export class LockHeld extends Data.TaggedError("LockHeld")<{
  /** The lock, as an operator reads it (a session directory's lock file path, or the host lock's name). */
  readonly path: string
  /** The holder's pid, -1 when it did not say. */
  readonly holderPid: number
  readonly holderWhat: string | undefined
}> {
  override get message(): string {
    const who = this.holderPid > 0 ? `process ${this.holderPid}` : "another process"
    return `${this.path} is held by ${who}${this.holderWhat !== undefined ? ` (${this.holderWhat})` : ""}`
  }
}

/** The operating system refused the lock for a reason other than "held" (not Linux, …). */
export class LockUnavailable extends Data.TaggedError("LockUnavailable")<{
  readonly path: string
  readonly detail: string
}> {
  override get message(): string {
    return `cannot take the lock ${this.path}: ${this.detail}`
  }
}

export const isNotFound = (e: PlatformError) => e._tag === "SystemError" && e.reason === "NotFound"
export const isAlreadyExists = (e: PlatformError) => e._tag === "SystemError" && e.reason === "AlreadyExists"

/** Whether a process with this pid exists (EPERM: it exists but belongs to someone else). */
export const pidAlive = (pid: number): boolean => {
  if (!Number.isInteger(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

export const parsePid = (text: string): number | undefined => {
  const t = text.trim()
  return /^\d+$/.test(t) ? Number(t) : undefined
}

/** The longest abstract name Linux takes (sun_path is 108 bytes, one of them the leading NUL). */
const MAX_NAME_BYTES = 107

/** An abstract socket name for `name`: as is when it fits, else a readable prefix and a digest. */
export const abstractName = (name: string): string => {
  if (Buffer.byteLength(name) <= MAX_NAME_BYTES) return name
  const digest = createHash("sha256").update(name).digest("hex")
  return `${name.slice(0, 40)}…${digest}`
}

/** How long a waiter waits for the holder to say who it is. */
const ASK_TIMEOUT = Duration.seconds(1)

/** What a holder says about itself: one JSON line. */
const describeSelf = (what: string) => `${JSON.stringify({ pid: process.pid, what })}\n`

/** Binds the name: `Some(server)` when it is ours now, `None` when another socket holds it. */
const tryBind = (name: string, path: string, what: string) =>
  Effect.async<Option.Option<net.Server>, LockUnavailable>((resume) => {
    const server = net.createServer((socket) => {
      socket.on("error", () => undefined)
      socket.end(describeSelf(what))
    })
    server.once("error", (e: NodeJS.ErrnoException) => {
      server.close()
      if (e.code === "EADDRINUSE") resume(Effect.succeed(Option.none()))
      else resume(Effect.fail(new LockUnavailable({ path, detail: `${e.code ?? "error"}: ${e.message}` })))
    })
    // exclusive: never share the handle through Node's cluster module.
    server.listen({ path: `\0${abstractName(name)}`, exclusive: true }, () => {
      // Holding the lock never keeps the process alive by itself.
      server.unref()
      resume(Effect.succeed(Option.some(server)))
    })
  })

const release = (server: net.Server) =>
  Effect.async<void>((resume) => {
    server.close(() => resume(Effect.void))
  })

/** Asks the holder of `name` who it is; `undefined` fields when it does not answer in time. */
export const askHolder = (name: string): Effect.Effect<LockHolder> =>
  Effect.async<LockHolder>((resume) => {
    const socket = net.connect({ path: `\0${abstractName(name)}` })
    let text = ""
    const done = () => {
      socket.destroy()
      const line = text.split("\n")[0] ?? ""
      try {
        const parsed = JSON.parse(line) as { pid?: unknown; what?: unknown }
        resume(
          Effect.succeed({
            pid: typeof parsed.pid === "number" && parsed.pid > 0 ? parsed.pid : undefined,
            what: typeof parsed.what === "string" && parsed.what !== "" ? parsed.what : undefined
          })
        )
      } catch {
        resume(Effect.succeed({ pid: undefined, what: undefined }))
      }
    }
    socket.setEncoding("utf8")
    socket.on("data", (chunk: string) => {
      text += chunk
      if (text.length > 4096) socket.destroy()
    })
    socket.on("end", done)
    socket.on("close", done)
    socket.on("error", () => undefined)
    return Effect.sync(() => socket.destroy())
  }).pipe(
    Effect.timeoutTo({
      duration: ASK_TIMEOUT,
      onSuccess: (h) => h,
      onTimeout: () => ({ pid: undefined, what: undefined })
    })
  )

/** One try: the bound server when the lock is ours, else LockHeld naming the holder. */
const tryTake = (name: string, path: string, what: string) =>
  Effect.flatMap(
    tryBind(name, path, what),
    Option.match({
      onSome: (server) => Effect.succeed(server),
      onNone: () =>
        Effect.flatMap(askHolder(name), (holder) =>
          Effect.fail(new LockHeld({ path, holderPid: holder.pid ?? -1, holderWhat: holder.what }))
        )
    })
  )

export interface LockOptions {
  /** How long to wait for the holder to let go (0 or absent: fail at once with LockHeld). */
  readonly waitMs?: number
  /** Told once, when the first try finds the lock held, whom we wait for. */
  readonly onWait?: (holder: LockHeld) => Effect.Effect<void>
  /** What this process does while it holds the lock, for waiters' messages. */
  readonly what?: string
}

const defaultWhat = () => `hyperloom ${process.argv.slice(2, 4).join(" ")}`.trim()

/**
 * Holds the kernel-released lock `name` for the enclosing scope (released when the scope closes,
 * or by the kernel when this process dies). `label` names the lock in messages.
 */
export const holdNamedLock = (name: string, label: string, options: LockOptions = {}) =>
  Effect.gen(function* () {
    const what = options.what ?? defaultWhat()
    let told = false
    const take = tryTake(name, label, what).pipe(
      Effect.tapError((e) =>
        e._tag === "LockHeld" && !told && options.onWait !== undefined
          ? Effect.zipRight(
              Effect.sync(() => {
                told = true
              }),
              options.onWait(e)
            )
          : Effect.void
      )
    )
    // Each try is one uninterruptible acquire (bind, or ask the holder); the waits between tries
    // stay interruptible, so Ctrl-C ends a waiter at once.
    const once = Effect.acquireRelease(take, release)
    const waitMs = options.waitMs ?? 0
    yield* waitMs > 0
      ? once.pipe(
          Effect.retry({
            schedule: lockRetry.pipe(Schedule.upTo(Duration.millis(waitMs))),
            while: (e) => e._tag === "LockHeld"
          })
        )
      : once
  })

/**
 * Holds the lock file at `path` for the enclosing scope. The lock is not a file: it is the
 * kernel-released lock named by the directory's identity (device and inode, so every path to the
 * same directory, through symlinks or bind mounts, names the same lock) and the file name. The
 * directory must exist.
 */
export const holdLockFile = (path: string, options: LockOptions = {}) =>
  Effect.flatMap(lockFileName(path), (name) => holdNamedLock(name, path, options))

/** The lock name of the lock file at `path`: its directory's device and inode, and its file name. */
export const lockFileName = (path: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const dirPath = nodePath.dirname(path)
    const dir = yield* fs.stat(dirPath)
    const identity = Option.isSome(dir.ino) ? `${dir.dev}:${dir.ino.value}` : yield* fs.realPath(dirPath)
    return `hyperloom-lock:${identity}/${nodePath.basename(path)}`
  })
