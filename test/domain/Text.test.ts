import { assert, describe, it } from "@effect/vitest"
import { keepTail, oneLine, shortId, Tail } from "../../src/domain/Text.js"

describe("Text", () => {
  it("oneLine folds every run of whitespace, newlines included, and trims", () => {
    assert.strictEqual(oneLine("  a\n\tb   c \r\n"), "a b c")
  })

  it("shortId: one shortener for every hex id (long ones cut with an ellipsis, a job id whole)", () => {
    assert.strictEqual(shortId("0123456789abcdef0123"), "0123456789ab…")
    assert.strictEqual(shortId("02000000"), "02000000")
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
