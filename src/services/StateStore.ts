import { FileSystem, Path } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Data, Effect, Either, Layer, Option, type Scope } from "effect"
import { CURRENT_SCHEMA_VERSION, parseState, renderState, type SessionState } from "../domain/State.js"
import { oneLine } from "../domain/Text.js"
import { writeFileAtomically } from "./AtomicWrite.js"
import { readRegularFile, STATE_FILE_MAX_BYTES } from "./BoundedRead.js"
import { holdLockFile, type LockUnavailable, pidAlive } from "./LockFile.js"

export { pidAlive }

/**
 * Persists a baseline session's state in `<session>/state.json` (docs/design.md#session-state).
 *
 * - `load` never modifies the file: a missing file is `None`, an older version is migrated in
 *   memory, a corrupt file or one that fails the schema is `StateCorrupt`, a newer version is
 *   `StateFromFuture`.
 * - `save` is atomic (temp file in the same directory, write, fsync, rename, fsync of the directory)
 *   and refuses to replace a file that `load` would refuse, so an unreadable state is never overwritten.
 * - `lock` holds the session's lock for the scope: one run per session. It is LockFile.ts's lock on
 *   `<session>/.lock` (flock(2), the file 0600 and ours): the kernel frees it when the holder dies,
 *   so there is no stale lock to judge, and a user who cannot open the file cannot hold it.
 */

export const STATE_FILE = "state.json"
export const LOCK_FILE = ".lock"

/** The state file exists but is not valid JSON or does not match the schema of its version. */
export class StateCorrupt extends Data.TaggedError("StateCorrupt")<{
  readonly path: string
  readonly detail: string
}> {
  override get message(): string {
    return `state file ${this.path} is unreadable: ${oneLine(this.detail)}; it was left untouched (move it away to start a new session)`
  }
}

/** The state file was written by a newer hyperloom. */
export class StateFromFuture extends Data.TaggedError("StateFromFuture")<{
  readonly path: string
  readonly version: number
  readonly supported: number
}> {
  override get message(): string {
    return `state file ${this.path} has schema_version ${this.version}, newer than the ${this.supported} this hyperloom reads; it was left untouched (use a newer hyperloom)`
  }
}

/** Another live process holds the session. */
export class SessionLocked extends Data.TaggedError("SessionLocked")<{
  readonly path: string
  readonly pid: number
}> {
  override get message(): string {
    const who = this.pid > 0 ? `process ${this.pid}` : "another process"
    return `session is in use by ${who} (lock ${this.path}); wait for that run to end (the lock goes with it, even if it is killed)`
  }
}

/** The file system refused an operation on the session directory (permissions, disk full, …). */
export class StateIoFailed extends Data.TaggedError("StateIoFailed")<{
  readonly path: string
  readonly operation: string
  readonly detail: string
}> {
  override get message(): string {
    return `cannot ${this.operation} ${this.path}: ${oneLine(this.detail)}`
  }
}

export type StateLoadError = StateCorrupt | StateFromFuture | StateIoFailed

export interface StateStoreShape {
  /** The session's state; `None` when the session has none yet. Never modifies the file. */
  readonly load: (sessionDir: string) => Effect.Effect<Option.Option<SessionState>, StateLoadError>
  /** Writes the state atomically, creating the session directory if needed. */
  readonly save: (sessionDir: string, state: SessionState) => Effect.Effect<void, StateLoadError>
  /** Holds the session's lock until the scope closes. */
  readonly lock: (sessionDir: string) => Effect.Effect<void, SessionLocked | StateIoFailed, Scope.Scope>
}

const fromProblem = (
  path: string,
  text: string
): Either.Either<SessionState, StateCorrupt | StateFromFuture> =>
  Either.mapLeft(parseState(text), (p) =>
    p.kind === "future"
      ? new StateFromFuture({ path, version: p.version, supported: CURRENT_SCHEMA_VERSION })
      : new StateCorrupt({ path, detail: p.detail })
  )

