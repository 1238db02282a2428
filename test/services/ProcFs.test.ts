import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { gcsServers, rayletGcsAddresses, raylets } from "../../src/domain/Daemons.js"
import type { ProcessInfo } from "../../src/domain/Snapshot.js"
import * as ProcFs from "../../src/services/ProcFs.js"

const tree = (scenario: string) => path.resolve(import.meta.dirname, "../fixtures/proc", scenario)

const read = (root: string) =>
  Effect.gen(function* () {
    const procFs = yield* ProcFs.ProcFs
    return { processes: yield* procFs.processes, daemons: yield* procFs.rayDaemons }
  }).pipe(Effect.provide(ProcFs.layerWith({ root })))

describe("ProcFs over recorded trees", () => {
  it.effect("lone-head: one gcs_server and one head raylet of the same node", () =>
    Effect.gen(function* () {
      const { processes, daemons } = yield* read(tree("lone-head"))
      assert.strictEqual(processes.length, 5)
      const [gcs] = gcsServers(daemons)
      const [raylet] = raylets(daemons)
      assert.strictEqual(daemons.length, 2)
      assert.deepStrictEqual(gcs, {
        kind: "gcs_server",
        pid: 5927,
        port: 6379,
        sessionName: "session_2026-11-30_04-58-39_491735_5926",
        nodeIp: "192.0.2.2"
      })
      assert.strictEqual(raylet?.pid, 5992)
      assert.strictEqual(raylet?.isHead, true)
      assert.strictEqual(raylet?.gcsAddress, "192.0.2.2:6379")
      assert.strictEqual(raylet?.sessionName, gcs?.sessionName)
      assert.match(raylet?.nodeId ?? "", /^[0-9a-f]{56}$/)
      // the gcs_server of 2.58 names its node too: the same one
      const gcsProc = processes.find((p) => p.pid === 5927)!
      assert.include(gcsProc.argv, `--node-id=${raylet?.nodeId}`)
      assert.strictEqual(raylet?.staticResources.serving_slot, 1)
      assert.strictEqual(raylet?.staticResources.GPU, 2)
      assert.strictEqual(raylet?.staticResources.CPU, 2)
    })
  )

  it.effect("reads argv, comm and ppid exactly, even for a comm with spaces and parentheses", () =>
    Effect.gen(function* () {
      const { processes } = yield* read(tree("lone-head"))
      const odd = processes.find((p) => p.comm === "my (odd) proc")
      assert.deepStrictEqual(odd, {
        pid: 5925,
        ppid: 5924,
        comm: "my (odd) proc",
        argv: ["/tmp/hl-rec/my (odd) proc", "600"],
        state: "S"
      })
      // setproctitle pads with NULs: no trailing empty elements
      const agent = processes.find((p) => p.comm === "ray::DashboardA")
      assert.deepStrictEqual(agent?.argv, ["ray::DashboardAgent"])
      assert.strictEqual(agent?.ppid, 5992)
      // Ray's monitor.py carries --gcs-address= but is no daemon
      const monitor = processes.find((p) => p.argv.some((a) => a.endsWith("/monitor.py")))
      assert.include(monitor?.argv ?? [], "--gcs-address=192.0.2.2:6379")
    })
  )

  it.effect("head-worker: two raylets of one cluster, one of them the head", () =>
    Effect.gen(function* () {
      const { daemons } = yield* read(tree("head-worker"))
      const rs = raylets(daemons)
      assert.strictEqual(gcsServers(daemons).length, 1)
      assert.deepStrictEqual(
        rs.map((r) => [r.pid, r.isHead, r.gcsAddress]),
        [
          [5992, true, "192.0.2.2:6379"],
          [6144, false, "192.0.2.2:6379"]
        ]
      )
      assert.notStrictEqual(rs[0]?.nodeId, rs[1]?.nodeId)
      assert.deepStrictEqual(rayletGcsAddresses(daemons), ["192.0.2.2:6379"])
    })
  )

  it.effect("two-heads: two clusters by port", () =>
    Effect.gen(function* () {
      const { daemons } = yield* read(tree("two-heads"))
      assert.deepStrictEqual(
        gcsServers(daemons).map((g) => g.port),
        [6379, 6380]
      )
      assert.deepStrictEqual(
        raylets(daemons).map((r) => r.isHead),
        [true, true]
      )
      assert.deepStrictEqual(rayletGcsAddresses(daemons), ["192.0.2.2:6379", "192.0.2.2:6380"])
    })
  )
})

