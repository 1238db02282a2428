import { assert, describe, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import {
  foldSignature,
  foldText,
  OUTPUT_SIGNATURE_PREFIX,
  OutputDigest,
  outputSignature,
  SIGNATURE_PREFIX,
  signatureBody
} from "../../src/domain/Signature.js"

describe("foldSignature examples", () => {
  it("is versioned", () => {
    assert.strictEqual(foldSignature("boom"), "v1:boom")
    assert.strictEqual(SIGNATURE_PREFIX, "v1:")
    assert.strictEqual(signatureBody("v1:a <n>"), "a <n>")
    assert.isUndefined(signatureBody("v0:a"))
  })

  it.each([
    ["uuid", "req 123e4567-e89b-12d3-a456-426614174000 failed", "req <uuid> failed"],
    ["uuid upper-case", "req 123E4567-E89B-12D3-A456-426614174000", "req <uuid>"],
    ["40-hex Ray id", "actor 1f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c died", "actor <id> died"],
    ["56-hex node id", `node ${"ab12".repeat(14)} lost`, "node <id> lost"],
    ["12-hex run", "job deadbeefcafe", "job <id>"],
    ["id in Ray's repr", "ActorID(0a1b2c3d4e5f60718293a4b5)", "ActorID(<id>)"],
    ["id after an underscore", "_ray_actor_0a1b2c3d4e5f60718293a4b5", "_ray_actor_<id>"],
    ["0x hex", "object at 0x7f3a2b1c9d80>", "object at <hex>>"],
    ["0x hex long enough to be an id", "ptr 0xdeadbeefcafe1234", "ptr <hex>"],
    ["IPv4", "connect to 10.0.0.12 refused", "connect to <ip> refused"],
    ["IPv4 with port", "gcs at 192.168.1.5:6379.", "gcs at <ip>."],
    ["IPv6 bracketed with port", "listen [2001:db8::8a2e:370:7334]:8000", "listen <ip>"],
    ["IPv6 loopback", "bind ::1 failed", "bind <ip> failed"],
    ["IPv6 full", "via 2001:0db8:85a3:0000:0000:8a2e:0370:7334 now", "via <ip> now"],
    ["IPv6 link-local with zone", "fe80::1%eth0 down", "<ip> down"],
    ["ISO timestamp", "at 2024-05-12T10:11:12.123456Z x", "at <ts> x"],
    ["ISO with offset", "at 2024-05-12 10:11:12+02:00 x", "at <ts> x"],
    ["date", "on 2024-05-12.", "on <ts>."],
    ["time of day", "INFO 05-12 10:11:12 start", "INFO <n>-<n> <ts> start"],
    ["log time with millis", "[10:11:12,345] x", "[<ts>] x"],
    ["durations", "took 12.5s then 300ms then 2m then 1h30m", "took <dur> then <dur> then <dur> then <dur>"],
    ["spaced durations", "waited 30 s and 3 minutes", "waited <dur> and <dur>"],
    ["numbers", "rank 3 of 8 got -1.5e-7 and 42", "rank <n> of <n> got <n> and <n>"],
    ["digits inside words", "gpu0 sm_80 worker-3", "gpu<n> sm_<n> worker-<n>"],
    ["hyphen is not a sign", "range 3-5", "range <n>-<n>"],
    ["whitespace collapsed", "  a\n\n\tb   c  ", "a b c"],
    [
      "hex-looking words survive",
      "face added bad cafe deadbeef decade",
      "face added bad cafe deadbeef decade"
    ],
    ["scope operators are not IPv6", "c10::Error ray::IDLE std::vector", "c<n>::Error ray::IDLE std::vector"],
    ["5 m is not a duration", "5 m away", "<n> m away"]
  ])("%s", (_name, input, folded) => {
    assert.strictEqual(foldText(input), folded)
    assert.strictEqual(foldSignature(input), `v1:${folded}`)
  })

  it("two failures that differ only in volatile tokens are equal, different failures are not", () => {
    const a = `2024-05-12T10:11:12Z worker 10.0.0.1:6379 pid=4242 actor ${"ab".repeat(20)} died after 12.5s`
    const b = `2025-01-01T00:00:00Z worker 10.0.0.2:6380 pid=17 actor ${"cd".repeat(20)} died after 3m`
    const c = `2024-05-12T10:11:12Z worker 10.0.0.1:6379 pid=4242 actor ${"ab".repeat(20)} hung after 12.5s`
    assert.strictEqual(foldSignature(a), foldSignature(b))
    assert.notStrictEqual(foldSignature(a), foldSignature(c))
  })
})

// ---------------------------------------------------------------------------------------------
// Properties

const UNIT_WORDS = new Set([
  ..."s sec secs second seconds ms ns us m min mins minute minutes h hr hrs hour hours day days".split(" ")
])
/** Plain words: no hex letters, no digits, not a duration unit. */
const word = fc.stringMatching(/^[g-z]{1,8}$/).filter((w) => !UNIT_WORDS.has(w))

const numberText = fc.oneof(
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map(String),
  fc.nat({ max: 100000 }).map((n) => (n / 100).toFixed(2)),
  fc.bigInt({ min: 0n, max: 10n ** 30n }).map(String)
)
const hexId = (length: number) =>
  fc
    .array(fc.constantFrom(..."0123456789abcdef"), { minLength: length, maxLength: length })
    .map((cs) => cs.join(""))
    .filter((s) => /[a-f]/.test(s))
const rayId = fc.oneof(hexId(40), hexId(56), hexId(32), hexId(12))
const hex4 = fc.integer({ min: 0, max: 0xffff }).map((n) => n.toString(16))
const ipv6 = fc.oneof(
  fc.array(hex4, { minLength: 8, maxLength: 8 }).map((g) => g.join(":")),
  fc
    .tuple(fc.array(hex4, { minLength: 0, maxLength: 3 }), fc.array(hex4, { minLength: 1, maxLength: 3 }))
    .map(([l, r]) => `${l.join(":")}::${r.join(":")}`)
)
const port = fc.integer({ min: 1, max: 65535 })
const ip = fc.oneof(
  fc.ipV4(),
  fc.tuple(fc.ipV4(), port).map(([a, p]) => `${a}:${p}`),
  ipv6,
  fc.tuple(ipv6, port).map(([a, p]) => `[${a}]:${p}`)
)
const timestamp = fc
  .date({ min: new Date("1990-01-01T00:00:00Z"), max: new Date("2090-01-01T00:00:00Z"), noInvalidDate: true })
  .map((d) => d.toISOString())
const duration = fc
  .tuple(fc.nat({ max: 100000 }), fc.constantFrom("s", "ms", "m", "h", "us", " s", " seconds", " minutes"))
  .map(([n, u]) => `${n / 10}${u}`)

/** One segment of a failure text as a pair: equal words, or two draws of the same volatile kind. */
const volatilePair = fc.oneof(
  fc.tuple(numberText, numberText),
  fc.tuple(rayId, rayId),
  fc.tuple(fc.uuid(), fc.uuid()),
  fc.tuple(ip, ip),
  fc.tuple(timestamp, timestamp),
  fc.tuple(duration, duration),
  fc.tuple(fc.nat(), fc.nat()).map(([a, b]) => [`0x${a.toString(16)}`, `0x${b.toString(16)}`] as const)
)
const segmentPair = fc.oneof(
  word.map((w) => [w, w] as const),
  volatilePair
)
const separator = fc.constantFrom(" ", "  ", "\n", "\t ")

const joinWith = (parts: ReadonlyArray<string>, seps: ReadonlyArray<string>) =>
  parts.map((p, i) => (i === 0 ? p : (seps[i % seps.length] ?? " ") + p)).join("")

/** Texts with adversarial adjacency: tokens glued to each other and to placeholder-looking text. */
const noisyText = fc
  .array(
    fc.oneof(
      fc.string({ maxLength: 12 }),
      word,
      numberText,
      rayId,
      fc.uuid(),
      ip,
      timestamp,
      duration,
      fc.constantFrom(
        ":",
        "::",
        ".",
        "-",
        "_",
        "<n>",
        "<id>",
        "<ip>",
        "0x",
        "[",
        "]",
        " ",
        "\n",
        "e",
        "s",
        "abc"
      )
    ),
    { maxLength: 20 }
  )
  .map((xs) => xs.join(""))

describe("foldSignature properties", () => {
  it.prop(
    "folding is idempotent on any text",
    [noisyText],
    ([text]) => {
      const once = foldText(text)
      assert.strictEqual(foldText(once), once)
      assert.strictEqual(foldSignature(signatureBody(foldSignature(text))!), foldSignature(text))
    },
    { fastCheck: { numRuns: 1000 } }
  )

  it.prop(
    "texts differing only in numbers, ids, addresses, timestamps and durations fold equal",
    [
      fc.array(segmentPair, { minLength: 1, maxLength: 14 }),
      fc.array(separator, { minLength: 1, maxLength: 4 })
    ],
    ([segments, seps]) => {
      const a = joinWith(
        segments.map((s) => s[0]),
        seps
      )
      const b = joinWith(
        segments.map((s) => s[1]),
        [" "]
      )
      assert.strictEqual(foldSignature(a), foldSignature(b))
    },
    { fastCheck: { numRuns: 500 } }
  )

  it.prop(
    "texts differing in a word fold differently",
    [fc.array(segmentPair, { minLength: 0, maxLength: 10 }), fc.nat(), word, word],
    ([segments, at, w1, w2]) => {
      fc.pre(w1 !== w2)
      const i = segments.length === 0 ? 0 : at % (segments.length + 1)
      const a = [...segments.slice(0, i).map((s) => s[0]), w1, ...segments.slice(i).map((s) => s[0])]
      const b = [...segments.slice(0, i).map((s) => s[1]), w2, ...segments.slice(i).map((s) => s[1])]
      assert.notStrictEqual(foldSignature(a.join(" ")), foldSignature(b.join(" ")))
    },
    { fastCheck: { numRuns: 500 } }
  )

  it.prop("the folded body holds no digits", [noisyText], ([text]) => {
    assert.notMatch(foldText(text), /\d/)
  })
})

describe("OutputDigest (v1:<sha-256>: the whole output)", () => {
  it("is versioned v1, a sha-256 hex, and ignores blank lines and volatile tokens", () => {
    const a = outputSignature({ stdout: "worker 3 died at 10.0.0.1:6379\n\n", stderr: "boom" })
    const b = outputSignature({ stdout: "worker 17   died at 10.0.0.2:7000", stderr: "\nboom\n" })
    assert.match(a, /^v1:[0-9a-f]{64}$/)
    assert.strictEqual(OUTPUT_SIGNATURE_PREFIX, "v1:")
    assert.strictEqual(a, b)
  })

  it("tells apart outputs whose tails are equal", () => {
    const tail = Array.from({ length: 500 }, (_, i) => `  File "x.py", line ${i}, in f`).join("\n")
    const a = outputSignature({ stderr: `ValueError: cause one\n${tail}` })
    const b = outputSignature({ stderr: `ValueError: cause two\n${tail}` })
    assert.notStrictEqual(a, b)
  })

  it("the stream a line came on matters, the order across streams does not", () => {
    const d1 = new OutputDigest()
    d1.add("stdout", "a")
    d1.add("stderr", "b")
    const d2 = new OutputDigest()
    d2.add("stderr", "b")
    d2.add("stdout", "a")
    assert.strictEqual(d1.signature(), d2.signature())
    assert.notStrictEqual(
      outputSignature({ stdout: "a", stderr: "b" }),
      outputSignature({ stdout: "b", stderr: "a" })
    )
    assert.notStrictEqual(outputSignature({ stdout: "a\nb" }), outputSignature({ stdout: "b\na" }))
  })

  it("keeps memory flat: many lines leave only the per-stream state", () => {
    const d = new OutputDigest()
    for (let i = 0; i < 50_000; i++) d.add(i % 2 === 0 ? "stdout" : "stderr", `line ${i} of the output`)
    assert.strictEqual(d.lines, 50_000)
    // every line folds to the same text: the digest is that of 100k equal lines per stream
    const again = new OutputDigest()
    for (let i = 0; i < 50_000; i++)
      again.add(i % 2 === 0 ? "stderr" : "stdout", `line ${i + 7} of the output`)
    assert.strictEqual(d.signature(), again.signature())
  })
})