/** The live store on a platform FileSystem (see `layer`). */
export const makeFileStateStore = Effect.gen(function* () {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path

  const io = (operation: string, target: string) => (e: PlatformError | LockUnavailable) =>
    new StateIoFailed({ path: target, operation, detail: e.message })

  // Not through fs.readFileString: a FIFO would hang it and /dev/zero exhaust memory (BoundedRead.ts).
  const readIfExists = (file: string) =>
    readRegularFile(file, STATE_FILE_MAX_BYTES).pipe(
      Effect.mapError((e) =>
        e._tag === "FileRefused"
          ? new StateCorrupt({ path: file, detail: e.detail })
          : new StateIoFailed({ path: file, operation: "read", detail: e.detail })
      )
    )

  const ensureDir = (dir: string) =>
    fs.makeDirectory(dir, { recursive: true }).pipe(Effect.mapError(io("create", dir)))

  const load = Effect.fn("StateStore.load")(function* (sessionDir: string) {
    const file = path.join(sessionDir, STATE_FILE)
    const text = yield* readIfExists(file)
    if (Option.isNone(text)) return Option.none<SessionState>()
    return Option.some(yield* fromProblem(file, text.value))
  })

  const save = Effect.fn("StateStore.save")(function* (sessionDir: string, state: SessionState) {
    const file = path.join(sessionDir, STATE_FILE)
    const body = renderState(state)
    yield* ensureDir(sessionDir)
    // Never replace a state file that load would refuse (docs/design.md#session-state: never
    // overwritten when unreadable).
    const existing = yield* readIfExists(file)
    if (Option.isSome(existing)) yield* fromProblem(file, existing.value)
    yield* writeFileAtomically(sessionDir, STATE_FILE, body).pipe(
      Effect.mapError(io("write", file)),
      Effect.provideService(FileSystem.FileSystem, fs),
      Effect.provideService(Path.Path, path)
    )
  })

  const lock = Effect.fn("StateStore.lock")(function* (sessionDir: string) {
    yield* ensureDir(sessionDir)
    const lockPath = path.join(sessionDir, LOCK_FILE)
    yield* holdLockFile(lockPath, { what: `baseline run --session ${sessionDir}` }).pipe(
      Effect.provideService(FileSystem.FileSystem, fs),
      Effect.mapError((e): SessionLocked | StateIoFailed =>
        e._tag === "LockHeld"
          ? new SessionLocked({ path: lockPath, pid: e.holderPid })
          : e._tag === "LockUnavailable"
            ? new StateIoFailed({ path: lockPath, operation: "take the lock", detail: e.detail })
            : io("take the lock", lockPath)(e)
      )
    )
  })

  return { load, save, lock } satisfies StateStoreShape as StateStoreShape
})

/**
 * An in-memory store with the live store's semantics (parsing, migration, refusals, one lock per
 * session). `files` seeds raw state-file texts by session directory.
 */
export const makeMemoryStateStore = (files: Readonly<Record<string, string>> = {}): StateStoreShape => {
  const texts = new Map<string, string>(Object.entries(files).map(([k, v]) => [normalize(k), v]))
  const locks = new Set<string>()
  const fileOf = (dir: string) => `${normalize(dir)}/${STATE_FILE}`
  const load = (sessionDir: string) =>
    Effect.suspend(() => {
      const text = texts.get(normalize(sessionDir))
      return text === undefined
        ? Effect.succeed(Option.none<SessionState>())
        : Effect.map(fromProblem(fileOf(sessionDir), text), Option.some)
    })
  const save = (sessionDir: string, state: SessionState) =>
    Effect.suspend(() => {
      const existing = texts.get(normalize(sessionDir))
      const check =
        existing === undefined ? Effect.void : Effect.asVoid(fromProblem(fileOf(sessionDir), existing))
      return Effect.tap(check, () => Effect.sync(() => texts.set(normalize(sessionDir), renderState(state))))
    })
  const lock = (sessionDir: string) =>
    Effect.acquireRelease(
      Effect.suspend(() => {
        const key = normalize(sessionDir)
        if (locks.has(key)) {
          return Effect.fail(new SessionLocked({ path: `${key}/${LOCK_FILE}`, pid: process.pid }))
        }
        locks.add(key)
        return Effect.succeed(key)
      }),
      (key) => Effect.sync(() => locks.delete(key))
    ).pipe(Effect.asVoid)
  return { load, save, lock }
}

const normalize = (dir: string) => (dir.length > 1 ? dir.replace(/\/+$/, "") : dir)

export class StateStore extends Effect.Service<StateStore>()("hyperloom/services/StateStore", {
  effect: makeFileStateStore
}) {}

/** The live store on a platform file system. */
export const layer: Layer.Layer<StateStore, never, FileSystem.FileSystem | Path.Path> = StateStore.Default

/**
 * A fresh in-memory store each time the layer is built (provide it per test), seeded with raw
 * state-file texts by session directory.
 */
export const layerTest = (files: Readonly<Record<string, string>> = {}): Layer.Layer<StateStore> =>
  Layer.sync(StateStore, () => StateStore.make(makeMemoryStateStore(files)))
