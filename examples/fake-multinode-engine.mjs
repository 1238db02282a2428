#!/usr/bin/env node
/**
 * A stand-in for a serving engine that spans nodes, taking the flags the real engines take
 * (no dependencies), so the multi-node recipes of docs/multi-node.md run without GPUs:
 *
 *   vLLM, multiprocessing backend (vllm/config/parallel.py, vllm PR #23691):
 *     node fake-multinode-engine.mjs --nnodes N --node-rank R --master-addr H --master-port P
 *          [--headless] [--port HTTP] [fake-engine.mjs options…]
 *   SGLang (python/sglang/srt/server_args.py, engine.py):
 *     node fake-multinode-engine.mjs --nnodes N --node-rank R --dist-init-addr H:P
 *          [--port HTTP] [fake-engine.mjs options…]
 *
 * Node rank 0 listens on the rendezvous port (P) and waits until the N-1 other ranks have joined;
 * only then does it start the API server (examples/fake-engine.mjs beside this file, with the
 * remaining options), so its /health answers 200 only once the whole engine is up, as the real
 * rank 0 does. Ranks above 0 join rank 0 (retrying while it is not listening yet, up to
 * --join-timeout S, default 120) and then serve no API: with --headless (vLLM) nothing at all;
 * without it (SGLang) a dummy GET /health that answers 200 whatever their state, as SGLang's
 * ranks above 0 do — which is why readiness must be probed on rank 0 only. A rank that loses its
 * rendezvous peer exits 1 ("lost the connection to …"), as a torch.distributed job fails.
 * `--distributed-executor-backend ray` exits 2 with vLLM's error for `nnodes > 1`. SIGTERM: exit 0.
 */
import { spawn } from "node:child_process"
import * as http from "node:http"
import * as net from "node:net"
import * as path from "node:path"

const args = process.argv.slice(2)
const rest = []
const flags = {}
const TAKES = ["nnodes", "node-rank", "master-addr", "master-port", "dist-init-addr", "join-timeout", "distributed-executor-backend"]
for (let i = 0; i < args.length; i++) {
  const a = args[i]
  const m = /^--([a-z-]+)(=(.*))?$/.exec(a)
  if (m && TAKES.includes(m[1])) {
    flags[m[1]] = m[3] ?? args[++i]
  } else if (a === "--headless") {
    flags.headless = true
  } else rest.push(a)
}
const log = (msg) => console.log(`INFO [multinode] ${msg}`)
const fail = (msg, code = 1) => {
  if (engine !== undefined && engine.exitCode === null) engine.kill("SIGKILL")
  console.error(msg)
  process.exit(code)
}

const nnodes = Number(flags.nnodes ?? "1")
const rank = Number(flags["node-rank"] ?? "0")
if (!Number.isInteger(nnodes) || nnodes < 1 || !Number.isInteger(rank) || rank < 0 || rank >= nnodes) {
  fail(`error: argument --node-rank: must be in [0, --nnodes), got --nnodes ${flags.nnodes} --node-rank ${flags["node-rank"]}`, 2)
}
if (flags["distributed-executor-backend"] === "ray" && nnodes > 1) {
  fail("ValueError: nnodes > 1 is only supported with the multiprocessing distributed executor backend (mp)", 2)
}
let host
let port
if (flags["dist-init-addr"] !== undefined) {
  const at = flags["dist-init-addr"].lastIndexOf(":")
  host = flags["dist-init-addr"].slice(0, at)
  port = Number(flags["dist-init-addr"].slice(at + 1))
} else {
  host = flags["master-addr"] ?? "127.0.0.1"
  port = Number(flags["master-port"] ?? "29501")
}
if (nnodes > 1 && !(port > 0 && port < 65536)) fail(`error: bad rendezvous address ${host}:${port}`, 2)
const sglang = flags["dist-init-addr"] !== undefined
const httpPort = (() => {
  const k = rest.findIndex((a) => a === "--port" || a.startsWith("--port="))
  if (k < 0) return Number(process.env.HYPERLOOM_PORT ?? "8000")
  return Number(rest[k].includes("=") ? rest[k].slice(7) : rest[k + 1])
})()

let engine
process.on("SIGTERM", () => {
  log("Shutting down")
  if (engine !== undefined && engine.exitCode === null) engine.kill("SIGTERM")
  process.exit(0)
})

const startApi = () => {
  const here = path.dirname(new URL(import.meta.url).pathname)
  engine = spawn(process.execPath, [path.join(here, "fake-engine.mjs"), ...rest], { stdio: "inherit" })
  engine.on("exit", (code, signal) => process.exit(code ?? (signal === "SIGTERM" ? 0 : 1)))
}

log(`node rank ${rank} of ${nnodes}, rendezvous ${host}:${port}${flags.headless ? ", headless" : ""}`)
if (nnodes === 1) {
  startApi()
} else if (rank === 0) {
  const joined = new Set()
  const server = net.createServer((socket) => {
    socket.setEncoding("utf8")
    let text = ""
    socket.on("data", (d) => {
      text += d
      const m = /^rank (\d+)\n/.exec(text)
      if (m && !joined.has(Number(m[1]))) {
        joined.add(Number(m[1]))
        log(`node rank ${m[1]} joined (${joined.size + 1}/${nnodes})`)
        if (joined.size === nnodes - 1) {
          log("all nodes joined; starting the API server")
          startApi()
        }
        socket.on("close", () => fail(`RuntimeError: lost the connection to node rank ${m[1]}`))
      }
    })
    socket.on("error", () => undefined)
  })
  server.on("error", (e) => fail(`RuntimeError: cannot listen on ${host}:${port}: ${e.message}`))
  server.listen(port, "0.0.0.0", () => log(`waiting for ${nnodes - 1} node(s) on port ${port}`))
} else {
  const deadline = Date.now() + Number(flags["join-timeout"] ?? "120") * 1000
  const join = () => {
    const socket = net.connect(port, host)
    socket.on("connect", () => {
      socket.write(`rank ${rank}\n`)
      log(`joined node rank 0 at ${host}:${port}`)
      socket.on("close", () => fail(`RuntimeError: lost the connection to node rank 0 at ${host}:${port}`))
      if (!flags.headless && sglang) {
        // SGLang's ranks above 0: a dummy /health, 200 whatever their state.
        http
          .createServer((req, res) => {
            res.writeHead(req.url === "/health" ? 200 : 404)
            res.end()
          })
          .listen(httpPort, "127.0.0.1")
      }
    })
    socket.on("error", () => {
      socket.destroy()
      if (Date.now() > deadline) fail(`RuntimeError: cannot join node rank 0 at ${host}:${port}`)
      setTimeout(join, 200)
    })
  }
  join()
}
