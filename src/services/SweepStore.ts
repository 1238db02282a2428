import { FileSystem, Path } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Effect, Either, Layer, Option } from "effect"
import {
  parseSweep,
  renderSummaryCsv,
  renderSweep,
  SUMMARY_CSV,
  SWEEP_FILE,
  SWEEP_SCHEMA_VERSION,
  type SweepDoc
} from "../domain/Sweep.js"
import { writeFileAtomically } from "./AtomicWrite.js"
import { readRegularFile, STATE_FILE_MAX_BYTES } from "./BoundedRead.js"
import { StateCorrupt, StateFromFuture, StateIoFailed, type StateLoadError } from "./StateStore.js"

/**
 * Persists a sweep session (docs/design.md#what-a-sweep-keeps): `<session>/sweep.json` and
 * `<session>/summary.csv`.
 *
 * - `load` never modifies anything: a missing file is `None`, a corrupt one `StateCorrupt`, one
 *   from a newer hyperloom `StateFromFuture`.
 * - `save` writes sweep.json atomically (temp file in the directory, fsync, rename, fsync of the
 *   directory), refusing to replace a file `load` would refuse (an unreadable sweep is never
 *   overwritten), then summary.csv the same way (derived: rewritten from the document each time).
 *
 * The session lock is the baseline's (StateStore.lock): one run per session directory.
 */
export interface SweepStoreShape {
  readonly load: (sessionDir: string) => Effect.Effect<Option.Option<SweepDoc>, StateLoadError>
  readonly save: (sessionDir: string, doc: SweepDoc) => Effect.Effect<void, StateLoadError>
  /**
   * Whether the session's sweep.json is still there (something is at its path): a sweep that saved
   * once asks before each save, so a session folder deleted under it is said, never recreated.
   */
  readonly stillThere: (sessionDir: string) => Effect.Effect<boolean>
}

const problem = (file: string, text: string): Either.Either<SweepDoc, StateCorrupt | StateFromFuture> =>
  Either.mapLeft(parseSweep(text), (p) =>
    p.kind === "future"
      ? new StateFromFuture({ path: file, version: p.version, supported: SWEEP_SCHEMA_VERSION })
      : new StateCorrupt({ path: file, detail: p.detail })
  )

const makeLive = Effect.gen(function* () {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const io = (operation: string, target: string) => (e: PlatformError) =>
    new StateIoFailed({ path: target, operation, detail: e.message })

  // Not through fs.readFileString: a FIFO hung sweep show, sweep run and report (deaf to Ctrl-C) and
  // /dev/zero ate gigabytes; refused as state.json is (BoundedRead.ts), the file left as it is.
  const readIfExists = (file: string) =>
    readRegularFile(file, STATE_FILE_MAX_BYTES).pipe(
      Effect.mapError((e) =>
        e._tag === "FileRefused"
          ? new StateCorrupt({ path: file, detail: e.detail })
          : new StateIoFailed({ path: file, operation: "read", detail: e.detail })
      )
    )

  const writeAtomically = (dir: string, base: string, text: string) =>
    writeFileAtomically(dir, base, text).pipe(
      Effect.mapError(io("write", path.join(dir, base))),
      Effect.provideService(FileSystem.FileSystem, fs),
      Effect.provideService(Path.Path, path)
    )

  const load = Effect.fn("SweepStore.load")(function* (sessionDir: string) {
    const file = path.join(sessionDir, SWEEP_FILE)
    const text = yield* readIfExists(file)
    if (Option.isNone(text)) return Option.none<SweepDoc>()
    return Option.some(yield* problem(file, text.value))
  })

  const save = Effect.fn("SweepStore.save")(function* (sessionDir: string, doc: SweepDoc) {
    const file = path.join(sessionDir, SWEEP_FILE)
    yield* fs.makeDirectory(sessionDir, { recursive: true }).pipe(Effect.mapError(io("create", sessionDir)))
    const existing = yield* readIfExists(file)
    if (Option.isSome(existing)) yield* problem(file, existing.value)
    yield* writeAtomically(sessionDir, SWEEP_FILE, renderSweep(doc))
    yield* writeAtomically(sessionDir, SUMMARY_CSV, renderSummaryCsv(doc))
  })

  const stillThere = (sessionDir: string) =>
    fs.exists(path.join(sessionDir, SWEEP_FILE)).pipe(Effect.orElseSucceed(() => true))

  return { load, save, stillThere } satisfies SweepStoreShape
})

export class SweepStore extends Effect.Service<SweepStore>()("hyperloom/services/SweepStore", {
  effect: makeLive
}) {}

/** The live store on a platform file system. */
export const layer: Layer.Layer<SweepStore, never, FileSystem.FileSystem | Path.Path> = SweepStore.Default

/** An in-memory store with the live one's refusals; `files` maps `<dir>/sweep.json` and `<dir>/summary.csv` to texts. */
export const makeMemorySweepStore = (files: Map<string, string> = new Map()): SweepStoreShape => {
  const key = (dir: string, base: string) => `${dir.replace(/\/+$/, "")}/${base}`
  return {
    load: (dir) =>
      Effect.suspend(() => {
        const text = files.get(key(dir, SWEEP_FILE))
        return text === undefined
          ? Effect.succeed(Option.none<SweepDoc>())
          : Effect.map(problem(key(dir, SWEEP_FILE), text), Option.some)
      }),
    save: (dir, doc) =>
      Effect.suspend(() => {
        const existing = files.get(key(dir, SWEEP_FILE))
        const check =
          existing === undefined ? Effect.void : Effect.asVoid(problem(key(dir, SWEEP_FILE), existing))
        return Effect.tap(check, () =>
          Effect.sync(() => {
            files.set(key(dir, SWEEP_FILE), renderSweep(doc))
            files.set(key(dir, SUMMARY_CSV), renderSummaryCsv(doc))
          })
        )
      }),
    stillThere: (dir) => Effect.sync(() => files.has(key(dir, SWEEP_FILE)))
  }
}

/** A fresh in-memory store per build. */
export const layerTest = (files: Map<string, string> = new Map()): Layer.Layer<SweepStore> =>
  Layer.sync(SweepStore, () => SweepStore.make(makeMemorySweepStore(files)))
