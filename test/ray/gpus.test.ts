/**
 * Clean GPUs on a real head (docs/design.md#clean-gpus), through the bundled CLI, on device files
 * simulated on a host of its own (test/support/fakeGpuDev.ts: /dev/nvidia0..3 over an overlay of
 * /dev). One head for the file, 4 GPUs declared, the slot. A "holder" is a process outside any
 * lease with /dev/nvidia<N> open, as a crashed engine's survivor keeps it.
 *
 * On main before the gate, `lease run --gpus 4` started its command beside such a holder.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, afterEach, assert, beforeAll, describe, it } from "@effect/vitest"
import { cleanEnv, cliPath, runCli } from "../support/cli.js"
import { mountFakeNvidia, onHostOfOwn } from "../support/fakeGpuDev.js"
import { isAlive } from "../support/lease.js"
import { prepareRay, projectRoot, startHead, teardownRay, waitFor } from "../support/ray.js"

const PORT = 6411
const ENV = { HL_RAY_HEAD_PORT: String(PORT) }
const own = onHostOfOwn()

let work = ""
const holders: Array<ChildProcess> = []

beforeAll(async () => {
  if (!own) return
  mountFakeNvidia(4)
  await prepareRay()
  await startHead({ port: PORT, slot: true, numGpus: 4 })
  work = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-gpus-"))
})

afterEach(() => {
  for (const h of holders.splice(0)) {
    try {
      process.kill(-h.pid!, "SIGKILL")
    } catch {
      // gone
    }
  }
})

afterAll(async () => {
  if (!own) return
  await teardownRay()
  if (work !== "") fs.rmSync(work, { recursive: true, force: true })
})

/**
 * A process outside any lease with /dev/nvidia<gpu> open (while the file `until` exists, then it
 * closes it and sleeps on), in a process group of its own that the test kills at the end.
 */
const startHolder = async (gpu: number, until?: string) => {
  const script =
    until === undefined
      ? `exec 3</dev/nvidia${gpu}; exec sleep 300`
      : `exec 3</dev/nvidia${gpu}; while [ -e ${until} ]; do sleep 0.1; done; exec 3<&-; exec sleep 300`
  const h = spawn("sh", ["-c", script], { stdio: "ignore", detached: true })
  holders.push(h)
  await waitFor(`the holder to open /dev/nvidia${gpu}`, () =>
    fs.readdirSync(`/proc/${h.pid}/fd`).some((fd) => {
      try {
        return fs.readlinkSync(`/proc/${h.pid}/fd/${fd}`) === `/dev/nvidia${gpu}`
      } catch {
        return false
      }
    })
  )
  return h.pid!
}

