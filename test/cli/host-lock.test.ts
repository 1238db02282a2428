/**
 * The shipped CLI (bundled by scripts/bundle-cli.mjs, as the package's bin) always takes the
 * host's one Ray lock (docs/design.md#one-repairer-per-host): no variable moves it elsewhere. The
 * unit tests' own bundles take a lock of their own name (test/support/bundle.ts), fixed at
 * bundle time, which this build does not have.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect } from "effect"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { bundleCli } from "../../scripts/bundle-cli.mjs"
import { hostDir } from "../../src/services/LockFile.js"
import { HOST_LOCK_FILE } from "../../src/services/WorkGate.js"
import { canActAsForeignUser, startSquatter } from "../support/foreignUser.js"

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

/** The name the host's lock had as an abstract socket (anyone could bind it first). */
const OLD_HOST_LOCK_NAME = "hyperloom-ray-host-lock"

/** The host's lock file, as the shipped CLI takes it. */
const hostLockPath = async () => path.join(await Effect.runPromise(hostDir()), HOST_LOCK_FILE)

/** Holds the host's lock as another hyperloom process would; undefined if someone else holds it. */
const holdHostLock = async () => {
  const file = await hostLockPath()
  const child = spawn(
    process.execPath,
    [
      "-e",
      `const fs = require("node:fs"), cp = require("node:child_process")
       const fd = fs.openSync(process.argv[1], fs.constants.O_RDWR | fs.constants.O_CREAT, 0o600)
       const r = cp.spawnSync("flock", ["-n", "-x", "3"], { stdio: ["ignore", "ignore", "ignore", fd] })
       console.log(r.status === 0 ? "ready" : "held")
       setTimeout(() => {}, 600000)`,
      file
    ],
    { stdio: ["ignore", "pipe", "inherit"] }
  )
  const line = await new Promise<string>((resolve) => child.stdout.once("data", (d) => resolve(String(d))))
  if (line.startsWith("ready")) return { close: () => child.kill("SIGKILL") }
  child.kill("SIGKILL")
  return undefined
}

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

describe("a foreign local user and the host's lock (docs/design.md#fair-queue)", () => {
  it.skipIf(!canActAsForeignUser())(
    "uid 65534 claiming the host's lock first is neither waited for nor quoted",
    async () => {
      // What the host's lock was (an abstract socket name) and what it is (a file in a directory of
      // our own): the squatter binds the one and tries to flock the other.
      const squat = await startSquatter([OLD_HOST_LOCK_NAME], [await hostLockPath()])
      const fakeRay = path.join(work, "ray-missing")
      fs.writeFileSync(fakeRay, "#!/bin/sh\nexit 1\n", { mode: 0o755 })
      try {
        assert.notInclude(squat.got.join("\n"), "locked ", "the foreign user holds the host's lock file")
        const child = spawn(process.execPath, [cli, "ray", "ensure", "--gpus", "0"], {
          env: { ...process.env, NODE_OPTIONS: "", HYPERLOOM_RAY: fakeRay },
          stdio: ["ignore", "pipe", "pipe"]
        })
        let stderr = ""
        child.stderr.on("data", (d) => (stderr += d))
        const ended = await new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(false), 15_000)
          child.on("exit", () => {
            clearTimeout(timer)
            resolve(true)
          })
        })
        child.kill("SIGKILL")
        assert.notInclude(stderr, "made-up story", "the squatter's story was quoted to the user")
        assert.isTrue(ended, `the CLI waited behind the squatter: ${stderr}`)
      } finally {
        squat.child.kill("SIGKILL")
      }
    },
    30_000
  )
})
