/**
 * Strict decimal numbers for option values (docs/design.md#bad-input). JavaScript's `Number()`
 * (and so `Schema.NumberFromString`, which @effect/cli's integer and float options use) reads
 * `0x10` as 16, `0b11` as 3, `0o7` as 7, `1e1` as 10, ` 5 ` as 5, `+3` as 3 and `Infinity` as a
 * number: `--gpus 0x10` asked Ray for 16 GPUs. A user who types a number on a command line means
 * decimal digits, so that is all these accept: ASCII digits, and for fractional values one `.`
 * between digits. Anything else is refused, never reinterpreted.
 */

const WHOLE = /^[0-9]+$/
const DECIMAL = /^(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)$/

/** A decimal whole number (`0`, `16`, `016`); `undefined` for anything else or one past 2^53. */
export const parseWholeNumber = (text: string): number | undefined => {
  if (!WHOLE.test(text)) return undefined
  const n = Number(text)
  return Number.isSafeInteger(n) ? n : undefined
}

/** A decimal number (`30`, `1.5`, `.5`); `undefined` for anything else (no sign, exponent or `Infinity`). */
export const parseDecimal = (text: string): number | undefined => {
  if (!DECIMAL.test(text)) return undefined
  const n = Number(text)
  return Number.isFinite(n) ? n : undefined
}
