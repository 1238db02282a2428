import * as Command from "@effect/cli/Command"
import { Effect, Option } from "effect"
import { rayExecutorBackendRefusal } from "../../domain/Group.js"
import { formatSeconds } from "../../domain/Text.js"
import { isGroupResult } from "../../programs/Group.js"
import { LeasedCommand, runLeasedCommand } from "../../programs/Leased.js"
import { EXIT, ExitWith, exitCodeFor, type Failure, UsageError } from "../Exit.js"
import { present } from "../Run.js"
import {
  commandArgs,
  gpus,
  json,
  leaseRequestOf,
  nodes,
  noServingSlot,
  positiveSeconds,
  rankCwd,
  rankEnv,
  strictCommand
} from "../Shared.js"
import { awaitStdoutFailure, exitForStdoutFailure, writeLine } from "../Stdout.js"
import { waitOption } from "./queue.js"

const timeout = positiveSeconds(
  "timeout",
  "Stop CMD once it has run S seconds, counted from when it starts (time spent waiting for a slot held by another lease is not counted; Ctrl-C ends the wait): CMD's process tree is stopped, the actor killed, and hyperloom exits 124."
)

const cmd = commandArgs(
  "The command to run inside the lease, after `--` (no shell: pass `sh -c '…'` for one)."
)

const OPTIONS = [
  "--json",
  "--gpus",
  "--no-serving-slot",
  "--timeout",
  "--wait",
  "--nodes",
  "--rank-cwd",
  "--rank-env"
]

// Never waits for the reader (Stdout.ts): the release must not wait on a pipe nobody reads.
const write = (stream: NodeJS.WriteStream, line: string) => Effect.sync(() => writeLine(stream, line))

/**
 * The reader of stdout went away (EPIPE) or stdout failed: the command is stopped and the lease
 * released (the race interrupts the lease, whose finalizers release it), then 141 or 74.
 */
const untilStdoutFails = Effect.flatMap(awaitStdoutFailure, (e) =>
  Effect.fail(new ExitWith({ code: exitForStdoutFailure(e) }))
)

/**
 * `lease run` exits with CMD's code, so its own failures take the codes `env` and `timeout`
 * reserve: 125 for any hyperloom failure (the precise code is in the error line and the JSON),
 * 124 timeout, 130 cancelled; usage errors stay 2 (nothing ran). 126/127 come from the
 * supervisor when CMD cannot be executed or found.
 */
const asLeaseFailure = (e: Failure): Effect.Effect<never, Failure> => {
  if (
    e._tag === "ExitWith" ||
    e._tag === "UsageError" ||
    e._tag === "InvalidSetting" ||
    e._tag === "InvalidAddress"
  ) {
    return Effect.fail(e)
  }
  return Effect.zipRight(
    Effect.sync(() =>
      process.stderr.write(`hyperloom: ${e.message} (hyperloom exit code ${exitCodeFor(e)})\n`)
    ),
    Effect.fail(new ExitWith({ code: EXIT.leaseFailed }))
  )
}

export const leaseRun = Command.make(
  "run",
  { json, gpus, noServingSlot, timeout, wait: waitOption, nodes, rankCwd, rankEnv, cmd },
  (o) =>
    present(
      o.json,
      Effect.flatMap(strictCommand(o.cmd, OPTIONS), (argv) => {
        const rayBackend = rayExecutorBackendRefusal(argv.join(" "))
        return Effect.zipRight(
          rayBackend === undefined ? Effect.void : Effect.fail(new UsageError({ detail: rayBackend })),
          Effect.raceFirst(
            runLeasedCommand({
              request: leaseRequestOf(o),
              command: LeasedCommand.Argv({ argv }),
              env: process.env,
              cwd: process.cwd(),
              timeoutSec: Option.getOrUndefined(o.timeout),
              waitSec: Option.getOrUndefined(o.wait),
              // With --json stdout carries only the final document: the command's output goes to stderr.
              onOutput: ({ stream, line }) =>
                write(stream === "stdout" && !o.json ? process.stdout : process.stderr, line)
            }),
            untilStdoutFails
          )
        )
      }).pipe(
        Effect.map((r) => ({
          exit_code: r.exitCode,
          timed_out: r.timedOut,
          runtime_sec: Number(r.runtimeSec.toFixed(3)),
          waited_sec: Number(r.waitedSec.toFixed(3)),
          command_sec: Number(r.commandSec.toFixed(3)),
          address: r.gcsAddress,
          pid: r.started?.pid ?? null,
          node_id: r.started?.nodeId ?? null,
          cuda_visible_devices: r.started?.cudaVisibleDevices ?? null,
          // A group (--nodes N >= 2, SPEC §11): its placement group and every rank.
          group: isGroupResult(r)
            ? {
                nodes: r.nodes,
                placement_group_id: r.placementGroupId,
                leader_host: r.group?.leaderHost ?? null,
                leader_port: r.group?.leaderPort ?? null,
                failed_rank: r.failedRank ?? null,
                ranks: (r.group?.ranks ?? []).map((k) => ({
                  rank: k.rank,
                  node_id: k.nodeId,
                  pid: k.pid ?? null,
                  actor_id: k.actorId,
                  cuda_visible_devices: k.cudaVisibleDevices ?? null,
                  exit_code: r.exits.find((e) => e.rank === k.rank)?.code ?? null
                }))
              }
            : null
        }))
      ),
      {
        render: (r) =>
          r.timed_out
            ? `hyperloom: lease timed out after ${formatSeconds(r.runtime_sec)}; the command was stopped`
            : `hyperloom: command exited with code ${r.exit_code} after ${formatSeconds(r.runtime_sec)}`,
        exitCode: (r) => (r.timed_out ? EXIT.leaseTimeout : (r.exit_code ?? EXIT.internal)),
        // the command's own output went to stdout; the summary goes to stderr
        humanTo: "stderr"
      }
    ).pipe(Effect.catchAll(asLeaseFailure))
).pipe(
  Command.withDescription(
    "Hold a serving lease (a Ray actor with serving_slot and --gpus N; the head is ensured and, if it lacks the slot and every guard allows, repaired first), run CMD inside it with this environment and working directory (the actor's CUDA_VISIBLE_DEVICES wins), stream its output, and exit with its exit code. Options end at `--`. Ctrl-C, --timeout or hyperloom dying stop CMD's process tree and free the slot. Exits like `env`/`timeout`: CMD's code, 124 timeout, 125 hyperloom failed (the precise code in the error line), 126 CMD not executable, 127 CMD not found, 130 cancelled, 2 bad usage."
  )
)
