import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as nodePath from "node:path"
import type { PlatformError } from "@effect/platform/Error"
import { Data, Duration, Effect, Schedule } from "effect"
import { lockRetry } from "../domain/Schedules.js"

/**
 * The one lock primitive (the host's Ray lock, a session's lock, the host queue's tickets): a
 * lock the kernel ties to a file with permissions and releases when its holder dies.
 *
 * A lock is flock(2) on a file. The kernel keeps the lock on the file's open file description,
 * so it is released when the holder's last descriptor closes: the holder exited, whatever the
 * signal (SIGKILL included). Nothing stale is ever judged: no pid file, no takeover, no liveness
 * guess. Node has no flock, so util-linux `flock(1)` places it on *our* descriptor, handed to it
 * as its fd 3 (`flock -n 3`): the lock belongs to the open file description, which this process
 * keeps after `flock` exits. Node opens files close-on-exec, so children (`ray start` and the
 * daemons it leaves running) never inherit the lock.
 *
 * Permissions: only who may open the file may lock it, and only who may write it can say who
 * holds it (the holder writes `{"pid","what","since"}` into the file it locked). A lock file is
 * created 0600 and must belong to us, to root, or to the owner of its directory; the host's own
 * directory (`/tmp/hyperloom-<uid>`, 0700, ours, never a symlink: `hostDir`) admits nobody else.
 * A foreign local user can neither hold such a lock nor tell a waiter a made-up holder. The one
 * thing such a user can do is make `/tmp/hyperloom-<uid>` first: hyperloom then never trusts it
 * and uses a fallback directory of the user's own (`hostDir`, docs/reliability.md §2).
 *
 * Limits (docs/reliability.md): a lock lives in one mount namespace's view of the file (a
 * container with its own /tmp has its own host lock; it normally has its own PID namespace too,
 * where `ray stop --force` cannot reach this host's Ray). Linux only (hyperloom reads /proc).
 */

/** Who holds a lock, as its holder wrote it (undefined when unreadable or not written yet). */
export interface LockHolder {
  readonly pid: number | undefined
  readonly what: string | undefined
  /** When it took the lock (ms since the epoch). */
  readonly since: number | undefined
}

