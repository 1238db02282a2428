/**
 * The strict command line (docs/design.md#the-command-line): options end at `--`, an unknown or misspelt
 * option is a usage error (exit 2) and nothing runs, `--gpus` is required where a lease is held,
 * `lease run` keeps 125 for hyperloom's own failures, `--log-level` goes anywhere, usage errors are
 * JSON under `--json`, help shows the whole command path and fits the terminal.
 *
 * "Nothing runs" is checked with a stand-in `ray` executable that records every call and a CMD
 * that would leave a marker file: neither may happen. Drives the real executable, no Ray needed.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { bundleCliWithRecordingRay, runBundled } from "../support/bundle.js"

let work: string
let cli: string
let fakeRay: string
let rayLog: string
let marker: string

beforeAll(async () => {
  ;({ work, cli, rayLog, marker, fakeRay } = await bundleCliWithRecordingRay())
}, 180_000)

afterAll(() => {
  fs.rmSync(work, { recursive: true, force: true })
})

const run = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  runBundled(cli, work, args, { HYPERLOOM_RAY: fakeRay, ...env })

const lines = (text: string) => text.split("\n").filter((l) => l.trim() !== "")

/** Exit 2, one stderr line containing every fragment, and nothing ran: no `ray` call, no CMD. */
const usageError = (r: ReturnType<typeof run>, ...fragments: ReadonlyArray<string>) => {
  assert.strictEqual(r.code, 2, r.stderr)
  assert.strictEqual(lines(r.stderr).length, 1, r.stderr)
  for (const f of fragments) assert.include(r.stderr, f)
  assert.isFalse(
    fs.existsSync(rayLog),
    `ray was run: ${fs.existsSync(rayLog) ? fs.readFileSync(rayLog, "utf8") : ""}`
  )
  assert.isFalse(fs.existsSync(marker), "CMD ran")
}

const touch = ["touch", "cmd-ran"] as const

describe("options end at `--`: an unknown option is a usage error and nothing runs", () => {
  it("lease run --gpu 1 -- CMD (misspelt --gpus) does not run `--gpu 1 CMD`", () => {
    usageError(run(["lease", "run", "--gpu", "1", "--", ...touch]), "--gpus")
  })

  it("lease run --timout 5 (misspelt --timeout) is not swallowed into CMD", () => {
    usageError(run(["lease", "run", "--gpus", "0", "--timout", "5", "--", ...touch]), "--timout", "--timeout")
  })

  it("an unknown option after a known one, and one in `--opt=value` form", () => {
    usageError(run(["lease", "run", "--gpus", "0", "--bogus", "--", ...touch]), "--bogus")
    usageError(run(["lease", "run", "--gpus", "0", "--timout=5", "--", ...touch]), "--timout")
  })

  it("CMD without `--` is refused (nothing before `--` may become CMD)", () => {
    usageError(run(["lease", "run", "--gpus", "0", ...touch]), "--")
  })

  it("baseline run: a misspelt option is refused and no session is created", () => {
    const session = path.join(work, "session")
    usageError(
      run(["baseline", "run", "--session", session, "--gpus", "0", "--deadlin", "5", "--", ...touch]),
      "--deadlin",
      "--deadline"
    )
    assert.isFalse(fs.existsSync(session))
  })

  it("everything after `--` is CMD, even what looks like hyperloom's options", () => {
    // `--json` after `--` belongs to CMD: stdout is not hyperloom's JSON (the lease fails: no ray).
    const r = run(["lease", "run", "--gpus", "0", "--", "echo", "--json"], {
      HYPERLOOM_RAY: "/nonexistent/hl/ray"
    })
    assert.strictEqual(r.code, 125, r.stderr)
    assert.strictEqual(r.stdout, "")
  })
})

describe("--gpus is required by lease and baseline commands", () => {
  it("lease run without --gpus: exit 2, nothing runs", () => {
    usageError(run(["lease", "run", "--", ...touch]), "--gpus")
  })

  it("baseline run without --gpus: exit 2, nothing runs", () => {
    usageError(run(["baseline", "run", "--session", path.join(work, "s2"), "--", ...touch]), "--gpus")
    assert.isFalse(fs.existsSync(path.join(work, "s2")))
  })

  it("--gpus 0 is a valid explicit value (the lease is attempted)", () => {
    const r = run(["lease", "run", "--gpus", "0", "--", "true"], { HYPERLOOM_RAY: "/nonexistent/hl/ray" })
    assert.notStrictEqual(r.code, 2, r.stderr)
  })
})

