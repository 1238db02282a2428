// The one test command (`npm test`): sets up Ray, typechecks, lints, builds, runs the unit tests
// alongside the real-Ray tests, prints each file's time, each step's CPU and the whole run's CPU
// (user + sys, so that a CPU regression shows even when the machine's load hides it), and ends with
// `tests: N passed, N failed, N skipped` counted from vitest's JSON reports. A test file that
// crashed on import counts as one failed test. Exits non-zero on any failure.
//
// The real-Ray tests run `ray stop --force`, which kills every Ray process on the host. Where this
// process may create namespaces (root; scripts/own-host.sh), each real-Ray test file runs on a
// host of its own (private PID, network and mount namespaces, own /tmp and /dev/shm), so several files
// run at once (HYPERLOOM_TEST_RAY_LANES, default 3; in the full run one more once the unit tests
// are done), the longest first, and this host's own Ray is never touched.
// Otherwise (or with HYPERLOOM_TEST_OWN_HOSTS=0) the files run one at a time on this host, and it refuses first (one line on stderr,
// exit 3) when Ray processes it did not start are running, unless
// HYPERLOOM_TEST_DISPOSABLE_HOST=1 says this is a disposable test host (.ci/run).
import { spawn, spawnSync } from "node:child_process"
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { refusal } from "./host-ray.mjs"

