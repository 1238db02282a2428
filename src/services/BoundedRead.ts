/**
 * Reading a file hyperloom did not write itself (a session's state, a command's result file, the
 * runner's logs) without trusting what it is (issue 13 item 8). `fs.readFile` on a FIFO blocks a
 * thread-pool thread until a writer comes (Ctrl-C cannot end it), and on `/dev/zero` it reads
 * until memory runs out. So the file is opened with O_NONBLOCK (a FIFO opens at once), checked
 * with fstat on that same descriptor (no race between a check and the open), refused unless it is
 * a regular file, and read only up to a bound.
 */
import { constants, promises as fsp } from "node:fs"
import { Data, Effect, Option } from "effect"

/** The file is there but not something to read: not a regular file, or larger than the bound. */
export class FileRefused extends Data.TaggedError("FileRefused")<{
  readonly path: string
  readonly detail: string
}> {
  override get message(): string {
    return `${this.path}: ${this.detail}`
  }
}

/** The file system refused the read (permissions, I/O error, …). */
export class FileReadFailed extends Data.TaggedError("FileReadFailed")<{
  readonly path: string
  readonly detail: string
}> {
  override get message(): string {
    return `${this.path}: ${this.detail}`
  }
}

const MiB = 1024 * 1024
/** state.json: one record per attempt, each error at most 2000 characters; 64 MiB is tens of thousands. */
export const STATE_FILE_MAX_BYTES = 64 * MiB
/** A result file: vLLM's --save-result JSON carries per-request arrays; a detailed one can be large. */
export const RESULT_FILE_MAX_BYTES = 256 * MiB

const kindOf = (s: {
  isDirectory(): boolean
  isFIFO(): boolean
  isCharacterDevice(): boolean
  isBlockDevice(): boolean
  isSocket(): boolean
}) =>
  s.isDirectory()
    ? "a directory"
    : s.isFIFO()
      ? "a FIFO (named pipe)"
      : s.isCharacterDevice()
        ? "a character device"
        : s.isBlockDevice()
          ? "a block device"
          : s.isSocket()
            ? "a socket"
            : "not a file"

const errnoOf = (e: unknown) => (e as NodeJS.ErrnoException | undefined)?.code

/**
 * The file's text (UTF-8), `None` when it does not exist; refused when it is not a regular file or
 * holds more than `maxBytes`.
 */
export const readRegularFile = (
  file: string,
  maxBytes: number
): Effect.Effect<Option.Option<string>, FileRefused | FileReadFailed> =>
  Effect.acquireUseRelease(
    Effect.tryPromise({
      try: () => fsp.open(file, constants.O_RDONLY | constants.O_NONBLOCK),
      catch: (e) => e
    }).pipe(
      Effect.map(Option.some),
      Effect.catchAll((e) =>
        errnoOf(e) === "ENOENT"
          ? Effect.succeed(Option.none<fsp.FileHandle>())
          : Effect.fail(new FileReadFailed({ path: file, detail: String((e as Error).message ?? e) }))
      )
    ),
    (handle) =>
      Option.isNone(handle)
        ? Effect.succeed(Option.none<string>())
        : Effect.gen(function* () {
            const h = handle.value
            const fail = (e: unknown) =>
              new FileReadFailed({ path: file, detail: String((e as Error).message ?? e) })
            const stat = yield* Effect.tryPromise({ try: () => h.stat(), catch: fail })
            if (!stat.isFile()) {
              return yield* new FileRefused({
                path: file,
                detail: `is ${kindOf(stat)}, not a regular file; not reading it`
              })
            }
            if (stat.size > maxBytes) {
              return yield* new FileRefused({
                path: file,
                detail: `is larger than ${maxBytes} bytes (${stat.size}); not reading it`
              })
            }
            // Read at most maxBytes + 1: a file that grew past the bound since fstat is refused too.
            const buffer = Buffer.alloc(Math.min(maxBytes + 1, stat.size + 64 * 1024))
            let filled = 0
            while (filled < buffer.length) {
              const { bytesRead } = yield* Effect.tryPromise({
                try: () => h.read(buffer, filled, buffer.length - filled, null),
                catch: fail
              })
              if (bytesRead === 0) break
              filled += bytesRead
            }
            if (filled > maxBytes) {
              return yield* new FileRefused({
                path: file,
                detail: `grew past ${maxBytes} bytes while being read; not reading it`
              })
            }
            return Option.some(buffer.subarray(0, filled).toString("utf8"))
          }),
    (handle) =>
      Option.isSome(handle) ? Effect.promise(() => handle.value.close()).pipe(Effect.ignore) : Effect.void
  )

/** Fails unless the file is missing or a regular file (for a reader that streams it). */
export const checkRegularFile = (file: string): Effect.Effect<boolean, FileRefused | FileReadFailed> =>
  Effect.tryPromise({ try: () => fsp.stat(file), catch: (e) => e }).pipe(
    Effect.matchEffect({
      onFailure: (e) =>
        errnoOf(e) === "ENOENT"
          ? Effect.succeed(false)
          : Effect.fail(new FileReadFailed({ path: file, detail: String((e as Error).message ?? e) })),
      onSuccess: (stat) =>
        stat.isFile()
          ? Effect.succeed(true)
          : Effect.fail(
              new FileRefused({
                path: file,
                detail: `is ${kindOf(stat)}, not a regular file; not reading it`
              })
            )
    })
  )
