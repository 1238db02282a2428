/**
 * lease run's stdout as a Unix tool's (issue 13 item 4), on a real head:
 * - a reader that does not read (a stuck pipe, a pager left open) never holds the lease after the
 *   command ended: output is queued up to a bound and dropped beyond it with one note;
 * - `lease run -- CMD | head -1`: the reader leaving (EPIPE) stops CMD, releases the lease and
 *   exits 141 quietly, no "Unhandled 'error' event" stack trace;
 * - `--json > /dev/full`: exit 74 and one stderr line, not 0 with the document lost.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { cleanEnv, cliPath, runCli } from "../support/cli.js"
import { prepareRay, projectRoot, startHead, teardownRay, waitFor } from "../support/ray.js"

beforeAll(async () => {
  await prepareRay()
  await startHead({ port: 6421, numCpus: 2, slot: true })
})

afterAll(() => teardownRay())

/** A second lease (the slot is one per host) runs at once: the first one's lease is free. */
const slotIsFree = async () => {
  const r = await runCli(["lease", "run", "--gpus", "0", "--", "true"], { timeoutMs: 60_000 })
  assert.strictEqual(r.code, 0, r.stderr)
}

describe("lease run's stdout never holds the lease", () => {
  it("a reader that never reads: the command ends, the lease is released, output past the bound is dropped with a note", async () => {
    // ~18 MB of output in 1000-character lines, past the 16 MiB that may wait unread.
    const child: ChildProcess = spawn(
      process.execPath,
      [cliPath, "lease", "run", "--gpus", "0", "--", "sh", "-c", 'yes "$(printf %01000d 0)" | head -n 18000'],
      { env: cleanEnv(), cwd: projectRoot, stdio: ["ignore", "pipe", "pipe"] }
    )
    let stderr = ""
    child.stderr!.on("data", (d) => (stderr += d))
    child.stdout!.pause()
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
    try {
      await waitFor(
        "the command to end",
        () => (stderr.includes("command exited with code 0") ? true : undefined),
        90_000
      )
      assert.include(stderr, "is not being read")
      await slotIsFree()
    } finally {
      let bytes = 0
      child.stdout!.on("data", (d: Buffer) => (bytes += d.length))
      child.stdout!.resume()
      assert.strictEqual(await exited, 0, stderr)
      assert.isAbove(bytes, 16 * 1024 * 1024)
    }
  })

  it("CMD | head -1: exit 141, no stack trace, the command stopped and the lease released", async () => {
    const r = spawnSync(
      "bash",
      [
        "-c",
        `"${process.execPath}" "${cliPath}" lease run --gpus 0 -- sh -c 'while :; do echo y; done' | head -1; echo "status \${PIPESTATUS[0]}"`
      ],
      { env: cleanEnv(), cwd: projectRoot, encoding: "utf8", timeout: 90_000 }
    )
    assert.strictEqual(r.stdout, "y\nstatus 141\n", r.stderr)
    assert.notInclude(r.stderr, "Unhandled")
    assert.notInclude(r.stderr, "    at ")
    await slotIsFree()
  })

  it("--json > /dev/full: exit 74 and one line on stderr, not 0 with the document lost", () => {
    const r = spawnSync(
      "bash",
      ["-c", `"${process.execPath}" "${cliPath}" lease run --json --gpus 0 -- true > /dev/full`],
      { env: cleanEnv(), cwd: projectRoot, encoding: "utf8", timeout: 90_000 }
    )
    assert.strictEqual(r.status, 74, r.stderr)
    assert.include(r.stderr, "cannot write to stdout: ENOSPC")
  })
})
