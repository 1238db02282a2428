/**
 * A sweep's status line on a terminal (docs/design.md#sweeps-at-cluster-scale, "Progress"): redrawn
 * in place on stderr's last line; a log line clears it, is written, and the status line is drawn
 * again below it. Off a terminal there is no pinned line: the sweep logs its status every 30 s
 * instead.
 */
import { Effect } from "effect"

let pinned: string | undefined

const CLEAR = "\r\x1b[2K"

/** Cut to the terminal's width: a wrapped line could not be redrawn in place. */
const toWidth = (line: string) => line.slice(0, Math.max(20, (process.stderr.columns ?? 120) - 1))

/** The redraw for a sweep's status, when stderr is a terminal (else undefined: log it). */
export const statusRedraw = (): ((line: string) => Effect.Effect<void>) | undefined =>
  process.stderr.isTTY === true
    ? (line) =>
        Effect.sync(() => {
          pinned = toWidth(line)
          process.stderr.write(`${CLEAR}${pinned}`)
        })
    : undefined

/** Writes a log line on stderr around the pinned status line (cleared, then drawn again). */
export const writeAroundStatus = (text: string) => {
  if (pinned === undefined) {
    process.stderr.write(text)
    return
  }
  process.stderr.write(`${CLEAR}${text}${pinned}`)
}

/** Takes the status line off the terminal (the sweep ended). */
export const unpinStatus = Effect.sync(() => {
  if (pinned === undefined) return
  pinned = undefined
  process.stderr.write(CLEAR)
})
