import * as fs from "node:fs"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import {
  describeGpuHolder,
  foreignHolders,
  type GpuHolder,
  gpuBusyMessage,
  gpuOfDevicePath,
  holdersFromNvidiaSmi,
  parseAmdSmiProcesses,
  parseNvidiaComputeApps,
  parseNvidiaGpuIndex,
  visibleGpuIndices
} from "../../src/domain/GpuHolders.js"

const fixture = (name: string) =>
  fs.readFileSync(path.join(import.meta.dirname, "../fixtures/gpu", name), "utf8")

describe("device files", () => {
  it("per-GPU device files name their GPU; the shared control files name none", () => {
    assert.strictEqual(gpuOfDevicePath("/dev/nvidia0"), 0)
    assert.strictEqual(gpuOfDevicePath("/dev/nvidia7"), 7)
    assert.strictEqual(gpuOfDevicePath("/dev/dri/renderD129"), 1)
    assert.strictEqual(gpuOfDevicePath("/dev/kfd"), "shared")
    for (const shared of [
      "/dev/nvidiactl",
      "/dev/nvidia-uvm",
      "/dev/nvidia-uvm-tools",
      "/dev/dri/card0",
      "/dev/null"
    ]) {
      assert.isUndefined(gpuOfDevicePath(shared), shared)
    }
  })

  it("CUDA_VISIBLE_DEVICES gives the indices (UUIDs skipped)", () => {
    assert.deepStrictEqual(visibleGpuIndices("0,2"), [0, 2])
    assert.deepStrictEqual(visibleGpuIndices(""), [])
    assert.deepStrictEqual(visibleGpuIndices(undefined), [])
    assert.deepStrictEqual(visibleGpuIndices("GPU-5e5c2c7e,1"), [1])
  })
})

describe("nvidia-smi --query-compute-apps", () => {
  const apps = parseNvidiaComputeApps(fixture("nvidia-smi-compute-apps.csv"))
  const index = parseNvidiaGpuIndex(fixture("nvidia-smi-gpus.csv"))

  it("reads every line: pid, name, uuid, MiB; [N/A] and [Insufficient Permissions] are unknown", () => {
    assert.strictEqual(apps.length, 4)
    assert.deepStrictEqual(apps[2], {
      pid: 51007,
      processName: "VLLM::EngineCore",
      gpuUuid: "GPU-a1f3b0c2-1d2e-4f5a-8b9c-3d4e5f6a7b8c",
      usedMemoryMiB: 71234
    })
    assert.isUndefined(apps[3]!.processName)
    assert.isUndefined(apps[3]!.usedMemoryMiB)
  })

  it("an idle host prints nothing: no holders", () => {
    assert.deepStrictEqual(parseNvidiaComputeApps(""), [])
    assert.deepStrictEqual(parseNvidiaComputeApps("\n"), [])
  })

  it("maps each uuid to the index CUDA_VISIBLE_DEVICES uses", () => {
    const holders = holdersFromNvidiaSmi(apps, index)
    assert.deepStrictEqual(
      holders.map((h) => [h.pid, h.gpu]),
      [
        [48213, 0],
        [48213, 1],
        [51007, 1],
        [51990, 0]
      ]
    )
  })
})

describe("amd-smi process --json", () => {
  it("reads each process with its GPU and VRAM", () => {
    const holders = parseAmdSmiProcesses(fixture("amd-smi-process.json"))
    assert.deepStrictEqual(holders, [
      { pid: 61204, gpu: 0, via: "amd-smi", command: "python3", memoryMiB: 20480 }
    ])
  })

  it("'No running processes detected' is idle (no holder), not an unreadable answer", () => {
    assert.deepStrictEqual(parseAmdSmiProcesses(fixture("amd-smi-process-idle.json")), [])
  })

  it("text that is not the document is undefined (could not tell)", () => {
    assert.isUndefined(parseAmdSmiProcesses("No running processes detected"))
    assert.isUndefined(parseAmdSmiProcesses("{}"))
  })
})

describe("the holders that matter to a lease", () => {
  const holders: ReadonlyArray<GpuHolder> = [
    { pid: 10, gpu: 0, via: "/dev/nvidia0", user: "alice", command: "python3 serve.py" },
    { pid: 10, gpu: 0, via: "nvidia-smi", command: "/usr/bin/python3", memoryMiB: 2048 },
    { pid: 11, gpu: 1, via: "/dev/nvidia1" },
    { pid: 12, gpu: 0, via: "/dev/nvidia0" },
    { pid: 13, gpu: undefined, via: "/dev/kfd" }
  ]

  it("on a leased GPU, outside the lease, one entry per pid and GPU with what each source knew", () => {
    const found = foreignHolders(holders, [0], new Set([12]))
    assert.deepStrictEqual(found, [
      { pid: 13, gpu: undefined, via: "/dev/kfd" },
      {
        pid: 10,
        gpu: 0,
        via: "/dev/nvidia0, nvidia-smi",
        user: "alice",
        command: "python3 serve.py",
        memoryMiB: 2048
      }
    ])
  })

  it("none when the lease's GPUs are free of others", () => {
    assert.deepStrictEqual(foreignHolders(holders.slice(0, 4), [2], new Set()), [])
  })

  it("gpu_busy names every holder, the wait, and that nothing was killed", () => {
    const text = gpuBusyMessage(foreignHolders(holders, [0], new Set([12])), 30)
    assert.match(text, /^gpu_busy: /)
    assert.include(text, "pid 10 (user alice, python3 serve.py, 2048 MiB, via /dev/nvidia0, nvidia-smi)")
    assert.include(text, "pid 13")
    assert.include(text, "30 s")
    assert.include(text, "does not kill")
    assert.strictEqual(describeGpuHolder({ pid: 5, gpu: 3, via: "amd-smi" }), "GPU 3: pid 5 (via amd-smi)")
  })
})
