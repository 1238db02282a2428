/**
 * One atomic file write for the stores (a baseline's state.json, a sweep's sweep.json and
 * summary.csv): a reader, or a run killed mid-write, sees the old file or the new one, never half.
 */
import { FileSystem, Path } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Effect } from "effect"

let tempCounter = 0
/**
 * A temp file name no other writer picks. `Date.now()` here only salts the name (a pid reused by a
 * later run); it is no time anyone reads or waits on, so it stays off the Effect Clock, where a
 * TestClock would make it a constant.
 */
const tempName = (base: string) => `.${base}.${process.pid}.${Date.now()}.${++tempCounter}.tmp`

/**
 * Writes `text` to `<dir>/<base>`: a new temp file in the same directory (so the rename stays on
 * one file system), fsync, rename over the old file, then fsync of the directory (best effort: it
 * makes the rename durable). A failed write removes its temp file.
 */
export const writeFileAtomically = (
  dir: string,
  base: string,
  text: string
): Effect.Effect<void, PlatformError, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const temp = path.join(dir, tempName(base))
    yield* Effect.scoped(
      Effect.gen(function* () {
        const handle = yield* fs.open(temp, { flag: "wx", mode: 0o644 })
        yield* handle.writeAll(new TextEncoder().encode(text))
        yield* handle.sync
      })
    ).pipe(
      Effect.zipRight(fs.rename(temp, path.join(dir, base))),
      Effect.onExit((exit) => (exit._tag === "Failure" ? fs.remove(temp).pipe(Effect.ignore) : Effect.void))
    )
    yield* Effect.scoped(Effect.flatMap(fs.open(dir, { flag: "r" }), (d) => d.sync)).pipe(Effect.ignore)
  })
