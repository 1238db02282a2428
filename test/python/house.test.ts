/**
 * The Python side's shape (issue 26 items 1, 3, 4), read from its sources with Python's `ast`
 * (nothing is run, no Ray): the serving engine's life and the runners' shared names have one
 * home (hyperloom.engine); the files that travel with a lease hold every module their entry
 * imports, however deep (a module imported inside a function too, which `files.test.ts`'s run
 * of a usage error never reaches); the bridges' endpoint does not import the lease actor; the
 * package's module list names every module; and no Python function carries a default of its own
 * for the stop grace or the clean-GPU timeout (hyperloom's TypeScript side holds both).
 */
import { spawnSync } from "node:child_process"
import { assert, describe, it } from "@effect/vitest"
import { anyPython, pythonDir } from "../support/lease.js"

const SCRIPT = `
import ast, json, os, re, sys
root = os.path.join(sys.argv[1], "hyperloom")
mods = {}
for name in sorted(os.listdir(root)):
    if name.endswith(".py"):
        with open(os.path.join(root, name)) as f:
            mods[name[:-3]] = ast.parse(f.read())
out = {"modules": sorted(m for m in mods if m != "__init__"), "imports": {}, "defines": {}, "methods": {},
       "defaults": [], "lists": {}}
for m, tree in mods.items():
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "hyperloom":
            imported.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hyperloom."):
            imported.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            imported.update(a.name.split(".")[1] for a in node.names if a.name.startswith("hyperloom."))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.args + node.args.kwonlyargs
            defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + node.args.defaults + node.args.kw_defaults
            for a, d in zip(args, defaults):
                if d is not None and re.search("grace|clean_timeout", a.arg) and not (isinstance(d, ast.Constant) and d.value is None):
                    out["defaults"].append("%s.%s(%s=%s)" % (m, node.name, a.arg, ast.unparse(d) if hasattr(ast, "unparse") else "?"))
        elif isinstance(node, ast.ClassDef):
            out["methods"].setdefault(m, []).extend(n.name for n in node.body if isinstance(n, ast.FunctionDef))
    out["imports"][m] = sorted(imported)
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out["defines"].setdefault(t.id, []).append(m)
                    if t.id in ("RUNNER_FILES", "SUPERVISOR_FILES") and isinstance(node.value, ast.Tuple):
                        out["lists"][t.id] = ast.literal_eval(node.value)
out["doc"] = ast.get_docstring(mods["__init__"])
print(json.dumps(out))
`

const house = JSON.parse(spawnSync(anyPython, ["-c", SCRIPT, pythonDir], { encoding: "utf8" }).stdout) as {
  readonly modules: ReadonlyArray<string>
  readonly imports: Record<string, ReadonlyArray<string>>
  readonly defines: Record<string, ReadonlyArray<string>>
  readonly methods: Record<string, ReadonlyArray<string>>
  readonly defaults: ReadonlyArray<string>
  readonly lists: Record<string, ReadonlyArray<string>>
  readonly doc: string
}

/** Every hyperloom module `roots` import, directly or through another, the roots included. */
const closure = (roots: ReadonlyArray<string>) => {
  const seen = new Set<string>()
  const visit = (m: string) => {
    if (seen.has(m)) return
    seen.add(m)
    for (const i of house.imports[m] ?? []) visit(i)
  }
  for (const r of roots) visit(r)
  return [...seen].sort()
}

describe("the Python side's shape", () => {
  it("the serving engine's life and the runners' shared names have one home: hyperloom.engine", () => {
    for (const name of ["SERVER_LOG", "CLIENT_LOG", "NOT_READY_EXIT", "STOPPED_EXIT"]) {
      assert.deepStrictEqual(house.defines[name], ["engine"], name)
    }
    assert.notInclude(house.imports.sweep, "serve", "the sweep runner borrows nothing from its sibling")
    assert.notInclude(house.imports.serve, "sweep")
    for (const runner of ["serve", "sweep"]) {
      assert.include(house.imports[runner], "engine")
      for (const own of ["start_server", "server_alive", "stop_server", "wait_ready"]) {
        assert.notInclude(house.methods[runner] ?? [], own, `${runner} keeps its own ${own}`)
      }
    }
  })

  it("the files that travel with a lease hold every module their entry imports, however deep", () => {
    const listed = (files: ReadonlyArray<string>) =>
      files
        .filter((f) => f.startsWith("hyperloom/") && f !== "hyperloom/__init__.py")
        .map((f) => f.slice(10, -3))
        .sort()
    assert.includeMembers(listed(house.lists.RUNNER_FILES), closure(["serve", "sweep"]))
    assert.includeMembers(listed(house.lists.SUPERVISOR_FILES), closure(["supervisor"]))
    assert.include(house.lists.RUNNER_FILES, "__main__.py")
    assert.include(house.lists.SUPERVISOR_FILES, "__main__.py")
  })

  it("the bridges' endpoint does not import the lease actor, not even through another module", () => {
    assert.notInclude(closure(["endpoint"]), "actor")
  })

  it("the package's module list names every module", () => {
    const missing = house.modules.filter((m) => !new RegExp(`^ {4}${m} `, "m").test(house.doc))
    assert.deepStrictEqual(missing, [])
  })

  it("no Python function has a default of its own for the stop grace or the clean-GPU timeout", () => {
    assert.deepStrictEqual(house.defaults, [])
  })
})
