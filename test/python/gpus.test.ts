/**
 * The clean-GPU gate's Python side (docs/design.md#clean-gpus, python/hyperloom/gpus.py) without
 * Ray, on the recorded tool outputs (test/fixtures/gpu) printed by fake `nvidia-smi`/`amd-smi`
 * executables first on PATH: the formats are read once, here; the supervisor waits up to
 * --gpu-clean-timeout for a holder outside the lease, then refuses naming it (gpu_busy on its
 * status pipe, CMD never started, the holder never signalled); a holder that lets go in time lets
 * CMD start; after CMD, the reclaim wait holds the exit back while a dead context of the lease is
 * still listed. The device-file half runs on a host of its own: test/ray/gpus.test.ts.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, afterEach, assert, beforeAll, describe, it } from "@effect/vitest"
import { appLine, type FakeGpuTools, fakeGpuTools, fixture } from "../support/fakeGpuTools.js"
import { anyPython, isAlive, pythonDir, supervisorArgv } from "../support/lease.js"
import { waitFor } from "../support/ray.js"

let tools: FakeGpuTools
let amdTools: FakeGpuTools
let work = ""
const holders: Array<ChildProcess> = []

beforeAll(() => {
  tools = fakeGpuTools(["nvidia-smi"])
  amdTools = fakeGpuTools(["amd-smi"])
  work = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-gpus-"))
})
afterAll(() => {
  tools.remove()
  amdTools.remove()
  fs.rmSync(work, { recursive: true, force: true })
})
afterEach(() => {
  tools.setApps(undefined)
  for (const h of holders.splice(0)) h.kill("SIGKILL")
})

interface Holder {
  pid: number
  gpu: number | null
  via: string
  user: string | null
  command: string | null
  memory_mib: number | null
  alive: boolean
}

/** `python -I PYDIR gpus --json` with `PATH`. */
const scan = (PATH: string): { holders: Array<Holder>; unreadable: number } => {
  const r = spawnSync(anyPython, ["-I", pythonDir, "gpus", "--json"], {
    env: { ...process.env, PATH },
    encoding: "utf8"
  })
  assert.strictEqual(r.status, 0, r.stderr)
  return JSON.parse(r.stdout)
}

/** A process outside any lease: it merely exists (the fake tool says it holds a GPU). */
const startHolder = () => {
  const h = spawn("sleep", ["300"], { stdio: "ignore" })
  holders.push(h)
  return h.pid!
}

interface Supervised {
  code: number | null
  status: string[]
  stderr: string
  ms: number
}

/** The lines the supervisor writes on its status pipe, as they come. */
const statusLines = (pipe: NodeJS.ReadableStream): string[] => {
  const status: string[] = []
  let buf = ""
  pipe.on("data", (d) => {
    buf += d
    const lines = buf.split("\n")
    buf = lines.pop()!
    status.push(...lines)
  })
  return status
}

const supervise = (args: ReadonlyArray<string>, during?: (status: string[]) => Promise<void>) => {
  const t0 = Date.now()
  const child = spawn(anyPython, [...supervisorArgv, "--status-fd", "3", ...args], {
    stdio: ["ignore", "ignore", "pipe", "pipe"],
    env: { ...process.env, PATH: tools.path }
  })
  let stderr = ""
  const status = statusLines(child.stdio[3] as NodeJS.ReadableStream)
  child.stderr!.on("data", (d) => (stderr += d))
  const done = new Promise<Supervised>((resolve) =>
    child.on("close", (code) => resolve({ code, status, stderr, ms: Date.now() - t0 }))
  )
  return during === undefined ? done : during(status).then(() => done)
}