const copyTree = (from: string) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-proc-"))
  fs.cpSync(from, dir, { recursive: true })
  return dir
}

describe("ProcFs tolerates processes that vanish mid-scan", () => {
  it.effect("a listed pid whose files are gone (or half gone, or empty) is skipped, never an error", () =>
    Effect.gen(function* () {
      const dir = copyTree(tree("lone-head"))
      try {
        fs.mkdirSync(path.join(dir, "777")) // listed, then gone: every read is ENOENT
        fs.mkdirSync(path.join(dir, "778"))
        fs.writeFileSync(path.join(dir, "778", "cmdline"), "x\0") // gone between the reads
        fs.mkdirSync(path.join(dir, "779"))
        for (const f of ["cmdline", "comm", "stat"]) fs.writeFileSync(path.join(dir, "779", f), "") // reaped
        fs.writeFileSync(path.join(dir, "self"), "not a pid")
        const { processes, daemons } = yield* read(dir)
        assert.deepStrictEqual(
          processes.map((p) => p.pid),
          [5925, 5927, 5959, 5992, 6015]
        )
        assert.strictEqual(daemons.length, 2)
      } finally {
        fs.rmSync(dir, { recursive: true, force: true })
      }
    })
  )

  it.live("the live /proc, scanned while processes come and go, never fails", () =>
    Effect.gen(function* () {
      const procFs = ProcFs.make("/proc")
      let stop = false
      const churn = (async () => {
        while (!stop) {
          const batch = Array.from({ length: 8 }, () => spawn("true", [], { stdio: "ignore" }))
          await Promise.all(batch.map((c) => new Promise((r) => c.once("exit", r))))
        }
      })()
      try {
        for (let i = 0; i < 10; i++) {
          const r = yield* Effect.either(procFs.processes)
          assert.isTrue(Either.isRight(r), Either.isLeft(r) ? r.left.message : "")
        }
      } finally {
        stop = true
        yield* Effect.promise(() => churn)
      }
      // and it sees a live child exactly as it is
      const child = spawn("bash", ["-c", "sleep 30; :", "x", "--gcs-address=192.0.2.9:1", "a b"], {
        stdio: "ignore",
        detached: true
      })
      try {
        const seen = (yield* procFs.processes).find((p) => p.pid === child.pid)
        assert.deepStrictEqual(seen, {
          pid: child.pid!,
          ppid: process.pid,
          comm: "bash",
          argv: ["bash", "-c", "sleep 30; :", "x", "--gcs-address=192.0.2.9:1", "a b"],
          state: seen?.state
        })
        assert.include(["S", "R"], seen?.state)
      } finally {
        process.kill(-child.pid!, "SIGKILL")
      }
    })
  )
})

describe("ProcFs reads only pid directories, in pid order", () => {
  const writeProc = (dir: string, name: string, comm: string, stat: string) => {
    fs.mkdirSync(path.join(dir, name))
    fs.writeFileSync(path.join(dir, name, "cmdline"), `${comm}\0`)
    fs.writeFileSync(path.join(dir, name, "comm"), `${comm}\n`)
    fs.writeFileSync(path.join(dir, name, "stat"), stat)
  }

  it.effect(
    "names that are not all digits are skipped even with a process's files; pids sort numerically",
    () =>
      Effect.gen(function* () {
        const dir = copyTree(tree("lone-head"))
        try {
          writeProc(dir, "10000", "big", "10000 (big) S 1 0")
          writeProc(dir, "12x", "a", "12 (a) S 1 0")
          writeProc(dir, "x12", "b", "12 (b) S 1 0")
          writeProc(dir, "NaN", "c", "1 (c) S 1 0")
          const { processes } = yield* read(dir)
          assert.deepStrictEqual(
            processes.map((p) => p.pid),
            [5925, 5927, 5959, 5992, 6015, 10000]
          )
          assert.deepStrictEqual(processes.at(-1), {
            pid: 10000,
            ppid: 1,
            comm: "big",
            argv: ["big"],
            state: "S"
          })
        } finally {
          fs.rmSync(dir, { recursive: true, force: true })
        }
      })
  )

  it.effect("comm loses only its final newline", () =>
    Effect.gen(function* () {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-proc-"))
      try {
        writeProc(dir, "5", "a\nb", "5 (a) R 1 0")
        const { processes } = yield* read(dir)
        assert.strictEqual(processes[0]?.comm, "a\nb")
      } finally {
        fs.rmSync(dir, { recursive: true, force: true })
      }
    })
  )
})