describe("lease run keeps 124-127 and 130 apart from CMD's codes, like env and timeout", () => {
  it("hyperloom's own failure exits 125; the precise code stays in the line and the JSON", () => {
    const env = { HYPERLOOM_RAY: "/nonexistent/hl/ray" }
    const r = run(["lease", "run", "--gpus", "0", "--", "true"], env)
    assert.strictEqual(r.code, 125, r.stderr)
    assert.strictEqual(lines(r.stderr).length, 1, r.stderr)
    assert.include(r.stderr, "no ray executable found")
    assert.include(r.stderr, "exit code 3")
    const j = run(["lease", "run", "--json", "--gpus", "0", "--", "true"], env)
    assert.strictEqual(j.code, 125, j.stderr)
    const doc = JSON.parse(j.stdout)
    assert.strictEqual(doc.error.tag, "RayNotFound")
    assert.strictEqual(doc.error.exit_code, 3)
  })

  it("the exit-code table in --help lists 125, 126 and 127", () => {
    const r = run(["--help"])
    for (const code of ["124  lease run", "125  lease run", "126  lease run", "127  lease run"]) {
      assert.include(r.stdout, code)
    }
  })
})

describe("--json: a usage error is a JSON document too", () => {
  it("an invalid value, a missing option and an unknown option", () => {
    for (const [args, fragment] of [
      [["lease", "run", "--json", "--gpus", "x", "--", "true"], "'x'"],
      [["lease", "run", "--json", "--", "true"], "--gpus"],
      [["lease", "run", "--json", "--gpus", "0", "--timout", "1", "--", "true"], "--timout"],
      [["ray", "doctor", "--json", "--gpus", "-1"], "--gpus"]
    ] as const) {
      const r = run(args)
      assert.strictEqual(r.code, 2, `${args.join(" ")}: ${r.stderr}`)
      const doc = JSON.parse(r.stdout)
      assert.strictEqual(doc.error.exit_code, 2)
      assert.include(doc.error.message, fragment)
    }
    assert.isFalse(fs.existsSync(rayLog))
  })

  it("--warmup is bounded: requests sent at once, a thread each on the node", () => {
    for (const cmd of [
      ["sweep", "run", "--session", path.join(work, "w"), "--param", "s=1", "--load", "c=1"],
      ["baseline", "run", "--session", path.join(work, "w")]
    ])
      usageError(
        run([...cmd, "--gpus", "1", "--server", "engine", "--warmup", "100000", "--", "client"]),
        "--warmup must be at most 1024",
        "got 100000"
      )
  })

  it("--json after the unknown option still makes the usage error JSON (it is before `--`)", () => {
    for (const args of [
      ["lease", "run", "--gpus", "1", "--bogus", "--json", "--", ...touch],
      [
        "baseline",
        "run",
        "--session",
        path.join(work, "s-json"),
        "--gpus",
        "1",
        "--bogus",
        "--json",
        "--",
        ...touch
      ]
    ]) {
      const r = run(args)
      assert.strictEqual(r.code, 2, `${args.join(" ")}: ${r.stderr}`)
      const doc = JSON.parse(r.stdout)
      assert.strictEqual(doc.error.tag, "UsageError")
      assert.strictEqual(doc.error.exit_code, 2)
      assert.include(doc.error.message, "--bogus")
      assert.include(r.stderr, "unknown option --bogus")
    }
    assert.isFalse(fs.existsSync(path.join(work, "s-json")))
    assert.isFalse(fs.existsSync(rayLog))
    assert.isFalse(fs.existsSync(marker), "CMD ran")
  })

  it("--json only once, whether before or after the unknown option", () => {
    const r = run(["lease", "run", "--json", "--gpus", "1", "--bogus", "--", ...touch])
    assert.strictEqual(r.code, 2, r.stderr)
    assert.strictEqual(JSON.parse(r.stdout).error.exit_code, 2)
  })
})

