/**
 * stdout as a Unix tool treats it (issue 13 item 4). Node emits a write error on process.stdout
 * as an 'error' event: unhandled, `hyperloom … | head -1` died with "Unhandled 'error' event" and
 * a stack trace, and `--json > /dev/full` exited 0 having lost its document. Here the first error
 * is kept and whoever waits on it is told:
 *
 * - EPIPE (the reader went away): the command ends quietly with 141 (128 + SIGPIPE, what a shell
 *   reports for a tool killed by SIGPIPE); `lease run` stops its command and releases the lease
 *   first (a reader that left wants no more output, as `yes | head -1` ends `yes`).
 * - any other write error (ENOSPC on /dev/full, EIO): one stderr line and exit 74 (EX_IOERR).
 *
 * Writes never wait for the reader: `writeLine` queues up to a bound and drops beyond it with one
 * note on stderr, so a reader that does not read (a stuck pipe, a pager left open) never holds a
 * lease after its command ended.
 */
import { Effect } from "effect"
import { EXIT } from "./Exit.js"

export const EXIT_STDOUT_CLOSED = EXIT.stdoutClosed
export const EXIT_STDOUT_FAILED = EXIT.stdoutFailed

/** What stdout may hold unread before output is dropped (per stream). */
export const MAX_UNREAD_BYTES = 16 * 1024 * 1024

let failure: NodeJS.ErrnoException | undefined
const waiters = new Set<(e: NodeJS.ErrnoException) => void>()
let watching = false

/** Keeps stdout's write errors from crashing the process (call once, before anything is written). */
export const watchStdout = () => {
  if (watching) return
  watching = true
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (failure !== undefined) return
    failure = e
    for (const w of waiters) w(e)
  })
}

/** The first write error stdout met, if any. */
export const stdoutFailure = (): NodeJS.ErrnoException | undefined => failure

/** Waits until stdout fails (never, if it does not). */
export const awaitStdoutFailure: Effect.Effect<NodeJS.ErrnoException> = Effect.async((resume) => {
  if (failure !== undefined) return resume(Effect.succeed(failure))
  const w = (e: NodeJS.ErrnoException) => resume(Effect.succeed(e))
  waiters.add(w)
  return Effect.sync(() => waiters.delete(w))
})

/** The exit code a stdout failure asks for, with its stderr line (none for EPIPE). */
export const exitForStdoutFailure = (e: NodeJS.ErrnoException): number => {
  if (e.code === "EPIPE") return EXIT_STDOUT_CLOSED
  process.stderr.write(
    `hyperloom: cannot write to stdout: ${e.code ?? e.message}; the output is lost (exit ${EXIT_STDOUT_FAILED})\n`
  )
  return EXIT_STDOUT_FAILED
}

/** Resolves once everything written to stdout has been handed to the OS (or stdout failed). */
export const flushStdout = (): Promise<void> =>
  new Promise((resolve) => {
    if (failure !== undefined || process.stdout.destroyed) return resolve()
    process.stdout.write("", () => resolve())
  })

const dropped = new Map<NodeJS.WriteStream, number>()

/** Writes one line as `writeBytes` does. */
export const writeLine = (stream: NodeJS.WriteStream, line: string): void => writeBytes(stream, `${line}\n`)

/**
 * Writes without waiting for the reader: past MAX_UNREAD_BYTES unread, the chunk is dropped
 * (counted; one note on stderr the first time). Nothing is written once the stream failed.
 */
export const writeBytes = (stream: NodeJS.WriteStream, chunk: Uint8Array | string): void => {
  if (stream.destroyed || (stream === process.stdout && failure !== undefined)) return
  if (stream.writableLength > MAX_UNREAD_BYTES) {
    const n = (dropped.get(stream) ?? 0) + 1
    dropped.set(stream, n)
    if (n === 1 && stream !== process.stderr) {
      process.stderr.write(
        `hyperloom: ${stream === process.stdout ? "stdout" : "the output"} is not being read (${MAX_UNREAD_BYTES / (1024 * 1024)} MiB unread); dropping the command's output from here on so that the lease is not held by the reader\n`
      )
    }
    return
  }
  stream.write(chunk)
}

/** Writes (lines or chunks) dropped because nobody read them (stdout, stderr). */
export const droppedLines = () => ({
  stdout: dropped.get(process.stdout) ?? 0,
  stderr: dropped.get(process.stderr) ?? 0
})
