// The guarded repair (`hyperloom ray repair`) against a bare `ray stop --force && ray start
// --head …` on the same kind of head (a lone idle head without serving_slot), alternating.
// Needs `npm run build` first; starts and stops its own heads.
//
//   node bench/repair.mjs [runs]        (default 3)
import { alternate, cli, must, ray, report, startHead, stopRay, time } from "./lib.mjs"

const runs = Number(process.argv[2] ?? 3)
const PORT = 6393
const slotless = () => {
  stopRay()
  startHead(PORT, ["--num-gpus=1", '--resources={"foo": 1}'])
}

try {
  const results = alternate(runs, [
    {
      name: "hyperloom ray repair",
      before: slotless,
      run: () => time(["node", cli, "ray", "repair", "--json"]),
      check: (r) => {
        must("repair", r)
        if (JSON.parse(r.stdout).action !== "repaired") throw new Error(`not repaired: ${r.stdout}`)
      }
    },
    {
      name: "ray stop --force && ray start --head (bare)",
      before: slotless,
      run: () =>
        time([
          "sh",
          "-c",
          `"${ray}" stop --force >/dev/null 2>&1 && "${ray}" start --head --port=${PORT} --num-cpus=2 --num-gpus=1 --resources='{"foo": 1, "serving_slot": 1}' --disable-usage-stats --include-dashboard=false >/dev/null 2>&1`
        ]),
      check: (r) => must("bare restart", r)
    }
  ])
  const ratio = report(
    `repair of a lone idle head, ${runs} runs each, alternating`,
    results,
    "hyperloom ray repair",
    "ray stop --force && ray start --head (bare)"
  )
  console.log(`  goal: <= 1.15x -> ${ratio <= 1.15 ? "met" : "NOT met"}`)
} finally {
  stopRay()
}