describe("the formats, read once (python/hyperloom/gpus.py)", () => {
  it("nvidia-smi --query-compute-apps: each line's pid, GPU index (from its UUID), name and MiB; [N/A] and [Insufficient Permissions] are unknown", () => {
    tools.setApps(fixture("nvidia-smi-compute-apps.csv"))
    const found = scan(tools.path).holders
    assert.deepStrictEqual(
      found.map((h) => [h.pid, h.gpu, h.via, h.memory_mib]),
      [
        [48213, 0, "nvidia-smi", 20480],
        [51990, 0, "nvidia-smi", null],
        [48213, 1, "nvidia-smi", 20478],
        [51007, 1, "nvidia-smi", 71234]
      ]
    )
    // The tool's name where this node's /proc does not know the pid (another PID namespace, gone).
    const engine = found.find((h) => h.pid === 51007)!
    if (!engine.alive) assert.strictEqual(engine.command, "VLLM::EngineCore")
    const hidden = found.find((h) => h.pid === 51990)!
    if (!hidden.alive) assert.isNull(hidden.command)
  })

  it("an idle nvidia-smi (no output) is no holder", () => {
    tools.setApps(undefined)
    assert.deepStrictEqual(scan(tools.path).holders, [])
  })

  it("amd-smi process --json: each process with its GPU and VRAM; 'No running processes detected' (also with a non-zero exit) is idle", () => {
    // What amd-smi lists only: with no nvidia-smi on PATH every holder of an NVIDIA device file
    // on the host counts too, and a real-Ray test running beside this one holds fake
    // /dev/nvidia* files in a host of its own (visible in this /proc).
    const listed = (PATH: string) => scan(PATH).holders.filter((h) => h.via.split(", ").includes("amd-smi"))
    amdTools.setAmd(fixture("amd-smi-process.json"))
    assert.deepStrictEqual(
      listed(amdTools.path).map((h) => [h.pid, h.gpu, h.via, h.memory_mib]),
      [[61204, 0, "amd-smi", 20480]]
    )
    amdTools.setAmd(fixture("amd-smi-process-idle.json"), 2)
    assert.deepStrictEqual(listed(amdTools.path), [])
    amdTools.setAmd("No running processes detected\n", 2)
    assert.deepStrictEqual(listed(amdTools.path), [])
  })
})

describe("the supervisor's gate (before CMD starts)", () => {
  it("a holder outside the lease on a leased GPU: waits --gpu-clean-timeout, then gpu_busy naming it; CMD never starts; the holder lives on", async () => {
    const pid = startHolder()
    tools.setApps(appLine(pid, 1, "python3", 1234))
    const marker = path.join(work, "ran-busy")
    const r = await supervise(["--gpus=0,1", "--gpu-clean-timeout", "1.5", "--", "touch", marker])
    assert.strictEqual(r.code, 125, r.stderr)
    assert.isFalse(fs.existsSync(marker), "CMD must not start")
    assert.isAtLeast(r.ms, 1400)
    const busy = r.status.find((l) => l.startsWith("gpu_busy "))
    assert.isDefined(busy, r.status.join("\n"))
    const doc = JSON.parse(busy!.slice("gpu_busy ".length)) as { holders: Array<Holder>; waited_sec: number }
    assert.deepStrictEqual(
      doc.holders.map((h) => [h.pid, h.gpu, h.via, h.memory_mib, h.user]),
      [[pid, 1, "nvidia-smi", 1234, os.userInfo().username]]
    )
    assert.include(doc.holders[0]!.command!, "sleep 300")
    assert.isAtLeast(doc.waited_sec, 1.4)
    assert.deepStrictEqual(r.status.slice(-2), ["failed", "exit 125"])
    assert.isTrue(r.status[0]!.startsWith("gpu_wait "), "told at once that it waits")
    assert.isTrue(isAlive(pid), "the holder is never killed")
  })

  it("a holder that lets go within the timeout: CMD starts", async () => {
    const pid = startHolder()
    tools.setApps(appLine(pid, 0, "python3", 99))
    const marker = path.join(work, "ran-after-wait")
    const r = await supervise(
      ["--gpus=0", "--gpu-clean-timeout", "30", "--", "touch", marker],
      async (status) => {
        await waitFor(
          "the gate to see the holder",
          () => status.some((l) => l.startsWith("gpu_wait ")),
          20_000,
          50
        )
        tools.setApps(undefined) // it let go
      }
    )
    assert.strictEqual(r.code, 0, r.stderr)
    assert.isTrue(fs.existsSync(marker))
    assert.isTrue(r.status.some((l) => l.startsWith("pid ")))
    assert.isFalse(r.status.some((l) => l.startsWith("gpu_busy")))
    assert.isTrue(isAlive(pid))
  })

  it("a holder on another GPU, or a lease without GPUs: CMD starts at once", async () => {
    const pid = startHolder()
    tools.setApps(appLine(pid, 1, "python3", 99))
    const other = await supervise(["--gpus=0", "--gpu-clean-timeout", "30", "--", "true"])
    assert.strictEqual(other.code, 0, other.stderr)
    assert.isBelow(other.ms, 15_000)
    assert.isFalse(other.status.some((l) => l.startsWith("gpu_")))
    const none = await supervise(["--gpu-clean-timeout", "30", "--", "true"])
    assert.strictEqual(none.code, 0)
    assert.isFalse(none.status.some((l) => l.startsWith("gpu_")))
  })

  it("a stop while it waits ends it at once (143), CMD never started", async () => {
    const pid = startHolder()
    tools.setApps(appLine(pid, 0, "python3", 99))
    const marker = path.join(work, "ran-stopped")
    const t0 = Date.now()
    const child = spawn(
      anyPython,
      [...supervisorArgv, "--gpus=0", "--gpu-clean-timeout", "60", "--", "touch", marker],
      {
        stdio: "ignore",
        env: { ...process.env, PATH: tools.path }
      }
    )
    const code = await new Promise<number | null>((resolve) => {
      setTimeout(() => child.kill("SIGTERM"), 1500)
      child.on("close", (c) => resolve(c))
    })
    assert.strictEqual(code, 143)
    assert.isBelow(Date.now() - t0, 20_000)
    assert.isFalse(fs.existsSync(marker))
  })
})

