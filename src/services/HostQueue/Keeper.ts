/** The process that keeps a host queue ticket's lock while its lease lives (docs/design.md#fair-queue). */
import { type ChildProcess, spawn } from "node:child_process"
import { Effect } from "effect"
import { flockSpawnFailed, LockUnavailable } from "../LockFile.js"

/**
 * The keeper of a ticket's lock: `flock -F -n -x` on the ticket (reopened through our `fd`, its
 * fd 3) execs `cat`, which holds the exclusive lock for as long as it runs and reads our pipe, so
 * it ends with this process whatever ends it (SIGKILL included). In a session of its own: a
 * terminal's signals reach the lease, which leaves the queue in order. Resolves once it holds
 * the lock; fails when another process holds it.
 */
export const startKeeper = (fd: number, path: string) =>
  Effect.async<ChildProcess, LockUnavailable>((resume) => {
    let child: ChildProcess
    try {
      child = spawn(
        "flock",
        ["-F", "-n", "-x", "-E", "75", "/proc/self/fd/3", "sh", "-c", "echo locked; exec cat"],
        {
          stdio: ["pipe", "pipe", "pipe", fd],
          detached: true
        }
      )
    } catch (e) {
      resume(Effect.fail(new LockUnavailable({ path, detail: `cannot run flock(1): ${String(e)}` })))
      return
    }
    let done = false
    let stderr = ""
    const finish = (r: Effect.Effect<ChildProcess, LockUnavailable>) => {
      if (done) return
      done = true
      resume(r)
    }
    child.stderr?.on("data", (d) => {
      stderr += d
    })
    child.stdout?.on("data", (d) => {
      if (String(d).includes("locked")) {
        child.unref()
        for (const s of [child.stdin, child.stdout, child.stderr])
          (s as unknown as { unref?: () => void })?.unref?.()
        finish(Effect.succeed(child))
      }
    })
    child.once("error", (e: NodeJS.ErrnoException) => finish(Effect.fail(flockSpawnFailed(path, e))))
    child.once("exit", (code) =>
      finish(
        Effect.fail(
          new LockUnavailable({
            path,
            detail:
              code === 75
                ? "a new ticket was locked by someone else"
                : `flock(1) exited with ${code}: ${stderr.trim()}`
          })
        )
      )
    )
  })