describe("ProcFs errors", () => {
  it.effect("a process entry that cannot be read for another reason than vanishing is ProcUnreadable", () =>
    Effect.gen(function* () {
      const dir = copyTree(tree("lone-head"))
      try {
        fs.mkdirSync(path.join(dir, "4242", "cmdline"), { recursive: true }) // EISDIR: not a vanished process
        const e = yield* Effect.flip(read(dir))
        assert.strictEqual(e._tag, "ProcUnreadable")
        assert.strictEqual(e.root, dir)
        assert.match(e.detail, /^reading a process: EISDIR: illegal operation on a directory, read$/)
        assert.strictEqual(e.message, `cannot read the process table at ${dir}: ${e.detail}`)
      } finally {
        fs.rmSync(dir, { recursive: true, force: true })
      }
    })
  )

  it.effect("a missing root is ProcUnreadable", () =>
    Effect.gen(function* () {
      const e = yield* Effect.flip(read("/nonexistent-hyperloom-proc"))
      assert.strictEqual(e._tag, "ProcUnreadable")
      assert.strictEqual(e.root, "/nonexistent-hyperloom-proc")
      assert.strictEqual(
        e.message,
        "cannot read the process table at /nonexistent-hyperloom-proc: ENOENT: no such file or directory, scandir '/nonexistent-hyperloom-proc'"
      )
    })
  )

  it.effect("a root that is a file is ProcUnreadable", () =>
    Effect.gen(function* () {
      const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "hl-proc-")), "proc")
      fs.writeFileSync(file, "")
      const e = yield* Effect.flip(read(file))
      assert.strictEqual(e._tag, "ProcUnreadable")
      assert.include(e.detail, "ENOTDIR")
    })
  )
})

describe("ProcFs test layers", () => {
  const processes: ReadonlyArray<ProcessInfo> = [
    { pid: 1, ppid: 0, comm: "init", argv: ["/sbin/init"] },
    {
      pid: 9,
      ppid: 1,
      comm: "raylet",
      argv: ["raylet", "--node_id=ab", "--gcs-address=192.0.2.2:6379", "--head"]
    },
    { pid: 8, ppid: 1, comm: "gcs_server", argv: ["gcs_server", "--gcs_server_port=6379"] }
  ]

  it.effect("layerTest serves the processes and their daemons", () =>
    Effect.gen(function* () {
      const procFs = yield* ProcFs.ProcFs
      assert.strictEqual((yield* procFs.processes).length, 3)
      assert.deepStrictEqual(
        (yield* procFs.rayDaemons).map((d) => [d.kind, d.pid]),
        [
          ["gcs_server", 8],
          ["raylet", 9]
        ]
      )
    }).pipe(Effect.provide(ProcFs.layerTest(processes)))
  )

  it.effect("layerTest(ProcUnreadable) fails both reads", () =>
    Effect.gen(function* () {
      const procFs = yield* ProcFs.ProcFs
      assert.strictEqual((yield* Effect.flip(procFs.processes))._tag, "ProcUnreadable")
      assert.strictEqual((yield* Effect.flip(procFs.rayDaemons))._tag, "ProcUnreadable")
    }).pipe(
      Effect.provide(
        ProcFs.layerTest(new ProcFs.ProcUnreadable({ root: "/proc", detail: "EACCES: permission denied" }))
      )
    )
  )
})

