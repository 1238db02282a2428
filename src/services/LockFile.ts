import { FileSystem } from "@effect/platform"
import { Data, Duration, Effect, Option } from "effect"

/** A lock file is held by another live process. */
export class LockHeld extends Data.TaggedError("LockHeld")<{
  readonly path: string
  readonly holderPid: number
}> {
  override get message(): string {
    return `${this.path} is held by process ${this.holderPid}`
  }
}

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

/**
 * Tries once to take an exclusive lock file (created with O_EXCL, holding `<pid> <token>`).
 * A lock whose holder is dead (or unreadable garbage) is stale and taken over.
 * Returns the holder's pid when someone else holds it.
 */
const tryTake = (fs: FileSystem.FileSystem, path: string, token: string) =>
  Effect.gen(function* () {
    for (let attempt = 0; attempt < 3; attempt++) {
      const created = yield* fs.writeFileString(path, token, { flag: "wx" }).pipe(
        Effect.as(true),
        Effect.catchIf(
          (e) => e._tag === "SystemError" && e.reason === "AlreadyExists",
          () => Effect.succeed(false)
        )
      )
      if (created) return Option.none<number>()
      const content = yield* fs.readFileString(path).pipe(Effect.orElseSucceed(() => ""))
      const pid = Number(content.trim().split(/\s+/)[0])
      if (Number.isInteger(pid) && pid > 0 && isAlive(pid)) return Option.some(pid)
      // stale: its holder died without releasing it
      yield* fs.remove(path).pipe(Effect.ignore)
    }
    return Option.some(-1)
  })

/**
 * Holds an exclusive lock file for the enclosing scope; released (removed, if still ours) when the
 * scope closes. With `waitMs`, waits for a live holder to let go, calling `onWait` once;
 * without, fails at once with LockHeld.
 */
export const holdLockFile = (
  path: string,
  options: { readonly waitMs?: number; readonly onWait?: (holderPid: number) => Effect.Effect<void> } = {}
) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const token = `${process.pid} ${Date.now().toString(36)}${Math.random().toString(36).slice(2)}\n`
    const deadline = Date.now() + (options.waitMs ?? 0)
    let told = false
    for (;;) {
      const holder = yield* tryTake(fs, path, token)
      if (Option.isNone(holder)) break
      if (Date.now() >= deadline) return yield* Effect.fail(new LockHeld({ path, holderPid: holder.value }))
      if (!told && options.onWait) {
        told = true
        yield* options.onWait(holder.value)
      }
      yield* Effect.sleep(Duration.millis(100))
    }
    yield* Effect.addFinalizer(() =>
      fs.readFileString(path).pipe(
        Effect.flatMap((content) => (content === token ? fs.remove(path) : Effect.void)),
        Effect.ignore
      )
    )
  })
