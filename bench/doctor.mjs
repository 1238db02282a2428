// `hyperloom ray doctor --json` against `ray status` on the same idle head, alternating, cold
// (a fresh process each run; the first doctor run after a build also writes the executable's code
// cache, and a third case runs with the cache off); then a warm snapshot + verdict inside one
// process; then both against a dead explicit address. Needs `npm run build` first; starts and
// stops its own head. HYPERLOOM_BENCH_CLI_BEFORE=<bin>[:<bin>…] puts other builds' doctor and
// `--version` in the same rotation.
//
//   node bench/doctor.mjs [runs]        (default 7)
import { Effect } from "effect"
import { alternate, cli, fmt, median, must, ray, report, root, startHead, stopRay, time } from "./lib.mjs"

const runs = Number(process.argv[2] ?? 7)
const PORT = 6393

stopRay()
startHead(PORT, ['--resources={"serving_slot": 1}'])
try {
  // let `ray status` get past its "No cluster status" start-up window
  for (let i = 0; i < 20 && !time([ray, "status"]).stdout.includes("Node status"); i++) {
    await new Promise((r) => setTimeout(r, 500))
  }
  // Other builds in the same rotation (HYPERLOOM_BENCH_CLI_BEFORE=<bin>[:<bin>…]), e.g. main's.
  const others = (process.env.HYPERLOOM_BENCH_CLI_BEFORE ?? "").split(":").filter((p) => p !== "")
  /** @type {Record<string, Array<number>>} */
  const coldCpu = {}
  const cold = alternate(
    runs,
    [
      {
        name: "hyperloom ray doctor --json (cold process)",
        run: () => time(["node", cli, "ray", "doctor", "--json"]),
        check: (r) => must("doctor", r)
      },
      ...others.map((bin, i) => ({
        name: `doctor --json (HYPERLOOM_BENCH_CLI_BEFORE${others.length > 1 ? ` #${i + 1}` : ""})`,
        run: () => time(["node", bin, "ray", "doctor", "--json"]),
        check: (r) => must("doctor", r)
      })),
      // `--version` alone: Node's start and the executable's own (no command run).
      {
        name: "hyperloom --version (cold process)",
        run: () => time(["node", cli, "--version"]),
        check: (r) => must("--version", r)
      },
      ...others.map((bin, i) => ({
        name: `--version (HYPERLOOM_BENCH_CLI_BEFORE${others.length > 1 ? ` #${i + 1}` : ""})`,
        run: () => time(["node", bin, "--version"]),
        check: (r) => must("--version", r)
      })),
      { name: "ray status", run: () => time([ray, "status"]), check: (r) => must("ray status", r) },
      // For reference: the same without the executable's V8 code cache (a command's first run).
      {
        name: "hyperloom ray doctor --json (code cache off)",
        run: () => time(["node", cli, "ray", "doctor", "--json"], { HYPERLOOM_NO_CODE_CACHE: "1" }),
        check: (r) => must("doctor", r)
      }
    ],
    coldCpu
  )
  const coldRatio = report(
    `idle head, ${runs} runs each, alternating`,
    cold,
    "hyperloom ray doctor --json (cold process)",
    "ray status"
  )
  console.log(`  goal: <= 0.4x -> ${coldRatio <= 0.4 ? "met" : "NOT met"}`)
  for (const name of Object.keys(cold).filter((n) => n.includes("HYPERLOOM_BENCH_CLI_BEFORE"))) {
    console.log(`  (${name} / ray status: ${(median(cold[name]) / median(cold["ray status"])).toFixed(3)}x)`)
  }
  console.log("  CPU (user + sys), medians:")
  for (const [name, xs] of Object.entries(coldCpu)) {
    console.log(`    ${name.padEnd(50)} ${fmt(median(xs)).padStart(10)}   runs: ${xs.map(fmt).join(", ")}`)
  }
  const offRatio = median(cold["hyperloom ray doctor --json (code cache off)"]) / median(cold["ray status"])
  console.log(`  (code cache off / ray status: ${offRatio.toFixed(3)}x)`)

  // Warm: one process, the live layers built once, snapshot + verdict repeated.
  /** @type {typeof import("../src/index.js")} */
  const lib = await import(`${root}/dist/lib/index.js`)
  // The CLI's own composition root: every service doctor needs (a hand-made subset went stale).
  const layer = lib.Live.layer
  const request = { gpus: 0, servingSlot: true }
  const warm = await Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const doctor = lib.Inspect.doctor
        yield* doctor(request) // cold call: loads grpc and the proto, connects
        const times = []
        for (let i = 0; i < 200; i++) {
          const t = process.hrtime.bigint()
          const r = yield* doctor(request)
          times.push(Number(process.hrtime.bigint() - t) / 1e6)
          if (!r.feasible) throw new Error("expected a feasible head")
        }
        return times
      })
    ).pipe(Effect.provide(layer))
  )
  const sorted = [...warm].sort((a, b) => a - b)
  console.log(
    `\nwarm snapshot + verdict in one process (200 calls): median ${fmt(median(warm))}, p90 ${fmt(sorted[Math.floor(sorted.length * 0.9)])}, max ${fmt(sorted[sorted.length - 1])}; goal <= 10 ms -> ${median(warm) <= 10 ? "met" : "NOT met"}`
  )
} finally {
  stopRay()
}

// Dead explicit address: nothing listens there. `ray status` takes ~40 s to give up, so 2 runs.
const deadRuns = Number(process.env.DEAD_RUNS ?? 2)
const dead = { RAY_ADDRESS: "127.0.0.1:6394" }
const deadResults = alternate(deadRuns, [
  { name: "hyperloom ray doctor (dead address)", run: () => time(["node", cli, "ray", "doctor"], dead) },
  { name: "ray status (dead address)", run: () => time([ray, "status"], dead) }
])
const deadRatio = report(
  `dead explicit address, ${deadRuns} runs each, alternating`,
  deadResults,
  "hyperloom ray doctor (dead address)",
  "ray status (dead address)"
)
console.log(
  `  goal: doctor under 1 s -> ${median(deadResults["hyperloom ray doctor (dead address)"]) < 1000 ? "met" : "NOT met"} (ratio ${deadRatio.toFixed(4)}x)`
)
