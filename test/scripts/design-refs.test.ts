/**
 * The design lives in the repository (docs/design.md): the code's references point at it, and they
 * keep pointing somewhere. Three checks over src/, python/, test/, docs/, bench/, scripts/, examples/
 * and README.md:
 *
 * - no reference to a specification the repository does not contain (`SPEC` followed by a section
 *   sign or "section N", or a bare section sign with a number in code and tests), nor to an
 *   upper-case `*.md` document it does not hold: a newcomer cannot follow one; say it with a
 *   docs/ link or say the reason itself;
 * - every `docs/<file>.md#<anchor>` (and, inside docs/, every relative `(<file>.md#<anchor>)` or
 *   `(#<anchor>)` link) names a file that exists and a heading it has, with the anchor spelt as
 *   GitHub spells a heading's (lower case, punctuation dropped, spaces as hyphens, repeats numbered);
 * - every file of the repository that docs/ and README.md name in backticks (`src/…`,
 *   `python/hyperloom/…`, `test/…`, `scripts/…`, `bench/…`, `examples/…`) exists, so that the
 *   design's "Code:" lines keep pointing at the code.
 *
 * All are shown failing on a made-up tree.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"

const root = path.resolve(import.meta.dirname, "../..")

const SCANNED_DIRS = ["src", "python", "test", "docs", "bench", "scripts", "examples"]
const SCANNED_FILES = ["README.md"]
const TEXT = /\.(?:[cm]?[jt]s|py|md|sh)$/
const SKIPPED_DIRS = new Set(["node_modules", "__pycache__", ".venv", "dist"])

// Built from parts so this file does not match itself.
const SPEC_REF = new RegExp(`\\bSPEC(?:'s)?\\s*(?:${"\u00a7"}|sections?\\s+\\d)`)
// A bare section sign with a number, unless it follows a Markdown file's name (`reliability.md §2`).
const BARE_REF = new RegExp(`(?<!\\.md\\s?)${"\u00a7"}\\s*\\d`)
// An upper-case document's name (the README's): it must exist at the root, in docs/ or beside the file.
// Named with a path from the root (`skills/hyperloom/SKILL.md`), it must be there.
const UPPER_DOC = /(?:[\w.-]+\/)*\b[A-Z][A-Z_]*\.md\b/g
// A file of the repository named in backticks in docs/ or README.md.
const REPO_PATH = /`((?:src|python\/hyperloom|test|scripts|bench|examples)\/[^`\s]*)`/g
const DOCS_REF = /\bdocs\/([\w./-]+\.md)#([\w-]+)/g
const RELATIVE_LINK = /\]\(([\w./-]*\.md)?#([\w-]+)\)/g

const walk = (dir: string, out: Array<string>): Array<string> => {
  if (!fs.existsSync(dir)) return out
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) {
      if (!SKIPPED_DIRS.has(entry.name)) walk(full, out)
    } else if (entry.isFile() && TEXT.test(entry.name)) out.push(full)
  }
  return out
}

/** A heading's anchor as GitHub makes it: its text without markup, lower case, punctuation dropped, spaces as hyphens. */
const slug = (heading: string): string =>
  heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/`/g, "")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-")

/** The anchors of a Markdown text's headings (outside fenced code), repeats numbered as GitHub numbers them. */
const anchors = (markdown: string): Set<string> => {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  let fence: string | null = null
  for (const line of markdown.split("\n")) {
    const f = /^\s*(`{3,}|~{3,})/.exec(line)
    if (f) {
      if (fence === null) fence = f[1]![0]!
      else if (f[1]![0] === fence) fence = null
      continue
    }
    if (fence !== null) continue
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (!h) continue
    const base = slug(h[1]!)
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    out.add(n === 0 ? base : `${base}-${n}`)
  }
  return out
}

