/**
 * A sweep's lifecycle on one real head (docs/design.md#sweeps), through the bundled CLI, against the
 * stand-in engine's performance model (the closed form: test/ray/sweep.test.ts's header): --dry-run
 * and its estimate, --strategy adaptive then grid on one session and a session grown by more
 * --load values; a squatter on the engine's port; --wait on a slot another lease holds; SIGKILL of
 * hyperloom and the same command resuming; Ctrl-C. The tests share one head (each leaves it idle);
 * the last one joins a worker raylet for `--nodes 2`. Each prints one `[sweep scenario]` line.
 * Split from sweep.test.ts so that the two files run at once, each on a host of its own.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { cleanEnv, cliPath, runCli } from "../support/cli.js"
import { pidsWithArg, waitGone } from "../support/lease.js"
import { projectRoot, startWorker, waitFor } from "../support/ray.js"
import {
  assertSlotFree,
  client,
  engine,
  newSession,
  newTag,
  readSweep,
  SLO,
  scenario,
  sweep,
  sweepArgs,
  sweepScenario,
  useSweepHead
} from "../support/sweepOnHead.js"

describe("a sweep's lifecycle on a real head", () => {
  const head = useSweepHead()

  it("--dry-run runs nothing; --strategy adaptive finds the grid's best with fewer engine starts and skips past a kv_cache_oom; --strategy grid completes it; more --load values grow it", async () => {
    const session = newSession()
    const tag = newTag()
    const server = engine(tag, "--max-model-len 32768 --max-num-seqs {seqs}")
    const grid = ["--param", "seqs=2,4,8,32,64", "--load", "c=8", "--slo", SLO]
    // the plan, an estimate, nothing run
    const dry = await sweep(
      session,
      server,
      [...grid, "--dry-run", "--estimate-start", "5", "--estimate-run", "2"],
      client(16)
    )
    assert.strictEqual(dry.code, 0, dry.stderr)
    assert.include(
      dry.stdout,
      "dry run (nothing runs): 5 combination(s) = 5 engine start(s), 1 load point(s) each, 1 repeat(s): 5 client run(s)"
    )
    assert.include(dry.stdout, "estimate: 35 s = 5 × 5 s per engine start + 5 × 2 s per client run")
    assert.include(dry.stdout, `server: sh -c ${JSON.stringify(server.replace("{seqs}", "2"))}`)
    assert.isFalse(fs.existsSync(path.join(session, "sweep.json")))
    // adaptive: start at seqs=8 (the middle), 32 fails kv_cache_oom so 64 is skipped unstarted, 4 is worse
    const { r: a, doc: adoc } = await sweepScenario(
      "adaptive",
      session,
      server,
      [...grid, "--strategy", "adaptive"],
      client(16)
    )
    assert.strictEqual(a.code, 0, a.stderr)
    assert.deepStrictEqual(
      adoc.combinations.map((c: any) => `${c.params.seqs}:${c.status}:${c.engine_starts.length}`),
      ["2:skipped:0", "4:done:1", "8:done:1", "32:infeasible:1", "64:skipped:0"]
    )
    assert.include(adoc.combinations[4].reason, "seqs=32 failed with kv_cache_oom")
    assert.strictEqual(adoc.summary.best.label, "seqs=8")
    assert.strictEqual(adoc.summary.time.engine_starts, 3)
    const t = adoc.summary.time.total
    assert.isAbove(t.engine_start_sec, 0)
    assert.isAbove(t.client_sec, 0)
    assert.closeTo(
      t.wall_sec,
      t.lease_wait_sec + t.engine_start_sec + t.client_sec + t.between_sec + t.own_sec,
      0.01
    )
    // a new, empty session with no --estimate-*: the estimate comes from this host's recent sweeps
    const fresh = await sweep(newSession(), server, [...grid, "--dry-run", "--json"], client(16))
    assert.strictEqual(fresh.code, 0, fresh.stderr)
    console.log(`[dry run from the host's recent sweeps] ${fresh.ms} ms`)
    const est = JSON.parse(fresh.stdout).estimate
    assert.strictEqual(est.source, "host", fresh.stdout)
    assert.isAtLeast(est.sweeps, 1)
    assert.isAbove(est.start_sec, 0)
    assert.isAbove(est.run_sec, 0)
    assert.isAtLeast(Date.parse(est.last_ended), Date.now() - a.ms - 60_000)
    assert.include(est.sessions, path.resolve(session))
    // another engine (issue 33 item 7): no estimate from the stand-in's sweeps, and it says so
    const vllm = await sweep(
      newSession(),
      "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-seqs {seqs}",
      [...grid, "--dry-run"],
      client(16)
    )
    assert.strictEqual(vllm.code, 0, vllm.stderr)
    assert.match(
      vllm.stdout,
      /estimate: none — none of this host's \d+ recent sweep\(s\) ran this engine \(vllm, model meta-llama\/Llama-3\.1-8B-Instruct\): they ran .*fake-engine\.mjs \(\d+\)/
    )
    const show = await runCli(["sweep", "show", "--session", session])
    assert.include(show.stdout, "each numeric --param axis is assumed unimodal")
    assert.match(show.stdout, /time: wall [\d.]+ s: lease wait/)
    console.log(`[sweep show, adaptive]\n${show.stdout}`)
    // grid on the same session: only the two skipped combinations start; the best judged again
    const { r: g, doc: gdoc } = await sweepScenario(
      "grid completion",
      session,
      server,
      [...grid, "--strategy", "grid"],
      client(16)
    )
    assert.strictEqual(g.code, 0, g.stderr)
    assert.deepStrictEqual(
      gdoc.combinations.map((c: any) => `${c.params.seqs}:${c.status}:${c.engine_starts.length}`),
      ["2:done:1", "4:done:1", "8:done:1", "32:infeasible:1", "64:infeasible:1"]
    )
    assert.strictEqual(gdoc.summary.best.label, "seqs=8")
    // grow: one more load value; only it runs, on the feasible combinations
    const runsBefore = gdoc.summary.time.client_runs
    const { r: grown, doc: wdoc } = await sweepScenario(
      "grown",
      session,
      server,
      ["--param", "seqs=2,4,8,32,64", "--load", "c=8,2", "--slo", SLO],
      client(16)
    )
    assert.strictEqual(grown.code, 0, grown.stderr)
    assert.strictEqual(wdoc.summary.time.client_runs, runsBefore + 3)
    assert.deepStrictEqual(
      wdoc.combinations[2].points.map((p: any) => `${p.load}:${p.status}`),
      ["2:ok", "8:ok"]
    )
    assert.deepStrictEqual(wdoc.combinations[2].points[1].runs, gdoc.combinations[2].points[0].runs)
    // three sweep runs of one session (issue 33 item 6): every figure adds up, one at a time the
    // combinations' walls within the total's, the best first measured within it
    const time = wdoc.summary.time
    const sum = (x: any) => x.lease_wait_sec + x.engine_start_sec + x.client_sec + x.between_sec + x.own_sec
    for (const c of [time.total, ...time.combinations])
      assert.closeTo(sum(c), c.wall_sec, 0.0015, JSON.stringify(c))
    assert.isAtMost(
      time.combinations.reduce((n: number, c: any) => n + c.wall_sec, 0),
      time.total.wall_sec,
      JSON.stringify(time)
    )
    assert.isAtMost(time.time_to_best_sec, time.total.wall_sec, JSON.stringify(time))
    assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [])
  }, 900_000)

  it("a squatter on the engine's port while it loads is refused as port_taken (pid and user named), never measured; the retry on a new port measures the engine (issue 27 item 1)", async () => {
    const session = newSession()
    const tag = newTag()
    const run = sweep(
      session,
      // the engine binds its port only after 4 s (vLLM's imports): the squatter is quicker
      `sleep 4; exec ${engine(tag, "--max-num-seqs 4")}`,
      ["--load", "c=2", "--slo", SLO],
      client(4)
    )
    const status = path.join(session, "combinations", "0", "engine-1", "engine.json")
    const port = await waitFor(
      "the sweep runner's engine.json with its port",
      () => {
        try {
          return JSON.parse(fs.readFileSync(status, "utf8")).port ?? undefined
        } catch {
          return undefined
        }
      },
      120_000,
      50
    )
    const squatter = http.createServer((_req, res) => res.writeHead(200).end("{}"))
    await new Promise<void>((resolve) => squatter.listen(port, "127.0.0.1", resolve))
    const r = await run
    squatter.close()
    const doc = readSweep(session)
    scenario("port squatter", doc, r.ms)
    assert.strictEqual(r.code, 0, r.stderr)
    const [c] = doc.combinations
    assert.strictEqual(c.engine_starts[0].class, "port_taken", JSON.stringify(c.engine_starts[0]))
    assert.include(
      c.engine_starts[0].error,
      `is served by pid ${process.pid} of user ${os.userInfo().username}`
    )
    assert.strictEqual(c.engine_starts[1].outcome, "ready")
    assert.strictEqual(c.points[0].status, "ok")
    assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [])
  })

  it("--wait: the slot held by another lease, the sweep fails naming the holder (exit 15), nothing runs; the same command resumes once it is free", async () => {
    const flag = path.join(newSession(), "hold")
    fs.writeFileSync(flag, "")
    const holder = spawn(
      process.execPath,
      [cliPath, "lease", "run", "--gpus", "0", "--", "sh", "-c", `while [ -e ${flag} ]; do sleep 0.1; done`],
      { cwd: projectRoot, env: cleanEnv(), stdio: ["ignore", "ignore", "pipe"] }
    )
    let holderErr = ""
    holder.stderr!.on("data", (d) => (holderErr += d))
    const holderExit = new Promise<number | null>((resolve) => holder.on("exit", (code) => resolve(code)))
    try {
      await waitFor(
        "the holder lease to hold the slot",
        async () => {
          const q = await runCli(["queue", "--json"], { timeoutMs: 30_000 })
          return q.json?.holders?.some((h: any) => h.pid === holder.pid) || undefined
        },
        120_000,
        250
      )
      const session = newSession()
      const tag = newTag()
      const args = (wait: string) =>
        sweepArgs(
          session,
          engine(tag, "--max-num-seqs {seqs}"),
          ["--wait", wait, "--param", "seqs=2", "--load", "c=1", "--slo", SLO],
          client(4)
        )
      const r = await runCli(args("2"), { timeoutMs: 120_000 })
      const doc = readSweep(session)
      scenario("wait expired", doc, r.ms)
      assert.strictEqual(r.code, 15, r.stderr)
      assert.include(r.stderr, "lease_wait_expired: the lease was not granted within --wait 2 s")
      // the holder named: the queue's entry for it (its pid) or, once Ray's view is in, its actor
      assert.notInclude(r.stderr, "nobody visible", r.stderr)
      assert.match(
        r.stderr,
        new RegExp(`held by (lease \\S+ of \\S+ \\(pid ${holder.pid},|actor )`),
        r.stderr
      )
      assert.strictEqual(doc.status, "stopped")
      assert.strictEqual(doc.stop_reason, "lease_wait_expired")
      assert.deepStrictEqual(doc.combinations[0].points[0].runs, [])
      assert.isFalse(fs.existsSync(path.join(doc.combinations[0].engine_starts[0].dir, "server.log")))
      assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [])
      fs.rmSync(flag)
      assert.strictEqual(await holderExit, 0, holderErr)
      // --wait is no part of the experiment; it also covers Ray starting the lease's worker,
      // seconds on a loaded machine, so the resume gets room
      const again = await runCli(args("90"), { timeoutMs: 120_000 })
      assert.strictEqual(again.code, 0, again.stderr)
      assert.strictEqual(readSweep(session).combinations[0].points[0].status, "ok")
    } finally {
      holder.kill("SIGKILL")
    }
  })

  /** Starts a sweep in the background; resolves with the child and its output. */
  const startSweep = (args: ReadonlyArray<string>) => {
    const child: ChildProcess = spawn(process.execPath, [cliPath, ...args], {
      cwd: projectRoot,
      env: cleanEnv(),
      stdio: ["ignore", "pipe", "pipe"]
    })
    const out = { stdout: "", stderr: "" }
    child.stdout!.on("data", (d) => (out.stdout += d))
    child.stderr!.on("data", (d) => (out.stderr += d))
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
    return { child, out, exited }
  }

  it("SIGKILL of hyperloom mid-sweep: the same command completes it, no finished point run twice, no engine left; a changed experiment is refused", async () => {
    const session = newSession()
    const tag = newTag()
    const args = sweepArgs(
      session,
      engine(tag, "--max-num-seqs {seqs}"),
      ["--param", "seqs=4", "--load", "c=1,2,4", "--slo", SLO],
      client(8)
    )
    const first = startSweep(args)
    // killed while the second point's client runs: the first is finished, the second in flight
    await waitFor(
      "the second point to run",
      () => {
        try {
          const [p0, p1] = readSweep(session).combinations[0].points
          return (p0.status === "ok" && p1.status === "running" && p1.runs.length === 1) || undefined
        } catch {
          return undefined
        }
      },
      120_000,
      50
    )
    first.child.kill("SIGKILL")
    await first.exited
    await waitGone("the engine", () => pidsWithArg(`--tag=${tag}`), 20_000)
    const before = readSweep(session)
    const firstRun = before.combinations[0].points[0].runs[0]
    const t = Date.now()
    const again = await runCli(args, { timeoutMs: 180_000 })
    const doc = readSweep(session)
    scenario("sigkill then resume", doc, Date.now() - t)
    assert.strictEqual(again.code, 0, again.stderr)
    const points = doc.combinations[0].points
    assert.deepStrictEqual(
      points.map((p: any) => p.status),
      ["ok", "ok", "ok"]
    )
    // the finished point kept its one run; nothing ran it again
    assert.deepStrictEqual(points[0].runs, [firstRun])
    assert.deepStrictEqual(points[0].interrupted_runs, [])
    // the point in flight was run again: its killed run kept as interrupted, one finished run
    assert.strictEqual(before.combinations[0].points[1].status, "running")
    assert.deepStrictEqual(
      points[1].interrupted_runs.map((r: any) => [r.dir, r.status]),
      [[before.combinations[0].points[1].runs[0].dir, "interrupted"]]
    )
    assert.deepStrictEqual(
      points.map((p: any) => p.runs.map((r: any) => r.status)),
      [["ok"], ["ok"], ["ok"]]
    )
    const runDirs = fs.readdirSync(path.join(session, "combinations", "0", "runs"))
    assert.strictEqual(runDirs.filter((d) => d.endsWith("-1")).length, 1, runDirs.join(" "))
    assert.strictEqual(runDirs.filter((d) => d.endsWith("-2")).length, 2, runDirs.join(" "))
    assert.strictEqual(doc.combinations[0].engine_starts.length, 2)
    assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [])
    // the same session with another experiment: refused, naming the difference, nothing runs
    const changed = await runCli(
      sweepArgs(
        session,
        engine(tag, "--max-num-seqs {seqs}"),
        ["--param", "seqs=4", "--load", "c=1,2,8", "--slo", SLO],
        client(8)
      )
    )
    assert.strictEqual(changed.code, 2, changed.stderr)
    assert.include(
      changed.stderr,
      "--load/--search: the session has --load c=1,2,4, this run gives --load c=1,2,8"
    )
    assert.deepStrictEqual(readSweep(session), doc)
  })

  it("Ctrl-C mid-point: the engine is gone, the slot free, exit 130, the sweep cancelled", async () => {
    const session = newSession()
    const tag = newTag()
    const run = startSweep(
      sweepArgs(
        session,
        engine(tag, "--max-num-seqs {seqs}"),
        ["--param", "seqs=1", "--load", "c=1", "--slo", SLO],
        client(200)
      )
    )
    await waitFor(
      "the point to run",
      () => {
        try {
          return readSweep(session).combinations[0].points[0].status === "running" || undefined
        } catch {
          return undefined
        }
      },
      90_000
    )
    await new Promise((r) => setTimeout(r, 1000))
    const t = Date.now()
    run.child.kill("SIGINT")
    const code = await Promise.race([
      run.exited,
      new Promise<"hung">((r) => setTimeout(() => r("hung"), 30_000))
    ])
    console.log(`[sweep scenario] ctrl-c: exit ${code} ${Date.now() - t} ms after SIGINT`)
    assert.strictEqual(code, 130, run.out.stderr)
    assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [], "the engine is gone when hyperloom has exited")
    const doc = readSweep(session)
    assert.strictEqual(doc.status, "cancelled")
    assert.strictEqual(doc.combinations[0].points[0].status, "pending")
    await assertSlotFree()
  })

  it("--nodes 2 on a head and a worker raylet: one combination as a group", async () => {
    await startWorker(head(), { numCpus: 1, numGpus: 1, resources: { serving_slot: 1 } })
    await waitFor(
      "the worker joined",
      async () => {
        const s = await runCli(["ray", "status", "--json"])
        return (s.json?.nodes?.filter((n: any) => n.state === "ALIVE").length ?? 0) >= 2 || undefined
      },
      60_000
    )
    const session = newSession()
    const tag = newTag()
    const { r, doc } = await sweepScenario(
      "nodes 2",
      session,
      engine(tag, "--max-num-seqs {seqs}"),
      ["--nodes", "2", "--param", "seqs=2", "--load", "c=2", "--slo", SLO],
      client(8)
    )
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(doc.experiment.nodes, 2)
    assert.strictEqual(doc.combinations[0].points[0].status, "ok")
    assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [])
  })
})
