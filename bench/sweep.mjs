// The sweep's own costs, measured in one run on one head with the stand-in engine
// (examples/fake-engine.mjs and its performance model), against the goals of issue 16:
//   1. engine starts = the number of combinations (plus retries): counted from sweep.json;
//   2. hyperloom's own time between the end of one client run and the start of the next, within a
//      combination (from the runner's epoch times in each run's control answer, --between's own
//      time taken out): median <= 0.3 s;
//   3. search evaluations per combination <= ceil(log2 MAX) + ceil(log2 (first fail - last pass
//      gap of the doubling)) + 1.
// Prints each figure and its goal. Needs `npm run build`; starts and stops its own head
// (run it on a host of its own: `bash scripts/own-host.sh node bench/sweep.mjs`).
//
// `--adaptive` (docs/design.md#time-to-the-answer, issue 25): instead, side by side in one run on
// one head, the stand-in's three-axis model (examples/engine-model.mjs THREE_AXES: three numeric
// params of four values, unimodal, a KV-infeasible corner) swept with `--strategy grid` and
// `--strategy adaptive`: each one's engine starts, wall time, best, and where its time went; goal:
// the grid's best with at most 30 % of the grid's engine starts.
//
//   node bench/sweep.mjs [--adaptive]
//   node bench/sweep.mjs --hosts 3 [--adaptive-only] [--rounds N]
//                                      (bench/sweep-hosts.mjs: --parallel 3 against 1 on three hosts, grid and adaptive;
//                                      adaptive in N rounds of the pair, alternating, default 2)
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { modelFlags, predict, THREE_AXES } from "../examples/engine-model.mjs"
import { FAKE_CLIENT_ARGS, median, must, root, startHead, stopRay, sweepRunArgv, time } from "./lib.mjs"

const PORT = 6393
const engine = `${process.execPath} ${path.join(root, "examples/fake-engine.mjs")} --load-sec 0.2 --queue-ms 1500 --max-num-seqs {seqs}`
const client = [process.execPath, "examples/fake-bench-client.mjs", ...FAKE_CLIENT_ARGS]
const sweep = (session, args) =>
  time(sweepRunArgv(session, "0", ["--server", engine, ...args], client), {
    HYPERLOOM_RAY_STATUS_TIMEOUT_SEC: "5"
  })

const ceilLog2 = (x) => (x > 1 ? Math.ceil(Math.log2(x)) : 0)

