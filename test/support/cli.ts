/** Runs the bundled CLI (dist/hyperloom.mjs, built by the ray project's global setup) as a user would. */
import { spawn } from "node:child_process"
import * as path from "node:path"
import { projectRoot } from "./ray.js"

export const cliPath = path.join(projectRoot, "dist/hyperloom.mjs")

export interface CliRun {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
  readonly ms: number
  /** stdout parsed as JSON (undefined when it is not JSON). */
  readonly json: any
}

/**
 * Environment for a CLI run: the test's own, without any RAY_ADDRESS / HYPERLOOM_NODES leaking in,
 * and without NODE_EXTRA_CA_CERTS: hyperloom opens no TLS connection, and a Node process given
 * extra CAs parses them as it starts (~50 ms of CPU each; the suite starts the CLI ~1000 times).
 */
export const cleanEnv = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => {
  const env = { ...process.env }
  delete env.RAY_ADDRESS
  delete env.HYPERLOOM_NODES
  delete env.NODE_EXTRA_CA_CERTS
  return { ...env, ...extra }
}

export const runCli = (
  args: ReadonlyArray<string>,
  opts: { env?: Record<string, string>; timeoutMs?: number; cwd?: string } = {}
): Promise<CliRun> =>
  new Promise((resolve, reject) => {
    const started = Date.now()
    const child = spawn(process.execPath, [cliPath, ...args], {
      env: cleanEnv(opts.env),
      cwd: opts.cwd ?? projectRoot,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(
        new Error(`hyperloom ${args.join(" ")} did not finish in ${opts.timeoutMs ?? 120_000} ms\n${stderr}`)
      )
    }, opts.timeoutMs ?? 120_000)
    child.on("exit", (code, signal) => {
      clearTimeout(timer)
      let json: any
      try {
        json = JSON.parse(stdout)
      } catch {
        json = undefined
      }
      resolve({ code, signal, stdout, stderr, ms: Date.now() - started, json })
    })
  })
