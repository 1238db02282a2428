/** Small text helpers shared by the services and the domain (pure). */
import { Either } from "effect"

/** Whitespace (newlines included) folded to single spaces, trimmed: for one-line messages. */
export const oneLine = (text: string): string => text.replace(/\s+/g, " ").trim()

/** A JSON file's text parsed, or why it is corrupt (`invalid JSON: …` on one line): the state and sweep files' first step. */
export const parseJson = (
  text: string
): Either.Either<unknown, { readonly kind: "corrupt"; readonly detail: string }> => {
  try {
    return Either.right(JSON.parse(text) as unknown)
  } catch (e) {
    return Either.left({
      kind: "corrupt",
      detail: `invalid JSON: ${oneLine(String((e as Error).message ?? e))}`
    })
  }
}

/** How many characters of a long hex id (a node, an actor, a placement group) are shown. */
const ID_SHOWN = 12

/** A hex id as an operator reads it: long ids (nodes, actors, groups) shortened, short ones (jobs) whole. */
export const shortId = (id: string): string => (id.length > ID_SHOWN ? `${id.slice(0, ID_SHOWN)}…` : id)

/**
 * At most `max` characters of `text`, its end replaced by `…` when it was longer: for a value a
 * user wrote (a 100 KB `--param` value) in a text table, which would otherwise pad every row to
 * its width. JSON output keeps the whole value.
 */
export const ellipsize = (text: string, max: number): string =>
  text.length <= max ? text : `${text.slice(0, Math.max(0, max - 1))}…`

/** The last `max` characters of `text`. */
export const keepTail = (text: string, max: number): string => (text.length > max ? text.slice(-max) : text)

/** Keeps the last `max` characters of a stream of lines (whole lines while they fit). */
export class Tail {
  private lines: Array<string> = []
  private size = 0
  constructor(private readonly max: number) {}
  push(line: string): void {
    this.lines.push(line)
    this.size += line.length + 1
    while (this.size > this.max && this.lines.length > 1) this.size -= this.lines.shift()!.length + 1
  }
  /** The kept lines joined by newlines, at most `max` characters. */
  text(): string {
    const all = this.lines.join("\n")
    return all.length > this.max ? all.slice(all.length - this.max) : all
  }
  /** The last `n` lines on one line, separated by ` | `. */
  lastLines(n: number): string {
    return this.lines.slice(-n).join(" | ")
  }
}

/**
 * Numbers as `vllm bench serve` prints its results (two decimals, the unit named): a throughput
 * `2761.41 tok/s`, a duration `12.35 s`, a latency `212.40 ms`; `-` when there is none.
 */
export const fixed2 = (n: number | null | undefined): string =>
  n === null || n === undefined || !Number.isFinite(n) ? "-" : n.toFixed(2)
export const formatThroughput = (n: number | null | undefined, unit = "tok/s"): string =>
  n === null || n === undefined ? "-" : `${fixed2(n)} ${unit}`
export const formatSeconds = (s: number | null | undefined): string =>
  s === null || s === undefined ? "-" : `${fixed2(s)} s`

/** Levenshtein distance, for "did you mean" on a misspelt option or command. */
export const editDistance = (a: string, b: string): number => {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0]!
    row[0] = i
    for (let j = 1; j <= b.length; j++) {
      const above = row[j]!
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1))
      diagonal = above
    }
  }
  return row[b.length]!
}
