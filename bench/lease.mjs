// A trivial lease, end to end, against what Ray's own API costs for the same thing: on one head
// with `serving_slot`, alternating, each run a fresh process:
//   - `hyperloom lease run --gpus 0 -- true`
//   - a bare Python script: `ray.init`, an actor holding `serving_slot`, `subprocess.call(["true"])`
//     inside it, `ray.kill` (the floor: what any Ray driver has to pay)
// Prints the median wall time and CPU time (user + sys of the process and its waited-for
// children) of each and both ratios side by side. Goal (issue 15): hyperloom ≤ 0.8× the bare
// script's wall time and ≤ 1.0× its CPU time.
// Needs `npm run build` first; starts and stops its own head. HYPERLOOM_BENCH_CLI_BEFORE=<bin>[:<bin>…]
// puts other builds' bins (each in a package folder of its own) in the same rotation.
//
//   node bench/lease.mjs [runs]        (default 7)
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { cli, fmt, median, must, ray, startHead, stopRay } from "./lib.mjs"

const runs = Number(process.argv[2] ?? 7)
const PORT = 6394

const python = (() => {
  const first = fs.readFileSync(ray, "utf8").split("\n")[0]
  const m = /^#!\s*(\S+)/.exec(first)
  return process.env.HYPERLOOM_RAY_PYTHON ?? (m ? m[1] : "python3")
})()

const work = fs.mkdtempSync(path.join(os.tmpdir(), "hl-bench-lease-"))
const script = path.join(work, "bare_lease.py")
// The CLI's V8 code cache in a folder of the bench's own, written by each build's warm-up run:
// the user's cache folder is shared by every build on the host, and the loader drops the files
// of all but the last few builds written, so other builds run meanwhile (other worktrees, tests)
// could make a measured run compile the bundle afresh and write its cache again.
const codeCache = path.join(work, "code-cache")
fs.writeFileSync(
  script,
  `import subprocess, sys
import ray

ray.init(address="auto", logging_level="ERROR", log_to_driver=False)

@ray.remote(num_gpus=0, resources={"serving_slot": 1})
class Holder:
    def run(self, argv):
        return subprocess.call(argv)

h = Holder.remote()
code = ray.get(h.run.remote(["true"]))
ray.kill(h)
sys.exit(code)
`
)

/**
 * Runs argv through `/usr/bin/time`-like accounting: wall ms from here, CPU ms as the child's
 * rusage (user + sys, its waited-for descendants included) read by a tiny wrapper shell.
 */
const measure = (argv) => {
  const env = { ...process.env, RAY_USAGE_STATS_ENABLED: "0", HYPERLOOM_CACHE_DIR: codeCache }
  delete env.RAY_ADDRESS
  const started = process.hrtime.bigint()
  // `times` in sh prints the shell's and its children's user/sys after the command ends.
  const r = spawnSync("sh", ["-c", '"$@"; code=$?; times >&2; exit $code', "sh", ...argv], {
    env,
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024
  })
  const ms = Number(process.hrtime.bigint() - started) / 1e6
  const lines = r.stderr.trimEnd().split("\n")
  const children = lines.at(-1) ?? ""
  const secs = [...children.matchAll(/(\d+)m([\d.]+)s/g)].map((m) => Number(m[1]) * 60 + Number(m[2]))
  const cpuMs = secs.length === 2 ? (secs[0] + secs[1]) * 1000 : Number.NaN
  return { ms, cpuMs, code: r.status, stdout: r.stdout, stderr: lines.slice(0, -2).join("\n") }
}

stopRay()
startHead(PORT, ["--num-cpus=2", '--resources={"serving_slot": 1}'])
try {
  // warm-up: the first actor on a fresh head pays for the worker pool; each side once
  must("hyperloom lease run", measure(["node", cli, "lease", "run", "--gpus", "0", "--", "true"]))
  must("bare Ray script", measure([python, script]))
  // Other builds to put in the same rotation (a before/after comparison): one bin, or several
  // separated by ":" (each with its package beside it, as dist/hyperloom.mjs has).
  const others = (process.env.HYPERLOOM_BENCH_CLI_BEFORE ?? "").split(":").filter((p) => p !== "")
  const lease = (bin) => measure(["node", bin, "lease", "run", "--gpus", "0", "--", "true"])
  for (const bin of others) must(`lease run (${bin})`, lease(bin))
  const cases = [
    { name: "hyperloom lease run --gpus 0 -- true", run: () => lease(cli) },
    { name: "bare Ray script (python)", run: () => measure([python, script]) },
    ...others.map((bin, i) => ({
      name: `hyperloom lease run (HYPERLOOM_BENCH_CLI_BEFORE${others.length > 1 ? ` #${i + 1}` : ""})`,
      run: () => lease(bin)
    }))
  ]
  const wall = Object.fromEntries(cases.map((c) => [c.name, []]))
  const cpu = Object.fromEntries(cases.map((c) => [c.name, []]))
  for (let i = 0; i < runs; i++) {
    for (const c of cases) {
      const r = must(c.name, c.run())
      wall[c.name].push(r.ms)
      cpu[c.name].push(r.cpuMs)
    }
  }
  const [a, b] = cases.map((c) => c.name)
  console.log(`\ntrivial lease on one idle head (port ${PORT}), ${runs} runs each, alternating`)
  for (const name of cases.map((c) => c.name)) {
    console.log(
      `  ${name.padEnd(50)} wall median ${fmt(median(wall[name])).padStart(9)}   cpu median ${fmt(median(cpu[name])).padStart(9)}`
    )
    console.log(`    wall runs: ${wall[name].map(fmt).join(", ")}`)
    console.log(`    cpu runs:  ${cpu[name].map(fmt).join(", ")}`)
  }
  const wallRatio = median(wall[a]) / median(wall[b])
  const cpuRatio = median(cpu[a]) / median(cpu[b])
  const goal = (ratio, max) => `goal <= ${max.toFixed(1)}x: ${ratio <= max ? "met" : "NOT met"}`
  console.log(
    `  ratios hyperloom / bare: wall ${wallRatio.toFixed(3)}x (${goal(wallRatio, 0.8)})   cpu ${cpuRatio.toFixed(3)}x (${goal(cpuRatio, 1.0)})`
  )
  others.forEach((bin, i) => {
    const c = cases[2 + i].name
    console.log(
      `  ${others.length > 1 ? `#${i + 1} ` : ""}before (${bin}): wall ratio ${(median(wall[c]) / median(wall[b])).toFixed(3)}x, cpu ratio ${(median(cpu[c]) / median(cpu[b])).toFixed(3)}x`
    )
  })
} finally {
  stopRay()
  fs.rmSync(work, { recursive: true, force: true })
}
