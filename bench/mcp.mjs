// `show` through a warm MCP server (`hyperloom mcp` on stdio, the official SDK's client, one call
// per run after a first warm-up call) against `hyperloom sweep show --session DIR --json` as a
// process (a cold start each run), alternating, on the same session: a sweep laid out by the
// sweep program's own code (16 combinations x 8 load points), read and rendered by both. The goal
// (docs/performance.md): the MCP call at most 0.2x the process's wall time. Needs `npm run build`
// first; no Ray (neither side reaches it).
//
//   node bench/mcp.mjs [runs]        (default 15)
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { build } from "esbuild"
import { cli, fmt, median, root } from "./lib.mjs"

const runs = Number(process.argv[2] ?? 15)
const work = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-bench-mcp-"))

/** The sweep program's own document code (src/domain/Sweep.ts), bundled for this script. */
const sweepModule = async () => {
  const out = path.join(work, "sweep-domain.mjs")
  await build({
    entryPoints: [path.join(root, "src/domain/Sweep.ts")],
    bundle: true,
    format: "esm",
    platform: "node",
    outfile: out,
    logLevel: "warning"
  })
  return import(out)
}

/** Awaits a process; its wall ms, exit code and stdout. */
const runProcess = (argv) =>
  new Promise((resolve) => {
    const started = process.hrtime.bigint()
    const child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.on("exit", (code) => resolve({ ms: Number(process.hrtime.bigint() - started) / 1e6, code, stdout }))
  })

try {
  const { initialSweep, renderSweep } = await sweepModule()
  const values = (n, f) => Array.from({ length: n }, (_, i) => String(f(i)))
  const experiment = {
    server: "vllm serve MODEL --port $HYPERLOOM_PORT --max-num-seqs {seqs} --max-num-batched-tokens {tokens}",
    client: ["vllm", "bench", "serve", "--base-url", "$HYPERLOOM_BASE_URL", "--max-concurrency", "{c}"],
    params: [
      { name: "seqs", values: values(4, (i) => 64 * 2 ** i) },
      { name: "tokens", values: values(4, (i) => 2048 * 2 ** i) }
    ],
    load: { kind: "points", name: "c", values: values(8, (i) => 2 ** i) },
    slos: [],
    repeats: 3,
    gpus: 1,
    nodes: 1
  }
  const sessions = path.join(work, "sessions")
  const session = path.join(sessions, "laid-out")
  fs.mkdirSync(session, { recursive: true })
  const doc = renderSweep(initialSweep(experiment, new Date().toISOString()))
  fs.writeFileSync(path.join(session, "sweep.json"), doc)

  const client = new Client({ name: "bench", version: "0" })
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [cli, "mcp", "--sessions", sessions],
      stderr: "ignore"
    })
  )
  const show = async () => {
    const started = process.hrtime.bigint()
    const r = await client.callTool({ name: "show", arguments: { session: "laid-out" } })
    const ms = Number(process.hrtime.bigint() - started) / 1e6
    /** @type {{ document?: { kind?: string } } | undefined} */
    const content = /** @type {any} */ (r.structuredContent)
    if (r.isError || content?.document?.kind !== "hyperloom.sweep")
      throw new Error(`show failed: ${JSON.stringify(r).slice(0, 500)}`)
    return ms
  }
  await show() // warm: the server's modules, the session's first read
  const mcp = []
  const proc = []
  for (let i = 0; i < runs; i++) {
    mcp.push(await show())
    const r = await runProcess([process.execPath, cli, "sweep", "show", "--session", session, "--json"])
    if (r.code !== 0 || JSON.parse(r.stdout).kind !== "hyperloom.sweep")
      throw new Error(`sweep show exited ${r.code}`)
    proc.push(r.ms)
  }
  await client.close()
  console.log(
    `\nshow of a sweep session (${Math.round(doc.length / 1024)} KiB sweep.json, ${runs} runs each, alternating)`
  )
  console.log(
    `  ${"show through a warm MCP server (stdio)".padEnd(44)} median ${fmt(median(mcp)).padStart(10)}   runs: ${mcp.map(fmt).join(", ")}`
  )
  console.log(
    `  ${"hyperloom sweep show --json (a process)".padEnd(44)} median ${fmt(median(proc)).padStart(10)}   runs: ${proc.map(fmt).join(", ")}`
  )
  console.log(`  ratio mcp / process: ${(median(mcp) / median(proc)).toFixed(3)}x (goal <= 0.2x)`)
} finally {
  fs.rmSync(work, { recursive: true, force: true })
}
