/**
 * Where the host's queue lives (docs/design.md#fair-queue): `/tmp` itself when it is root's sticky
 * directory, shared by every user of the host; else the user's own directory.
 */
import * as fs from "node:fs"
import * as nodePath from "node:path"
import { Effect } from "effect"
import { hostFile, type LockUnavailable, privateDir, testPrefix } from "../LockFile.js"

/** Where a queue lives: its tickets (directory, name prefix) and the user's own directory. */
export interface QueuePlace {
  /** The tickets' directory: a shared sticky one (`/tmp`), or the user's own. */
  readonly tickets: string
  /** Every ticket's name starts with it. */
  readonly prefix: string
  /** The user's own directory (0700): the history and its mutex. */
  readonly own: string
  readonly shared: boolean
}

/** This process's effective uid (0 where the platform has none). */
export const euid = () => process.geteuid?.() ?? 0

/**
 * Whether `dir` lets every user add names and nobody remove or rename another's: a real
 * directory (lstat: not a symlink) owned by root, world-writable, with the sticky bit.
 */
export const isSharedSticky = (dir: string): boolean => {
  try {
    const st = fs.lstatSync(dir)
    return st.isDirectory() && st.uid === 0 && (st.mode & 0o1000) !== 0 && (st.mode & 0o002) !== 0
  } catch {
    return false
  }
}

let warnedPrivate = false

/**
 * The host's queue: its tickets in `base` (`/tmp`) when it is root's sticky directory, shared by
 * every user of the host; else in the user's own `/tmp/hyperloom-<uid>/queue`, with one warning
 * line (other users' leases then meet this user's in Ray's own order).
 */
export const hostPlace = (base = "/tmp"): Effect.Effect<QueuePlace, LockUnavailable> =>
  Effect.gen(function* () {
    const own = yield* Effect.flatMap(hostFile("queue"), privateDir)
    const prefix = `.hyperloom-queue.${testPrefix}`
    if (isSharedSticky(base)) return { tickets: base, prefix, own, shared: true }
    if (!warnedPrivate) {
      warnedPrivate = true
      yield* Effect.logWarning(
        `${base} is not a sticky directory of root's that every user may write (lstat): the host's queue is this user's own (${own}); other users' leases meet this user's in Ray's own order`
      )
    }
    return { tickets: own, prefix, own, shared: false }
  })

/** A queue in a directory of the test's own (`dir`: shared when it is root's and sticky). */
export const placeIn = (
  dir: string,
  own = nodePath.join(dir, `.own-${euid()}`)
): Effect.Effect<QueuePlace, LockUnavailable> =>
  Effect.map(privateDir(own), (o) => ({
    tickets: dir,
    prefix: ".hyperloom-queue.",
    own: o,
    shared: isSharedSticky(dir)
  }))