// Optional: "unit" or "ray", then test files of that project (`npm run test:ray -- test/ray/x.test.ts`).
const only = process.argv[2]
const chosen = process.argv.slice(3).map((f) => f.replace(/^(\.\/)?test\/ray\//, ""))
const unknown = only === "ray" ? chosen.filter((f) => !existsSync(`test/ray/${f}`)) : []
if (unknown.length > 0) {
  process.stderr.write(
    `npm test: no such real-Ray test file: ${unknown.join(", ")} (they are in test/ray/)\n`
  )
  process.exit(2)
}

/** Can each real-Ray test file get a host of its own? (HYPERLOOM_TEST_OWN_HOSTS=0: never.) */
const ownHosts =
  process.env.HYPERLOOM_TEST_OWN_HOSTS !== "0" &&
  spawnSync("bash", ["scripts/own-host.sh", "true"], { stdio: "ignore" }).status === 0
const lanes = ownHosts ? Math.max(1, Number(process.env.HYPERLOOM_TEST_RAY_LANES ?? 3) || 1) : 1

// Even with hosts of their own, whose tests cannot reach this host's Ray, it refuses
// (docs/design.md#the-test-suite-protects-the-host-too).
if (only !== "unit") {
  // HYPERLOOM_TEST_PROC_ROOT: test-only, points the scan at a recorded /proc tree.
  const refused = refusal(process.env, process.env.HYPERLOOM_TEST_PROC_ROOT ?? "/proc")
  if (refused !== undefined) {
    process.stderr.write(`${refused}\n`)
    process.exit(3)
  }
}
const runBegan = Date.now()
const out = ".test-results"
rmSync(out, { recursive: true, force: true })
mkdirSync(out, { recursive: true })

/** Seconds since the run began, for the steps' lines. */
const sinceStart = (t = Date.now()) => `+${((t - runBegan) / 1000).toFixed(0)} s`

/**
 * CPU seconds (user + sys) of this process and every process it waited for, which is the whole
 * run: each step's child is waited for, and each waits for its own (Linux: /proc/self/stat's utime,
 * stime, cutime, cstime). undefined where there is no /proc.
 */
const cpuSeconds = () => {
  try {
    const stat = readFileSync("/proc/self/stat", "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    // fields[0] is the state (field 3): utime..cstime are fields 14..17
    const ticks = fields.slice(11, 15).reduce((sum, f) => sum + Number(f), 0)
    return ticks / 100
  } catch {
    return undefined
  }
}

/** GNU time, to give each step's CPU (user + sys of the step and what it waited for), if installed. */
const TIME = "/usr/bin/time"
const timed = existsSync(TIME) && spawnSync(TIME, ["-f", "%U", "true"], { stdio: "ignore" }).status === 0
/** CPU seconds per step name, for the summary. */
const stepCpu = new Map()
let stepCount = 0

/** Runs one step to completion, its output to the console (or, with `log`, to a file printed after). */
const step = (name, cmd, args, log) =>
  new Promise((resolve) => {
    const began = Date.now()
    process.stderr.write(
      `\n== ${name}: ${cmd} ${args.join(" ")} (at ${sinceStart(began)})${log ? ` (output after it ends)` : ""}\n`
    )
    const cpuFile = `${out}/cpu-${++stepCount}.txt`
    const [run, ...runArgs] = timed ? [TIME, "-f", "%U %S", "-o", cpuFile, cmd, ...args] : [cmd, ...args]
    const child = spawn(run, runArgs, {
      stdio: log ? ["ignore", "pipe", "pipe"] : "inherit",
      env: process.env
    })
    let text = ""
    if (log) {
      child.stdout.on("data", (d) => (text += d))
      child.stderr.on("data", (d) => (text += d))
    }
    child.on("close", (code) => {
      const secs = ((Date.now() - began) / 1000).toFixed(1)
      if (log) process.stderr.write(`\n== ${name} (output)\n${text}`)
      // GNU time's last line is "<user> <sys>" (a line before it says how a failed command ended).
      const cpu = timed && existsSync(cpuFile) ? readFileSync(cpuFile, "utf8").trim().split("\n").at(-1) : ""
      const [user, sys] = (cpu ?? "").split(" ").map(Number)
      const cpuSecs = Number.isFinite(user) && Number.isFinite(sys) ? user + sys : undefined
      if (cpuSecs !== undefined) stepCpu.set(name, cpuSecs)
      process.stderr.write(
        `== ${name}: ${code === 0 ? "ok" : `FAILED (exit ${code})`} in ${secs} s${cpuSecs === undefined ? "" : `, CPU ${cpuSecs.toFixed(1)} s`} (ended at ${sinceStart()})\n`
      )
      resolve(code === 0)
    })
  })

const counts = { passed: 0, failed: 0, skipped: 0 }
const timings = []
/** Every failure, one line each, repeated next to the summary (CI may keep only the tail). */
const failures = []
let ok = true

const tally = (file, project) => {
  if (!existsSync(file)) {
    process.stderr.write(`no report from the ${project} tests: counting one failure\n`)
    failures.push(`${project}: no report (vitest did not finish)`)
    counts.failed += 1
    return
  }
  const report = JSON.parse(readFileSync(file, "utf8"))
  for (const suite of report.testResults ?? []) {
    timings.push({
      project,
      file: suite.name.replace(`${process.cwd()}/`, ""),
      ms: suite.endTime - suite.startTime
    })
    const tests = suite.assertionResults ?? []
    if (suite.status === "failed" && tests.every((t) => t.status !== "failed")) {
      // The file failed outside any test (import crash, hook failure): one failure.
      process.stderr.write(
        `file failed outside its tests: ${suite.name}: ${(suite.message ?? "").split("\n")[0]}\n`
      )
      failures.push(`${project}: ${timings.at(-1).file}: ${(suite.message ?? "").split("\n")[0]}`)
      counts.failed += 1
    }
    for (const t of tests) {
      if (t.status === "passed") counts.passed += 1
      else if (t.status === "failed") {
        counts.failed += 1
        const why = (t.failureMessages ?? [""])[0].split("\n")[0].slice(0, 300)
        failures.push(`${project}: ${timings.at(-1).file} > ${t.fullName}: ${why}`)
      } else counts.skipped += 1
    }
  }
}

const vitest = (project, log, files = [], wrap = [], name = `${project} tests`, report = project) => {
  const file = `${out}/${report}.json`
  // vitest's own bin, not `npx vitest` (npx costs a second or more a run on a loaded machine).
  const args = [
    "node_modules/.bin/vitest",
    "run",
    "--project",
    project,
    "--reporter=default",
    "--reporter=json",
    `--outputFile.json=${file}`,
    ...files
  ]
  const [cmd, ...rest] = [...wrap, ...args]
  return step(name, cmd, rest, log).then((passed) => {
    tally(file, project)
    return passed
  })
}

/**
 * Seconds each real-Ray file took in a clean-clone CI run on a quiet machine (780 s, three lanes
 * beside the unit tests, four after them; docs/performance.md), the four sweep files and mcp since
 * without the warm-up their stand-in engine does not need (measured alone, scaled to that run):
 * the longest start first, so that the lanes end together. A file not listed counts as
 * NEW_FILE_SECONDS.
 */
const RAY_SECONDS = {
  sweep: 260,
  "sweep-faults": 240,
  "two-hosts": 133,
  "sweep-lifecycle": 130,
  faults: 129,
  repair: 112,
  "sweep-remote": 100,
  serving: 97,
  group: 91,
  "repair-faults": 89,
  guards: 84,
  mcp: 83,
  baseline: 82,
  waiting: 72,
  containment: 66,
  "lease-bridge": 61,
  queue: 53,
  inspector: 52,
  inprocess: 51,
  "two-hosts-contained": 48,
  output: 45,
  signals: 37,
  bridge: 32,
  terminal: 31,
  gpus: 28,
  errors: 19,
  "group-bridge": 9,
  proto: 5
}
const NEW_FILE_SECONDS = 60

const nameOf = (f) => f.replace(/\.test\.ts$/, "")
const secondsOf = (f) => RAY_SECONDS[nameOf(f)] ?? NEW_FILE_SECONDS
/** The real-Ray files still to run, the longest first; the lanes take them from the front. */
const rayQueue = readdirSync("test/ray")
  .filter((f) => f.endsWith(".test.ts") && (chosen.length === 0 || chosen.includes(f)))
  .sort((x, y) => secondsOf(y) - secondsOf(x) || x.localeCompare(y))
let rayAllPassed = true

/**
 * One lane of real-Ray files: takes the next file from the queue until none is left, each file in
 * a vitest run of its own on a host of its own (its tests one after the other).
 */
const rayLane = async (lane) => {
  // The bundle was made before the lanes start: no run rebuilds it (test/ray/globalSetup.ts).
  process.env.HYPERLOOM_TEST_BUNDLED = "1"
  for (let f = rayQueue.shift(); f !== undefined; f = rayQueue.shift()) {
    const wrap = ["bash", "scripts/own-host.sh"]
    const passed = await vitest(
      "ray",
      true,
      [`test/ray/${f}`],
      wrap,
      `ray ${f} (lane ${lane})`,
      `ray-${nameOf(f)}`
    )
    rayAllPassed = passed && rayAllPassed
  }
}

/**
 * The real-Ray tests: one vitest run for them all on this host (one file at a time), or, with
 * hosts of their own, `lanes` lanes of files (rayLane); `extra` lanes (the full run's check lane
 * once the unit tests are done) join them. The CLI is bundled once before (not by every run).
 */
const rayTests = async (extra = []) => {
  if (!ownHosts)
    return vitest(
      "ray",
      false,
      chosen.map((f) => `test/ray/${f}`)
    )
  process.stderr.write(
    `\n== ray tests: ${rayQueue.length} files, ${lanes} at a time${extra.length > 0 ? ` (${lanes + extra.length} once the unit tests are done)` : ""}, each on a host of its own\n`
  )
  await Promise.all([...Array.from({ length: lanes }, (_, i) => rayLane(i + 1)), ...extra])
  return rayAllPassed
}

const began = Date.now()
const cpuBegan = cpuSeconds()
if (only === "ray") {
  if (await step("bundle", "node", ["scripts/build.mjs", "--bundle-only"])) ok = (await rayTests()) && ok
  else {
    counts.failed += 1
    failures.push("the bundle failed (see above)")
  }
} else if (only) {
  ok = (await vitest(only, false, process.argv.slice(3))) && ok
} else {
  // The real-Ray tests mostly wait on Ray (heads starting, leases, sleeps); the checks and the
  // unit tests use the CPU. So they run side by side (the output of a step that runs beside
  // another is printed when it ends):
  // - Ray's setup beside the CLI's bundle (seconds), then `lanes` lanes of real-Ray files;
  // - the unit lane: the unit tests at once (the longest CPU step, and one thread: the sooner it
  //   starts, the sooner its lane is free); then, with hosts of their own, it joins the real-Ray
  //   lanes for the files still queued (the CPU the unit tests used is free by then);
  // - the check lane: typecheck, bench typecheck, lint, Python lint (~40 s of CPU, nothing waits
  //   for them);
  // - the library's build (tsc, only the consumer test needs it), then the consumer test (npm pack
  //   and install: mostly waits on npm).
  const rayReady = (async () => {
    // The bundle needs no Ray: it is made while Ray's setup checks (or installs) the virtualenv.
    const [setUp, bundled] = await Promise.all([
      step("ray setup", "bash", ["scripts/setup-ray.sh"]),
      step("bundle", "node", ["scripts/build.mjs", "--bundle-only"], true)
    ])
    let fine = setUp && bundled
    fine = (await step("bundle smoke test", "node", ["dist/hyperloom.mjs", "--help"], true)) && fine
    if (!fine) {
      counts.failed += 1
      failures.push("ray lane: Ray setup, the bundle or its smoke test failed (see above)")
    }
    return fine
  })()
  // The library build, the consumer tests and the checks have minutes of slack (they end within
  // the first ~100 s of a run whose real-Ray lanes end last): niced, their CPU goes to the lanes
  // and the unit tests first when the two cores are full, and is not lost when they are not.
  const NICE = ["nice", "-n", "15"]
  const libLane = (async () => {
    if (
      !(await step(
        "library build",
        NICE[0],
        [...NICE.slice(1), "node", "scripts/build.mjs", "--lib-only"],
        true
      ))
    ) {
      counts.failed += 1
      failures.push("library build failed (see above)")
      return false
    }
    // npm pack takes the bundle too.
    await rayReady
    return vitest("consumer", true, [], NICE)
  })()
  const checkLane = (async () => {
    // The packages' own bins, not `npx` (~0.9 s of CPU a start, `/usr/bin/time npx tsc --version`).
    const niced = (name, cmd, args) => step(name, NICE[0], [...NICE.slice(1), cmd, ...args], true)
    let fine = await niced("typecheck", "node_modules/.bin/tsc", ["--noEmit", "-p", "."])
    // The bench scripts, checked against the library's types, so that a bench cannot rot unseen.
    fine = (await niced("bench typecheck", "node_modules/.bin/tsc", ["-p", "bench"])) && fine
    fine = (await niced("lint", "node_modules/.bin/biome", ["check", "."])) && fine
    fine = (await niced("python lint", "bash", ["scripts/lint-python.sh"])) && fine
    if (!fine) {
      counts.failed += 1
      failures.push("check lane: the typecheck or the lint failed (see above)")
    }
    return fine
  })()
  const unitLane = (async () => {
    const fine = await vitest("unit", true)
    if (ownHosts) {
      await rayReady
      await rayLane(lanes + 1)
    }
    return fine
  })()
  const rayOk = rayReady.then(() => rayTests(ownHosts ? [unitLane] : []))
  const results = await Promise.all([rayReady, rayOk, libLane, checkLane, unitLane])
  ok = results.every(Boolean) && ok
}
process.stderr.write("\n== time per test file\n")
for (const t of timings.sort((a, b) => b.ms - a.ms)) {
  process.stderr.write(`${(t.ms / 1000).toFixed(1).padStart(8)} s  ${t.project.padEnd(4)}  ${t.file}\n`)
}
if (stepCpu.size > 0) {
  process.stderr.write("\n== CPU per step (user + sys, with everything the step waited for)\n")
  for (const [name, secs] of [...stepCpu].sort((a, b) => b[1] - a[1])) {
    process.stderr.write(`${secs.toFixed(1).padStart(8)} s  ${name}\n`)
  }
}
const cpuEnd = cpuSeconds()
process.stderr.write(`\n== total: ${((Date.now() - began) / 1000).toFixed(1)} s\n`)
if (cpuEnd !== undefined && cpuBegan !== undefined) {
  // The processes of the run that nobody waited for (Ray's daemons left to init) are not in it.
  process.stderr.write(`== CPU: ${(cpuEnd - cpuBegan).toFixed(1)} s (user + sys of the whole run)\n`)
}
if (failures.length > 0) {
  process.stderr.write(`\n== failed (${failures.length})\n${failures.map((f) => `  ${f}\n`).join("")}`)
}
if (counts.failed > 0) ok = false
console.log(`tests: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`)
process.exit(ok ? 0 : 1)
