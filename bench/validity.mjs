// The validity checks' cost (docs/design.md#samplers, docs/performance.md): one small stand-in
// sweep (examples/fake-engine.mjs, examples/fake-bench-client.mjs; 2 combinations x 2 loads,
// client runs of several seconds) run alternately with the node's samplers on (the default) and
// off (HYPERLOOM_SAMPLERS=0 in the runner's environment), --runs N times each, both with
// --warmup 0 and no --check, so that the samplers are the only difference. Prints per run the
// sweep's wall, the client runs' summed wall (runtime_sec), the samplers' own CPU (the sum of the
// runs' observations.sampler_cpu_s) and the scrape interval seen (each run's duration over its
// scrapes' gaps); then the ratios on/off of the medians. Goal: the samplers cost <= 1 % of wall.
//
// The warm-up and --check are costs of their own, accounted apart (once per engine start, their
// seconds in sweep.json): one more sweep with the default --warmup and --check
// examples/known-answers.mjs prints them beside the client runs' time.
//
// Needs `npm run build`; starts and stops its own head (run it on a host of its own:
// `bash scripts/own-host.sh node bench/validity.mjs`).
//
//   node bench/validity.mjs [--runs N]   (default 3)
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fmt, median, must, root, startHead, stopRay, sweepRunArgv, time } from "./lib.mjs"

const PORT = 6395
const at = process.argv.indexOf("--runs")
const RUNS = at > 0 ? Number(process.argv[at + 1]) : 3
if (!Number.isInteger(RUNS) || RUNS < 1) throw new Error("--runs takes a whole number >= 1")

const engine = `${process.execPath} ${path.join(root, "examples/fake-engine.mjs")} --load-sec 0.2 --max-num-seqs {seqs}`
// 16 prompts at 4 a second (Poisson), at most {c} in flight: a client run of about 4 s
const client = [
  process.execPath,
  "examples/fake-bench-client.mjs",
  "--num-prompts",
  "16",
  "--request-rate",
  "4",
  "--max-concurrency",
  "{c}",
  "--output-len",
  "32"
]
const grid = ["--param", "seqs=2,4", "--load", "c=2,4"]
const check = `${process.execPath} ${path.join(root, "examples/known-answers.mjs")}`

const sweep = (session, args, env) =>
  time(sweepRunArgv(session, "0", ["--server", engine, ...grid, ...args], client), {
    HYPERLOOM_RAY_STATUS_TIMEOUT_SEC: "5",
    ...env
  })

