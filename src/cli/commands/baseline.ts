import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Console, Effect, Option } from "effect"
import { rayExecutorBackendRefusal } from "../../domain/Group.js"
import {
  DEFAULT_READY_PATH,
  DEFAULT_READY_TIMEOUT_SEC,
  RUNNER_DEFAULTS,
  readiness
} from "../../domain/Serving.js"
import { renderState } from "../../domain/State.js"
import { runBaseline } from "../../programs/Baseline.js"
import { Settings } from "../../services/Settings.js"
import { StateStore } from "../../services/StateStore.js"
import { VERSION } from "../../version.js"
import { EXIT, ExitWith, exitCodeForSession, UsageError } from "../Exit.js"
import { renderSession } from "../RenderSession.js"
import { withJsonErrors } from "../Run.js"
import {
  checkCmd,
  commandArgs,
  gpuCleanTimeout,
  gpus,
  json,
  leaseRequestOf,
  maxFailed,
  nodes,
  noServingSlot,
  positiveSeconds,
  rankCwd,
  rankEnv,
  strictCommand,
  warmup
} from "../Shared.js"
import { waitOption } from "./queue.js"
import { session } from "./state.js"

const attemptTimeout = positiveSeconds(
  "attempt-timeout",
  "Bound each attempt's command, counted from when it starts (time spent waiting for a slot held by another lease is not charged; --deadline and Ctrl-C still bound the wait); an attempt past it is killed and counts as a `timeout` failure."
)

const deadline = positiveSeconds(
  "deadline",
  `Bound the whole run, in seconds from its start. When it passes, the attempt in flight is stopped (its lease released) and the session stops as session_time_exhausted, not charged (exit ${EXIT.sessionTimeExhausted}); a later run resumes it.`
)

const enablementCmd = Options.text("enablement-cmd").pipe(
  Options.withPseudoName("CMD"),
  Options.withDescription(
    "A shell command line (one string, run with /bin/sh -c) that tries to fix what made an attempt fail: after a counted failure with output, it runs with HYPERLOOM_LAUNCH_LOG naming a file holding the failure's output tail, then the baseline runs again (revalidation). While it is engaged, the same-failure and three-failure stops stand down; 5 failed revalidations stop as enablement_stalled."
  ),
  Options.optional
)

const server = Options.text("server").pipe(
  Options.withPseudoName("'SERVER CMD'"),
  Options.withDescription(
    `A serving benchmark: the serving engine's command line, ONE string run with \`sh -c\` in a process group of its own, e.g. 'vllm serve MODEL --port $HYPERLOOM_PORT'. Each attempt, on the leased node: a free port (HYPERLOOM_PORT, HYPERLOOM_BASE_URL for the server and the client), the server started, GET <base>/<ready-path> polled until it answers 200 (progress every ${RUNNER_DEFAULTS.progressEverySec} s: elapsed, the server log's last line), then CMD runs as the client; the server's whole process group is stopped (TERM, grace, KILL) before the lease is released. A server that exits or is not ready in time fails the attempt with its log's tail. Kept in <session>/attempts/<n>/: server.log, client.log, serve.json, the result file; <session>/environment.json records what ran on what.`
  ),
  Options.optional
)

const readyPath = Options.text("ready-path").pipe(
  Options.withPseudoName("P"),
  Options.withDescription(`With --server: the path polled for readiness (default ${DEFAULT_READY_PATH}).`),
  Options.optional
)

const readyTimeout = positiveSeconds(
  "ready-timeout",
  `With --server: how long the server may take to answer its readiness check (default ${DEFAULT_READY_TIMEOUT_SEC} s; large models load slowly); past it the attempt fails as a timeout and the server is stopped.`
)

const cmd = commandArgs(
  'The baseline command and its arguments, after `--` (run without a shell); with --server, the load client. Each attempt gets HYPERLOOM_RESULT_FILE (write {"throughput": N} there; a fresh file per attempt in <session>/attempts/<n>/, or a report of vLLM, SGLang, GuideLLM or AIPerf: docs/clients.md), HYPERLOOM_ATTEMPT_DIR (that folder: the --output-artifact-dir of AIPerf), HYPERLOOM_SESSION_DIR and HYPERLOOM_ATTEMPT; its output is streamed to stderr as "[attempt n] …".'
)

/** The options before `--`, named for `strictCommand` (test/cli/HelpTables.test.ts checks them against the Command). */
export const OPTIONS = [
  "--session",
  "--gpus",
  "--no-serving-slot",
  "--attempt-timeout",
  "--wait",
  "--gpu-clean-timeout",
  "--deadline",
  "--enablement-cmd",
  "--nodes",
  "--rank-cwd",
  "--rank-env",
  "--server",
  "--ready-path",
  "--ready-timeout",
  "--check",
  "--warmup",
  "--max-failed",
  "--json"
]

