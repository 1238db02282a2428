// Faults injected into real repairs, counted (docs/design.md#one-repairer-per-host). Each round starts a
// lone slot-less head, then either
//   - runs `hyperloom ray ensure` paused at one step of the repair (test-only
//     HYPERLOOM_TEST_REPAIR_PAUSE: before_stop, before_start, before_slot), SIGKILLs it there, and
//     runs `hyperloom ray ensure` again: the host must end with a healthy head with the slot, and the
//     second ensure must not wait for the dead holder's lock; or
//   - races two `hyperloom ray ensure` (the second with another RAY_TMPDIR): exactly one repairs,
//     and no two repair windows (final guard check → restarted head, timed as the log lines
//     arrive) overlap.
// Needs `npm run build` first; starts and stops its own heads (`ray stop --force`): run it on a
// disposable host, or on a host of its own: `bash scripts/own-host.sh node bench/repair-faults.mjs`.
//
//   node bench/repair-faults.mjs [rounds per fault]     (default 5: 15 kills and 5 races)
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { cli, ray, root, stopRay, time } from "./lib.mjs"

const rounds = Number(process.argv[2] ?? 5)
const PORT = 6394
const ENV = { HL_RAY_HEAD_PORT: String(PORT), RAY_USAGE_STATS_ENABLED: "0" }
const REPAIR_LOG = "Ray head has no serving_slot resource; restarting the local head with it"
const RESTARTED_LOG = "Ray head restarted at"
const STEPS = ["before_stop", "before_start", "before_slot"]

const env = (extra = {}) => {
  /** @type {NodeJS.ProcessEnv} */
  const e = { ...process.env, ...ENV, ...extra }
  delete e.RAY_ADDRESS
  delete e.HYPERLOOM_NODES
  return e
}