/** `--adaptive`: grid against adaptive on the three-axis model, on one head. */
const adaptiveVsGrid = () => {
  const server = `${process.execPath} ${path.join(root, "examples/fake-engine.mjs")} --load-sec 0.2 ${THREE_AXES.engineArgs.join(" ")} ${THREE_AXES.params.map((p) => `--${p.name} {${p.name}}`).join(" ")}`
  const { concurrency, numPrompts, inputLen, outputLen } = THREE_AXES.load
  const loadClient = [
    process.execPath,
    "examples/fake-bench-client.mjs",
    "--num-prompts",
    String(numPrompts),
    "--max-concurrency",
    "{c}",
    "--input-len",
    String(inputLen),
    "--output-len",
    String(outputLen)
  ]
  const params = THREE_AXES.params.flatMap((p) => ["--param", `${p.name}=${p.values.join(",")}`])
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-bench-adaptive-"))
  stopRay()
  startHead(PORT, ["--num-cpus=2", '--resources={"serving_slot": 1}'])
  try {
    const results = {}
    for (const strategy of ["adaptive", "grid"]) {
      const session = path.join(dir, strategy)
      const r = time(
        sweepRunArgv(
          session,
          "0",
          ["--server", server, ...params, "--load", `c=${concurrency}`, "--strategy", strategy],
          loadClient
        ),
        { HYPERLOOM_RAY_STATUS_TIMEOUT_SEC: "5" }
      )
      if (r.code !== 0) throw new Error(`${strategy} sweep exited ${r.code}: ${r.stderr.slice(-3000)}`)
      const doc = JSON.parse(fs.readFileSync(path.join(session, "sweep.json"), "utf8"))
      results[strategy] = { doc, ms: r.ms }
      const t = doc.summary.time
      const f = (x) => x.toFixed(1)
      console.log(
        `${strategy}: ${t.engine_starts} engine starts, ${t.client_runs} client runs, wall ${(r.ms / 1000).toFixed(1)} s; best ${doc.summary.best.label} at ${doc.summary.best.output_throughput.toFixed(1)} tok/s, first measured ${f(t.time_to_best_sec)} s in`
      )
      console.log(
        `  time: lease wait ${f(t.total.lease_wait_sec)} s, engine starts ${f(t.total.engine_start_sec)} s, client runs ${f(t.total.client_sec)} s, --between ${f(t.total.between_sec)} s, hyperloom's own ${f(t.total.own_sec)} s (of ${f(t.total.wall_sec)} s)`
      )
    }
    const a = results.adaptive.doc
    const g = results.grid.doc
    const share = a.summary.time.engine_starts / g.summary.time.engine_starts
    // The model has exact ties (gpu-memory-utilization past the KV limit changes nothing, nor does
    // max-num-batched-tokens past a prompt's length), between which one run per point on a busy
    // host picks at random: a best is judged by the model's closed form of its command line, the
    // same answer when that is the same throughput.
    const modelOf = (b) =>
      predict(modelFlags(b.server_cmd.split(/\s+/)), { concurrency, numPrompts, inputLen, outputLen })
        .outputThroughput
    const same = modelOf(a.summary.best) >= modelOf(g.summary.best) * (1 - 1e-9)
    console.log(
      `adaptive against grid: ${a.summary.time.engine_starts} of ${g.summary.time.engine_starts} engine starts (${(share * 100).toFixed(0)} %), wall ${((results.adaptive.ms / results.grid.ms) * 100).toFixed(0)} % of the grid's; the grid's best (${g.summary.best.label}, ${modelOf(g.summary.best).toFixed(1)} tok/s in the model) ${same ? "found" : "NOT found"} (adaptive: ${a.summary.best.label}, ${modelOf(a.summary.best).toFixed(1)} tok/s in the model); goal: the grid's best with <= 30 % of its starts: ${same && share <= 0.3 ? "met" : "MISSED"}`
    )
  } finally {
    must("ray stop", stopRay())
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

if (process.argv[2] === "--hosts") {
  if (process.argv[3] !== "3") throw new Error("bench/sweep.mjs --hosts takes 3")
  const { benchHosts } = await import("./sweep-hosts.mjs")
  const rounds = process.argv.indexOf("--rounds")
  benchHosts({
    adaptiveOnly: process.argv.includes("--adaptive-only"),
    rounds: rounds > 0 ? Number(process.argv[rounds + 1]) : 2
  })
  process.exit(0)
}

if (process.argv.includes("--adaptive")) {
  adaptiveVsGrid()
  process.exit(0)
}

stopRay()
startHead(PORT, ["--num-cpus=2", '--resources={"serving_slot": 1}'])
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-bench-sweep-"))
try {
  // a grid: 2 combinations x 4 loads, a --between before each client run
  const grid = path.join(dir, "grid")
  const g = sweep(grid, [
    "--param",
    "seqs=2,4",
    "--load",
    "c=1,2,4,8",
    "--slo",
    "p99_ttft_ms<=1000",
    "--between",
    "sleep 0.05"
  ])
  if (g.code !== 0) throw new Error(`grid sweep exited ${g.code}: ${g.stderr.slice(-3000)}`)
  const gdoc = JSON.parse(fs.readFileSync(path.join(grid, "sweep.json"), "utf8"))
  const starts = gdoc.combinations.reduce((n, c) => n + c.engine_starts.length, 0)
  const retries = gdoc.combinations.reduce(
    (n, c) => n + c.engine_starts.filter((s) => s.outcome === "failed").length,
    0
  )
  const gaps = []
  for (const c of gdoc.combinations) {
    for (const s of c.engine_starts) {
      const control = path.join(s.dir, "control")
      const done = fs
        .readdirSync(control)
        .filter((f) => f.endsWith(".done.json"))
        .map((f) => JSON.parse(fs.readFileSync(path.join(control, f), "utf8")))
        .sort((a, b) => a.seq - b.seq)
      for (let i = 1; i < done.length; i++) {
        gaps.push((done[i].client_started - done[i - 1].client_ended - (done[i].between_sec ?? 0)) * 1000)
      }
    }
  }
  console.log(
    `grid sweep: ${gdoc.combinations.length} combinations x 4 loads in ${(g.ms / 1000).toFixed(1)} s`
  )
  console.log(
    `  engine starts ${starts} (combinations ${gdoc.combinations.length}, failed starts retried ${retries}); goal: equal: ${starts === gdoc.combinations.length + retries ? "met" : "MISSED"}`
  )
  const m = median(gaps)
  console.log(
    `  hyperloom's own gap between client runs (--between's 50 ms taken out): median ${m.toFixed(0)} ms, max ${Math.max(...gaps).toFixed(0)} ms over ${gaps.length} gaps; goal <= 300 ms: ${m <= 300 ? "met" : "MISSED"} (ratio ${(m / 300).toFixed(2)}x of the goal)`
  )

  // a search: 2 combinations, MAX 16
  const search = path.join(dir, "search")
  const MAX = 16
  const s = sweep(search, ["--param", "seqs=3,5", "--search", `c:${MAX}`, "--slo", "p99_ttft_ms<=1000"])
  if (s.code !== 0) throw new Error(`search sweep exited ${s.code}: ${s.stderr.slice(-3000)}`)
  const sdoc = JSON.parse(fs.readFileSync(path.join(search, "sweep.json"), "utf8"))
  console.log(`search sweep (MAX ${MAX}): ${(s.ms / 1000).toFixed(1)} s`)
  for (const c of sdoc.combinations) {
    const loads = c.points.map((p) => ({ load: Number(p.load), pass: p.status === "ok" }))
    const firstFail = loads.findIndex((p) => !p.pass)
    const lastPass = Math.max(
      0,
      ...loads
        .slice(0, firstFail < 0 ? loads.length : firstFail)
        .filter((p) => p.pass)
        .map((p) => p.load)
    )
    const gap = firstFail < 0 ? 0 : loads[firstFail].load - lastPass
    const bound = ceilLog2(MAX) + ceilLog2(gap) + 1
    const largest = sdoc.summary.combinations[c.index].largest_passing_load
    console.log(
      `  ${Object.entries(c.params)
        .map(([k, v]) => `${k}=${v}`)
        .join(
          " "
        )}: ${loads.length} evaluations (${loads.map((p) => `${p.load}${p.pass ? "+" : "-"}`).join(" ")}), largest passing ${largest}; bound ceil(log2 ${MAX}) + ceil(log2 ${gap}) + 1 = ${bound}: ${loads.length <= bound ? "met" : "MISSED"}`
    )
  }
} finally {
  must("ray stop", stopRay())
  fs.rmSync(dir, { recursive: true, force: true })
}
