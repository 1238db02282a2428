/**
 * Serving groups across two hosts of their own (scripts/two-hosts.sh) under
 * docs/design.md#the-shared-host: the clean-GPU gate on the node that runs a rank, and containment
 * of what a rank's command starts, on BOTH nodes. The worker host simulates /dev/nvidia0
 * (test/support/fakeGpuDev.ts: an overlay over /dev in the worker host's own mount namespace); each
 * node declares the slot and one GPU, so `--nodes 2 --gpus 1` puts rank 0 on the head host and rank
 * 1 on the worker host with GPU 0. One cluster for the file.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, afterEach, assert, beforeAll, describe, it } from "@effect/vitest"
import { fakeNvidiaScript } from "../support/fakeGpuDev.js"
import { groupLease, rayStatus, waitNothingHeld } from "../support/groups.js"
import {
  type HostName as AnyHost,
  argvOf,
  GCS,
  type Hosts,
  leaseProcsOn,
  makeHosts,
  onHost,
  type Started,
  startCluster,
  WORKER_IP,
  whyNoHosts
} from "../support/hosts.js"
import { escapingLines, isAlive, markerSleep, pidsWithArg } from "../support/lease.js"
import { rayPython, sleep, waitFor } from "../support/ray.js"

const why = whyNoHosts()
if (why !== undefined) process.stderr.write(`two-hosts tests skipped: cannot make namespaces here (${why})\n`)

/** The two hosts this file makes. */
type HostName = Extract<AnyHost, "head" | "worker">
const HOSTS: ReadonlyArray<HostName> = ["head", "worker"]

/** A process's pid in its own (innermost) PID namespace: what its host's /proc, and so the gate, calls it. */
const nsPid = (pid: number): number => {
  const line = fs
    .readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("NSpid:"))!
  return Number(line.trim().split(/\s+/).at(-1))
}

const livePids = (): number[] =>
  fs
    .readdirSync("/proc")
    .filter((e) => /^\d+$/.test(e))
    .map(Number)
    .filter(isAlive)

/** Pids (as seen here) on each host whose argv has an element equal to one of `markers`. */
const markedOn = (hosts: Hosts, markers: ReadonlyArray<string>): Record<HostName, number[]> => {
  const found: Record<HostName, number[]> = { head: [], worker: [] }
  for (const pid of livePids()) {
    const argv = argvOf(pid)
    if (argv === undefined || !markers.some((m) => argv.includes(m))) continue
    for (const host of HOSTS) if (onHost(hosts, host, pid)) found[host].push(pid)
  }
  return found
}

/**
 * Ray's view of every node's free `serving_slot`, sampled as fast as the GCS answers by a driver
 * on the head host; each change is a line `TIME NODE_ID FREE` (TIME: when the answer came, so a
 * slot seen free at TIME was free at some moment up to TIME).
 */
const SLOT_WATCH = `
import sys, time, ray
from ray._private import state
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
last = {}
print("watching", flush=True)
while True:
    try:
        avail = state.available_resources_per_node()
    except Exception:
        time.sleep(0.05)
        continue
    t = time.time()
    for node, res in avail.items():
        free = res.get("serving_slot", 0)
        if last.get(node) != free:
            last[node] = free
            print("%.4f %s %g" % (t, node, free), flush=True)
    time.sleep(0.01)
`

