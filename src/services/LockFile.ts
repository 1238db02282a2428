import * as nodePath from "node:path"
import { FileSystem } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Data, Duration, Effect, Option } from "effect"

/**
 * The one lock-file primitive (the host's Ray lock, a session's lock). A lock file holds its
 * holder's pid. It is created complete, by hard-linking a temp file that already holds the pid,
 * so a reader never sees a half-written lock (and never mistakes one for a stale lock). A lock
 * whose pid is no longer alive, or whose content is not a pid, is stale and is taken over.
 */

/** A lock file is held by another live process. */
export class LockHeld extends Data.TaggedError("LockHeld")<{
  readonly path: string
  readonly holderPid: number
}> {
  override get message(): string {
    return `${this.path} is held by process ${this.holderPid}`
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

let tempCounter = 0

/**
 * One try at the lock: `None` when it is ours now, `Some(pid)` when a live process holds it.
 * A stale lock is removed (only if it did not change meanwhile) and the try goes on; three
 * rounds are plenty for one contender, and the loser of a race sees a live pid.
 */
const tryTake = (fs: FileSystem.FileSystem, path: string) =>
  Effect.gen(function* () {
    const temp = nodePath.join(
      nodePath.dirname(path),
      `.${nodePath.basename(path)}.${process.pid}.${Date.now()}.${++tempCounter}.tmp`
    )
    const readIfExists = fs.readFileString(path).pipe(
      Effect.map(Option.some),
      Effect.catchIf(isNotFound, () => Effect.succeed(Option.none<string>()))
    )
    const attempt = Effect.gen(function* () {
      yield* fs.writeFileString(temp, `${process.pid}\n`, { flag: "wx" })
      for (let round = 0; round < 3; round++) {
        const linked = yield* fs.link(temp, path).pipe(
          Effect.as(true),
          Effect.catchIf(isAlreadyExists, () => Effect.succeed(false))
        )
        if (linked) return Option.none<number>()
        const held = yield* readIfExists
        if (Option.isNone(held)) continue
        const pid = parsePid(held.value)
        if (pid !== undefined && pidAlive(pid)) return Option.some(pid)
        const again = yield* readIfExists
        if (Option.isSome(again) && again.value === held.value) {
          yield* fs.remove(path).pipe(Effect.catchIf(isNotFound, () => Effect.void))
        }
      }
      // Someone keeps replacing it: treat as held by an unknown process.
      return Option.some(-1)
    })
    return yield* attempt.pipe(Effect.ensuring(fs.remove(temp).pipe(Effect.ignore)))
  })

/**
 * Holds a lock file for the enclosing scope; released (removed, if it still holds our pid) when
 * the scope closes. With `waitMs`, waits for a live holder to let go, calling `onWait` once;
 * without, fails at once with LockHeld.
 */
export const holdLockFile = (
  path: string,
  options: { readonly waitMs?: number; readonly onWait?: (holderPid: number) => Effect.Effect<void> } = {}
) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const deadline = Date.now() + (options.waitMs ?? 0)
    let told = false
    for (;;) {
      const holder = yield* tryTake(fs, path)
      if (Option.isNone(holder)) break
      if (Date.now() >= deadline) return yield* new LockHeld({ path, holderPid: holder.value })
      if (!told && options.onWait) {
        told = true
        yield* options.onWait(holder.value)
      }
      yield* Effect.sleep(Duration.millis(100))
    }
    yield* Effect.addFinalizer(() =>
      fs.readFileString(path).pipe(
        Effect.flatMap((content) => (parsePid(content) === process.pid ? fs.remove(path) : Effect.void)),
        Effect.ignore
      )
    )
  })