/** A lock is held by another live process (or by another part of this one). */
export class LockHeld extends Data.TaggedError("LockHeld")<{
  /** The lock, as an operator reads it (a lock file's path, or the host lock's label). */
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

/**
 * The lock cannot be taken for a reason other than "held": its directory or file belongs to
 * another user (made before us, maybe to squat it), `flock(1)` is missing, the file system refused.
 */
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

const euid = (): number => process.geteuid?.() ?? 0

/** A user's name from /etc/passwd (the uid as text when it has none there). */
export const userName = (uid: number): string => {
  try {
    for (const line of fs.readFileSync("/etc/passwd", "utf8").split("\n")) {
      const f = line.split(":")
      if (f.length > 2 && f[2] === String(uid)) return f[0]!
    }
  } catch {
    // no passwd file: the uid says it
  }
  return String(uid)
}

const errno = (e: unknown) => (e as NodeJS.ErrnoException).code ?? "error"

/**
 * The host's hyperloom directory for this user: `/tmp/hyperloom-<uid>` (under `base`, `/tmp` by
 * default), whatever RAY_TMPDIR/TMPDIR say, so every process of this user on the host meets
 * there. Created 0700; an existing one must be a real directory (not a symlink), ours, and open to
 * nobody else. When another user made that name first (a squat: a sticky `/tmp` lets anyone make
 * it), the first safe directory of `fallbacks` is used instead (`fallbackDirs`: the same for every
 * process of the user on this host, whatever its environment), with one warning line naming the
 * squatter; LockUnavailable naming it only when none is safe (never trusted, never taken over).
 */
export const hostDir = (
  base = "/tmp",
  fallbacks: ReadonlyArray<FallbackDir> = fallbackDirs()
): Effect.Effect<string, LockUnavailable> => {
  const path = nodePath.join(base, `hyperloom-${euid()}`)
  return privateDir(path).pipe(
    Effect.catchAll((refused) => {
      const squatter = foreignOwner(path)
      if (squatter === undefined) return Effect.fail(refused)
      const who = `${userName(squatter)} (uid ${squatter})`
      const tryEach = (rest: ReadonlyArray<FallbackDir>): Effect.Effect<string, LockUnavailable> =>
        rest.length === 0
          ? Effect.fail(
              new LockUnavailable({
                path,
                detail: `${refused.detail}; no fallback directory of yours is safe either (${fallbacks.map((f) => f.path).join(", ") || "none"})`
              })
            )
          : privateDirUnder(rest[0]!).pipe(Effect.orElse(() => tryEach(rest.slice(1))))
      return tryEach(fallbacks).pipe(
        Effect.tap((dir) =>
          warnedSquats.has(`${path}>${dir}`)
            ? Effect.void
            : Effect.zipRight(
                Effect.sync(() => warnedSquats.add(`${path}>${dir}`)),
                Effect.logWarning(
                  `${path} belongs to ${who}, not to you (another user made it first; hyperloom trusts nothing in it): using ${dir} instead; remove it as root to go back`
                )
              )
        )
      )
    })
  )
}

/** The squats already warned about in this process (one warning line each). */
const warnedSquats = new Set<string>()

/** The uid of another user owning `path` itself (a directory, a file or a symlink), else undefined. */
const foreignOwner = (path: string): number | undefined => {
  try {
    const uid = fs.lstatSync(path).uid
    return uid !== euid() ? uid : undefined
  } catch {
    return undefined
  }
}

/** A fallback for the host's directory: `path`, made (0700, ours) below `root`, which must exist. */
export interface FallbackDir {
  /** An existing directory of the user's own that nobody else can write. */
  readonly root: string
  readonly path: string
}

/**
 * Where the host's directory goes when `/tmp/hyperloom-<uid>` is squatted, in order: the user's
 * runtime directory `/run/user/<uid>` (what XDG_RUNTIME_DIR names in a login session; read from
 * its fixed path, not from the variable, so every process of the user picks the same one), then
 * `<home>/.cache/hyperloom/host-<hostname>` (the home from the password database; the host's name
 * keeps a home shared between hosts apart).
 */
export const fallbackDirs = (): ReadonlyArray<FallbackDir> => {
  let home = ""
  try {
    home = os.userInfo().homedir
  } catch {
    // no password entry: only the runtime directory
  }
  const run = nodePath.join("/run/user", String(euid()))
  return [
    { root: run, path: nodePath.join(run, "hyperloom") },
    ...(home !== ""
      ? [{ root: home, path: nodePath.join(home, ".cache", "hyperloom", `host-${os.hostname()}`) }]
      : [])
  ]
}

/**
 * A fallback's `path` as a directory of our own (`privateDir`, each missing level made 0700),
 * when its `root` is a real directory of ours that nobody else can write; every level below it
 * must be ours too (`privateDir` refuses one that is not).
 */
const privateDirUnder = (dir: FallbackDir): Effect.Effect<string, LockUnavailable> =>
  Effect.suspend(() => {
    let st: fs.Stats
    try {
      st = fs.lstatSync(dir.root)
    } catch (e) {
      return Effect.fail(new LockUnavailable({ path: dir.root, detail: errno(e) }))
    }
    if (!st.isDirectory() || st.uid !== euid() || (st.mode & 0o022) !== 0)
      return Effect.fail(
        new LockUnavailable({ path: dir.root, detail: "not a directory of yours that only you can write" })
      )
    const levels: Array<string> = []
    for (let p = dir.path; p !== dir.root && p !== nodePath.dirname(p); p = nodePath.dirname(p))
      levels.unshift(p)
    if (nodePath.dirname(levels[0] ?? dir.root) !== dir.root && levels.length > 0)
      return Effect.fail(new LockUnavailable({ path: dir.path, detail: `not below ${dir.root}` }))
    return Effect.as(Effect.forEach(levels, privateDir, { discard: true }), dir.path)
  })

/** `path` as a directory of our own, 0700 (made if missing); see `hostDir`. */
export const privateDir = (path: string): Effect.Effect<string, LockUnavailable> =>
  Effect.try({
    try: () => {
      try {
        fs.mkdirSync(path, { mode: 0o700 })
      } catch (e) {
        if (errno(e) !== "EEXIST") throw e
      }
      const st = fs.lstatSync(path)
      const me = euid()
      if (!st.isDirectory())
        throw new Refusal(`${path} is not a directory (a symlink or a file is never followed)`)
      if (st.uid !== me) {
        throw new Refusal(
          `${path} belongs to ${userName(st.uid)} (uid ${st.uid}), not to you: another user made it first, and hyperloom trusts no lock or queue in it; remove it (as root) and run again`
        )
      }
      if ((st.mode & 0o077) !== 0) fs.chmodSync(path, 0o700)
      return path
    },
    catch: (e) =>
      new LockUnavailable({ path, detail: e instanceof Refusal ? e.message : `${errno(e)}: ${String(e)}` })
  })

class Refusal extends Error {}

/**
 * TEST ONLY, fixed when a test bundles the CLI (test/support/bundle.ts, an esbuild `define`): the
 * unit tests run the real CLI against stand-in `ray` executables beside the real-Ray tests, and
 * must never wait behind the host's lock or queue those hold. Nothing sets it at run time (no
 * variable, no option): the shipped CLI and the library always use the host's own files, so no
 * process can step out of the host's exclusion or queue.
 */
declare const __HYPERLOOM_TEST_HOST_LOCK__: string | undefined
export const testPrefix: string =
  typeof __HYPERLOOM_TEST_HOST_LOCK__ === "string" ? `${__HYPERLOOM_TEST_HOST_LOCK__}.` : ""

/** A file of the host's hyperloom directory (`hostDir`): the host lock, the queue, its history. */
export const hostFile = (leaf: string): Effect.Effect<string, LockUnavailable> =>
  Effect.map(hostDir(), (dir) => nodePath.join(dir, `${testPrefix}${leaf}`))

/**
 * Opens (creating 0600 if missing) the lock file at `path` for locking: a regular file owned by
 * us, by root or by its directory's owner (who could replace it anyway); ours is made 0600 if it
 * was open to others.
 */
const openLockFile = (path: string): Effect.Effect<number, LockUnavailable> =>
  Effect.try({
    try: () => {
      const fd = fs.openSync(
        path,
        fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK,
        0o600
      )
      try {
        const st = fs.fstatSync(fd)
        if (!st.isFile()) throw new Refusal(`${path} is not a regular file`)
        const me = euid()
        const dirOwner = fs.statSync(nodePath.dirname(path)).uid
        if (st.uid !== me && st.uid !== 0 && st.uid !== dirOwner) {
          throw new Refusal(
            `${path} belongs to ${userName(st.uid)} (uid ${st.uid}), who may hold it or write its holder: hyperloom does not trust it; remove it and run again`
          )
        }
        if (st.uid === me && (st.mode & 0o077) !== 0) fs.fchmodSync(fd, 0o600)
        return fd
      } catch (e) {
        fs.closeSync(fd)
        throw e
      }
    },
    catch: (e) =>
      new LockUnavailable({ path, detail: e instanceof Refusal ? e.message : `${errno(e)}: ${String(e)}` })
  })

/** flock(1) could not be started (missing, or the spawn failed). */
export const flockSpawnFailed = (path: string, e: NodeJS.ErrnoException) =>
  new LockUnavailable({
    path,
    detail:
      e.code === "ENOENT"
        ? "flock(1) was not found (install util-linux: hyperloom's locks are flock(2) locks)"
        : `cannot run flock(1): ${e.message}`
  })

/**
 * One non-blocking flock(2) on `fd` (exclusive, or shared): `flock -n 3` with our descriptor as
 * its fd 3, so the lock is placed on our open file description and stays when `flock` exits.
 * True when it is ours now, false when another description holds it.
 */
export const flockOnce = (
  fd: number,
  path: string,
  mode: "exclusive" | "shared" = "exclusive"
): Effect.Effect<boolean, LockUnavailable> =>
  Effect.async<boolean, LockUnavailable>((resume) => {
    let child: ReturnType<typeof spawn>
    try {
      child = spawn("flock", ["-n", mode === "exclusive" ? "-x" : "-s", "-E", "75", "3"], {
        stdio: ["ignore", "ignore", "pipe", fd]
      })
    } catch (e) {
      resume(Effect.fail(new LockUnavailable({ path, detail: `cannot run flock(1): ${String(e)}` })))
      return
    }
    let stderr = ""
    child.stderr?.on("data", (d) => {
      stderr += d
    })
    child.once("error", (e: NodeJS.ErrnoException) => resume(Effect.fail(flockSpawnFailed(path, e))))
    child.once("close", (code) => {
      if (code === 0) resume(Effect.succeed(true))
      else if (code === 75) resume(Effect.succeed(false))
      else
        resume(
          Effect.fail(new LockUnavailable({ path, detail: `flock(1) exited with ${code}: ${stderr.trim()}` }))
        )
    })
  })

/** The flock(2) locks the kernel shows in /proc/locks now, as `major:minor:inode` keys. */
export const heldInodes = (): ReadonlySet<string> => {
  const held = new Set<string>()
  try {
    for (const line of fs.readFileSync("/proc/locks", "utf8").split("\n")) {
      // "1: FLOCK  ADVISORY  WRITE 123 fe:00:456 0 EOF"; "1: -> FLOCK …" lines are blocked waiters.
      const f = line.trim().split(/\s+/)
      if (f[1] !== "FLOCK") continue
      const id = f[5]?.split(":")
      if (id?.length !== 3) continue
      held.add(`${Number.parseInt(id[0]!, 16)}:${Number.parseInt(id[1]!, 16)}:${id[2]}`)
    }
  } catch {
    // no /proc/locks: every question is asked with a try of the lock instead
  }
  return held
}

/** The `major:minor:inode` key of a file, as /proc/locks writes it (Linux's dev_t encoding). */
export const inodeKey = (st: fs.Stats) => {
  const major = (st.dev >> 8) & 0xfff
  const minor = (st.dev & 0xff) | ((st.dev >> 12) & 0xfff00)
  return `${major}:${minor}:${st.ino}`
}

/**
 * Whether /proc/locks shows a flock on the file behind `fd` right now. A yes is the kernel's
 * (someone holds it); a no is only a hint (a holder in another PID namespace is not listed there),
 * so a no is always followed by a real try.
 */
const visiblyHeld = (fd: number) => {
  try {
    return heldInodes().has(inodeKey(fs.fstatSync(fd)))
  } catch {
    return false
  }
}

/** Closes a descriptor (releasing any flock on it when it was the last one). */
export const closeFd = (fd: number) =>
  Effect.sync(() => {
    try {
      fs.closeSync(fd)
    } catch {
      // already closed
    }
  })

/** Reads the holder a lock file names (written by whoever holds it). */
export const readHolder = (path: string): LockHolder => {
  try {
    const parsed = JSON.parse(fs.readFileSync(path, "utf8").split("\n")[0] ?? "") as {
      pid?: unknown
      what?: unknown
      since?: unknown
    }
    const pid = typeof parsed.pid === "number" && pidAlive(parsed.pid) ? parsed.pid : undefined
    return {
      pid,
      what:
        pid !== undefined && typeof parsed.what === "string" && parsed.what !== "" ? parsed.what : undefined,
      since: pid !== undefined && typeof parsed.since === "number" ? parsed.since : undefined
    }
  } catch {
    return { pid: undefined, what: undefined, since: undefined }
  }
}

/** Writes the holder record into the lock file we hold (best effort: a waiter then says less). */
const writeHolder = (fd: number, what: string) =>
  Effect.sync(() => {
    try {
      const body = Buffer.from(`${JSON.stringify({ pid: process.pid, what, since: Date.now() })}\n`)
      fs.ftruncateSync(fd, 0)
      fs.writeSync(fd, body, 0, body.length, 0)
    } catch {
      // a full disk must not cost the lock itself
    }
  })

/** A lock we hold: its descriptor (the lock goes when it closes). */
export interface HeldLock {
  readonly fd: number
  readonly path: string
}

/** One try: the lock when it is ours, else LockHeld naming the holder its file names. */
const tryTake = (path: string, label: string, what: string) =>
  Effect.gen(function* () {
    const fd = yield* openLockFile(path)
    // A waiter's retries ask /proc/locks first, and spawn flock(1) only when the lock looks free.
    const ours = visiblyHeld(fd) ? false : yield* flockOnce(fd, path).pipe(Effect.tapError(() => closeFd(fd)))
    if (!ours) {
      yield* closeFd(fd)
      const holder = readHolder(path)
      return yield* new LockHeld({ path: label, holderPid: holder.pid ?? -1, holderWhat: holder.what })
    }
    yield* writeHolder(fd, what)
    return { fd, path } satisfies HeldLock
  })

const release = (lock: HeldLock) => closeFd(lock.fd)

export interface LockOptions {
  /** How long to wait for the holder to let go (0 or absent: fail at once with LockHeld). */
  readonly waitMs?: number
  /** Told once, when the first try finds the lock held, whom we wait for. */
  readonly onWait?: (holder: LockHeld) => Effect.Effect<void>
  /** What this process does while it holds the lock, for waiters' messages (default: nothing said). */
  readonly what?: string
  /** How the lock is named in messages (default: its path). */
  readonly label?: string
}

/**
 * Holds the lock file at `path` for the enclosing scope (released when the scope closes, or by
 * the kernel when this process dies). Its directory must exist.
 */
export const holdLockFile = (path: string, options: LockOptions = {}) =>
  Effect.gen(function* () {
    const what = options.what ?? ""
    const label = options.label ?? path
    let told = false
    const take = tryTake(path, label, what).pipe(
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
    // Each try is one uninterruptible acquire (open, flock, say who we are); the waits between
    // tries stay interruptible, so Ctrl-C ends a waiter at once.
    const once = Effect.acquireRelease(take, release)
    const waitMs = options.waitMs ?? 0
    return yield* waitMs > 0
      ? once.pipe(
          Effect.retry({
            schedule: lockRetry.pipe(Schedule.upTo(Duration.millis(waitMs))),
            while: (e) => e._tag === "LockHeld"
          })
        )
      : once
  })
