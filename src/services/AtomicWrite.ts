/**
 * The one atomic file write (a baseline's state.json, a sweep's sweep.json and summary.csv, an
 * attempt's records and reports, the host queue's history): a reader, or a run killed mid-write,
 * sees the old file or the new one, never half. One temp-file name, one order of steps: a new
 * temp file in the same directory (so the rename stays on one file system), written, fsync, rename
 * over the old file, then fsync of the directory (best effort: it makes the rename durable). A
 * failed write removes its temp file. The Effect form is for code on the FileSystem service; the
 * synchronous form for code on node:fs (services/HostQueue.ts).
 */
import * as nodeFs from "node:fs"
import * as nodePath from "node:path"
import { FileSystem } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Effect } from "effect"

let tempCounter = 0
/**
 * The temp file of a write to `<dir>/<base>`: hidden, in the same directory, a name no other
 * writer picks. `Date.now()` here only salts the name (a pid reused by a later run); it is no time
 * anyone reads or waits on, so it stays off the Effect Clock, where a TestClock would make it a
 * constant.
 */
export const tempPathFor = (dir: string, base: string) =>
  `${dir.replace(/\/+$/, "")}/.${base}.${process.pid}.${Date.now()}.${++tempCounter}.tmp`

/** `path` as its directory and its name (a bare name is in `.`). */
export const splitPath = (path: string): { readonly dir: string; readonly base: string } => ({
  dir: nodePath.dirname(path),
  base: nodePath.basename(path)
})

const joined = (dir: string, base: string) => `${dir.replace(/\/+$/, "")}/${base}`

/** Writes `text` to `<dir>/<base>` atomically (see above), on the FileSystem service. */
export const writeFileAtomically = (
  dir: string,
  base: string,
  text: string | Uint8Array,
  mode = 0o644
): Effect.Effect<void, PlatformError, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const temp = tempPathFor(dir, base)
    yield* Effect.scoped(
      Effect.gen(function* () {
        const handle = yield* fs.open(temp, { flag: "wx", mode })
        yield* handle.writeAll(typeof text === "string" ? new TextEncoder().encode(text) : text)
        yield* handle.sync
      })
    ).pipe(
      Effect.zipRight(fs.rename(temp, joined(dir, base))),
      Effect.onExit((exit) => (exit._tag === "Failure" ? fs.remove(temp).pipe(Effect.ignore) : Effect.void))
    )
    yield* Effect.scoped(Effect.flatMap(fs.open(dir, { flag: "r" }), (d) => d.sync)).pipe(Effect.ignore)
  })

/** fsync of a directory, best effort: a rename in it is durable after it. */
export const syncDirectorySync = (dir: string): void => {
  let fd: number | undefined
  try {
    fd = nodeFs.openSync(dir, "r")
    nodeFs.fsyncSync(fd)
  } catch {
    // best effort: some file systems refuse to sync a directory
  } finally {
    if (fd !== undefined) nodeFs.closeSync(fd)
  }
}

/** Writes `body` to `path` atomically (see above), with node:fs; throws what node:fs throws. */
export const writeFileAtomicallySync = (path: string, body: string | Uint8Array, mode = 0o644): void => {
  const { dir, base } = splitPath(path)
  const temp = tempPathFor(dir, base)
  try {
    const fd = nodeFs.openSync(temp, "wx", mode)
    try {
      nodeFs.writeFileSync(fd, body)
      nodeFs.fsyncSync(fd)
    } finally {
      nodeFs.closeSync(fd)
    }
    nodeFs.renameSync(temp, path)
  } catch (e) {
    nodeFs.rmSync(temp, { force: true })
    throw e
  }
  syncDirectorySync(dir)
}
