/**
 * What a new user meets on the command line (issue 15): usage errors that say what is wrong, help
 * pages without @effect/cli's boilerplate, and shell completions that complete every command's
 * options. Drives the bundled executable; no Ray needed (a stand-in `ray` that fails).
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { bundleCli, runBundled } from "../support/bundle.js"

let work: string
let cli: string

beforeAll(async () => {
  ;({ work, cli } = await bundleCli())
  fs.writeFileSync(path.join(work, "ray"), "#!/bin/sh\nexit 1\n", { mode: 0o755 })
}, 180_000)

afterAll(() => {
  fs.rmSync(work, { recursive: true, force: true })
})

const run = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  runBundled(cli, work, args, { HYPERLOOM_RAY: path.join(work, "ray"), COLUMNS: "100", ...env })

const usage = (args: ReadonlyArray<string>, ...fragments: ReadonlyArray<string>) => {
  const r = run(args)
  assert.strictEqual(r.code, 2, r.stderr)
  const lines = r.stderr.split("\n").filter((l) => l.trim() !== "")
  assert.strictEqual(lines.length, 1, r.stderr)
  for (const f of fragments) assert.include(lines[0], f)
  return lines[0]!
}

describe("usage errors say what is wrong", () => {
  it("a repeated --gpus is named as repeated, not as unknown", () => {
    const line = usage(
      ["lease", "run", "--gpus", "1", "--gpus", "2", "--", "true"],
      "--gpus",
      "more than once"
    )
    assert.notInclude(line, "did you mean")
    assert.notInclude(line, "unknown option")
  })

  it("--server without a value says it needs one", () => {
    const line = usage(
      ["baseline", "run", "--session", "s", "--gpus", "0", "--server", "--", "true"],
      "--server",
      "needs a value"
    )
    assert.notInclude(line, "unknown option")
  })

  it("a misspelt subcommand gets the nearest one: hyperloom ray stauts", () => {
    usage(["ray", "stauts"], "unknown command", "ray stauts", "did you mean `hyperloom ray status`")
    usage(["lease", "rn", "--gpus", "0", "--", "true"], "did you mean `hyperloom lease run`")
    usage(["stat"], "did you mean `hyperloom state`")
  })

  it("a word far from any command lists the commands of its level", () => {
    usage(["ray", "frobnicate"], "unknown command", "status", "doctor", "ensure", "repair")
  })
})

describe("help pages", () => {
  const pages = [
    ["--help"],
    ["ray", "--help"],
    ["ray", "status", "--help"],
    ["lease", "run", "--help"],
    ["baseline", "run", "--help"],
    ["state", "show", "--help"],
    ["report", "--help"],
    ["sweep", "run", "--help"],
    ["sweep", "show", "--help"],
    ["queue", "--help"],
    ["ray", "doctor", "--help"]
  ]

  // One test per page: a test is one synchronous stretch of CLI starts (spawnSync), and a worker
  // blocked for over 60 s misses vitest's own RPC deadline (an unhandled "Timeout calling
  // onTaskUpdate" that fails the run though every test passed).
  for (const page of pages) {
    it(`${page.join(" ")}: no @effect/cli boilerplate, no banner and no SPEC references`, () => {
      const r = run(page)
      assert.strictEqual(r.code, 0, r.stderr)
      for (const boiler of [
        "A user-defined piece of text.",
        "This setting is optional.",
        "A true or false value.",
        "An integer.",
        "A floating point number.",
        "must be repeated at least 1 times",
        "may be repeated zero or more times",
        "SPEC"
      ]) {
        assert.notInclude(r.stdout, boiler, `${page.join(" ")}`)
      }
      const first = r.stdout.split("\n").find((l) => l.trim() !== "")
      if (page.length > 1) assert.strictEqual(first, "USAGE", `${page.join(" ")} starts with a banner`)
    })
  }

  // One test per page (one CLI start each): four in one test took 34 s at a load average of 18,
  // over the 20 s a test gets.
  for (const page of [
    ["sweep", "run", "--help"],
    ["lease", "run", "--help"],
    ["baseline", "run", "--help"]
  ]) {
    it(`${page.join(" ")}: sweep and group options show what their value is, and repeatable ones are optional in USAGE`, () => {
      const r = run(page)
      const usageText = r.stdout.slice(0, r.stdout.indexOf("DESCRIPTION")).replaceAll("\n", " ")
      assert.notMatch(usageText, / (text|integer)\b/, `${page.join(" ")}: a type as the value's name`)
      if (page[0] !== "sweep") {
        assert.include(usageText, "[--rank-env NAME]...", page.join(" "))
        assert.include(usageText, "[--rank-cwd DIR]", page.join(" "))
      }
      // a usage line wraps between option groups, never inside one
      assert.notMatch(r.stdout.slice(0, r.stdout.indexOf("DESCRIPTION")), /\[[^\]\n]*\n/, page.join(" "))
    })
  }

  it("sweep run's repeatable options and its server command in USAGE", () => {
    const sweep = run(["sweep", "run", "--help"]).stdout.replaceAll("\n", " ")
    assert.include(sweep, "[--param NAME=VALUES]...")
    assert.include(sweep, "[--slo METRIC<=X]...")
    assert.include(sweep, "--server 'SERVER CMD'")
  })

  it("the exit codes wrap at the page's width under each code's text, not twice", () => {
    for (const columns of ["80", "100"]) {
      const r = run(["--help"], { COLUMNS: columns })
      const table = r.stdout.slice(r.stdout.indexOf("Exit codes:"))
      const rows = table.split("\n").slice(1)
      for (const [i, row] of rows.entries()) {
        assert.isAtMost(row.length, Number(columns), row)
        const next = rows[i + 1]
        // a row continued on the next line was filled up to the width first
        if (next !== undefined && /^ {7}\S/.test(next))
          assert.isAbove(
            row.length + 1 + next.trim().split(" ")[0]!.length,
            Number(columns),
            `${row} | ${next}`
          )
      }
      assert.include(table.replace(/\n {7}/g, " "), "an invalid RAY_ADDRESS or HYPERLOOM_* setting")
    }
  })

  it("options show what their value is (--gpus N, --timeout S), not its type", () => {
    const r = run(["lease", "run", "--help"])
    assert.match(r.stdout, /^\$ hyperloom lease run .*--gpus N/m)
    assert.include(r.stdout, "--timeout S")
    assert.notInclude(r.stdout, "--gpus integer")
  })

  it("a command list puts each description under its usage line, aligned", () => {
    const r = run(["ray", "--help"])
    const after = r.stdout.split("\n").slice(r.stdout.split("\n").indexOf("COMMANDS") + 1)
    const entries = after.filter((l) => l.trim() !== "")
    const usages = entries.filter((l) => /^ {2}\S/.test(l))
    const text = entries.filter((l) => !/^ {2}\S/.test(l))
    assert.deepStrictEqual(
      usages.map((l) => l.trim().split(" ")[0]),
      ["status", "doctor", "ensure", "repair"]
    )
    for (const l of text) assert.match(l, /^ {6}\S/, l)
  })
})

describe("shell completions", () => {
  const bashComplete = (words: ReadonlyArray<string>) => {
    const script = run(["--completions", "bash"]).stdout
    const file = path.join(work, "completions.bash")
    fs.writeFileSync(file, script)
    const line = words.map((w) => `'${w}'`).join(" ")
    const r = spawnSync(
      "bash",
      [
        "-c",
        `source '${file}'; COMP_WORDS=(${line}); COMP_CWORD=${words.length - 1}; _hyperloom_bash_completions hyperloom; printf '%s\\n' "\${COMPREPLY[@]}"`
      ],
      { encoding: "utf8" }
    )
    return r.stdout.split("\n").filter((l) => l !== "")
  }

  it("bash completes a leaf command's options", () => {
    assert.includeMembers(bashComplete(["hyperloom", "lease", "run", "--"]), [
      "--gpus",
      "--timeout",
      "--json"
    ])
    assert.includeMembers(bashComplete(["hyperloom", "ray", "doctor", "--"]), ["--gpus", "--no-serving-slot"])
    assert.includeMembers(bashComplete(["hyperloom", "ray", ""]), ["status", "doctor"])
  })

  it("no shell is offered --wizard", () => {
    for (const shell of ["bash", "zsh", "fish"])
      assert.notInclude(run(["--completions", shell]).stdout, "wizard", shell)
  })
})

describe("the docs say what --help says", () => {
  it("--attempt-timeout: docs/baseline.md counts from the command's start, the wait for a slot excluded", () => {
    const doc = fs.readFileSync(path.join(import.meta.dirname, "..", "..", "docs", "baseline.md"), "utf8")
    const item = doc.split("\n- ").find((p) => p.startsWith("`--attempt-timeout S`"))
    assert.isDefined(item, "docs/baseline.md has no --attempt-timeout item")
    assert.notMatch(item!, /waiting for the lease included/)
    assert.include(item!.replace(/\s+/g, " "), "counted from when it starts")
    assert.include(item!.replace(/\s+/g, " "), "not charged")
    const help = run(["baseline", "run", "--help"]).stdout.replace(/\s+/g, " ")
    assert.include(
      help,
      "counted from when it starts (time spent waiting for a slot held by another lease is not charged"
    )
  })
})
