/**
 * The stand-in engine and client on loopback (examples/fake-engine.mjs, fake-bench-client.mjs),
 * for tests of what the stand-ins write.
 */
import { spawn } from "node:child_process"
import * as path from "node:path"
import { freePort } from "./freePort.js"

const root = path.resolve(import.meta.dirname, "../..")
export const engineJs = path.join(root, "examples/fake-engine.mjs")
export const clientJs = path.join(root, "examples/fake-bench-client.mjs")

/** Runs `node argv…` to its end (killed after 30 s): its exit code and its whole output. */
export const runNode = (argv: ReadonlyArray<string>) =>
  new Promise<{ code: number | null; out: string }>((resolve) => {
    const child = spawn(process.execPath, argv, { stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    child.stdout.on("data", (d) => {
      out += d
    })
    child.stderr.on("data", (d) => {
      out += d
    })
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000)
    child.on("close", (code) => {
      clearTimeout(timer)
      resolve({ code, out })
    })
  })

/** The stand-in engine (its extra flags) on a free port until `f` ends; `f` gets its base URL. */
export const withEngine = async <A>(
  extra: ReadonlyArray<string>,
  f: (base: string) => Promise<A>
): Promise<A> => {
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const engine = spawn(process.execPath, [engineJs, "--port", String(port), "--load-sec", "0.1", ...extra], {
    stdio: "ignore"
  })
  try {
    const until = Date.now() + 15_000
    for (;;) {
      try {
        if ((await fetch(`${base}/health`)).status === 200) break
      } catch {
        // not yet
      }
      if (Date.now() > until) throw new Error("engine not ready")
      await new Promise((r) => setTimeout(r, 50))
    }
    return await f(base)
  } finally {
    engine.kill("SIGKILL")
  }
}