/** `hyperloom ray ensure --json`, its stderr lines timed as they arrive; `onLine` may SIGKILL it. */
const ensure = (extra = {}, onLine) =>
  new Promise((resolve) => {
    const started = Date.now()
    const child = spawn(process.execPath, [cli, "ray", "ensure", "--json"], {
      env: env(extra),
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    let partial = ""
    const lines = []
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.setEncoding("utf8")
    child.stderr.on("data", (d) => {
      stderr += d
      partial += d
      for (let nl = partial.indexOf("\n"); nl >= 0; nl = partial.indexOf("\n")) {
        const text = partial.slice(0, nl)
        partial = partial.slice(nl + 1)
        lines.push({ at: Date.now(), text })
        onLine?.(text, () => child.kill("SIGKILL"))
      }
    })
    const timer = setTimeout(() => child.kill("SIGKILL"), 180_000)
    child.on("exit", (code, signal) => {
      clearTimeout(timer)
      let json
      try {
        json = JSON.parse(stdout)
      } catch {
        json = undefined
      }
      resolve({ code, signal, stderr, lines, json, ms: Date.now() - started })
    })
  })

const healthyHead = () => {
  const r = time(["node", cli, "ray", "status", "--json"], env())
  if (r.code !== 0) return false
  const s = JSON.parse(r.stdout)
  return (
    s.resources.total.serving_slot === 1 &&
    s.nodes.filter((n) => n.state === "ALIVE").length === 1 &&
    s.address.endsWith(`:${PORT}`)
  )
}

const windows = (run) => {
  const out = []
  let start
  for (const l of run.lines) {
    if (l.text.includes(REPAIR_LOG)) start = l.at
    else if (start !== undefined && l.text.includes(RESTARTED_LOG)) {
      out.push([start, l.at])
      start = undefined
    }
  }
  if (start !== undefined) out.push([start, Number.POSITIVE_INFINITY])
  return out
}

const counts = {
  faults: 0,
  killedAtStep: 0,
  recovered: 0,
  healthyAfter: 0,
  waitedForDeadHolder: 0,
  races: 0,
  raceRepairs: 0,
  raceBothOk: 0,
  overlaps: 0,
  headRetries: 0
}
/** @type {Record<string, { faults: number, healthy: number, nextEnsureMs: Array<number> }>} */
const perStep = Object.fromEntries(STEPS.map((s) => [s, { faults: 0, healthy: 0, nextEnsureMs: [] }]))

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** A head Ray reports as up: one ALIVE node at PORT (what `hyperloom ray status` reads). */
const headUp = () => {
  const r = time(["node", cli, "ray", "status", "--json"], env())
  if (r.code !== 0) return false
  try {
    const s = JSON.parse(r.stdout)
    return s.address.endsWith(`:${PORT}`) && s.nodes.filter((n) => n.state === "ALIVE").length === 1
  } catch {
    return false
  }
}

/**
 * A lone slot-less head, robust to a loaded host: `ray start` can fail on its own ("Failed to get
 * node info: Deadline Exceeded" when the raylet registers late), so each try is bounded, a failed
 * one is cleaned up with `ray stop --force`, and the head counts only once Ray reports it up.
 */
const slotless = async () => {
  const tries = 4
  let last = ""
  for (let t = 1; t <= tries; t++) {
    stopRay()
    const r = spawnSync(
      ray,
      [
        "start",
        "--head",
        `--port=${PORT}`,
        "--disable-usage-stats",
        "--include-dashboard=false",
        "--num-cpus=2"
      ],
      { env: env(), encoding: "utf8", timeout: 120_000, maxBuffer: 16 * 1024 * 1024 }
    )
    if (r.status === 0) {
      const deadline = Date.now() + 60_000
      while (Date.now() < deadline) {
        if (headUp()) return
        await sleep(1000)
      }
      last = "ray start succeeded but the head was not up within 60 s"
    } else {
      last = `ray start exited ${r.status ?? r.signal}: ${`${r.stderr ?? ""}${r.stdout ?? ""}`.slice(-800)}`
    }
    counts.headRetries += 1
    console.error(`ray start try ${t}/${tries} failed: ${last}`)
    await sleep(2000 * t)
  }
  throw new Error(`could not start a head after ${tries} tries: ${last}`)
}

try {
  for (let round = 0; round < rounds; round++) {
    for (const step of STEPS) {
      await slotless()
      counts.faults += 1
      perStep[step].faults += 1
      const killed = await ensure({ HYPERLOOM_TEST_REPAIR_PAUSE: step }, (text, kill) => {
        if (text.includes(`repair paused at ${step}`)) kill()
      })
      if (killed.signal === "SIGKILL") counts.killedAtStep += 1
      const next = await ensure()
      perStep[step].nextEnsureMs.push(next.ms)
      if (next.code === 0) counts.recovered += 1
      if (next.stderr.includes("waiting for")) counts.waitedForDeadHolder += 1
      if (healthyHead()) {
        counts.healthyAfter += 1
        perStep[step].healthy += 1
      } else {
        console.error(`round ${round} ${step}: not healthy after; next ensure: ${next.stderr.slice(-1500)}`)
      }
    }
    await slotless()
    counts.races += 1
    // The second racer has another Ray temp dir: the host lock is the same whatever RAY_TMPDIR.
    const otherTmp = fs.mkdtempSync(path.join(os.tmpdir(), "hl-bench-raytmp-"))
    const runs = await Promise.all([ensure(), ensure({ RAY_TMPDIR: otherTmp })])
    fs.rmSync(otherTmp, { recursive: true, force: true })
    const [a, b] = runs.map(windows)
    counts.raceRepairs += a.length + b.length
    if (runs.every((r) => r.code === 0)) counts.raceBothOk += 1
    for (const x of a) for (const y of b) if (x[0] < y[1] && y[0] < x[1]) counts.overlaps += 1
  }
} finally {
  stopRay()
}

console.log(`\nrepair fault injection: ${rounds} round(s) × (${STEPS.length} kills + 1 race), ray at ${ray}`)
for (const step of STEPS) {
  const p = perStep[step]
  const ms = [...p.nextEnsureMs].sort((x, y) => x - y)
  console.log(
    `  SIGKILL ${step.padEnd(13)} faults ${p.faults}, healthy head with the slot after ${p.healthy}/${p.faults}, next ensure median ${(ms[Math.floor(ms.length / 2)] / 1000).toFixed(2)} s`
  )
}
console.log(
  `  faults injected ${counts.faults}; killed at the step ${counts.killedAtStep}; next ensure ok ${counts.recovered}; ` +
    `healthy after ${counts.healthyAfter}; next ensure waited for the dead holder ${counts.waitedForDeadHolder}`
)
console.log(
  `  races ${counts.races}; both ensures ok ${counts.raceBothOk}; repairs ${counts.raceRepairs} (one per race expected); overlapping repair windows ${counts.overlaps}`
)
const ok =
  counts.healthyAfter === counts.faults &&
  counts.killedAtStep === counts.faults &&
  counts.waitedForDeadHolder === 0 &&
  counts.overlaps === 0 &&
  counts.raceRepairs === counts.races &&
  counts.raceBothOk === counts.races
console.log(`  ray start retried on a loaded host: ${counts.headRetries}`)
console.log(`  invariants held: ${ok ? "yes" : "NO"}`)
process.exit(ok ? 0 : 1)