describe("stat and cmdline parsing", () => {
  it("parseStat reads after the last ')'", () => {
    assert.deepStrictEqual(ProcFs.parseStat("42 (a) b) (c) S 7 42 42 0"), { state: "S", ppid: 7 })
    assert.deepStrictEqual(ProcFs.parseStat("42 (x y) Z 1 0"), { state: "Z", ppid: 1 })
    assert.strictEqual(ProcFs.parseStat(""), undefined)
    assert.strictEqual(ProcFs.parseStat("42 (x"), undefined)
    // no ')' at all is no stat line, even when its fields would parse
    assert.strictEqual(ProcFs.parseStat("1 2 3"), undefined)
    // a ')' first, fields after it
    assert.deepStrictEqual(ProcFs.parseStat(") R 3"), { state: "R", ppid: 3 })
    // runs of blanks separate fields
    assert.deepStrictEqual(ProcFs.parseStat("42 (x)  S \t 7  9"), { state: "S", ppid: 7 })
    // a stat cut after the comm, or after the state, has no ppid
    assert.strictEqual(ProcFs.parseStat("42 (x)"), undefined)
    assert.strictEqual(ProcFs.parseStat("42 (x) S"), undefined)
    assert.strictEqual(ProcFs.parseStat("42 (x) S x"), undefined)
  })

  it("parseCmdline splits on NUL and drops the trailing padding", () => {
    assert.deepStrictEqual(ProcFs.parseCmdline("a\0b c\0\0d\0"), ["a", "b c", "", "d"])
    assert.deepStrictEqual(ProcFs.parseCmdline("ray::IDLE\0\0\0\0"), ["ray::IDLE"])
    assert.deepStrictEqual(ProcFs.parseCmdline(""), [])
  })
})

describe("ProcFs.hiddenReason: does this /proc show every process?", () => {
  const selfFiles = (mountinfo: string | undefined, status: string | undefined) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-self-"))
    const files = { mountinfo: path.join(dir, "mountinfo"), status: path.join(dir, "status") }
    if (mountinfo !== undefined) fs.writeFileSync(files.mountinfo, mountinfo)
    if (status !== undefined) fs.writeFileSync(files.status, status)
    return files
  }
  const procLine = (options: string) => `22 27 0:21 / /proc rw,relatime - proc proc ${options}\n`
  const hidden = (self: ProcFs.SelfFiles, root = "/proc") =>
    Effect.flatMap(ProcFs.ProcFs, (p) => p.hiddenReason).pipe(
      Effect.provideService(ProcFs.ProcFs, ProcFs.make(root, self))
    )

  it.effect("a hidepid mount without CAP_SYS_PTRACE hides; with it, or a plain mount, it does not", () =>
    Effect.gen(function* () {
      const noCaps = "CapEff:\t0000000000000000\n"
      const ptrace = "CapEff:\t0000000000080000\n"
      const reason = yield* hidden(selfFiles(procLine("rw,hidepid=invisible"), noCaps))
      assert.include(reason!, "/proc is mounted with hidepid=invisible")
      assert.isUndefined(yield* hidden(selfFiles(procLine("rw,hidepid=invisible"), ptrace)))
      assert.isUndefined(yield* hidden(selfFiles(procLine("rw"), noCaps)))
      // a member of the mount's gid= group sees every process
      const gid = process.getegid!()
      assert.isUndefined(yield* hidden(selfFiles(procLine(`rw,hidepid=invisible,gid=${gid}`), noCaps)))
      assert.isDefined(yield* hidden(selfFiles(procLine(`rw,hidepid=invisible,gid=${gid + 4242}`), noCaps)))
      // A status without CapEff is not taken as privileged.
      assert.isDefined(yield* hidden(selfFiles(procLine("rw,hidepid=2"), "Name:\tnode\n")))
      assert.isDefined(yield* hidden(selfFiles(procLine("rw,hidepid=2"), undefined)))
    })
  )

  it.effect("an unreadable mount table is a reason (cannot tell), never a pass", () =>
    Effect.gen(function* () {
      const reason = yield* hidden(selfFiles(undefined, "CapEff:\t0\n"))
      assert.include(reason!, "cannot read ")
      assert.include(reason!, "mountinfo")
    })
  )

  it.effect("a recorded tree is no proc mount: it hides nothing it recorded", () =>
    Effect.gen(function* () {
      assert.isUndefined(
        yield* hidden(selfFiles(procLine("rw,hidepid=2"), "CapEff:\t0\n"), tree("lone-head"))
      )
    })
  )

  it.effect("this machine's /proc as this process sees it", () =>
    Effect.gen(function* () {
      // Whatever it says, it says it from the real mount table, without failing.
      const reason = yield* Effect.flatMap(ProcFs.ProcFs, (p) => p.hiddenReason).pipe(
        Effect.provide(ProcFs.layer)
      )
      const mounted = fs.readFileSync("/proc/self/mountinfo", "utf8")
      if (!/ \/proc .* - proc .*hidepid=[^0o]/.test(mounted)) assert.isUndefined(reason)
    })
  )
})
