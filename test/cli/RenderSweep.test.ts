/**
 * `sweep show` as text (docs/design.md#best-and-tie): the best's server and client command lines
 * are complete and ready to paste. The test pastes them: the lines after `best:` go to a real `sh`
 * as they are printed, with a server and a client that print their argv; what they print must be
 * the argv hyperloom ran (quotes, spaces, `$`, an apostrophe, `$HYPERLOOM_…` references expanded as
 * hyperloom would), in the directory the sweep ran in.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { renderSweepText } from "../../src/cli/RenderSweep.js"
import { withSummary } from "../../src/domain/Sweep.js"
import { scriptedSweep } from "../support/sweep.js"

describe("sweep show (text)", () => {
  it.effect("the best's command lines paste into a shell and run the argv hyperloom ran, where it ran", () =>
    Effect.gen(function* () {
      const work = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-show-"))
      const cwd = path.join(work, "it's a dir")
      fs.mkdirSync(cwd)
      // `./argv` prints its arguments one a line, and where it runs
      fs.writeFileSync(
        path.join(cwd, "argv"),
        `#!/bin/sh\npwd\nfor a in "$@"; do printf '[%s]\\n' "$a"; done\n`,
        { mode: 0o755 }
      )
      const doc = yield* scriptedSweep({
        server: "./argv serve --max-num-seqs {seqs} --port $HYPERLOOM_PORT --note 'two words' --home \\$HOME",
        client: [
          "./argv",
          "--max-concurrency",
          "{c}",
          "--base-url",
          "$HYPERLOOM_BASE_URL",
          "it's",
          "$PATH",
          ""
        ],
        gpus: 1,
        cwd
      })
      const text = renderSweepText("/s", doc)
      const block = text.slice(text.indexOf("\nbest:")).split("\n").slice(2)
      assert.include(block.join("\n"), "# the server")
      const sh = spawnSync("sh", ["-e"], {
        input: `${block.join("\n")}\n`,
        encoding: "utf8",
        env: { PATH: "/usr/bin:/bin" }
      })
      assert.strictEqual(sh.status, 0, sh.stderr)
      const want = [
        cwd,
        "[serve]",
        "[--max-num-seqs]",
        "[8]",
        "[--port]",
        "[8000]",
        "[--note]",
        "[two words]",
        "[--home]",
        "[$HOME]",
        cwd,
        "[--max-concurrency]",
        "[8]",
        "[--base-url]",
        "[http://127.0.0.1:8000]",
        "[it's]",
        "[$PATH]",
        "[]"
      ]
      assert.deepStrictEqual(sh.stdout.trim().split("\n"), want)
      fs.rmSync(work, { recursive: true, force: true })
    })
  )
})

describe("sweep show (text): long values (issue 27 item 8)", () => {
  it.effect(
    "a 100 KB param value is cut with an ellipsis in the tables, whole in the pasteable command",
    () =>
      Effect.gen(function* () {
        const long = "x".repeat(100_000)
        const doc = yield* scriptedSweep({
          server: `serve --max-num-seqs {seqs} --note ${long}`,
          client: ["bench", "--max-concurrency", "{c}"],
          gpus: 1
        })
        const withLong = withSummary({
          ...doc,
          combinations: doc.combinations.map((c) => ({ ...c, params: { ...c.params, note: long } }))
        })
        const text = renderSweepText("/s", withLong)
        const [head, best] = [text.slice(0, text.indexOf("\nbest:")), text.slice(text.indexOf("\nbest:"))]
        for (const line of head.split("\n")) assert.isBelow(line.length, 400, line.slice(0, 200))
        assert.include(head, "…")
        assert.include(best.split("\n")[1]!, "…")
        assert.include(best, `--note ${long}`)
      })
  )
})
