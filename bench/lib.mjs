// Shared helpers for the bench scripts: timing child processes, medians, a head to measure on.
// Each bench starts what it measures and stops it; run them with no other Ray on the host
// (they call `ray stop --force`).
import { spawnSync } from "node:child_process"
import { readFileSync } from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
export const ray = process.env.HYPERLOOM_RAY ?? path.join(root, ".venv/bin/ray")
/** The bundled CLI to measure (HYPERLOOM_BENCH_CLI: another build, e.g. of an older commit). */
export const cli = process.env.HYPERLOOM_BENCH_CLI ?? path.join(root, "dist/hyperloom.mjs")

/** The stand-in client's arguments in the sweep benches: 8 prompts at concurrency {c}, 16 tokens out. */
export const FAKE_CLIENT_ARGS = ["--num-prompts", "8", "--max-concurrency", "{c}", "--output-len", "16"]

/** `hyperloom sweep run --session SESSION --gpus GPUS ARGS… -- CLIENT…` as one argv, run by this node. */
export const sweepRunArgv = (session, gpus, args, client) => [
  process.execPath,
  cli,
  "sweep",
  "run",
  "--session",
  session,
  "--gpus",
  gpus,
  ...args,
  "--",
  ...client
]

/**
 * CPU ms (user + sys) of the children this process has waited for, their own waited-for children
 * included (/proc/self/stat's cutime + cstime, 10 ms ticks); undefined without /proc.
 */
const childCpuMs = () => {
  try {
    const stat = readFileSync("/proc/self/stat", "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(fields[13]) + Number(fields[14])) * 10
  } catch {
    return undefined
  }
}

/** Runs argv to completion; returns wall time in ms, its CPU in ms (`cpuMs`) and the exit code. */
export const time = (argv, env = {}) => {
  const cpuBefore = childCpuMs()
  const started = process.hrtime.bigint()
  const r = spawnSync(argv[0], argv.slice(1), {
    env: { ...process.env, RAY_USAGE_STATS_ENABLED: "0", ...env },
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024
  })
  const ms = Number(process.hrtime.bigint() - started) / 1e6
  const cpuAfter = childCpuMs()
  const cpuMs = cpuBefore === undefined || cpuAfter === undefined ? Number.NaN : cpuAfter - cpuBefore
  return { ms, cpuMs, code: r.status, stdout: r.stdout, stderr: r.stderr }
}

export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  const m = Math.floor(s.length / 2)
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

export const fmt = (ms) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`)

export const must = (what, r) => {
  if (r.code !== 0) throw new Error(`${what} exited ${r.code}: ${r.stderr.slice(-2000)}`)
  return r
}

export const stopRay = () => time([ray, "stop", "--force"])

export const startHead = (port, extra = []) =>
  must(
    "ray start",
    time([
      ray,
      "start",
      "--head",
      `--port=${port}`,
      "--disable-usage-stats",
      "--include-dashboard=false",
      ...extra
    ])
  )

/**
 * Alternates the measured commands `runs` times (a, b, a, b, …) so drift hits both alike; the wall
 * ms per case, and, given `cpu` (an object), each case's CPU ms in it.
 */
export const alternate = (
  runs,
  cases,
  /** @type {Record<string, Array<number>> | undefined} */ cpu = undefined
) => {
  /** @type {Record<string, Array<number>>} */
  const results = Object.fromEntries(cases.map((c) => [c.name, []]))
  for (let i = 0; i < runs; i++) {
    for (const c of cases) {
      c.before?.()
      const r = c.run()
      if (c.check) c.check(r)
      results[c.name].push(r.ms)
      if (cpu !== undefined) cpu[c.name] = [...(cpu[c.name] ?? []), r.cpuMs]
    }
  }
  return results
}

export const report = (title, results, numerator, denominator) => {
  console.log(`\n${title}`)
  for (const [name, xs] of Object.entries(results)) {
    console.log(
      `  ${name.padEnd(44)} median ${fmt(median(xs)).padStart(10)}   runs: ${xs.map(fmt).join(", ")}`
    )
  }
  const ratio = median(results[numerator]) / median(results[denominator])
  console.log(`  ratio ${numerator} / ${denominator}: ${ratio.toFixed(3)}x`)
  return ratio
}
