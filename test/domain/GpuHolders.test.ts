import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { describeGpuHolder, GpuBusy, GpuHolderJson, gpuBusyMessage } from "../../src/domain/GpuHolders.js"

// The formats themselves (device files, nvidia-smi, amd-smi) are read by python/hyperloom/gpus.py
// and tested through it (test/python/gpus.test.ts); here only hyperloom's own JSON and words.
const decode = Schema.decodeUnknownSync(GpuHolderJson)

describe("the holders Python reports", () => {
  it("decodes a holder; what a source did not know is null", () => {
    assert.deepStrictEqual(decode({ pid: 5, gpu: 3, via: "amd-smi" }), {
      pid: 5,
      gpu: 3,
      via: "amd-smi",
      user: null,
      command: null,
      memory_mib: null,
      alive: true
    })
  })

  it("gpu_busy names every holder, the wait, and that nothing was killed", () => {
    const holders = [
      decode({
        pid: 10,
        gpu: 0,
        via: "/dev/nvidia0, nvidia-smi",
        user: "alice",
        command: "python3 serve.py",
        memory_mib: 2048
      }),
      decode({ pid: 13, gpu: null, via: "/dev/kfd" })
    ]
    const text = gpuBusyMessage(holders, 30)
    assert.match(text, /^gpu_busy: /)
    assert.include(
      text,
      "GPU 0: pid 10 (user alice, python3 serve.py, 2048 MiB, via /dev/nvidia0, nvidia-smi)"
    )
    assert.include(text, "all AMD GPUs (/dev/kfd): pid 13 (via /dev/kfd)")
    assert.include(text, "30 s")
    assert.include(text, "does not kill")
    assert.notInclude(text, "\n")
    assert.strictEqual(
      describeGpuHolder(decode({ pid: 5, gpu: 3, via: "amd-smi" })),
      "GPU 3: pid 5 (via amd-smi)"
    )
    const busy = new GpuBusy({ holders, waitedSec: 30 })
    assert.strictEqual(busy.message, text)
    assert.strictEqual(busy.class, "gpu_busy")
    assert.match(new GpuBusy({ holders, waitedSec: 30, rank: 1 }).message, /^gpu_busy: rank 1: /)
    // A group rank's node is named: the holders' pids are that node's.
    const node = "0123456789abcdef0123456789abcdef0123456789abcdef01234567"
    assert.match(
      new GpuBusy({ holders, waitedSec: 30, rank: 1, nodeId: node, nodeAddress: "10.0.0.2" }).message,
      /^gpu_busy: rank 1 on node 10\.0\.0\.2 \(0123456789ab…\): the leased GPU\(s\)/
    )
    assert.match(
      new GpuBusy({ holders, waitedSec: 30, nodeId: node }).message,
      /^gpu_busy: on node 0123456789ab…: /
    )
  })
})