/** Every stale specification reference and every broken docs/ anchor under `base`, one line each. */
const findProblems = (base: string): Array<string> => {
  const files = [
    ...SCANNED_DIRS.flatMap((d) => walk(path.join(base, d), [])),
    ...SCANNED_FILES.map((f) => path.join(base, f)).filter((f) => fs.existsSync(f))
  ]
  const anchorCache = new Map<string, Set<string> | null>()
  const anchorsOf = (file: string) => {
    if (!anchorCache.has(file)) {
      anchorCache.set(file, fs.existsSync(file) ? anchors(fs.readFileSync(file, "utf8")) : null)
    }
    return anchorCache.get(file)!
  }
  const problems: Array<string> = []
  for (const file of files) {
    const rel = path.relative(base, file)
    const inDocs = rel.startsWith(`docs${path.sep}`) || rel === "README.md"
    const lines = fs.readFileSync(file, "utf8").split("\n")
    lines.forEach((line, i) => {
      const where = `${rel}:${i + 1}`
      if (SPEC_REF.test(line) || (!inDocs && BARE_REF.test(line))) {
        problems.push(`${where}: a reference to a specification the repository does not hold: ${line.trim()}`)
      }
      if (inDocs) {
        for (const m of line.matchAll(REPO_PATH)) {
          if (m[1]!.includes("*")) continue // a pattern, not a file
          if (!fs.existsSync(path.join(base, m[1]!))) problems.push(`${where}: ${m[1]} does not exist`)
        }
      }
      for (const m of line.matchAll(UPPER_DOC)) {
        const held =
          (m[0].includes("/") && fs.existsSync(path.join(base, m[0]))) ||
          [base, path.join(base, "docs"), path.dirname(file)].some((d) =>
            fs.existsSync(path.join(d, path.basename(m[0])))
          )
        if (!held) problems.push(`${where}: ${m[0]} is not in the repository`)
      }
      const refs: Array<[string, string]> = []
      for (const m of line.matchAll(DOCS_REF)) refs.push([path.join(base, "docs", m[1]!), m[2]!])
      if (rel.endsWith(".md")) {
        for (const m of line.matchAll(RELATIVE_LINK)) {
          refs.push([m[1] ? path.join(path.dirname(file), m[1]) : file, m[2]!])
        }
      }
      for (const [target, anchor] of refs) {
        const known = anchorsOf(target)
        if (known === null) problems.push(`${where}: ${path.relative(base, target)} does not exist`)
        else if (!known.has(anchor)) {
          problems.push(`${where}: ${path.relative(base, target)} has no heading #${anchor}`)
        }
      }
    })
  }
  return problems
}

describe("the design's references", () => {
  it("no reference to an absent specification is left, and every docs/ anchor names a heading", () => {
    assert.deepStrictEqual(findProblems(root), [])
  })

  it("anchors are spelt as GitHub spells headings", () => {
    const md = [
      "# The design",
      "## The repair guards",
      "### Ray's own view of the host",
      "## `hyperloom ray doctor --json` against `ray status`, cold",
      "## 8. Fair: the host's queue",
      "```sh",
      "# not a heading",
      "```",
      "## Resume",
      "## Resume"
    ].join("\n")
    assert.deepStrictEqual(
      [...anchors(md)],
      [
        "the-design",
        "the-repair-guards",
        "rays-own-view-of-the-host",
        "hyperloom-ray-doctor---json-against-ray-status-cold",
        "8-fair-the-hosts-queue",
        "resume",
        "resume-1"
      ]
    )
  })

  it("fails on a specification reference and on an anchor with no heading", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-design-refs-"))
    try {
      // Spelt in parts so that this file's own lines do not match.
      const sign = "\u00a7"
      const D = "docs/"
      const write = (rel: string, text: string) => {
        fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true })
        fs.writeFileSync(path.join(dir, rel), text)
      }
      write(
        "docs/design.md",
        "# Design\n\n## Serving leases\n\nSee [the guards](#the-guards).\n\nCode: `src/a.ts`, `src/gone.ts`.\n"
      )
      write(
        "docs/other.md",
        "# Other\n\nAs [design](design.md#serving-leases) says; (reliability.md §2) is fine.\n"
      )
      write("src/a.ts", `/** Holds a lease (${D}design.md#serving-leases). */\n// (SPEC ${sign}5)\n`)
      write("src/b.ts", `// ${D}design.md#no-such-heading, ${D}missing.md#x\n`)
      write("python/c.py", `"""The bridge (SPEC ${"section"} 5)."""\n# (SPEC ${"sections"} 5 and 11)\n`)
      write(
        "test/d.test.ts",
        `// beside every ${sign}7 field\n// as ${"RAY"}.md says; docs/README.md and README.md are here\n// skills/s/${"SKILL"}.md is here, skills/t/${"SKILL"}.md is not\n`
      )
      write(`skills/s/${"SKILL"}.md`, "---\nname: s\n---\n")
      write("README.md", `[design](${D}design.md#serving-leases)\n`)
      assert.deepStrictEqual(
        findProblems(dir).map((p) => p.replace(/: a reference .*/, ": spec")),
        [
          "src/a.ts:2: spec",
          "src/b.ts:1: docs/design.md has no heading #no-such-heading",
          "src/b.ts:1: docs/missing.md does not exist",
          "python/c.py:1: spec",
          "python/c.py:2: spec",
          "test/d.test.ts:1: spec",
          `test/d.test.ts:2: ${"RAY"}.md is not in the repository`,
          `test/d.test.ts:3: skills/t/${"SKILL"}.md is not in the repository`,
          "docs/design.md:5: docs/design.md has no heading #the-guards",
          "docs/design.md:7: src/gone.ts does not exist"
        ]
      )
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
