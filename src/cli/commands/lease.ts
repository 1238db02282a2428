import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Effect, Option } from "effect"
import { rayExecutorBackendRefusal } from "../../domain/Group.js"
import { formatSeconds } from "../../domain/Text.js"
import { isGroupResult } from "../../programs/Group.js"
import { LeasedCommand, runLeasedCommand } from "../../programs/Leased.js"
import { type LeaseStarted, LeaseTerminal } from "../../services/LeaseBridge.js"
import { Settings } from "../../services/Settings.js"
import { leaseRunReport } from "../Documents.js"
import { EXIT, ExitWith, exitCodeFor, type Failure, UsageError } from "../Exit.js"
import { present } from "../Run.js"
import {
  commandArgs,
  gpuCleanTimeout,
  gpus,
  leaseRequestOf,
  nodes,
  noServingSlot,
  positiveSeconds,
  rankCwd,
  rankEnv,
  strictCommand
} from "../Shared.js"
import { cancellingSignal } from "../Signals.js"
import { awaitStdoutFailure, exitForStdoutFailure, writeBytes, writeLine } from "../Stdout.js"
import { waitOption } from "./queue.js"

const timeout = positiveSeconds(
  "timeout",
  `Stop CMD once it has run S seconds, counted from when it starts (time spent waiting for a slot held by another lease is not counted; Ctrl-C ends the wait): CMD's process tree is stopped, the actor killed, and hyperloom exits ${EXIT.leaseTimeout}.`
)

// docs/design.md#the-command-line: with --json stdout is one JSON document, so CMD's stdout cannot
// share it: it goes to stderr (its bytes unchanged), where a user who asked for the document on
// stdout still sees it.
const json = Options.boolean("json").pipe(
  Options.withDescription(
    "Print one JSON document on stdout when CMD ends (its exit code, times, node and GPUs); the command's stdout goes to stderr then, its bytes unchanged, beside hyperloom's own lines."
  )
)

const cmd = commandArgs(
  "The command to run inside the lease, after `--` (no shell: pass `sh -c '…'` for one)."
)

/** The options before `--`, named for `strictCommand` (test/cli/HelpTables.test.ts checks them against the Command). */
export const OPTIONS = [
  "--json",
  "--gpus",
  "--no-serving-slot",
  "--timeout",
  "--wait",
  "--gpu-clean-timeout",
  "--nodes",
  "--rank-cwd",
  "--rank-env"
]

// Never waits for the reader (Stdout.ts): the release must not wait on a pipe nobody reads.
const write = (stream: NodeJS.WriteStream, line: string) => Effect.sync(() => writeLine(stream, line))

/**
 * The terminal CMD runs at, as under `srun`: this process's stdin forwarded to CMD (then EOF; a
 * terminal too), and CMD's bytes unchanged on stdout and stderr. With --json, stdout carries only
 * the JSON document, so CMD's stdout goes to stderr (its bytes unchanged too).
 */
const terminalOf = (asJson: boolean, seen: { started?: LeaseStarted }) =>
  LeaseTerminal.of({
    stdin: process.stdin,
    write: (stream, bytes) =>
      writeBytes(stream === "stdout" && !asJson ? process.stdout : process.stderr, bytes),
    onStarted: (started) => {
      seen.started = started
    }
  })

/**
 * Ctrl-C (or SIGTERM, SIGHUP) does not end silently: once the lease is released, one line says
 * what was stopped and that the slot is free.
 */
const saidCancelled = (argv: ReadonlyArray<string>, seen: { started?: LeaseStarted }) =>
  Effect.sync(() => {
    const by = cancellingSignal() ?? "interruption"
    const pid = seen.started?.pid
    process.stderr.write(
      seen.started !== undefined
        ? `hyperloom: cancelled (${by}): stopped ${argv[0]}${pid !== undefined ? ` (pid ${pid})` : ""} and released the lease; its slot and GPUs are free\n`
        : `hyperloom: cancelled (${by}): the lease was released (the command stopped if it had started)\n`
    )
  })

/** After the lease: this process's stdin let go (a terminal left open must not keep hyperloom alive). */
const releaseStdin = Effect.sync(() => {
  process.stdin.pause()
  process.stdin.destroy()
})

/**
 * The reader of stdout went away (EPIPE) or stdout failed: the command is stopped and the lease
 * released (the race interrupts the lease, whose finalizers release it), then EXIT.stdoutClosed or
 * EXIT.stdoutFailed.
 */
const untilStdoutFails = Effect.flatMap(awaitStdoutFailure, (e) =>
  Effect.fail(new ExitWith({ code: exitForStdoutFailure(e) }))
)

/**
 * `lease run` exits with CMD's code, so its own failures take the codes `env` and `timeout`
 * reserve: EXIT.leaseFailed for any hyperloom failure (the precise code is in the error line and
 * the JSON), EXIT.leaseTimeout, EXIT.cancelled; usage errors stay EXIT.usage (nothing ran).
 * EXIT.commandNotExecutable / commandNotFound come from the supervisor when CMD cannot be
 * executed or found.
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
  { json, gpus, noServingSlot, timeout, wait: waitOption, gpuCleanTimeout, nodes, rankCwd, rankEnv, cmd },
  (o) =>
    present(
      o.json,
      Effect.flatMap(strictCommand(o.cmd, OPTIONS), (argv) => {
        const seen: { started?: LeaseStarted } = {}
        const rayBackend = rayExecutorBackendRefusal(argv.join(" "))
        return Effect.zipRight(
          rayBackend === undefined ? Effect.void : Effect.fail(new UsageError({ detail: rayBackend })),
          Effect.raceFirst(
            Effect.flatMap(Settings, (settings) =>
              runLeasedCommand({
                request: leaseRequestOf(o),
                command: LeasedCommand.Argv({ argv }),
                // the environment the Settings layer read (the live layer's is this process's)
                env: settings.env,
                cwd: settings.cwd,
                timeoutSec: Option.getOrUndefined(o.timeout),
                waitSec: Option.getOrUndefined(o.wait),
                // A group's ranks (--nodes N >= 2) come as lines; one node's bytes went to the terminal.
                // With --json stdout carries only the final document: the command's output goes to stderr.
                onOutput: ({ stream, line, written }) =>
                  written === true
                    ? Effect.void
                    : write(stream === "stdout" && !o.json ? process.stdout : process.stderr, line)
              })
            ),
            untilStdoutFails
          ).pipe(
            Effect.provideService(LeaseTerminal, terminalOf(o.json, seen)),
            Effect.ensuring(releaseStdin),
            Effect.onInterrupt(() => saidCancelled(argv, seen))
          )
        )
      }).pipe(Effect.map((r) => leaseRunReport(r, isGroupResult(r) ? r : undefined))),
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
    `Run CMD under a serving lease and exit with its exit code. The lease is a Ray actor with serving_slot and --gpus N (the head is ensured, and repaired first if it lacks the slot and every guard allows); CMD runs in it as under srun, with this environment and directory (the actor's CUDA_VISIBLE_DEVICES wins), this stdin, and CMD's output here byte for byte (in the background, give \`< /dev/null\`). Options end at \`--\`. Ctrl-C, --timeout or hyperloom dying stop CMD's process tree and free the slot. Exit codes besides CMD's: ${EXIT.leaseTimeout} timeout, ${EXIT.leaseFailed} hyperloom failed (the precise code in the error line), ${EXIT.commandNotExecutable} CMD not executable, ${EXIT.commandNotFound} CMD not found, ${EXIT.cancelled} cancelled, ${EXIT.usage} bad usage. More (stdin and output, --nodes): the README's "Commands".`
  )
)
