/**
 * `hyperloom sweep run` / `sweep show` / `report` on one real head (docs/design.md#sweeps), through
 * the bundled CLI, against the stand-in engine's performance model (examples/engine-model.mjs:
 * batch limit B = --max-num-seqs, throughput 200·b/(4+b) at batch b = min(c, B), TTFT jumping by
 * about a whole wave and the queue's cost (seconds) once c > B, vLLM's KV-cache error when B ×
 * --max-model-len exceeds the budget). The answers asserted come from the model's closed form: with
 * n = 16 output tokens, N ≥ c + 1 prompts and the SLO p99_ttft_ms<=1000 (c ≤ B: tens of ms, c > B:
 * ≥ 1.8 s, so a loaded machine's jitter decides nothing), the largest passing concurrency of a
 * combination is exactly B, and the best feasible combination is the largest B at c = B. The tests
 * share one head (each leaves it idle); the last one joins a worker raylet for `--nodes 2`. Each
 * prints one `[sweep scenario]` line.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { modelFlags, predict } from "../../examples/engine-model.mjs"
import { cleanEnv, cliPath, runCli } from "../support/cli.js"
import { pidsWithArg, waitGone } from "../support/lease.js"
import {
  type Head,
  prepareRay,
  projectRoot,
  startHead,
  startWorker,
  teardownRay,
  waitFor
} from "../support/ray.js"

const PORT = 6399
const SLO = "p99_ttft_ms<=1000"
const engine = (tag: string, extra = "") =>
  `${process.execPath} ${path.join(projectRoot, "examples/fake-engine.mjs")} --load-sec 0.2 --queue-ms 1500 --tag=${tag} ${extra}`.trim()
const client = (prompts: number) => [
  process.execPath,
  "examples/fake-bench-client.mjs",
  "--num-prompts",
  String(prompts),
  "--max-concurrency",
  "{c}",
  "--output-len",
  "16"
]

const sessions: Array<string> = []
const newSession = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-sweep-"))
  sessions.push(dir)
  return dir
}
let tagN = 0
const newTag = () => `hl-sweep-${process.pid}-${Date.now()}-${tagN++}`
const readSweep = (dir: string) => JSON.parse(fs.readFileSync(path.join(dir, "sweep.json"), "utf8"))

const sweepArgs = (
  session: string,
  server: string,
  args: ReadonlyArray<string>,
  cmd: ReadonlyArray<string>
) => ["sweep", "run", "--session", session, "--gpus", "1", "--server", server, ...args, "--", ...cmd]
const sweep = (...a: Parameters<typeof sweepArgs>) => runCli(sweepArgs(...a), { timeoutMs: 240_000 })

const scenario = (name: string, doc: any, ms: number) =>
  console.log(
    `[sweep scenario] ${name}: ${doc?.status ?? "?"}, verdict ${doc?.summary?.verdict ?? "?"}, ` +
      `${doc?.combinations?.reduce((n: number, c: any) => n + c.engine_starts.length, 0) ?? "?"} engine start(s), ${(ms / 1000).toFixed(1)} s`
  )

const assertSlotFree = async () => {
  const r = await runCli(["lease", "run", "--gpus", "1", "--", "true"], { timeoutMs: 60_000 })
  assert.strictEqual(r.code, 0, r.stderr)
  assert.isBelow(r.ms, 20_000, r.stderr)
}

/** The model's closed form for a combination's engine argv at concurrency c. */
const expected = (server: string, c: number, prompts: number) =>
  predict(modelFlags(server.split(/\s+/)), {
    concurrency: c,
    numPrompts: prompts,
    inputLen: 32,
    outputLen: 16
  })

let head: Head

