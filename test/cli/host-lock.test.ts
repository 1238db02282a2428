/**
 * The shipped CLI (bundled by scripts/bundle-cli.mjs, as the package's bin) always takes the
 * host's one Ray lock (SPEC §9 "one repairer per host"): no variable moves it elsewhere. The
 * unit tests' own bundles take a lock of their own name (test/support/bundle.ts), fixed at
 * bundle time, which this build does not have.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { bundleCli } from "../../scripts/bundle-cli.mjs"
import { HOST_LOCK_NAME } from "../../src/services/WorkGate.js"

let work: string
let cli: string

beforeAll(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-host-lock-"))
  cli = path.join(work, "hyperloom.mjs")
  await bundleCli({ outfile: cli })
}, 120_000)

afterAll(() => {
  fs.rmSync(work, { recursive: true, force: true })
})

/** Holds the host's lock as another hyperloom process would; undefined if someone else holds it. */
const holdHostLock = () =>
  new Promise<net.Server | undefined>((resolve) => {
    const server = net.createServer((socket) => socket.end())
    server.once("error", () => resolve(undefined))
    server.listen({ path: `\0${HOST_LOCK_NAME}`, exclusive: true }, () => resolve(server))
  })

describe("the shipped CLI and the host's lock", () => {
  it("waits for the host's lock whatever HYPERLOOM_TEST_HOST_LOCK says", async (ctx) => {
    const lock = await holdHostLock()
    if (lock === undefined) ctx.skip() // a real hyperloom process holds it right now
    const fakeRay = path.join(work, "ray")
    fs.writeFileSync(fakeRay, "#!/bin/sh\nexit 1\n", { mode: 0o755 })
    const child = spawn(process.execPath, [cli, "ray", "ensure", "--gpus", "0"], {
      env: {
        ...process.env,
        NODE_OPTIONS: "",
        HYPERLOOM_RAY: fakeRay,
        HYPERLOOM_TEST_HOST_LOCK: "elsewhere"
      },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stderr = ""
    child.stderr.on("data", (d) => (stderr += d))
    try {
      const waited = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), 15_000)
        child.stderr.on("data", () => {
          if (stderr.includes("which is working on the Ray head")) {
            clearTimeout(timer)
            resolve(true)
          }
        })
        child.on("exit", () => {
          clearTimeout(timer)
          resolve(false)
        })
      })
      assert.isTrue(waited, `the CLI did not wait for the host's lock: ${stderr}`)
    } finally {
      child.kill("SIGKILL")
      lock?.close()
    }
  })
})
