/** The readable `ray` command output (src/cli/Render.ts): what an operator reads beside `ray status`. */
import { assert, describe, it } from "@effect/vitest"
import { renderResources } from "../../src/cli/Render.js"

describe("renderResources", () => {
  it("reads used/total as `ray status` does: a held slot is 1/1, a free one 0/1", () => {
    const total = { CPU: 8, GPU: 2, serving_slot: 1, memory: 4 * 1024 ** 3, "node:10.0.0.1": 1 }
    assert.strictEqual(
      renderResources(total, { CPU: 7, GPU: 0, serving_slot: 0, memory: 3 * 1024 ** 3 }),
      "CPU 1/8, GPU 2/2, memory 1.0 GiB/4.0 GiB, serving_slot 1/1"
    )
    assert.strictEqual(
      renderResources(total, total),
      "CPU 0/8, GPU 0/2, memory 0 B/4.0 GiB, serving_slot 0/1"
    )
  })
})
