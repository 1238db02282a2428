// The one test command (`npm test`): sets up Ray, typechecks, lints, builds, runs the unit tests and
// the real-Ray tests (serially), and ends with `tests: N passed, N failed, N skipped` counted from
// vitest's JSON reports. A test file that crashed on import counts as one failed test. Exits
// non-zero on any failure.
import { spawnSync } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs"

const only = process.argv[2] // optional: "unit" or "ray"
const out = ".test-results"
rmSync(out, { recursive: true, force: true })
mkdirSync(out, { recursive: true })

const step = (name, cmd, args) => {
  process.stderr.write(`\n== ${name}: ${cmd} ${args.join(" ")}\n`)
  const r = spawnSync(cmd, args, { stdio: "inherit", env: process.env })
  return r.status === 0
}

const counts = { passed: 0, failed: 0, skipped: 0 }
let ok = true

const tally = (file, project) => {
  if (!existsSync(file)) {
    process.stderr.write(`no report from the ${project} tests: counting one failure\n`)
    counts.failed += 1
    return
  }
  const report = JSON.parse(readFileSync(file, "utf8"))
  for (const suite of report.testResults ?? []) {
    const tests = suite.assertionResults ?? []
    if (suite.status === "failed" && tests.every((t) => t.status !== "failed")) {
      // The file failed outside any test (import crash, hook failure): one failure.
      process.stderr.write(
        `file failed outside its tests: ${suite.name}: ${(suite.message ?? "").split("\n")[0]}\n`
      )
      counts.failed += 1
    }
    for (const t of tests) {
      if (t.status === "passed") counts.passed += 1
      else if (t.status === "failed") counts.failed += 1
      else counts.skipped += 1
    }
  }
}

if (!only) {
  ok = step("ray setup", "bash", ["scripts/setup-ray.sh"]) && ok
  ok = step("typecheck", "npx", ["tsc", "--noEmit", "-p", "."]) && ok
  ok = step("lint", "npx", ["biome", "check", "."]) && ok
  ok = step("build", "node", ["scripts/build.mjs"]) && ok
  ok = step("bundle smoke test", "node", ["dist/hyperloom.mjs", "--help"]) && ok
  if (!ok) counts.failed += 1
}
for (const project of only ? [only] : ["unit", "ray"]) {
  const file = `${out}/${project}.json`
  const passed = step(`${project} tests`, "npx", [
    "vitest",
    "run",
    "--project",
    project,
    "--reporter=default",
    "--reporter=json",
    `--outputFile.json=${file}`
  ])
  ok = passed && ok
  tally(file, project)
}
if (counts.failed > 0) ok = false
console.log(`tests: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`)
process.exit(ok ? 0 : 1)