describe("sweep run on a real head", () => {
  beforeAll(async () => {
    await prepareRay()
    head = await startHead({ port: PORT, slot: true, numGpus: 1 })
  }, 120_000)
  afterAll(async () => {
    await teardownRay()
    for (const s of sessions) fs.rmSync(s, { recursive: true, force: true })
  }, 120_000)

  it("a grid finds the model's best; the combination over the KV budget is started once and skipped", async () => {
    const session = newSession()
    const tag = newTag()
    const server = engine(tag, "--max-model-len 32768 --max-num-seqs {seqs}")
    const r = await sweep(
      session,
      server,
      ["--param", "seqs=2,4,32", "--load", "c=2,4", "--slo", SLO],
      client(8)
    )
    const doc = readSweep(session)
    scenario("grid", doc, r.ms)
    assert.strictEqual(r.code, 0, r.stderr)
    // one engine start per combination, the infeasible one not retried
    assert.deepStrictEqual(
      doc.combinations.map((c: any) => c.engine_starts.length),
      [1, 1, 1]
    )
    const [b2, b4, b32] = doc.combinations
    assert.strictEqual(b32.status, "infeasible")
    assert.strictEqual(b32.class, "kv_cache_oom")
    assert.include(b32.error, "KV cache")
    assert.isTrue(b32.points.every((p: any) => p.status === "not_run"))
    // the largest passing load of each feasible combination is its batch limit
    assert.deepStrictEqual(
      doc.summary.combinations.map((c: any) => c.largest_passing_load),
      ["2", "4", null]
    )
    assert.deepStrictEqual(
      b2.points.map((p: any) => p.status),
      ["ok", "slo_failed"]
    )
    // the best: B = 4 at c = 4 (model: 200·4/8 = 100 tok/s, against 66.7 for B = 2)
    assert.strictEqual(doc.summary.verdict, "best")
    assert.strictEqual(doc.summary.best.label, "seqs=4")
    assert.strictEqual(doc.summary.best.load, "4")
    const want = expected(b4.server_cmd, 4, 8).outputThroughput
    assert.closeTo(doc.summary.best.output_throughput, want, want * 0.3)
    // runnable command lines, sweep show and its JSON, summary.csv, the report
    assert.strictEqual(doc.summary.best.server_cmd, server.replace("{seqs}", "4"))
    assert.include(doc.summary.best.client_cmd, "--max-concurrency 4")
    const show = await runCli(["sweep", "show", "--session", session])
    assert.strictEqual(show.code, 0)
    assert.include(show.stdout, "best: #1 (seqs=4) at c=4")
    console.log(`[sweep show]\n${show.stdout}`)
    const shown = await runCli(["sweep", "show", "--session", session, "--json"])
    assert.deepStrictEqual(shown.json, doc)
    const csv = fs.readFileSync(path.join(session, "summary.csv"), "utf8").trim().split("\n")
    assert.strictEqual(csv.length, 1 + 6)
    const run0 = b2.points[0].runs[0].dir
    assert.isTrue(fs.existsSync(path.join(run0, "client.log")))
    assert.isTrue(fs.existsSync(path.join(run0, "result.json")))
    assert.isTrue(fs.existsSync(path.join(b2.engine_starts[0].dir, "server.log")))
    const out = path.join(session, "report.html")
    const rep = await runCli(["report", "--session", session, "--out", out])
    assert.strictEqual(rep.code, 0, rep.stderr)
    const html = fs.readFileSync(out, "utf8")
    assert.include(html, "Pareto")
    assert.notMatch(html, /https?:\/\/(?!www\.w3\.org)/)
    // one numbering (#N, as the table), the node it ran on named
    assert.match(r.stderr, /sweep: combination #1 \(seqs=4\)( on [^,]+)?, c=4/)
    assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [])
  })

  it("search: doubling then bisection finds each combination's largest passing load, every point recorded", async () => {
    const session = newSession()
    const r = await sweep(
      session,
      engine(newTag(), "--max-num-seqs {seqs}"),
      ["--param", "seqs=2,3", "--search", "c:8", "--slo", SLO],
      client(6)
    )
    const doc = readSweep(session)
    scenario("search", doc, r.ms)
    assert.strictEqual(r.code, 0, r.stderr)
    assert.deepStrictEqual(
      doc.summary.combinations.map((c: any) => c.largest_passing_load),
      ["2", "3"]
    )
    assert.deepStrictEqual(
      doc.combinations.map((c: any) => c.points.map((p: any) => `${p.load}:${p.status}`)),
      [
        ["1:ok", "2:ok", "4:slo_failed", "3:slo_failed"],
        ["1:ok", "2:ok", "4:slo_failed", "3:ok"]
      ]
    )
    assert.strictEqual(doc.summary.best.label, "seqs=3")
  })

  it("an engine that dies during a point fails it and ends its combination; the next one runs", async () => {
    const session = newSession()
    const tag = newTag()
    const r = await sweep(
      session,
      engine(tag, "--max-num-seqs 4 {mode}"),
      ["--param", "mode=--fail=crash-after-ready,--tag=steady", "--load", "c=2,4", "--slo", SLO],
      client(8)
    )
    const doc = readSweep(session)
    scenario("engine dies", doc, r.ms)
    assert.strictEqual(r.code, 0, r.stderr)
    const [crash, steady] = doc.combinations
    assert.strictEqual(crash.status, "engine_died")
    assert.deepStrictEqual(
      crash.points.map((p: any) => p.status),
      ["failed", "not_run"]
    )
    assert.isTrue(crash.points[0].runs[0].engine_died)
    assert.strictEqual(crash.points[0].runs.length, 1, "an engine death is not retried against a dead engine")
    assert.strictEqual(crash.engine_starts.length, 1)
    assert.strictEqual(steady.status, "done")
    assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [])
  })

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

  it("no point meets the SLO: exit 14 sweep_no_feasible_point", async () => {
    const session = newSession()
    const r = await sweep(
      session,
      engine(newTag(), "--max-num-seqs {seqs}"),
      ["--param", "seqs=2", "--load", "c=2", "--slo", "p99_ttft_ms<=1"],
      client(4)
    )
    scenario("no feasible point", readSweep(session), r.ms)
    assert.strictEqual(r.code, 14, r.stderr)
    assert.include(r.stdout, "sweep_no_feasible_point")
  })

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
    const a = await sweep(session, server, [...grid, "--strategy", "adaptive"], client(16))
    const adoc = readSweep(session)
    scenario("adaptive", adoc, a.ms)
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
    const show = await runCli(["sweep", "show", "--session", session])
    assert.include(show.stdout, "each numeric --param axis is assumed unimodal")
    assert.match(show.stdout, /time: wall [\d.]+ s: lease wait/)
    console.log(`[sweep show, adaptive]\n${show.stdout}`)
    // grid on the same session: only the two skipped combinations start; the best judged again
    const g = await sweep(session, server, [...grid, "--strategy", "grid"], client(16))
    const gdoc = readSweep(session)
    scenario("grid completion", gdoc, g.ms)
    assert.strictEqual(g.code, 0, g.stderr)
    assert.deepStrictEqual(
      gdoc.combinations.map((c: any) => `${c.params.seqs}:${c.status}:${c.engine_starts.length}`),
      ["2:done:1", "4:done:1", "8:done:1", "32:infeasible:1", "64:infeasible:1"]
    )
    assert.strictEqual(gdoc.summary.best.label, "seqs=8")
    // grow: one more load value; only it runs, on the feasible combinations
    const runsBefore = gdoc.summary.time.client_runs
    const grown = await sweep(
      session,
      server,
      ["--param", "seqs=2,4,8,32,64", "--load", "c=8,2", "--slo", SLO],
      client(16)
    )
    const wdoc = readSweep(session)
    scenario("grown", wdoc, grown.ms)
    assert.strictEqual(grown.code, 0, grown.stderr)
    assert.strictEqual(wdoc.summary.time.client_runs, runsBefore + 3)
    assert.deepStrictEqual(
      wdoc.combinations[2].points.map((p: any) => `${p.load}:${p.status}`),
      ["2:ok", "8:ok"]
    )
    assert.deepStrictEqual(wdoc.combinations[2].points[1].runs, gdoc.combinations[2].points[0].runs)
    assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [])
  }, 900_000)

  it("no engine ever ready: exit 17 sweep_no_engine_ready, the note quoting the engine's own line and its server.log", async () => {
    const session = newSession()
    const r = await sweep(
      session,
      engine(newTag(), "--max-num-seqs {seqs}"),
      ["--param", "seqs=0", "--load", "c=2", "--slo", SLO],
      client(4)
    )
    const doc = readSweep(session)
    scenario("no engine ready", doc, r.ms)
    assert.strictEqual(r.code, 17, r.stderr)
    const note = doc.combinations[0].error.split("\n")[0]
    assert.include(note, 'the engine said: "vllm serve: error: argument --max-num-seqs: must be at least 1"')
    // not ready for a class that may pass is retried once: the note is the last start's
    assert.include(note, `${doc.combinations[0].engine_starts.at(-1).dir}/server.log`)
    assert.include(r.stdout, "argument --max-num-seqs: must be at least 1")
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

  it("interleaved repeats, a larger --repeats growing a finished sweep, and compare on a real head: one run per point claims no confidence, the records' differences first, a gate that holds, the report of both", async () => {
    // One combination (B = 4) at c = 2 and 4, 4 prompts of 16 tokens, 60 ms steps (a run is 1-2 s)
    // with the stand-in's seeded noise (each request's steps × 1 + 0.02·z), one model and
    // seed: A at 3 repeats; C, first with one run per point, then grown to 3 repeats. The
    // statistics and one run per point in full are checked by hand in test/domain/Stats.test.ts
    // and Compare.test.ts.
    const model = (extra: string) =>
      `--max-num-seqs {seqs} --decode-ms 60 --decode-ms-per-seq 0 --noise 0.02 --seed 7 ${extra}`.trim()
    const args = (repeats: number) => ["--param", "seqs=4", "--load", "c=2,4", "--repeats", String(repeats)]
    const a = newSession()
    const c = newSession()
    const cEngine = engine(newTag(), model(""))
    const ra = await sweep(a, engine(newTag(), model("")), args(3), client(4))
    assert.strictEqual(ra.code, 0, ra.stderr)
    const rc1 = await sweep(c, cEngine, args(1), client(4))
    assert.strictEqual(rc1.code, 0, rc1.stderr)
    const docA = readSweep(a)
    scenario("repeats 3 (A)", docA, ra.ms)
    const runNumbers = (doc: any) =>
      doc.combinations[0].points.map((p: any) =>
        p.runs.map((r: any) => Number(path.basename(r.dir).split("-")[0]))
      )
    // the rounds: run numbers alternate between the two points
    assert.deepStrictEqual(runNumbers(docA), [
      [1, 3, 5],
      [2, 4, 6]
    ])
    assert.strictEqual(docA.combinations[0].points[0].stats.output_throughput.n, 3)
    // C with one run per point: no confidence can be claimed
    const one = await runCli(["compare", a, c, "--json"])
    assert.strictEqual(one.code, 0, one.stderr)
    assert.strictEqual(one.json.metrics[0].overall.verdict, "no confidence: one run")
    // C grown to 3 repeats: only the 4 new runs, in rounds, on one more engine start; the first runs kept
    const cBefore = readSweep(c)
    const rc3 = await sweep(c, cEngine, args(3), client(4))
    const docC = readSweep(c)
    scenario("grown to repeats 3 (C)", docC, rc3.ms)
    assert.strictEqual(rc3.code, 0, rc3.stderr)
    assert.include(rc3.stderr, "growing the repeats from 1 to 3: 4 new run(s) on 2 measured point(s)")
    assert.strictEqual(docC.combinations[0].engine_starts.length, 2)
    assert.deepStrictEqual(runNumbers(docC), [
      [1, 3, 5],
      [2, 4, 6]
    ])
    assert.deepStrictEqual(
      docC.combinations[0].points.map((p: any) => p.runs[0]),
      cBefore.combinations[0].points.map((p: any) => p.runs[0])
    )
    assert.strictEqual(docC.combinations[0].points[1].stats.output_throughput.n, 3)
    // the same model twice: the gate holds. (The verdicts themselves — no difference for the same
    // model, the 10 % slow-down found with 95 % confidence and exit 18 — are proven in
    // test/domain/Compare.test.ts: on this shared host two sessions of one model and seed measured
    // 5.0 % apart [95 % CI +1.3 … +8.7 %] at load 20, which no sweep size separates from a 10 %
    // slow-down with certainty.)
    const same = await runCli(["compare", a, c, "--fail-on", "output_throughput<-30%", "--json"])
    console.log(`[compare A C] ${JSON.stringify(same.json?.metrics?.[0]?.overall)}`)
    assert.strictEqual(same.code, 0, same.stderr)
    assert.strictEqual(same.json.metrics[0].overall.points, 2)
    assert.isTrue(same.json.gates[0].confident)
    // what differs is listed first: the engine command lines
    const text = await runCli(["compare", a, c])
    assert.strictEqual(text.code, 0, text.stderr)
    assert.match(
      text.stdout,
      /^compare A: .*\nwhat differs between the two sessions' records:\n {2}engine command:/
    )
    console.log(`[compare text]\n${text.stdout}`)
    const out = path.join(a, "both.html")
    const report = await runCli(["report", "--session", a, "--session", c, "--out", out])
    assert.strictEqual(report.code, 0, report.stderr)
    assert.include(fs.readFileSync(out, "utf8"), "Change B ÷ A − 1 per point, 95 % CI (Welch)")
  })

  it("--nodes 2 on a head and a worker raylet: one combination as a group", async () => {
    await startWorker(head, { numCpus: 1, numGpus: 1, resources: { serving_slot: 1 } })
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
    const r = await sweep(
      session,
      engine(tag, "--max-num-seqs {seqs}"),
      ["--nodes", "2", "--param", "seqs=2", "--load", "c=2", "--slo", SLO],
      client(8)
    )
    const doc = readSweep(session)
    scenario("nodes 2", doc, r.ms)
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(doc.experiment.nodes, 2)
    assert.strictEqual(doc.combinations[0].points[0].status, "ok")
    assert.deepStrictEqual(pidsWithArg(`--tag=${tag}`), [])
  })
})