describe.skipIf(why !== undefined)(
  "serving groups on two hosts: clean GPUs and containment on both nodes",
  () => {
    let hosts: Hosts
    /** node id -> host */
    const hostOf = new Map<string, HostName>()
    let shared = ""
    /** The holders started (their pids as seen here: nsenter's children, which a kill of nsenter leaves running). */
    const holders: number[] = []

    const status = () => rayStatus(hosts.cli)
    /** Nothing of the group left: every slot free, no rank actor or placement group, no supervisor, keeper or rank worker on either host. */
    const assertNothingHeld = async () => {
      await waitNothingHeld(status)
      await waitFor(
        "nothing of a lease on either host",
        () => (HOSTS.flatMap((h) => leaseProcsOn(hosts, h)).length === 0 ? true : undefined),
        30_000,
        200
      )
    }

    /**
     * A process outside any lease on the worker host with /dev/nvidia0 open (while `/tmp/shared/FLAG`
     * exists, when `flag` is given; then it closes it and sleeps on). Returns its pid as seen here
     * and as the worker host sees it.
     */
    const startHolder = async (flag?: string) => {
      const marker = markerSleep()
      const hold =
        flag === undefined
          ? `exec 3</dev/nvidia0; echo open; exec sleep ${marker}`
          : `exec 3</dev/nvidia0; echo open; while [ -e /tmp/shared/${flag} ]; do sleep 0.1; done; exec 3<&-; echo closed; exec sleep ${marker}`
      const h = hosts.start("worker", ["sh", "-c", hold, marker])
      const pid = await waitFor(
        "the holder on the worker host",
        () => pidsWithArg(marker).find((p) => onHost(hosts, "worker", p)),
        30_000,
        50
      )
      holders.push(pid)
      await waitFor("the holder to open /dev/nvidia0", () =>
        h.out.stdout.includes("open") ? true : undefined
      )
      return { pid, inHost: nsPid(pid), out: h.out }
    }

    const killHolders = () => {
      for (const pid of holders.splice(0)) {
        try {
          process.kill(pid, "SIGKILL")
        } catch {
          // gone
        }
      }
    }

    beforeAll(async () => {
      hosts = await makeHosts()
      shared = path.join(hosts.dir, "shared")
      await startCluster(hosts)
      const s = await waitFor(
        "both nodes alive",
        async () => {
          const st = await status()
          return st.nodes.filter((n: any) => n.state === "ALIVE").length === 2 ? st : undefined
        },
        60_000,
        500
      )
      for (const n of s.nodes) hostOf.set(n.node_id, n.address === WORKER_IP ? "worker" : "head")
      const mounted = await hosts.run("worker", ["sh", "-c", fakeNvidiaScript(1)])
      assert.strictEqual(mounted.code, 0, `the worker host's fake /dev/nvidia0: ${mounted.stderr}`)
    }, 240_000)
    afterEach(() => {
      killHolders()
    })
    afterAll(async () => {
      await hosts?.down()
    })

    describe("the clean-GPU gate on the rank's own node", () => {
      it("the worker host's GPU held outside any lease: gpu_busy naming the holder and its node, no rank runs, the holder lives, every bundle released", async () => {
        const holder = await startHolder()
        const workerNode = [...hostOf].find(([, h]) => h === "worker")![0]
        const r = await hosts.cli(
          groupLease(
            "--json",
            "--gpu-clean-timeout",
            "2",
            "--",
            "sh",
            "-c",
            'touch "/tmp/shared/ran-busy-$HYPERLOOM_RANK"'
          ),
          { timeoutMs: 150_000 }
        )
        assert.strictEqual(r.code, 125, r.stderr)
        const error = r.json?.error
        assert.strictEqual(error?.exit_code, 16, r.stdout)
        assert.strictEqual(error?.class, "gpu_busy")
        assert.deepStrictEqual(
          error.holders.map((h: any) => [h.pid, h.gpu, h.via]),
          [[holder.inHost, 0, "/dev/nvidia0"]]
        )
        assert.deepStrictEqual(
          fs.readdirSync(shared).filter((f) => f.startsWith("ran-busy-")),
          [],
          "no rank's command runs (all ranks or none)"
        )
        assert.include(error.message, `GPU 0: pid ${holder.inHost} (`)
        assert.include(r.stderr, "(hyperloom exit code 16)")
        assert.deepStrictEqual(
          [error.rank, error.node_id, error.node_address],
          [1, workerNode, WORKER_IP],
          "the holder's node"
        )
        assert.match(error.message, /^gpu_busy: rank 1 /)
        assert.include(error.message, WORKER_IP, "the holder's node is named (its pid is that node's)")
        assert.include(error.message, workerNode.slice(0, 12))
        assert.isTrue(isAlive(holder.pid), "the holder is never signalled")
        await assertNothingHeld()
        assert.isTrue(isAlive(holder.pid))
      })

      it("the holder lets go within --gpu-clean-timeout: the wait is announced, no rank runs meanwhile, then the group runs", async () => {
        fs.writeFileSync(path.join(shared, "hold"), "")
        const holder = await startHolder("hold")
        const run = hosts.startCli(
          groupLease(
            "--gpu-clean-timeout",
            "120",
            "--",
            "sh",
            "-c",
            'touch "/tmp/shared/ran-wait-$HYPERLOOM_RANK"; echo "ran $HYPERLOOM_RANK"'
          )
        )
        try {
          await waitFor(
            "the gate to announce its wait",
            () => (run.out.stderr.includes("waiting up to 120 s") ? true : undefined),
            120_000,
            100
          )
          assert.include(run.out.stderr, `GPU 0: pid ${holder.inHost}`)
          // Rank 0's node is clean; still, no rank starts while another's GPU is held.
          await sleep(1_000)
          assert.deepStrictEqual(
            fs.readdirSync(shared).filter((f) => f.startsWith("ran-wait-")),
            [],
            "nothing runs while a rank waits"
          )
          fs.rmSync(path.join(shared, "hold"))
          const r = await run.exited
          assert.strictEqual(r.code, 0, r.stderr)
          assert.include(r.stdout, "[rank 0] ran 0")
          assert.include(r.stdout, "[rank 1] ran 1")
        } finally {
          run.child.kill("SIGKILL")
        }
        assert.include(holder.out.stdout, "closed")
        assert.isTrue(isAlive(holder.pid), "the holder is never signalled")
        await assertNothingHeld()
      })
    })

    describe("a rank's escapes (setsid, GNU timeout, start_new_session, a double fork) on both nodes", () => {
      let watch: Started
      /** Ray's view of each node's free slot over time: [time in ms, free]. */
      const slotLog = new Map<HostName, Array<[number, number]>>()

      beforeAll(async () => {
        watch = hosts.start("head", [rayPython, "-c", SLOT_WATCH, GCS])
        let seen = 0
        watch.child.stdout!.on("data", () => {
          const lines = watch.out.stdout.split("\n")
          for (const line of lines.slice(seen, -1)) {
            const [t, node, free] = line.split(" ")
            const host = hostOf.get(node ?? "")
            if (host === undefined) continue
            slotLog.set(host, [...(slotLog.get(host) ?? []), [Number(t) * 1000, Number(free)]])
          }
          seen = lines.length - 1
        })
        await waitFor(
          "the slot watch",
          () => (slotLog.get("head") !== undefined && slotLog.get("worker") !== undefined ? true : undefined),
          90_000,
          100
        )
      }, 120_000)
      afterAll(() => {
        watch?.child.kill("SIGKILL")
      })

      /**
       * Runs a 2-rank group whose command (on each node) starts one escape of each kind and waits;
       * `end` ends it once all of them run on both hosts. Meanwhile /proc is scanned for them: the
       * last scan that still saw one on a host must have started before Ray first showed that
       * host's slot free again (a scan that starts later and sees one is an escape outliving the slot).
       */
      const escapesOutliveNothing = async (end: (run: Started, flag: string) => Promise<void>) => {
        const m = [markerSleep(), markerSleep(), markerSleep(), markerSleep()]
        const flag = `run-${m[0]}`
        fs.writeFileSync(path.join(shared, flag), "")
        const t0 = Date.now()
        const run = hosts.startCli(
          groupLease(
            "--gpu-clean-timeout",
            "0",
            "--",
            "sh",
            "-c",
            `${escapingLines(m)}\necho up; while [ -e /tmp/shared/${flag} ]; do sleep 0.1; done`
          )
        )
        const lastSeen: Record<HostName, number> = { head: 0, worker: 0 }
        const most: Record<HostName, number> = { head: 0, worker: 0 }
        let scanning = true
        const scanner = (async () => {
          while (scanning) {
            const at = Date.now()
            const found = markedOn(hosts, m)
            for (const h of HOSTS) {
              if (found[h].length > 0) lastSeen[h] = at
              most[h] = Math.max(most[h], found[h].length)
            }
            await sleep(5)
          }
        })()
        let r: Awaited<Started["exited"]>
        try {
          await waitFor(
            "every escape running on both hosts",
            () => (most.head >= 4 && most.worker >= 4 ? true : undefined),
            120_000,
            50
          ).catch((e) => {
            throw new Error(
              `${e.message}; seen ${JSON.stringify(most)}; lease run's stderr: ${run.out.stderr}`
            )
          })
          await end(run, flag)
          r = await run.exited
          // Ray's view of the slots lags its raylets: give it a moment to show both free.
          await waitFor(
            "Ray showing both slots free again",
            () =>
              HOSTS.every((h) => {
                const log = slotLog.get(h) ?? []
                return log.some(([t, free]) => t > t0 && free === 0) && log.at(-1)?.[1] === 1
              })
                ? true
                : undefined,
            30_000,
            100
          )
        } finally {
          scanning = false
          await scanner
          run.child.kill("SIGKILL")
          fs.rmSync(path.join(shared, flag), { force: true })
        }
        const left = markedOn(hosts, m)
        assert.deepStrictEqual(left, { head: [], worker: [] }, "no escape outlives the lease on either host")
        for (const h of HOSTS) {
          const log = slotLog.get(h)!
          const heldAt = log.findIndex(([t, free]) => t > t0 && free === 0)
          const freeAgain = log.slice(heldAt).find(([, free]) => free === 1)![0]
          assert.isBelow(
            lastSeen[h],
            freeAgain,
            `on the ${h} host an escape was still seen ${lastSeen[h] - freeAgain} ms after its slot was free`
          )
        }
        await assertNothingHeld()
        return r
      }

      it("the command ends: every escape on both hosts is gone before either slot is free", async () => {
        const r = await escapesOutliveNothing(async (_run, flag) => {
          fs.rmSync(path.join(shared, flag))
        })
        assert.strictEqual(r.code, 0, r.stderr)
        assert.include(r.stdout, "[rank 0] up")
        assert.include(r.stdout, "[rank 1] up")
      })

      it("Ctrl-C of lease run: every escape on both hosts is gone before either slot is free", async () => {
        const r = await escapesOutliveNothing(async (run) => {
          process.kill(await run.pid(), "SIGINT")
        })
        assert.strictEqual(r.code, 130, r.stderr)
      })
    })
  }
)
