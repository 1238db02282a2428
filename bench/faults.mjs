// Fault injection on a real head (docs/design.md#the-slot-means-the-gpus-are-free,
// docs/design.md#contained): runs seeded iterations of the harness in
// test/support/faults.ts (bundled here with esbuild), --faults of each kind (SIGKILL of the CLI,
// the bridge, the worker, the supervisor, its keeper, the command, the command's whole group,
// ray.kill; SIGSTOP of each of those, then a SIGKILL of the process whose death ends the lease),
// each lease's command holding one escape of each kind (setsid, timeout, start_new_session, a
// double fork), and prints the counts: faults per kind and per phase, invariants held, orphans,
// samples of the slot free while anything of the lease ran, double holders. Goal: 0 orphans, 0 such
// samples, 0 double holders.
//
//   node scripts/build.mjs --bundle-only && node bench/faults.mjs [--faults 50] [--seed 1]
//        [--kinds bridge,stop:keeper,...] [--minutes M] [--out outcomes.json]
//
// --minutes: start no new fault after M minutes (the kind with the fewest faults so far goes
// next, so a run cut short has as many of each). --out: every outcome, rewritten after each. An iteration the harness itself could not carry out (e.g. the lease
// never started) is counted and printed as a harness error, not as a fault, and the run goes on.
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
const kindsArg = process.argv.indexOf("--kinds")
const MINUTES = arg("minutes", Number.POSITIVE_INFINITY)
const SEED = arg("seed", 1)
const outArg = process.argv.indexOf("--out")
const OUT = outArg >= 0 ? path.resolve(process.argv[outArg + 1]) : undefined
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
const KINDS = kindsArg >= 0 ? process.argv[kindsArg + 1].split(",") : h.KINDS
for (const k of KINDS) if (!h.KINDS.includes(k)) throw new Error(`unknown kind ${k} (${h.KINDS.join(", ")})`)
const outcomes = []
const harnessErrors = []
const t0 = Date.now()
try {
  // Each kind until it has had --faults faults really injected: a kind whose target does not
  // exist yet when the fault comes (no worker while the lease waits) falls back to the CLI, and
  // is counted as that, so the kind with the fewest so far goes next.
  const injected = Object.fromEntries(KINDS.map((k) => [k, 0]))
  const ACTOR_LESS = new Set(["cli", "bridge"]) // kinds whose target exists while the lease waits
  for (let n = 0; n < FAULTS * KINDS.length * 2; n++) {
    if (Date.now() - t0 > MINUTES * 60_000) {
      console.log(`-- stopped after ${MINUTES} min (--minutes): ${n} iterations`)
      break
    }
    const short = KINDS.filter((k) => injected[k] < FAULTS)
    if (short.length === 0) break
    const kind = short.reduce((a, k) => (injected[k] < injected[a] ? k : a))
    const phase = random.pick(h.phasesFor(kind).filter((p) => p !== "waiting" || ACTOR_LESS.has(kind)))
    let o
    try {
      o = await h.runIteration({
        head,
        run: `b${SEED}`,
        n,
        phase,
        kinds: [kind],
        random,
        boundMs: 10_000,
        log: (l) => console.log(l)
      })
    } catch (e) {
      harnessErrors.push(`iteration ${n} (${kind}, ${phase}): ${String(e)}`)
      console.log(`  -> HARNESS ERROR: ${String(e)}`)
      // Whatever of it is left: its command (the marker in its environment) and its CLI, the
      // blocker and the probe (the marker in their argv).
      const mark = `b${SEED}-${n}`
      const mine = (v) => v === mark || v?.startsWith(`${mark}-`)
      for (const p of h
        .processes()
        .filter((p) => mine(p.mark) || p.argv.some((a) => a.startsWith("HL_FAULT=") && mine(a.slice(9))))) {
        try {
          process.kill(p.pid, "SIGKILL")
        } catch {}
      }
      continue
    }
    outcomes.push(o)
    if (o.kind in injected) injected[o.kind]++
    if (OUT) fs.writeFileSync(OUT, JSON.stringify({ seed: SEED, outcomes, harnessErrors }, null, 1))
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
console.log("  per kind (faults / held / survived / orphans / slot-free samples / double holders):")
for (const k of Object.keys(s.byKind)) {
  const of = outcomes.filter((o) => o.kind === k)
  const sum = (f) => of.reduce((a, o) => a + f(o), 0)
  console.log(
    `    ${k.padEnd(16)} ${of.length} / ${of.filter((o) => o.orphans + o.doubleHolders + o.slotFreeWhileRunning === 0 && o.leaseEnded).length} / ${of.filter((o) => o.survived).length} / ${sum((o) => o.orphans)} / ${sum((o) => o.slotFreeWhileRunning)} / ${sum((o) => o.doubleHolders)}`
  )
}
console.log(`  escapes (setsid, timeout, start_new_session, double fork) in every lease's command`)
console.log(`  invariants held: ${s.invariantsHeld}/${s.faults}`)
console.log(
  `  harness errors (no fault injected): ${harnessErrors.length}${harnessErrors.map((e) => `\n    ${e}`).join("")}`
)
console.log(`  orphans found: ${s.orphans} (goal 0)`)
console.log(`  double holders: ${s.doubleHolders} (goal 0)`)
console.log(`  samples with the slot free while the command ran: ${s.slotFreeWhileRunning} (goal 0)`)
console.log(`  leases not ended within the bound: ${s.leasesNotEnded} (goal 0)`)
console.log(
  `  leases that survived their fault (a replaced keeper or spare bridge), then ended with SIGINT: ${s.survived}`
)
console.log(`  command gone after the fault: median ${pct(50)} ms, p90 ${pct(90)} ms, max ${s.maxGoneMs} ms`)
process.exitCode = s.invariantsHeld === s.faults ? 0 : 1
