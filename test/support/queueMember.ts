/**
 * A process in a host queue, for the HostQueue tests: joins the live queue in the directory
 * argv[2] (HostQueue.makeFileQueue) with `--gpus` argv[3], prints `joined <ticket>`, marks
 * itself holding when it reads "hold" on stdin, and stays until killed or its stdin closes.
 * Bundled by the test (test/support/bundle.ts) and run with node.
 */
import * as readline from "node:readline"
import { Effect } from "effect"
import { makeFileQueue } from "../../src/services/HostQueue.js"

const [dir, gpus] = [process.argv[2]!, Number(process.argv[3] ?? 0)]
const queue = makeFileQueue(Effect.succeed(dir))

Effect.runFork(
  Effect.scoped(
    Effect.gen(function* () {
      const ticket = yield* queue.join({ gpus, command: `member ${process.pid}` })
      console.log(`joined ${ticket.entry.ticket}`)
      yield* Effect.async<void>((resume) => {
        const rl = readline.createInterface({ input: process.stdin })
        rl.on("line", (line) => {
          if (line === "hold")
            Effect.runFork(
              Effect.andThen(
                ticket.markHolding("actor-x"),
                Effect.sync(() => console.log("holding"))
              )
            )
        })
        rl.on("close", () => resume(Effect.void))
      })
    })
  )
)
