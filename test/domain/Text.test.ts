import { assert, describe, it } from "@effect/vitest"
import { keepTail, oneLine, Tail } from "../../src/domain/Text.js"

describe("Text", () => {
  it("oneLine folds every run of whitespace, newlines included, and trims", () => {
    assert.strictEqual(oneLine("  a\n\tb   c \r\n"), "a b c")
  })

  it("keepTail keeps the newest characters", () => {
    assert.strictEqual(keepTail("abcdef", 3), "def")
    assert.strictEqual(keepTail("ab", 3), "ab")
  })

  it("Tail keeps whole lines while they fit, then the last max characters", () => {
    const t = new Tail(11)
    for (const l of ["one", "two", "three", "four"]) t.push(l)
    assert.strictEqual(t.text(), "three\nfour")
    assert.strictEqual(t.lastLines(2), "three | four")
    const long = new Tail(5)
    long.push("abcdefghij")
    assert.strictEqual(long.text(), "fghij")
  })
})
