/**
 * A baseline attempt in words and on disk: where its files live, the one line that sums it up in
 * the live log, the telling line of its error text. Pure; the baseline program and the renderers
 * share it.
 */
import { decidesClass, fromException, isTellingLine, MAX_EVIDENCE_LINES, rootCauseLine } from "./Failure.js"
import type { LeaseRequest } from "./Feasibility.js"
import { CLIENT_LOG, SERVE_STATUS_FILE, SERVER_LOG } from "./Serving.js"
import type { SessionState } from "./State.js"
import { type Decision, STALL_LIMIT } from "./StopRules.js"
import { formatThroughput } from "./Text.js"

/** Where an attempt's files live. */
export const attemptPaths = (sessionDir: string, n: number) => {
  const dir = `${sessionDir.replace(/\/+$/, "") || "/"}/attempts/${n}`.replace(/^\/\//, "/")
  return {
    dir,
    resultFile: `${dir}/result.json`,
    launchLog: `${dir}/launch.log`,
    serverLog: `${dir}/${SERVER_LOG}`,
    clientLog: `${dir}/${CLIENT_LOG}`,
    serveStatus: `${dir}/${SERVE_STATUS_FILE}`
  }
}
export type AttemptPaths = ReturnType<typeof attemptPaths>

/** Keeps a telling line (`isTellingLine`) as evidence, the first MAX_EVIDENCE_LINES of them. */
export const keepEvidence = (evidence: Array<string>, line: string) => {
  if (evidence.length < MAX_EVIDENCE_LINES && isTellingLine(line)) evidence.push(line.trim().slice(0, 1000))
}

/**
 * The attempt's output as its error text: stdout's tail, then stderr's. Never interleaved by
 * arrival: the two pipes race, and the same failure must read the same every time (its folded
 * signature decides the same-failure stop). stderr last, so the error tail ends with it.
 */
export const joinTails = (stdout: string, stderr: string): string =>
  [stdout, stderr].filter((t) => t.trim() !== "").join("\n")

export const fmtSec = (s: number) => (s < 10 ? `${s.toFixed(1)} s` : `${Math.round(s)} s`)

export const describeRequest = (r: LeaseRequest) =>
  `${r.gpus} GPU(s)${r.servingSlot ? " + serving_slot" : ""}`

/** One line summing up an attempt: number, class, exit code, runtime, the streaks, what comes next and why. */
export const describeAttempt = (state: SessionState, decision: Decision): string => {
  const a = state.baseline_attempts[state.baseline_attempts.length - 1]
  const what =
    a === undefined
      ? "no attempt"
      : `attempt ${a.number}: ${a.error_class ?? `succeeded, throughput ${formatThroughput(a.throughput)}`}` +
        `${a.exit_code !== null ? `, exit ${a.exit_code}` : ""}${a.runtime_sec !== null ? `, ${fmtSec(a.runtime_sec)}` : ""}`
  const e = state.enablement
  const streaks =
    `streaks: failure ${state.baseline_failure_streak}, arg-error ${state.baseline_arg_error_streak}, ` +
    `total failures ${state.baseline_total_failures}` +
    (e.attempts > 0 ? `, enablement runs ${e.attempts}, stall ${e.stall_streak}/${STALL_LIMIT}` : "")
  const next =
    decision._tag === "retry"
      ? "next: retry"
      : decision._tag === "run_enablement"
        ? "next: enablement command, then revalidation"
        : decision._tag === "stop"
          ? `next: stop (${decision.reason})`
          : "next: done (succeeded)"
  return `${what}; ${streaks}; ${next}: ${decision.why}`
}

const ERRORISH =
  /error|exception|fatal|traceback|failed|not found|killed|out of memory|missing|ray_cluster_infeasible/i
const HEADER_CLASSES = new Set([
  "timeout",
  "no_report",
  "invalid_measurement",
  "session_time_exhausted",
  "orchestrator_cancelled",
  "interrupted"
])

/**
 * The line that decided a `kv_cache_oom` or `fast_exit_arg_error` class (`decidesClass`), the
 * root cause first (`rootCauseLine`), from the exception's name on: a log prefix such as
 * `(EngineCore_DP0 pid=N) ERROR … [core.py:586]` or `root cause:` would take the room the message
 * needs. Undefined for other classes or when no line matches.
 */
const decidingLine = (lines: ReadonlyArray<string>, errorClass: string | null): string | undefined => {
  const line = rootCauseLine(lines.filter((l) => decidesClass(l, errorClass)))
  return line === undefined ? undefined : fromException(line)
}

/**
 * The telling line of an attempt's error text, shortened: the marker line when there is one; the
 * classifier's description for the classes that have one (timeout, no report, …); the line that
 * decided the class for `kv_cache_oom` and `fast_exit_arg_error` (not vLLM's generic "Engine
 * core initialization failed. See root cause above" trailer); otherwise the last line that reads
 * like an error (stdout and stderr arrive interleaved, so the error is not always the last line),
 * else the last line.
 */
export const errorHead = (error: string | null, errorClass: string | null, max = 160): string => {
  if (error === null) return ""
  const lines = error
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && l !== "…")
  const marked = lines.find((l) => l.toLowerCase().includes("ray_cluster_infeasible"))
  const line =
    marked ??
    (errorClass !== null && HEADER_CLASSES.has(errorClass)
      ? lines[0]
      : (decidingLine(lines, errorClass) ??
        [...lines].reverse().find((l) => ERRORISH.test(l)) ??
        lines[lines.length - 1]))
  const text = (line ?? "").replace(/^…/, "")
  return text.length > max ? `${text.slice(0, max - 1)}…` : text
}
