// Fault injection on a real head (SPEC §9 "the slot means the GPUs are free"): runs many seeded
// iterations of the harness in test/support/faults.ts (bundled here with esbuild) and prints the
// counts: faults injected per kind and per phase, invariants held, orphans found, double holders.
// Goal: 0 orphans, 0 double holders, every invariant held.
//
//   node scripts/build.mjs --bundle-only && node bench/faults.mjs [--faults 50] [--seed 1]
//
// It starts its own head on port 6386 and runs `ray stop --force` at the end: run it where no
// other Ray runs (a disposable host or an isolated namespace).
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { build } from "esbuild"
import { root } from "./lib.mjs"

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? Number(process.argv[i + 1]) : fallback
}
const FAULTS = arg("faults", 50)
const SEED = arg("seed", 1)
const PORT = 6386

const work = fs.mkdtempSync(path.join(os.tmpdir(), "hl-bench-faults-"))
const entry = path.join(work, "entry.ts")
fs.writeFileSync(
  entry,
  `export * from ${JSON.stringify(path.join(root, "test/support/faults.ts"))}\nexport * from ${JSON.stringify(path.join(root, "test/support/ray.ts"))}\nexport { killBridges, closeGcs } from ${JSON.stringify(path.join(root, "test/support/lease.ts"))}\n`
)
const outfile = path.join(work, "faults.mjs")
await build({
  entryPoints: [entry],
  outfile,
  bundle: true,
  platform: "node",
  target: "node20",
  format: "esm",
  logLevel: "warning",
  define: { "import.meta.dirname": JSON.stringify(path.join(root, "test/support")) },
  banner: {
    js: "import { createRequire as __req } from 'node:module';\nconst require = __req(import.meta.url);"
  }
})
const h = await import(pathToFileURL(outfile).href)

await h.prepareRay()
const head = await h.startHead({ port: PORT, slot: true, numGpus: 1 })
const random = h.rng(SEED)
const outcomes = []
const t0 = Date.now()
try {
  for (let n = 0; n < FAULTS; n++) {
    const phase = random.pick(h.PHASES)
    const o = await h.runIteration({
      head,
      run: `b${SEED}`,
      n,
      phase,
      random,
      boundMs: 10_000,
      log: (l) => console.log(l)
    })
    outcomes.push(o)
    const bad = o.orphans + o.doubleHolders + o.slotFreeWhileRunning > 0 || !o.leaseEnded
    console.log(
      `  -> ${bad ? "VIOLATION" : "held"}: gone ${o.goneMs} ms after the fault, cli exit ${o.cliExit}${o.notes.length ? `; ${o.notes.join(" | ")}` : ""}`
    )
  }
} finally {
  h.killBridges()
  h.closeFaultClients()
  h.closeGcs()
  await h.teardownRay()
  fs.rmSync(work, { recursive: true, force: true })
}
const s = h.summarize(outcomes)
const gone = outcomes
  .map((o) => o.goneMs)
  .filter((ms) => ms >= 0)
  .sort((a, b) => a - b)
const pct = (p) => (gone.length ? gone[Math.min(gone.length - 1, Math.floor((p / 100) * gone.length))] : -1)
console.log("")
console.log(`fault injection: ${s.faults} faults, seed ${SEED}, ${((Date.now() - t0) / 1000).toFixed(0)} s`)
console.log(
  `  per kind:  ${Object.entries(s.byKind)
    .map(([k, v]) => `${k} ${v}`)
    .join(", ")}`
)
console.log(
  `  per phase: ${Object.entries(s.byPhase)
    .map(([k, v]) => `${k} ${v}`)
    .join(", ")}`
)
console.log(`  invariants held: ${s.invariantsHeld}/${s.faults}`)
console.log(`  orphans found: ${s.orphans} (goal 0)`)
console.log(`  double holders: ${s.doubleHolders} (goal 0)`)
console.log(`  samples with the slot free while the command ran: ${s.slotFreeWhileRunning} (goal 0)`)
console.log(`  leases not ended within the bound: ${s.leasesNotEnded} (goal 0)`)
console.log(`  command gone after the fault: median ${pct(50)} ms, p90 ${pct(90)} ms, max ${s.maxGoneMs} ms`)
process.exitCode = s.invariantsHeld === s.faults ? 0 : 1