/** The figures of one finished sweep from its sweep.json. */
const figures = (session, ms) => {
  const doc = JSON.parse(fs.readFileSync(path.join(session, "sweep.json"), "utf8"))
  const runs = doc.combinations.flatMap((c) => c.points.flatMap((p) => p.runs))
  const starts = doc.combinations.flatMap((c) => c.engine_starts)
  const gaps = []
  let samplerCpu = 0
  let observed = 0
  for (const r of runs) {
    const o = r.observations
    if (o == null) continue
    observed++
    samplerCpu += o.sampler_cpu_s ?? 0
    const n = o.engine_load?.samples ?? 0
    // the scrapes: one at the start, one at the end, at most every 2 s between
    if (n >= 3) gaps.push(o.duration_s / (n - 1))
  }
  return {
    ms,
    runs: runs.length,
    observed,
    clientMs: runs.reduce((s, r) => s + (r.runtime_sec ?? 0), 0) * 1000,
    samplerCpu,
    gapMax: gaps.length ? Math.max(...gaps) : Number.NaN,
    gapMin: gaps.length ? Math.min(...gaps) : Number.NaN,
    warmupSec: starts.reduce((s, e) => s + (e.warmup?.sec ?? 0), 0),
    warmups: starts.filter((e) => e.warmup != null).length,
    checkSec: starts.reduce((s, e) => s + (e.check?.runtime_sec ?? 0), 0),
    checks: starts.filter((e) => e.check != null).length,
    checksFailed: starts.filter((e) => e.check != null && e.check.exit_code !== 0).length,
    starts: starts.length
  }
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-bench-validity-"))
stopRay()
startHead(PORT, ["--num-cpus=2", '--resources={"serving_slot": 1}'])
try {
  /** @type {Record<string, Array<ReturnType<typeof figures>>>} */
  const results = { on: [], off: [] }
  const cases = [
    { name: "on", env: {} },
    { name: "off", env: { HYPERLOOM_SAMPLERS: "0" } }
  ]
  for (let i = 0; i < RUNS; i++) {
    for (const c of cases) {
      const session = path.join(dir, `${c.name}-${i}`)
      const r = must(`sweep (samplers ${c.name})`, sweep(session, ["--warmup", "0"], c.env))
      const f = figures(session, r.ms)
      // off must really be off, on really on: every run observed, or none
      if (c.name === "off" && f.observed !== 0)
        throw new Error(`samplers off, yet ${f.observed} runs observed`)
      if (c.name === "on" && f.observed !== f.runs)
        throw new Error(`samplers on, ${f.observed} of ${f.runs} runs observed`)
      results[c.name].push(f)
      console.log(
        `samplers ${c.name.padEnd(3)} run ${i + 1}: sweep ${fmt(f.ms)}, ${f.runs} client runs ${fmt(f.clientMs)}, sampler CPU ${f.samplerCpu.toFixed(3)} s (${((f.samplerCpu * 1000 * 100) / f.clientMs).toFixed(2)} % of the client runs' wall)${c.name === "on" ? `, scrape interval seen ${f.gapMin.toFixed(2)}-${f.gapMax.toFixed(2)} s` : ""}`
      )
    }
  }
  const med = (name, k) => median(results[name].map((f) => f[k]))
  const sweepRatio = med("on", "ms") / med("off", "ms")
  const clientRatio = med("on", "clientMs") / med("off", "clientMs")
  const cpuShare = (med("on", "samplerCpu") * 1000) / med("on", "clientMs")
  const gapMax = Math.max(...results.on.map((f) => f.gapMax))
  console.log(`\nmedians over ${RUNS} runs each (alternating on, off):`)
  console.log(
    `  sweep wall: on ${fmt(med("on", "ms"))}, off ${fmt(med("off", "ms"))}; ratio on/off ${sweepRatio.toFixed(3)}x`
  )
  console.log(
    `  client runs' wall: on ${fmt(med("on", "clientMs"))}, off ${fmt(med("off", "clientMs"))}; ratio on/off ${clientRatio.toFixed(3)}x`
  )
  console.log(
    `  samplers' own CPU: ${med("on", "samplerCpu").toFixed(3)} s per sweep, ${(cpuShare * 100).toFixed(2)} % of the client runs' wall`
  )
  console.log(`  scrape interval seen: at most ${gapMax.toFixed(2)} s (goal: scrapes at most every 2 s)`)
  const worst = Math.max(sweepRatio, clientRatio) - 1
  console.log(
    `  goal: the samplers cost <= 1 % of wall: ${worst <= 0.01 && cpuShare <= 0.01 ? "met" : "MISSED"} (worst wall ratio ${(worst * 100).toFixed(2)} %, own CPU ${(cpuShare * 100).toFixed(2)} %)`
  )

  // the warm-up and --check: their own, accounted costs, apart from the samplers'
  const session = path.join(dir, "warmup-check")
  const r = must("sweep (--warmup, --check)", sweep(session, ["--check", check], {}))
  const f = figures(session, r.ms)
  console.log(
    `\nwith the default --warmup and --check examples/known-answers.mjs: sweep ${fmt(f.ms)}, ${f.starts} engine starts; warm-up ${f.warmupSec.toFixed(2)} s over ${f.warmups} starts, --check ${f.checkSec.toFixed(2)} s over ${f.checks} starts (${f.checksFailed} failed); ${(((f.warmupSec + f.checkSec) * 1000 * 100) / f.ms).toFixed(1)} % of this sweep's wall, ${(((f.warmupSec + f.checkSec) * 1000 * 100) / f.clientMs).toFixed(1)} % of its client runs' ${fmt(f.clientMs)}`
  )
} finally {
  must("ray stop", stopRay())
  fs.rmSync(dir, { recursive: true, force: true })
}
