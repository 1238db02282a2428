import { assert, describe, it } from "@effect/vitest"
import { parseDecimal, parseWholeNumber } from "../../src/domain/Numbers.js"

/** What `Number()` accepts and a user typing a number does not mean (issue 13 item 8). */
const notDecimal = [
  "0x10",
  "0X10",
  "0b11",
  "0o7",
  "1e1",
  "1E1",
  " 5",
  "5 ",
  "\t5",
  "+3",
  "-3",
  "-0",
  "Infinity",
  "-Infinity",
  "NaN",
  "1_000",
  "٣",
  "",
  " ",
  "1,5",
  "0x"
]

describe("parseWholeNumber", () => {
  it("reads decimal digits", () => {
    assert.strictEqual(parseWholeNumber("0"), 0)
    assert.strictEqual(parseWholeNumber("16"), 16)
    assert.strictEqual(parseWholeNumber("016"), 16)
    assert.strictEqual(parseWholeNumber("9007199254740991"), 9007199254740991)
  })

  it("refuses hex, binary, octal, exponents, signs, spaces, Infinity, fractions", () => {
    for (const v of [...notDecimal, "2.5", "1.", ".5", "1.0"]) {
      assert.isUndefined(parseWholeNumber(v), JSON.stringify(v))
    }
  })

  it("refuses a number past 2^53 (it would not be the number typed)", () => {
    assert.isUndefined(parseWholeNumber("9007199254740993"))
  })
})

describe("parseDecimal", () => {
  it("reads digits with an optional fraction", () => {
    assert.strictEqual(parseDecimal("30"), 30)
    assert.strictEqual(parseDecimal("1.5"), 1.5)
    assert.strictEqual(parseDecimal(".5"), 0.5)
    assert.strictEqual(parseDecimal("0"), 0)
  })

  it("refuses what Number() would read otherwise", () => {
    for (const v of [...notDecimal, "1.", ".", "1.2.3", "1e-3"]) {
      assert.isUndefined(parseDecimal(v), JSON.stringify(v))
    }
  })
})
