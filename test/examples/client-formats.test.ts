/**
 * The stand-in client writes GuideLLM's and AIPerf's reports end to end (examples/client-formats.mjs,
 * `fake-bench-client.mjs --format guidellm|aiperf`) against the stand-in engine on loopback, and
 * hyperloom reads them back (Results.ts, ClientReports.ts, AttemptFiles' artifact directory): one
 * point per benchmark at the load it states, GuideLLM's per-request records (all kept) giving TPOT
 * by hyperloom's definition, AIPerf's several concurrencies one folder each.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { parseResult } from "../../src/domain/Results.js"
import { mean } from "../../src/domain/Stats.js"
import { AttemptFiles, layer } from "../../src/services/AttemptFiles.js"
import { clientJs, runNode, withEngine } from "../support/standIns.js"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hl-client-formats-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

const fast = ["--decode-ms", "3", "--decode-ms-per-seq", "0"]
const run = runNode

const readResult = (file: string) =>
  Effect.runPromise(
    Effect.flatMap(AttemptFiles, (f) => f.readResult(file)).pipe(
      Effect.provide(layer),
      Effect.provide(NodeFileSystem.layer)
    )
  )

describe("the stand-in as GuideLLM and as AIPerf, read back by hyperloom", () => {
  it("GuideLLM (today's report and the pre-0.4 one): one point per --rate at its concurrency; TPOT from every record", async () => {
    await withEngine(fast, async (base) => {
      for (const version of ["0.7", "0.3"]) {
        const file = path.join(dir, `guidellm-${version}.json`)
        const r = await run([
          clientJs,
          "--base-url",
          base,
          "--format",
          "guidellm",
          "--rate-type",
          "concurrent",
          "--rate",
          "1,3",
          "--max-requests",
          "6",
          "--output-len",
          "8",
          "--report-version",
          version,
          "--output-path",
          file
        ])
        assert.strictEqual(r.code, 0, r.out)
        const doc = JSON.parse(fs.readFileSync(file, "utf8"))
        const parsed = parseResult(fs.readFileSync(file, "utf8"), { file: "g.json" })!
        assert.strictEqual(parsed.format, "guidellm", version)
        assert.deepStrictEqual(
          parsed.points?.map((p) => [p.label, p.load]),
          [
            ["concurrent@1", { kind: "concurrency", value: 1 }],
            ["concurrent@3", { kind: "concurrency", value: 3 }]
          ],
          version
        )
        for (const [i, p] of (parsed.points ?? []).entries()) {
          const records = doc.benchmarks[i].requests.successful
          assert.strictEqual(p.metrics.completed, 6)
          assert.strictEqual(p.metrics.failed, 0)
          // every request's record is there: TPOT is the unweighted mean of their inter_token_latency_ms
          assert.strictEqual(
            p.metrics.mean_tpot_ms,
            mean(records.map((x: { inter_token_latency_ms: number }) => x.inter_token_latency_ms)),
            version
          )
          assert.isTrue(
            p.notes.some((n) => n.startsWith(`tpot: computed from benchmarks[${i}]'s 6 per-request records`))
          )
          assert.strictEqual(p.metrics.output_throughput, (6 * 8) / doc.benchmarks[i].duration)
        }
        assert.strictEqual(parsed.workload?.client_version, version === "0.7" ? "0.7.3" : null)
      }
    })
  })

  it("AIPerf: an artifact directory (no result file) at one concurrency, and a folder per value at several", async () => {
    await withEngine(fast, async (base) => {
      const one = path.join(dir, "aiperf-one")
      const many = path.join(dir, "aiperf-many")
      for (const [out, concurrency] of [
        [one, "2"],
        [many, "1,2,4"]
      ] as const) {
        const r = await run([
          clientJs,
          "--base-url",
          base,
          "--format",
          "aiperf",
          "--concurrency",
          concurrency,
          "--request-count",
          "4",
          "--output-len",
          "8",
          "--output-artifact-dir",
          out
        ])
        assert.strictEqual(r.code, 0, r.out)
      }
      const single = await readResult(path.join(one, "result.json"))
      assert.strictEqual(single?.format, "aiperf")
      assert.deepStrictEqual(single?.load, { kind: "concurrency", value: 2 })
      assert.strictEqual(single?.metrics.completed, 4)
      assert.deepStrictEqual(single?.notes, [])
      const several = await readResult(path.join(many, "result.json"))
      assert.deepStrictEqual(
        several?.points?.map((p) => [p.where, p.load?.value, p.metrics.completed]),
        [
          ["concurrency_1/profile_export_aiperf.json", 1, 4],
          ["concurrency_2/profile_export_aiperf.json", 2, 4],
          ["concurrency_4/profile_export_aiperf.json", 4, 4]
        ]
      )
      // its aggregates are numpy's: the TPOT hyperloom recomputes from the jsonl equals the export's
      const jsonl = fs.readFileSync(path.join(many, "concurrency_4", "profile_export.jsonl"), "utf8")
      const tpots = jsonl
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).metrics.inter_token_latency.value as number)
      assert.strictEqual(several?.points?.[2]?.metrics.mean_tpot_ms, mean(tpots))
    })
  })
})
