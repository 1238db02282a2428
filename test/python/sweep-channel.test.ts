/**
 * The sweep runner's channel (docs/design.md#sweeps-at-cluster-scale: the leased node shares
 * nothing with hyperloom's host but Ray): requests on its stdin, everything it tells hyperloom as
 * messages on its stdout, files included. The folders hyperloom names (the engine's, each run's)
 * are ITS host's: the runner never creates or writes them, it sends their files' bytes; the result
 * file the client writes (HYPERLOOM_RESULT_FILE, under the run's folder) comes back the same way.
 * Without Ray: the runner is run directly, with the stand-in engine and client.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach, assert, describe, it } from "@effect/vitest"
import { SAMPLER_NAME } from "../../src/domain/Observations.js"
import { projectRoot } from "../support/ray.js"
import { runSweepRunner } from "../support/sweepRunner.js"

const engine = `${process.execPath} ${path.join(projectRoot, "examples/fake-engine.mjs")} --load-sec 0`
const client = [
  process.execPath,
  path.join(projectRoot, "examples/fake-bench-client.mjs"),
  "--num-prompts",
  "4",
  "--max-concurrency",
  "2",
  "--output-len",
  "8"
]
const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true })
})

describe("the sweep runner talks through its stdin and stdout only", () => {
  it("a run's files (client.log, the result file, between.log) and server.log come back as messages; nothing is written where hyperloom's folders are named", {
    timeout: 70_000
  }, async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "hl-sweep-channel-"))
    dirs.push(tmp)
    // hyperloom's folders: on another host (they do not exist here)
    const remote = path.join(tmp, "launching-host")
    const run1 = `${remote}/runs/1`
    const r = await runSweepRunner({
      server: engine,
      dir: `${remote}/engine`,
      cwd: `${remote}/cwd`,
      env: { TMPDIR: tmp },
      requests: [
        {
          seq: 1,
          argv: client,
          dir: run1,
          env: { HYPERLOOM_RESULT_FILE: `${run1}/result.json` },
          between: "echo between-ran",
          timeout_sec: 30
        }
      ]
    })
    assert.strictEqual(r.code, 0, r.stderr.slice(-2000))
    assert.deepStrictEqual(
      r.engine.map((s) => s.state),
      ["starting", "ready", "stopped"]
    )
    assert.isTrue(r.engine[2]!.gone)
    const done = r.done.get(1)
    assert.strictEqual(done?.exit_code, 0)
    assert.isTrue(done?.engine_alive)
    // what the node sampled comes back with the run, and the engine's configuration with `ready`
    // (docs/design.md#samplers): the client's 4 requests and its warm-up request, 8 tokens each
    const seen = done?.observations?.[SAMPLER_NAME] as any
    assert.strictEqual(seen?.engine_load?.generation_tokens_delta, 40, JSON.stringify(done))
    assert.strictEqual(seen?.engine_load?.requests_total_delta, 5)
    assert.strictEqual(r.engine[1]!.engine_config?.engine, "vllm")
    assert.strictEqual(r.engine[1]!.engine_config?.values.max_num_seqs, 256)
    assert.deepStrictEqual(Object.keys(r.files).sort(), [
      `${remote}/engine/server.log`,
      `${run1}/between.log`,
      `${run1}/client.log`,
      `${run1}/result.json`
    ])
    assert.isAbove(JSON.parse(r.files[`${run1}/result.json`]!).output_throughput, 0)
    assert.strictEqual(r.files[`${run1}/between.log`], "between-ran\n")
    assert.include(r.files[`${remote}/engine/server.log`], "api_server.py")
    // the runner ran where it could: its cwd is not a folder here
    assert.include(r.stderr, `${remote}/cwd is not a folder on this node`)
    assert.isFalse(fs.existsSync(remote), "nothing written at hyperloom's folders")
    assert.deepStrictEqual(fs.readdirSync(tmp), [], "the runner's own folder is removed at its end")
  })
})
