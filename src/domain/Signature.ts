import { createHash, type Hash } from "node:crypto"

/**
 * Failure signatures (docs/design.md#failure-signatures): an error text with its volatile tokens
 * folded into placeholders, so that "the same failure again" can be told from "a different
 * failure".
 *
 * Two forms exist, both of fold version `v1` (docs/design.md#failure-signatures: the stored
 * signature has the `v1:` prefix):
 *
 * - `v1:<folded text>` (`foldSignature`): the fold of one text. Used where an attempt has no output
 *   of its own (the lease's infeasibility error) and by the migration of old state files.
 * - `v1:<sha-256 hex>` (`OutputDigest`): the attempt's WHOLE output, every line of every stream,
 *   each line folded as below and fed into a streaming digest per stream (memory stays flat however
 *   long the output). The stored 2000-character tail is only what is displayed: two different root
 *   causes followed by the same long traceback (vLLM's "Engine core initialization failed. See root
 *   cause above") have equal tails but different signatures. Streams are digested apart and combined
 *   in name order, so how the two pipes interleaved on arrival cannot change the signature.
 *
 * The fold is versioned: a stored signature is `v1:<folded text>`. Changing any pattern below
 * changes what equal means, so it must come with a new version (and old signatures then never
 * match new ones, which errs on the side of not stopping).
 *
 * Patterns run in order, specific before general, each over the output of the previous one:
 *
 *   1. UUIDs                                      → `<uuid>`
 *   2. IPv6 (`[addr]:port`, full, `::`-compressed) → `<ip>` (before times: `0:10:44a0::1` is no time)
 *   3. timestamps: ISO date(-time), time of day   → `<ts>`
 *   4. IPv4 with an optional `:port`               → `<ip>`
 *   5. `0x…` hex                                   → `<hex>`
 *   6. ids: hex runs of ID_MIN_HEX_CHARS or more holding a letter a-f (Ray's 40/56-hex ids, job
 *      ids, hashes), but not the mantissa of a number in scientific notation → `<id>`
 *   7. durations: `12.5s`, `300ms`, `2m`, `1h30m`, `5 s`, `3 minutes` → `<dur>`
 *   8. numbers (sign, decimals, exponent; also inside words: `gpu3` → `gpu<n>`) → `<n>`
 *
 * and whitespace is collapsed to single spaces (before, so `5  s` is a duration too, and after).
 *
 * Words that merely look like hex (`face`, `added`, `bad`, `cafe`, `deadbeef`) are shorter than the
 * id threshold and survive. A run of digits only is a number, however long: folding it as `<n>` keeps
 * "differs only in numbers" exact at the cost of an all-digit hex id (odds ~ (10/16)^40) folding to
 * `<n>` rather than `<id>`.
 *
 * Idempotence: after one fold no digit is left (step 8 takes every digit), so steps 3, 4, 5, 7 and
 * 8 find nothing on a second pass. Steps 1, 2 and 6 can match digit-free text; their boundaries treat a
 * placeholder like a word character, so a hex word that ended in digits (`abcdefabcdef1x` →
 * `abcdefabcdef<n>x`) is not turned into an id on the second pass. Hence
 * `foldText(foldText(x)) === foldText(x)`.
 */

export const SIGNATURE_VERSION = "v1"
export const SIGNATURE_PREFIX = `${SIGNATURE_VERSION}:`

/** A hex run this long or longer (with a letter in it) is an id. */
export const ID_MIN_HEX_CHARS = 12

const PLACEHOLDER = "<(?:uuid|id|hex|ip|ts|dur|n)>"
/** Not preceded / followed by a letter, digit or a placeholder. */
const NOT_AFTER_WORD = `(?<![0-9a-z])(?<!${PLACEHOLDER})`
const NOT_BEFORE_WORD = `(?![0-9a-z])(?!${PLACEHOLDER})`

/** Not the mantissa of a number in scientific notation (`7.81671725916e-313`, `12345678901e+5`). */
const NOT_A_MANTISSA = "(?!(?<=\\d\\.)\\d+e)(?!\\d+e[+-]\\d)"

const H4 = "[0-9a-f]{1,4}"
const V6_GROUPS = `${H4}(?::${H4}){0,6}`
const V6_CORE = `(?:(?:${H4}:){7}${H4}|(?:${V6_GROUPS})?::${V6_GROUPS}|${V6_GROUPS}::)`

/** Digits with optional decimals and exponent. */
const NUMBER_BODY = "\\d+(?:\\.\\d+)?(?:e[+-]?\\d+)?"
/** A `-` is a sign when it is not glued to a word or a closing bracket (`worker-3` keeps its hyphen). */
const SIGN = "(?:(?<![\\w)\\]>.])-)?"

const UNIT_GLUED = "(?:ns|us|µs|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?)(?![a-zµ])"
/** After a space only unambiguous units: `5 s` yes, `5 m` (metres?) and `5 h` no. */
const UNIT_SPACED = "(?:ns|us|µs|ms|seconds?|secs?|s|minutes?|mins?|hours?|hrs?|days?)(?![a-zµ])"

