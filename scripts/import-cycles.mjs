#!/usr/bin/env node
// Lists the import cycles among src/**/*.ts (type-only imports included: a circle of types is
// still two modules that cannot be read apart). Exits 1 when there is one. Usage:
//   node scripts/import-cycles.mjs [root=src]
import * as fs from "node:fs"
import * as path from "node:path"

const root = path.resolve(process.argv[2] ?? "src")
const files = fs
  .readdirSync(root, { recursive: true })
  .map((f) => path.join(root, String(f)))
  .filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"))

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?\sfrom\s+"(\.[^"]+)"/g
const edges = new Map()
for (const file of files) {
  const text = fs.readFileSync(file, "utf8")
  const out = new Set()
  for (const m of text.matchAll(IMPORT)) {
    out.add(path.resolve(path.dirname(file), m[1].replace(/\.js$/, ".ts")))
  }
  edges.set(
    file,
    [...out].filter((t) => edges.has(t) || files.includes(t))
  )
}

// Tarjan's strongly connected components: every component of more than one module is a cycle.
let index = 0
const stack = []
const meta = new Map()
const cycles = []
const visit = (v) => {
  meta.set(v, { index, low: index, on: true })
  index++
  stack.push(v)
  for (const w of edges.get(v) ?? []) {
    if (!meta.has(w)) {
      visit(w)
      meta.get(v).low = Math.min(meta.get(v).low, meta.get(w).low)
    } else if (meta.get(w).on) {
      meta.get(v).low = Math.min(meta.get(v).low, meta.get(w).index)
    }
  }
  if (meta.get(v).low === meta.get(v).index) {
    const component = []
    let w
    do {
      w = stack.pop()
      meta.get(w).on = false
      component.push(path.relative(process.cwd(), w))
    } while (w !== v)
    if (component.length > 1 || (edges.get(v) ?? []).includes(v)) cycles.push(component.sort())
  }
}
for (const f of files) if (!meta.has(f)) visit(f)

for (const c of cycles) console.log(`import cycle: ${c.join(" <-> ")}`)
console.log(`${files.length} modules, ${cycles.length} import cycle(s)`)
process.exit(cycles.length > 0 ? 1 : 0)