const description = `Run a baseline benchmark command (CMD after --) under a serving lease until it succeeds or a stop rule fires. Success (exit ${EXIT.ok}): a positive throughput in HYPERLOOM_RESULT_FILE. The stop rules: baseline_failed (exit ${EXIT.baselineFailed}: ray_cluster_infeasible, the same failure twice in a row, or three failures), baseline_arg_error (exit ${EXIT.baselineArgError}: two argument errors in a row), enablement_stalled (exit ${EXIT.enablementStalled}: 5 failed revalidations after --enablement-cmd), session_time_exhausted (exit ${EXIT.sessionTimeExhausted}: --deadline); Ctrl-C exits ${EXIT.cancelled}. Another lease failure ends the run with its error, the attempt not charged. <session>/state.json is written after every change; the same command resumes an unfinished, cancelled or timed-out session (other arguments: exit ${EXIT.usage}, naming what differs), a finished one is shown with its exit code and nothing runs. Prints the session summary (--json: the state document).`

export const baselineRun = Command.make(
  "run",
  {
    session,
    gpus,
    noServingSlot,
    attemptTimeout,
    wait: waitOption,
    gpuCleanTimeout,
    deadline,
    enablementCmd,
    nodes,
    rankCwd,
    rankEnv,
    server,
    readyPath,
    readyTimeout,
    check: checkCmd,
    warmup,
    maxFailed,
    json,
    cmd
  },
  (o) =>
    Effect.gen(function* () {
      const printState = (state: Parameters<typeof renderState>[0]) =>
        o.json ? Console.log(renderState(state).trimEnd()) : Console.log(renderSession(o.session, state))
      const argv = yield* strictCommand(o.cmd, OPTIONS)
      const serverCmd = Option.getOrUndefined(o.server)
      if (
        serverCmd === undefined &&
        [o.readyPath, o.readyTimeout, o.check, o.warmup, o.maxFailed].some((x: Option.Option<unknown>) =>
          Option.isSome(x)
        )
      ) {
        return yield* new UsageError({
          detail: "--ready-path, --ready-timeout, --check, --warmup and --max-failed go with --server"
        })
      }
      if (serverCmd !== undefined && serverCmd.trim() === "") {
        return yield* new UsageError({ detail: "--server must be a command line, got an empty string" })
      }
      const rayBackend = serverCmd === undefined ? undefined : rayExecutorBackendRefusal(serverCmd)
      if (rayBackend !== undefined) return yield* new UsageError({ detail: rayBackend })
      const program = Effect.gen(function* () {
        const settings = yield* Settings
        const ready = readiness(Option.getOrUndefined(o.readyPath), Option.getOrUndefined(o.readyTimeout))
        const serving =
          serverCmd === undefined
            ? undefined
            : {
                server: serverCmd,
                readiness: ready,
                check: Option.getOrUndefined(o.check),
                warmup: Option.getOrUndefined(o.warmup),
                maxFailed: Option.getOrUndefined(o.maxFailed)
              }
        return yield* runBaseline({
          sessionDir: o.session,
          request: leaseRequestOf(o),
          argv,
          attemptTimeoutSec: Option.getOrUndefined(o.attemptTimeout),
          waitSec: Option.getOrUndefined(o.wait),
          deadlineSec: Option.getOrUndefined(o.deadline),
          enablementCmd: Option.getOrUndefined(o.enablementCmd),
          env: settings.env,
          cwd: settings.cwd,
          // Each attempt runs through the AttemptRunner the command is provided with: a lease, or
          // with --nodes N >= 2 (or HYPERLOOM_NODES) a group of N ranks.
          serving,
          version: VERSION
        })
      }).pipe(
        // Ctrl-C: the program has saved the cancelled state by now; print it like a normal end.
        Effect.onInterrupt(() =>
          Effect.flatMap(StateStore, (store) => store.load(o.session)).pipe(
            Effect.flatMap(Option.match({ onNone: () => Effect.void, onSome: printState })),
            Effect.ignore
          )
        )
      )
      const report = yield* program
      yield* printState(report.state)
      const code = exitCodeForSession(report.state)
      if (code !== EXIT.ok) return yield* Effect.fail(new ExitWith({ code }))
    }).pipe(withJsonErrors(o.json), Effect.scoped)
).pipe(Command.withDescription(description))
