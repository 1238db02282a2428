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
// --split adds, in the same rotation, where hyperloom's CPU goes and what a design it does not
// use would buy:
//   - the same lease with its bridge's Python timed on its own (a shell around it appends the
//     bridge's user + sys to a file): the bridge's CPU, and the rest (Node, its other children);
//   - `node <cli> --version`: Node's start and the bundle's load, nothing else;
//   - the same lease with a bridge forked from a Python that imported Ray once before the runs
//     (bench/lease-forked/): `import ray` paid once per host instead of once per lease. Its CPU is
//     the CLI's process tree plus the forked bridge's own (it writes it as it exits) plus what the
//     forking process spent meanwhile (/proc/PID/stat).
//
//   node bench/lease.mjs [runs] [--split]        (default 7 runs)
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { cli, fmt, median, must, ray, root, startHead, stopRay } from "./lib.mjs"

const args = process.argv.slice(2)
const split = args.includes("--split")
const runs = Number(args.find((a) => a !== "--split") ?? 7)
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
const measure = (argv, extraEnv = {}) => {
  /** @type {NodeJS.ProcessEnv} */
  const env = { ...process.env, RAY_USAGE_STATS_ENABLED: "0", HYPERLOOM_CACHE_DIR: codeCache, ...extraEnv }
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
  const cpuMs = timesCpuMs(lines.at(-1) ?? "")
  return { ms, cpuMs, code: r.status, stdout: r.stdout, stderr: lines.slice(0, -2).join("\n") }
}

/** User + sys in ms of the children line that sh's `times` prints (`0m0.77s 0m0.03s`). */
function timesCpuMs(line) {
  const secs = [...line.matchAll(/(\d+)m([\d.]+)s/g)].map((m) => Number(m[1]) * 60 + Number(m[2]))
  return secs.length === 2 ? (secs[0] + secs[1]) * 1000 : Number.NaN
}

/** A file's lines, none if it does not exist yet. */
const linesOf = (file) => (fs.existsSync(file) ? fs.readFileSync(file, "utf8").trimEnd().split("\n") : [])

/** A Python behind a shell for the CLI: its `bridge` command runs as `bridge` says, anything else as is. */
const wrapPython = (name, bridge) => {
  const wrapper = path.join(work, name)
  fs.writeFileSync(
    wrapper,
    `#!/bin/sh\nif [ "$2" = bridge ]; then ${bridge}; fi\nexec ${JSON.stringify(python)} "$@"\n`,
    { mode: 0o755 }
  )
  return wrapper
}

// sh's `times` appends two lines per run: the shell's own, then its children's (the bridge's).
const bridgeTimes = path.join(work, "bridge-times")
const timedPython = wrapPython(
  "timed-python",
  `${JSON.stringify(python)} "$@"; code=$?; times >> ${JSON.stringify(bridgeTimes)}; exit $code`
)

/** Ticks of user + sys a live process has spent (/proc/PID/stat), in ms. */
const clockTick = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100
const procCpuMs = (pid) => {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTick
}

/** Starts bench/lease-forked/zygote.py and waits until it has imported Ray (it prints `ready`). */
const startZygote = () => {
  const dir = path.join(root, "bench", "lease-forked")
  const socketName = `hyperloom-bench-zygote-${process.pid}`
  const times = path.join(work, "forked-times")
  const out = path.join(work, "zygote.out")
  const fd = fs.openSync(out, "w")
  const child = spawn(python, [path.join(dir, "zygote.py"), path.join(root, "python"), socketName, times], {
    stdio: ["ignore", fd, fd],
    env: { ...process.env, RAY_USAGE_STATS_ENABLED: "0" }
  })
  fs.closeSync(fd)
  const deadline = Date.now() + 60_000
  while (!fs.readFileSync(out, "utf8").includes("ready")) {
    if (Date.now() > deadline || child.exitCode !== null) {
      throw new Error(`the zygote did not start: ${fs.readFileSync(out, "utf8").slice(-2000)}`)
    }
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50)
  }
  const stub = path.join(dir, "stub.py")
  const wrapper = wrapPython(
    "forked-python",
    `exec ${JSON.stringify(python)} -S -E ${JSON.stringify(stub)} ${socketName} "$@"`
  )
  return { child, times, wrapper }
}

let zygote
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
  const bridgeCpu = []
  const forkedCpu = []
  if (split) {
    zygote = startZygote()
    const { times, wrapper } = zygote
    const leaseWith = (pythonPath) =>
      measure(["node", cli, "lease", "run", "--gpus", "0", "--", "true"], {
        HYPERLOOM_RAY_PYTHON: pythonPath
      })
    must("lease run, bridge timed", leaseWith(timedPython))
    must("lease run, forked bridge", leaseWith(wrapper))
    cases.push(
      {
        name: "  same, its bridge timed on its own",
        run: () => {
          const r = leaseWith(timedPython)
          bridgeCpu.push(timesCpuMs(linesOf(bridgeTimes).at(-1) ?? ""))
          return r
        }
      },
      { name: "  node <cli> --version", run: () => measure(["node", cli, "--version"]) },
      {
        name: "  same lease, bridge forked, Ray pre-imported",
        run: () => {
          const seen = linesOf(times).length
          const before = procCpuMs(zygote.child.pid)
          const r = leaseWith(wrapper)
          const forked = linesOf(times).slice(seen)
          if (forked.length !== 1) {
            throw new Error(`the forked bridge wrote ${forked.length} CPU lines, not 1`)
          }
          const own = Number(forked[0]) * 1000
          forkedCpu.push(own)
          return { ...r, cpuMs: r.cpuMs + own + (procCpuMs(zygote.child.pid) - before) }
        }
      }
    )
  }
  /** @type {Record<string, Array<number>>} */
  const wall = Object.fromEntries(cases.map((c) => [c.name, []]))
  /** @type {Record<string, Array<number>>} */
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
  if (split) {
    const [timed, version, forked] = cases.slice(2 + others.length).map((c) => c.name)
    const bare = median(cpu[b])
    const ratio = (x) => `${(x / bare).toFixed(3)}x`
    const rest = cpu[timed].map((ms, i) => ms - bridgeCpu[i])
    console.log("  where hyperloom's CPU goes (medians, each against the bare script's CPU):")
    console.log(`    its bridge (Python): ${fmt(median(bridgeCpu))} (${ratio(median(bridgeCpu))})`)
    console.log(`    the rest (Node, its other children): ${fmt(median(rest))} (${ratio(median(rest))})`)
    console.log(
      `    of which Node's start and the bundle (--version): ${fmt(median(cpu[version]))} (${ratio(median(cpu[version]))})`
    )
    console.log(
      `    the forked bridge's own (Ray pre-imported): ${fmt(median(forkedCpu))} (${ratio(median(forkedCpu))})`
    )
    const fw = median(wall[forked]) / median(wall[b])
    const fc = median(cpu[forked]) / bare
    console.log(
      `  with a forked, pre-imported bridge: wall ${fw.toFixed(3)}x (${goal(fw, 0.8)})   cpu ${fc.toFixed(3)}x (${goal(fc, 1.0)}); the forking process's own start not counted`
    )
  }
} finally {
  zygote?.child.kill("SIGKILL")
  stopRay()
  fs.rmSync(work, { recursive: true, force: true })
}
