/**
 * Containment (docs/design.md#contained, issue 13 items 1, 2 and 5) on one real head, through the
 * bundled CLI: whatever a leased command starts is gone when its lease is released, also what
 * left its process group or session (setsid, GNU timeout, start_new_session, a double-forked
 * daemon); a command that signals its own process group does not take its supervision with it;
 * a serving attempt whose session disk fills still ends. Each test failed on the previous main:
 * the escapes outlived the lease, the signals killed the supervisor and keeper (the lease ended
 * while the command ran on), the full disk held the lease forever.
 */
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { cleanEnv, cliPath, runCli } from "../support/cli.js"
import {
  escapingLines,
  markerSleep,
  pidsRunning,
  pidsWithArg,
  selfSignalCode,
  waitGone
} from "../support/lease.js"
import { prepareRay, projectRoot, startHead, teardownRay, waitFor } from "../support/ray.js"

const PORT = 6409

/** Every marker's processes, for a message. */
const alive = (markers: ReadonlyArray<string>) =>
  markers.flatMap((m) => pidsWithArg(m).map((p) => `${m}:${p}`))

const escapes = escapingLines

/**
 * `lease run` in the background of a command that starts an escape of each kind, echoes "up" and
 * sleeps; once it said so and every escape runs.
 */
const startEscaping = async () => {
  const m = [markerSleep(), markerSleep(), markerSleep(), markerSleep()]
  const child = spawn(
    process.execPath,
    [cliPath, "lease", "run", "--gpus", "1", "--", "sh", "-c", `${escapes(m)}\necho up; exec sleep 300`],
    { env: cleanEnv(), cwd: projectRoot, stdio: ["ignore", "pipe", "pipe"] }
  )
  let out = ""
  let err = ""
  child.stdout.on("data", (d) => (out += d))
  child.stderr.on("data", (d) => (err += d))
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  await waitFor(
    "the command and its escapes",
    () => (out.includes("up") && alive(m).length >= 4 ? true : undefined),
    60_000
  )
  return { m, child, exited, stderr: () => err }
}