describe("hints are command lines that work as printed", () => {
  it("state show on a missing session suggests a baseline run that passes usage checks (--gpus included)", () => {
    const session = path.join(work, "hinted")
    const r = run(["state", "show", "--session", session])
    assert.strictEqual(r.code, 8, r.stderr)
    const hint = /`hyperloom (baseline run [^`]*)`/.exec(r.stderr)?.[1]
    assert.isDefined(hint, r.stderr)
    assert.include(hint!, "--gpus N")
    const args = hint!
      .replace(" -- CMD…", " -- true")
      .split(" ")
      .map((a) => (a === "N" ? "0" : a))
    const b = run(args, { HYPERLOOM_RAY: "/nonexistent/hl/ray" })
    assert.notStrictEqual(b.code, 2, `${args.join(" ")}: ${b.stderr}`)
    assert.notInclude(b.stderr, "--gpus")
  })
})

describe("--log-level is accepted wherever users put it", () => {
  for (const args of [
    ["--log-level", "debug", "state", "show", "--session", "/nonexistent/hl"],
    ["state", "show", "--log-level", "debug", "--session", "/nonexistent/hl"],
    ["state", "show", "--session", "/nonexistent/hl", "--log-level", "debug"],
    ["state", "show", "--session", "/nonexistent/hl", "--log-level=warning"]
  ]) {
    it(args.join(" "), () => {
      const r = run(args)
      assert.strictEqual(r.code, 8, r.stderr)
      assert.include(r.stderr, "no baseline session")
    })
  }

  it("an invalid level is a usage error", () => {
    usageError(run(["--log-level", "loud", "state", "show", "--session", "/x"]), "--log-level", "loud")
  })

  it("in a lease, before `--`, without becoming part of CMD", () => {
    usageError(
      run(["lease", "run", "--log-level", "debug", "--gpus", "0", "--timout", "1", "--", ...touch]),
      "--timout"
    )
  })
})

describe("help", () => {
  it("shows the whole command path", () => {
    const r = run(["lease", "run", "--help"])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.match(r.stdout, /^\$ hyperloom lease run /m)
    assert.notMatch(r.stdout, /^\$ run /m)
    const d = run(["ray", "doctor", "--help"])
    assert.match(d.stdout, /^\$ hyperloom ray doctor /m)
  })

  // One test per command: a test is one synchronous stretch of CLI starts (spawnSync), and a
  // worker blocked for 60 s misses vitest's own RPC deadline (test/support/unitSetup.ts).
  for (const command of [
    ["ray", "status"],
    ["ray", "doctor"],
    ["ray", "ensure"],
    ["ray", "repair"],
    ["lease", "run"],
    ["baseline", "run"],
    ["state", "show"],
    ["sweep", "run"],
    ["sweep", "show"],
    ["report"]
  ]) {
    it(`${command.join(" ")} --help shows its whole path in USAGE`, () => {
      const r = run([...command, "--help"])
      assert.strictEqual(r.code, 0, `${command.join(" ")}: ${r.stderr}`)
      const usage = r.stdout.split("\n").filter((l) => l.startsWith("$ "))
      assert.isNotEmpty(usage, `${command.join(" ")}: no USAGE line in\n${r.stdout}`)
      for (const l of usage) assert.isTrue(l.startsWith(`$ hyperloom ${command.join(" ")} `), l)
    })
  }

  it("wraps to the terminal width (COLUMNS when not a terminal)", () => {
    for (const columns of [60, 100]) {
      const r = run(["baseline", "run", "--help"], { COLUMNS: String(columns) })
      assert.strictEqual(r.code, 0, r.stderr)
      const long = r.stdout.split("\n").filter((l) => l.length > columns && / /.test(l.trim()))
      assert.deepStrictEqual(long, [], `lines wider than ${columns}`)
    }
    // Without wrapping, baseline run's description is one line of several hundred characters.
    const wide = run(["baseline", "run", "--help"], { COLUMNS: "100" })
    assert.isAbove(
      lines(wide.stdout).length,
      lines(run(["baseline", "run", "--help"], { COLUMNS: "1000" }).stdout).length
    )
  })

  it("shell completions are generated (bash, zsh, fish)", () => {
    for (const shell of ["bash", "zsh", "fish"]) {
      const r = run(["--completions", shell])
      assert.strictEqual(r.code, 0, r.stderr)
      assert.include(r.stdout, "hyperloom")
      assert.include(r.stdout, "lease")
    }
  })
})
