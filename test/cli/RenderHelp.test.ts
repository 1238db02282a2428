/**
 * A list of commands (the root's and a group's help) shows each command's first sentence, not its
 * whole description: the root's help printed every command's paragraph again (12 KB); a command's
 * own --help keeps the whole paragraph.
 */
import { assert, describe, it } from "@effect/vitest"
import { tidyHelp } from "../../src/cli/RenderHelp.js"

const page = (description: string) =>
  [
    "USAGE",
    "",
    "$ hyperloom",
    "",
    "COMMANDS",
    "",
    `  - lease run [--json] --gpus N <CMD>...  ${description}`,
    "  - queue [--json]  Show the host's queue.",
    ""
  ].join("\n")

describe("a command list shows each command's first sentence", () => {
  it("cuts the description after its first sentence; a dot inside parentheses or backticks does not end it", () => {
    const out = tidyHelp(
      page("Hold a lease (see e.g. the README) and run `a.b` in it. Ctrl-C stops it. Exits with its code."),
      true
    )
    assert.include(out, "\n      Hold a lease (see e.g. the README) and run `a.b` in it.\n")
    assert.notInclude(out, "Ctrl-C")
    assert.include(out, "\n      Show the host's queue.")
  })

  it("a first sentence over 200 characters is cut at a word and marked", () => {
    const long = `Run ${"word ".repeat(60)}end. Second.`
    const line = tidyHelp(page(long), true)
      .split("\n")
      .find((l) => l.startsWith("      Run"))
    assert.isDefined(line)
    assert.isAtMost(line!.trim().length, 201)
    assert.isTrue(line!.endsWith("word …"), line)
  })

  it("a command's own page keeps its whole description", () => {
    const own = ["USAGE", "", "$ hyperloom queue", "", "DESCRIPTION", "", "One. Two. Three.", ""].join("\n")
    assert.include(tidyHelp(own, false), "One. Two. Three.")
  })
})