describe("containment on a real head", () => {
  beforeAll(async () => {
    await prepareRay()
    await startHead({ port: PORT, slot: true, numGpus: 1 })
  }, 120_000)
  afterAll(async () => {
    await teardownRay()
  }, 120_000)

  it("escapes of every kind (setsid, timeout, start_new_session, a double fork) are gone when the command ends", async () => {
    const m = [markerSleep(), markerSleep(), markerSleep(), markerSleep()]
    const r = await runCli(
      ["lease", "run", "--gpus", "1", "--", "sh", "-c", `${escapes(m)}\nsleep 1; echo up`],
      {
        timeoutMs: 90_000
      }
    )
    const left = alive(m)
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(r.stdout.trim(), "up")
    assert.deepStrictEqual(left, [], "nothing the command started runs once the lease is released")
  })

  it("Ctrl-C of lease run: the escapes of a running command are gone before the CLI exits", async () => {
    const { m, child, exited } = await startEscaping()
    child.kill("SIGINT")
    await exited
    assert.deepStrictEqual(alive(m), [], "every escape is gone when the CLI has exited")
  })

  it("SIGKILL of the lease bridge: when the CLI has exited, the escapes are gone and the slot is free again, no other lease needed", async () => {
    const { m, exited, stderr } = await startEscaping()
    const bridges = pidsRunning("bridge")
    assert.strictEqual(bridges.length, 1, "one lease bridge")
    process.kill(bridges[0]!, "SIGKILL")
    assert.strictEqual(await exited, 125, stderr())
    assert.deepStrictEqual(alive(m), [], "every escape is gone when the CLI has exited")
    const status = await runCli(["ray", "status", "--json"])
    const slot = JSON.parse(status.stdout).nodes[0].serving_slot
    assert.strictEqual(slot.held, 0, `the slot is free: ${status.stdout}\n${stderr()}`)
    assert.include(stderr(), "ending what is left of its lease")
  })

  it("baseline run --server: an engine that leaves its group (under timeout, os.setsid(), start_new_session) is gone when the run ends", async () => {
    const m = [markerSleep(), markerSleep(), markerSleep()]
    const tag = `hl-escape-engine-${process.pid}`
    // The engine's own helpers, as real engines start them: GNU timeout (a group of its own), a
    // worker that calls os.setsid(), a child started with start_new_session=True (torchrun, SGLang).
    const server = [
      `timeout 300 sleep ${m[0]} &`,
      `python3 -c 'import os, sys; os.setsid(); os.execvp("sleep", ["sleep", sys.argv[1]])' ${m[1]} &`,
      `python3 -c 'import subprocess, sys; subprocess.Popen(["sleep", sys.argv[1]], start_new_session=True)' ${m[2]}`,
      `exec ${process.execPath} ${path.join(projectRoot, "examples/fake-engine.mjs")} --load-sec 0 --tag=${tag}`
    ].join("\n")
    const session = fs.mkdtempSync(path.join(os.tmpdir(), "hl-escape-"))
    try {
      const r = await runCli(
        [
          "baseline",
          "run",
          "--session",
          session,
          "--gpus",
          "1",
          "--server",
          server,
          "--",
          process.execPath,
          "examples/fake-bench-client.mjs",
          "--num-prompts",
          "4",
          "--output-len",
          "8"
        ],
        { timeoutMs: 120_000 }
      )
      const left = alive(m)
      assert.strictEqual(r.code, 0, r.stderr)
      assert.deepStrictEqual(left, [], "nothing the engine started runs once the run has ended")
      assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [])
    } finally {
      fs.rmSync(session, { recursive: true, force: true })
    }
  })

  for (const sig of ["SIGUSR2", "SIGALRM", "SIGQUIT", "SIGRTMIN"]) {
    it(`a command that sends ${sig} to its own process group keeps its supervision; nothing outlives it`, async () => {
      const marker = markerSleep()
      // The command ignores the signal (so do its children), sends it to its whole group, lives on.
      const code = selfSignalCode(sig, 1.5)
      const r = await runCli(["lease", "run", "--gpus", "1", "--", "python3", "-c", code, marker], {
        timeoutMs: 90_000
      })
      assert.strictEqual(r.code, 0, `exit ${r.code}: ${r.stderr}`)
      assert.strictEqual(r.stdout.trim(), "survived")
      assert.deepStrictEqual(pidsWithArg(marker), [])
    })
  }

  it("ray doctor says the containment a lease really gets (its command in a cgroup of its own, or not)", async () => {
    const doctor = await runCli(["ray", "doctor", "--json", "--gpus", "1"], { timeoutMs: 60_000 })
    const mode = JSON.parse(doctor.stdout).containment.mode
    assert.include(["cgroup", "subreaper"], mode)
    const r = await runCli(["lease", "run", "--gpus", "1", "--", "cat", "/proc/self/cgroup"], {
      timeoutMs: 60_000
    })
    assert.strictEqual(r.code, 0, r.stderr)
    const own = r.stdout.split("\n").find((l) => l.startsWith("0::")) ?? ""
    assert.strictEqual(
      /\/hyperloom-lease-hl-[0-9a-f]{16}$/.test(own),
      mode === "cgroup",
      `doctor: ${mode}; the command's cgroup: ${own}`
    )
    const text = await runCli(["ray", "doctor", "--gpus", "1"], { timeoutMs: 60_000 })
    assert.match(
      text.stdout,
      mode === "cgroup" ? /^contain {2}a cgroup per lease/m : /^contain {2}the supervisor as subreaper only/m
    )
  })

  it("a serving attempt whose session disk fills ends (the client's output is still drained), engine gone", async () => {
    // A small tmpfs of this test's own (the file runs on a host of its own: its own mount namespace).
    const session = fs.mkdtempSync(path.join(os.tmpdir(), "hl-full-"))
    const mounted = spawnSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", session], {
      encoding: "utf8"
    })
    assert.strictEqual(mounted.status, 0, `mount: ${mounted.stderr}`)
    try {
      const tag = `hl-full-engine-${process.pid}`
      const engine = `${process.execPath} ${path.join(projectRoot, "examples/fake-engine.mjs")} --load-sec 0 --tag=${tag}`
      // ~8 MB of output: client.log fills the 1 MiB disk long before the client is done.
      const client = [
        "sh",
        "-c",
        "i=0; while [ $i -lt 80000 ]; do echo line $i of a chatty benchmark client....; i=$((i+1)); done"
      ]
      const r = await runCli(
        [
          "baseline",
          "run",
          "--session",
          path.join(session, "s"),
          "--gpus",
          "1",
          "--server",
          engine,
          "--",
          ...client
        ],
        { timeoutMs: 120_000 }
      )
      assert.isNotNull(r.code, "the run ended by itself")
      await waitGone("the engine", () => pidsWithArg(`--tag=${tag}`), 10_000)
      const next = await runCli(["lease", "run", "--gpus", "1", "--", "true"], { timeoutMs: 60_000 })
      assert.strictEqual(next.code, 0, `the slot is free again: ${next.stderr}`)
    } finally {
      spawnSync("umount", ["-l", session])
      fs.rmSync(session, { recursive: true, force: true })
    }
  })
})
