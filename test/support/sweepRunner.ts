/**
 * The sweep runner (`python PYDIR sweep`, python/hyperloom/sweep.py) run directly, without Ray, as
 * the lease runs it: requests written to its stdin, its messages (domain/Sweep/Runner.ts) read
 * from its stdout. Each request is sent once the engine is ready (the first after `beforeFirst`)
 * and the next once the previous one is answered; then `{"stop": true}`.
 */
import { spawn } from "node:child_process"
import { LeasedCommand, readiness, runnerArgs } from "../../src/domain/Serving.js"
import { type EngineStatus, parseRunnerMessage, type RunDone } from "../../src/domain/Sweep/Runner.js"
import { anyPython, pythonDir } from "./lease.js"

export interface RunnerRun {
  readonly code: number | null
  /** Lines of stdout that were not messages (the client's output). */
  readonly outputLines: number
  readonly stderr: string
  /** Every engine status, in order. */
  readonly engine: ReadonlyArray<EngineStatus>
  readonly done: ReadonlyMap<number, RunDone>
  /** The files sent: hyperloom's path → their bytes, put together as hyperloom does. */
  readonly files: Record<string, string>
}

export const runSweepRunner = (o: {
  readonly server: string
  readonly dir: string
  readonly cwd?: string
  readonly env?: Record<string, string>
  readonly requests: ReadonlyArray<Record<string, unknown>>
  readonly beforeFirst?: () => void
  readonly timeoutMs?: number
}) =>
  new Promise<RunnerRun>((resolve) => {
    const command = LeasedCommand.Engine({
      server: o.server,
      readiness: readiness("/health", 20),
      dir: o.dir
    })
    const child = spawn(anyPython, ["-I", pythonDir, "sweep", ...runnerArgs(command, o.cwd ?? "/")], {
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, ...o.env }
    })
    const engine: Array<EngineStatus> = []
    const done = new Map<number, RunDone>()
    const files: Record<string, string> = {}
    let outputLines = 0
    let stderr = ""
    let partial = ""
    let next = 0
    const sendNext = () => {
      if (next === 0) o.beforeFirst?.()
      const req = next < o.requests.length ? o.requests[next] : { stop: true }
      next++
      child.stdin.write(`${JSON.stringify(req)}\n`)
    }
    child.stdout.on("data", (d: Buffer) => {
      const parts = (partial + d.toString("utf8")).split("\n")
      partial = parts.pop() ?? ""
      for (const line of parts) {
        const m = parseRunnerMessage(line)
        if (m === undefined) {
          outputLines++
          continue
        }
        if (m._tag === "engine") {
          engine.push(m.status)
          if (m.status.state === "ready") sendNext()
        } else if (m._tag === "done") {
          done.set(m.done.seq, m.done)
          if (next <= o.requests.length) sendNext()
        } else {
          const text = Buffer.from(m.data, "base64").toString("utf8")
          files[m.file] = m.at === 0 ? text : (files[m.file] ?? "") + text
        }
      }
    })
    child.stderr.on("data", (d) => (stderr += d))
    const timer = setTimeout(() => child.kill("SIGKILL"), o.timeoutMs ?? 60_000)
    child.on("exit", (code) => {
      clearTimeout(timer)
      resolve({ code, outputLines, stderr, engine, done, files })
    })
  })