const RULES: ReadonlyArray<readonly [RegExp, string]> = [
  [
    new RegExp(
      `${NOT_AFTER_WORD}[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}${NOT_BEFORE_WORD}`,
      "gi"
    ),
    "<uuid>"
  ],
  [new RegExp(`\\[${V6_CORE}(?:%[0-9a-z]+)?\\](?::\\d{1,5})?`, "gi"), "<ip>"],
  [
    new RegExp(`(?<![\\w:.])(?<!${PLACEHOLDER})${V6_CORE}(?:%[0-9a-z]+)?(?![\\w:.])(?!${PLACEHOLDER})`, "gi"),
    "<ip>"
  ],
  [
    /(?<![\w.])\d{4}-\d{2}-\d{2}(?:[t ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?)?(?:z|[+-]\d{2}:?\d{2}(?!\d))?(?![\w])/gi,
    "<ts>"
  ],
  [/(?<![0-9a-f:])\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?(?![0-9a-f:])/gi, "<ts>"],
  [/(?<!\d)(?<!\d\.)(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?(?!\.?\d)/g, "<ip>"],
  [/(?<![0-9a-z])0x[0-9a-f]+/gi, "<hex>"],
  [
    new RegExp(
      `${NOT_AFTER_WORD}${NOT_A_MANTISSA}(?=[0-9a-f]*[a-f])[0-9a-f]{${ID_MIN_HEX_CHARS},}${NOT_BEFORE_WORD}`,
      "gi"
    ),
    "<id>"
  ],
  [
    new RegExp(
      `(?<![\\w.])-?${NUMBER_BODY}(?:${UNIT_GLUED}|\\s${UNIT_SPACED})(?:\\d+(?:\\.\\d+)?${UNIT_GLUED})*`,
      "gi"
    ),
    "<dur>"
  ],
  [new RegExp(SIGN + NUMBER_BODY, "gi"), "<n>"]
]

const collapse = (text: string): string => text.replace(/\s+/g, " ").trim()

/** The folded body of a signature (no version prefix). */
export const foldText = (text: string): string => {
  let out = collapse(text)
  for (const [pattern, placeholder] of RULES) out = out.replace(pattern, placeholder)
  return collapse(out)
}

/** The stored signature of an error text: `v1:<folded>`. */
export const foldSignature = (text: string): string => SIGNATURE_PREFIX + foldText(text)

/** The folded body of a stored `v1:` signature, or undefined when it is not one. */
export const signatureBody = (signature: string): string | undefined =>
  signature.startsWith(SIGNATURE_PREFIX) ? signature.slice(SIGNATURE_PREFIX.length) : undefined

/** The digest form has the fold's version too: what "equal" means is the `v1` fold's. */
export const OUTPUT_SIGNATURE_PREFIX = SIGNATURE_PREFIX

/**
 * SHA-256 from node:crypto: a pure computation (no I/O), the one non-`effect` import the domain
 * allows itself rather than a hand-written hash.
 */
const sha256 = (): Hash => createHash("sha256")

/**
 * The `v1:<hex>` signature of an attempt's whole output, built line by line as the output arrives.
 * `add(channel, line)` folds the line (volatile tokens → placeholders, whitespace collapsed; blank
 * lines carry nothing and are skipped) and feeds it to the channel's digest; `signature()` combines
 * the channels (sorted by name, so arrival order across channels does not matter). Lines of one
 * channel count in their order. Constant memory per channel.
 */
export class OutputDigest {
  private readonly channels = new Map<string, { hash: Hash; lines: number }>()

  add(channel: string, line: string): void {
    const folded = foldText(line)
    if (folded === "") return
    let c = this.channels.get(channel)
    if (c === undefined) {
      c = { hash: sha256(), lines: 0 }
      this.channels.set(channel, c)
    }
    c.hash.update(`${folded}\n`, "utf8")
    c.lines++
  }

  /** Lines fed (after skipping blank ones), all channels. */
  get lines(): number {
    let n = 0
    for (const c of this.channels.values()) n += c.lines
    return n
  }

  /** `v1:<hex>`; call once, after the last line (a channel's digest is finished by it). */
  signature(): string {
    const parts = [...this.channels.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([name, c]) => `${name}\u0000${c.lines}\u0000${c.hash.digest("hex")}\n`)
    return OUTPUT_SIGNATURE_PREFIX + sha256().update(parts.join(""), "utf8").digest("hex")
  }
}

/** The `v1:<hex>` signature of a whole text given per channel (each split into lines). */
export const outputSignature = (channels: Readonly<Record<string, string>>): string => {
  const d = new OutputDigest()
  for (const [name, text] of Object.entries(channels)) for (const line of text.split("\n")) d.add(name, line)
  return d.signature()
}