describe.skipIf(!own)("clean GPUs (real head, fake device files on a host of its own)", () => {
  it("a holder outside the lease: gpu_busy naming it after --gpu-clean-timeout, nothing runs, the holder lives", async () => {
    const pid = await startHolder(1)
    const marker = path.join(work, "ran-busy")
    const r = await runCli(
      ["lease", "run", "--gpus", "4", "--gpu-clean-timeout", "2", "--", "touch", marker],
      {
        env: ENV
      }
    )
    assert.strictEqual(r.code, 125, r.stderr)
    assert.match(r.stderr, /gpu_busy: /)
    assert.include(
      r.stderr,
      `GPU 1: pid ${pid} (user ${os.userInfo().username}, sleep 300, via /dev/nvidia1)`
    )
    assert.include(r.stderr, "(hyperloom exit code 16)")
    assert.isFalse(fs.existsSync(marker), "the command must not start")
    assert.isAtLeast(r.ms, 2000)
    assert.isTrue(isAlive(pid), "the holder is never killed")

    // The same with --json: class and holders in the document.
    const j = await runCli(
      ["lease", "run", "--json", "--gpus", "4", "--gpu-clean-timeout", "0", "--", "true"],
      {
        env: ENV
      }
    )
    assert.strictEqual(j.code, 125, j.stderr)
    assert.strictEqual(j.json?.error?.exit_code, 16, j.stdout)
    assert.strictEqual(j.json?.error?.class, "gpu_busy")
    assert.deepStrictEqual(
      j.json?.error?.holders.map((h: { pid: number; gpu: number; via: string }) => [h.pid, h.gpu, h.via]),
      [[pid, 1, "/dev/nvidia1"]]
    )
    assert.isTrue(isAlive(pid))

    // ray doctor lists it under its GPU, beside the CLI contract's fields, in --json and in text.
    const d = await runCli(["ray", "doctor", "--json", "--gpus", "4"], { env: ENV })
    assert.strictEqual(d.code, 0, d.stderr)
    for (const name of ["feasible", "infeasible", "repair", "warnings"]) assert.property(d.json, name)
    assert.isTrue(d.json.gpu_holders.scanned)
    assert.deepStrictEqual(
      d.json.gpu_holders.by_gpu["1"].map((h: { pid: number; via: string }) => [h.pid, h.via]),
      [[pid, "/dev/nvidia1"]]
    )
    const t = await runCli(["ray", "doctor", "--gpus", "4"], { env: ENV })
    assert.include(
      t.stdout,
      `GPU 1: pid ${pid} (user ${os.userInfo().username}, sleep 300, via /dev/nvidia1)`
    )
  })

  it("a holder that lets go within the timeout: the wait is announced at once, then the lease proceeds", async () => {
    const flag = path.join(work, "hold-2")
    fs.writeFileSync(flag, "")
    const pid = await startHolder(2, flag)
    const marker = path.join(work, "ran-after-wait")
    const child = spawn(
      process.execPath,
      [cliPath, "lease", "run", "--gpus", "4", "--gpu-clean-timeout", "120", "--", "touch", marker],
      { cwd: projectRoot, env: cleanEnv(ENV), stdio: ["ignore", "ignore", "pipe"] }
    )
    let stderr = ""
    child.stderr!.on("data", (d) => (stderr += d))
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
    try {
      // The gate says at once that it waits, and for whom; then the holder lets go.
      await waitFor("the gate to announce its wait", () => stderr.includes("waiting up to 120 s"), 120_000)
      assert.include(stderr, `GPU 2: pid ${pid}`)
      assert.isFalse(fs.existsSync(marker), "nothing runs while it waits")
      fs.rmSync(flag)
      assert.strictEqual(await exited, 0, stderr)
    } finally {
      child.kill("SIGKILL")
    }
    assert.isTrue(fs.existsSync(marker))
    assert.isTrue(isAlive(pid), "the holder is never killed")
  })

  it("the release waits until the lease's own processes closed their GPU device files; the next lease finds them free", async () => {
    // CMD leaves a process of its own (its session, another process group) with /dev/nvidia0
    // open for 3 s after CMD ended.
    const pidFile = path.join(work, "left-pid")
    const script = `python3 -c "import os,time; os.setpgid(0,0); f=open('/dev/nvidia0'); open('${pidFile}','w').write(str(os.getpid())); time.sleep(3)" & while [ ! -s ${pidFile} ]; do sleep 0.05; done; exit 0`
    const r = await runCli(["lease", "run", "--gpus", "4", "--", "sh", "-c", script], { env: ENV })
    assert.strictEqual(r.code, 0, r.stderr)
    const left = Number(fs.readFileSync(pidFile, "utf8"))
    const holds = () => {
      try {
        return fs.readdirSync(`/proc/${left}/fd`).some((fd) => {
          try {
            return fs.readlinkSync(`/proc/${left}/fd/${fd}`) === "/dev/nvidia0"
          } catch {
            return false
          }
        })
      } catch {
        return false
      }
    }
    assert.isFalse(holds(), "released only once the lease's own process let go of /dev/nvidia0")
    assert.notInclude(r.stderr, "still hold")
    const next = await runCli(["lease", "run", "--gpus", "4", "--gpu-clean-timeout", "0", "--", "true"], {
      env: ENV
    })
    assert.strictEqual(next.code, 0, next.stderr)
  })
})
