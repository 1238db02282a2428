/**
 * A tie a person can read (issue 33 item 5): what differs between tied combinations is named first
 * and whole; what they share comes after and is the only part ever cut.
 */
import { assert, describe, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { differing, labelDifferingFirst, pick, tieNames } from "../../src/domain/Sweep/Best.js"

const LONG = "meta-llama/Llama-3.1-70B-Instruct-with-a-very-long-local-path-name"
const a = { model: LONG, "max-num-seqs": "8", "max-model-len": "4096", gpu_memory_utilization: "0.9" }
const b = { ...a, gpu_memory_utilization: "0.85" }

describe("a tie a person can read", () => {
  it("the params that differ, and those shared", () => {
    assert.deepStrictEqual(differing([a, b]), {
      differ: ["gpu_memory_utilization"],
      same: ["model", "max-num-seqs", "max-model-len"]
    })
    assert.deepStrictEqual(pick(a, ["gpu_memory_utilization"]), { gpu_memory_utilization: "0.9" })
  })

  it("the tie names each combination by what differs, whole; the shared params once, after", () => {
    const t = tieNames([
      { combination: 1, params: a },
      { combination: 0, params: b }
    ])
    assert.strictEqual(t.refs.get(1), "#1 (gpu_memory_utilization=0.9)")
    assert.strictEqual(t.refs.get(0), "#0 (gpu_memory_utilization=0.85)")
    assert.strictEqual(
      t.tail,
      `; they differ only in gpu_memory_utilization (alike: model=${LONG} max-num-seqs=8 max-model-len=4096)`
    )
  })

  it("a label cut to fit keeps the differing params whole, first", () => {
    const label = labelDifferingFirst(a, ["gpu_memory_utilization"], 60)
    assert.isTrue(label.startsWith("gpu_memory_utilization=0.9 model=meta-llama/"), label)
    assert.strictEqual(label.length, 60)
    assert.isTrue(label.endsWith("…"))
    // nothing to cut: the whole label, the differing first
    assert.strictEqual(labelDifferingFirst({ x: "1", y: "2" }, ["y"], 60), "y=2 x=1")
  })

  it.prop(
    "whatever the values, every differing param is shown whole and the label fits when it can",
    [
      fc.array(fc.string({ minLength: 1, maxLength: 80 }), { minLength: 2, maxLength: 5 }),
      fc.integer({ min: 0, max: 4 })
    ],
    ([values, at]) => {
      const names = values.map((_, i) => `p${i}`)
      const one = Object.fromEntries(names.map((n, i) => [n, values[i]!]))
      const k = names[at % names.length]!
      const two = { ...one, [k]: `${one[k]}x` }
      const { differ } = differing([one, two])
      const label = labelDifferingFirst(two, differ, 60)
      const whole = `${k}=${two[k]}`
      return label.startsWith(whole) && (whole.length + 2 > 60 || label.length <= 60)
    }
  )
})
