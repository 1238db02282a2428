/**
 * A process in a host queue, for the HostQueue tests: joins the live queue in the directory
 * argv[2] (HostQueue.makeFileQueue, placeIn) with `--gpus` argv[3], prints `joined <lease id>`,
 * marks itself holding when it reads "hold" on stdin, prints `ahead [<lease id>…]` (who is ahead
 * of it) when it reads "look", and stays until killed or its stdin closes.
 * Bundled by the test (test/support/bundle.ts) and run with node.
 */
import * as readline from "node:readline"
import { Effect } from "effect"
import { blockers } from "../../src/domain/Queue.js"
import { makeFileQueue, placeIn } from "../../src/services/HostQueue.js"

const [dir, gpus] = [process.argv[2]!, Number(process.argv[3] ?? 0)]
const queue = makeFileQueue(placeIn(dir))

Effect.runFork(
  Effect.scoped(
    Effect.gen(function* () {
      const ticket = yield* queue.join({ gpus, command: `member ${process.pid}` })
      console.log(`joined ${ticket.entry.leaseId}`)
      yield* Effect.async<void>((resume) => {
        const rl = readline.createInterface({ input: process.stdin })
        rl.on("line", (line) => {
          if (line === "look")
            Effect.runFork(
              Effect.andThen(ticket.look, (entries) =>
                Effect.sync(() =>
                  console.log(
                    `ahead ${JSON.stringify(blockers(entries, ticket.entry).map((e) => e.leaseId))}`
                  )
                )
              )
            )
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
  ).pipe(
    Effect.catchAllCause((cause) =>
      Effect.sync(() => {
        console.error(`member failed: ${cause}`)
        process.exit(1)
      })
    )
  )
)