describe("a group rank's hold (--hold-fd): no rank starts while another rank's GPUs are held", () => {
  /** The supervisor with fd 4 as its hold pipe; `during` gets the status lines and the pipe. */
  const held = (
    args: ReadonlyArray<string>,
    during: (status: string[], hold: NodeJS.WritableStream, supervisor: ChildProcess) => Promise<void>
  ) => {
    const child = spawn(anyPython, [...supervisorArgv, "--status-fd", "3", "--hold-fd", "4", ...args], {
      stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"],
      env: { ...process.env, PATH: tools.path }
    })
    const status = statusLines(child.stdio[3] as NodeJS.ReadableStream)
    let stderr = ""
    child.stderr!.on("data", (d) => (stderr += d))
    const hold = child.stdio[4] as NodeJS.WritableStream
    hold.on("error", () => undefined)
    const done = new Promise<{ code: number | null; stderr: string }>((resolve) =>
      child.on("close", (code) => resolve({ code, stderr }))
    )
    return during(status, hold, child).then(() => done.then((r) => ({ ...r, status })))
  }

  it("after its gate passed: 'clean', then CMD starts only on the bridge's word", async () => {
    const marker = path.join(work, "ran-held")
    const r = await held(
      ["--gpus=0", "--gpu-clean-timeout", "5", "--", "touch", marker],
      async (status, hold) => {
        await waitFor("the hold's clean report", () => status.includes("clean"), 20_000, 20)
        await new Promise((r) => setTimeout(r, 500))
        assert.isFalse(fs.existsSync(marker), "CMD waits for the word")
        assert.isFalse(status.some((l) => l.startsWith("pid ")))
        hold.write("g")
      }
    )
    assert.strictEqual(r.code, 0, r.stderr)
    assert.isTrue(fs.existsSync(marker))
    assert.deepStrictEqual(r.status[0], "clean")
    assert.isTrue(r.status.some((l) => l.startsWith("pid ")))
  })

  it("a holder outside the lease: gpu_busy and never 'clean'; the end of the hold pipe or TERM while held: CMD never starts (143)", async () => {
    const pid = startHolder()
    tools.setApps(appLine(pid, 0, "python3", 99))
    const busy = await held(["--gpus=0", "--gpu-clean-timeout", "0.5", "--", "true"], async () => undefined)
    assert.strictEqual(busy.code, 125, busy.stderr)
    assert.isFalse(busy.status.includes("clean"))
    assert.isTrue(busy.status.some((l) => l.startsWith("gpu_busy ")))
    tools.setApps(undefined)
    for (const end of ["eof", "term"] as const) {
      const marker = path.join(work, `ran-held-${end}`)
      const r = await held(
        ["--gpus=0", "--gpu-clean-timeout", "30", "--", "touch", marker],
        async (status, hold, supervisor) => {
          await waitFor("the hold's clean report", () => status.includes("clean"), 20_000, 20)
          if (end === "eof") hold.end()
          else supervisor.kill("SIGTERM")
        }
      )
      assert.strictEqual(r.code, 143, `${end}: ${r.stderr}`)
      assert.isFalse(fs.existsSync(marker), `${end}: CMD never started`)
      assert.deepStrictEqual(r.status.slice(-2), ["failed", "exit 143"])
    }
  })
})

describe("the reclaim wait (after CMD ends)", () => {
  it("holds the exit back while a dead context of the lease is still listed on its GPU, bounded", async () => {
    // CMD "leaves" a dead pid's context listed (its memory being freed): the fake lists it once CMD ran.
    const apps = path.join(tools.dir, "apps")
    const dead = 4_000_000 // above any pid_max: never alive
    const line = appLine(dead, 0, "python3", 5000).trim()
    let ranAt = 0
    const cmd = ["--gpus=0", "--gpu-clean-timeout", "30", "--", "sh", "-c", `echo '${line}' > ${apps}`]
    const r = await supervise(cmd, async (status) => {
      await waitFor("CMD to run", () => fs.existsSync(apps), 20_000, 20)
      ranAt = Date.now()
      await new Promise((r) => setTimeout(r, 1500))
      assert.isFalse(
        status.some((l) => l.startsWith("exit")),
        "no exit while the GPU is still held"
      )
      tools.setApps(undefined) // freed
    })
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(r.status.at(-1), "exit 0")
    assert.isAtLeast(Date.now() - ranAt, 1400)
  })
})
