import { Data } from "effect"
import { INFEASIBLE_MARKER } from "./Errors.js"
import type { EngineConfig, Observations } from "./Observations.js"
import {
  type ClientCounts,
  impossibleMetricOf,
  type Metrics,
  type ResultFormat,
  type Workload
} from "./Results.js"
import type { CheckRun, WarmupRun } from "./Serving.js"
import type { RunValidity } from "./Validity.js"

/**
 * Failure classes of a baseline attempt (docs/design.md#failure-classes).
 *
 * - `session_time_exhausted`, `orchestrator_cancelled`: the run itself stopped the attempt (deadline,
 *   Ctrl-C / cancel). Never charged.
 * - `interrupted`: an attempt a crash left in flight, found on resume. Never charged.
 * - everything else is a counted failure.
 */
export const FAILURE_CLASSES = [
  "session_time_exhausted",
  "orchestrator_cancelled",
  "timeout",
  "ray_cluster_infeasible",
  "kv_cache_oom",
  "fast_exit_arg_error",
  "subprocess_nonzero",
  "no_report",
  "invalid_measurement",
  "port_taken",
  "interrupted"
] as const

export type FailureClass = (typeof FAILURE_CLASSES)[number]

/** Classes that are not charged to the baseline: they change no streak, no total, no signature. */
export type UnchargedClass = "session_time_exhausted" | "orchestrator_cancelled" | "interrupted"

export type CountedClass = Exclude<FailureClass, UnchargedClass>

export const isUncharged = (c: FailureClass): c is UnchargedClass =>
  c === "session_time_exhausted" || c === "orchestrator_cancelled" || c === "interrupted"

export const isCounted = (c: FailureClass): c is CountedClass => !isUncharged(c)

/**
 * An attempt exiting non-zero faster than this may be an argument error
 * (docs/design.md#failure-classes).
 */
export const FAST_EXIT_SEC = 30

/** The stored error text (and the launch log) of an attempt is at most this many characters. */
export const MAX_ERROR_CHARS = 2000

/**
 * What happened to one baseline attempt, as the baseline program observed it. Everything the
 * classifier needs is data here; it never looks at error objects or their messages other than the
 * lease's typed infeasibility error, passed as its message.
 */
export type AttemptOutcome = Data.TaggedEnum<{
  /**
   * The lease failed with `RayClusterInfeasible`; `message` is the error's message (it starts with
   * the marker `ray_cluster_infeasible`).
   */
  LeaseInfeasible: { readonly message: string }
  /** CMD ran past the attempt timeout and was killed. */
  TimedOut: {
    readonly runtimeSec: number
    readonly timeoutSec: number
    readonly outputTail: string
    /** The `v1:<sha-256>` signature of the attempt's whole output (see Signature.ts), when the program kept one. */
    readonly outputSignature?: string | undefined
  }
  /** The run stopped the attempt: the session deadline passed, or the operator cancelled. */
  StoppedByRun: {
    readonly cause: "deadline" | "cancel"
    readonly runtimeSec: number
    readonly outputTail: string
  }
  /**
   * CMD exited. `outputTail` is the tail of stdout+stderr. `throughput` is the `throughput` value
   * read from HYPERLOOM_RESULT_FILE: `undefined` when there is no file, no valid JSON or no such key,
   * otherwise the raw JSON value (a number, or anything else, which is not a measurement).
   */
  Exited: {
    readonly exitCode: number
    readonly runtimeSec: number
    readonly outputTail: string
    readonly throughput: unknown
    /** The `v1:<sha-256>` signature of the attempt's whole output (see Signature.ts), when the program kept one. */
    readonly outputSignature?: string | undefined
    /**
     * The telling lines (`isTellingLine`) seen anywhere in the whole output, not only in the tail:
     * a root cause printed before a long traceback still classifies the failure.
     */
    readonly evidence?: ReadonlyArray<string> | undefined
    /**
     * The result file's format and metrics (docs/design.md#results-and-metrics), when it had a
     * known format.
     */
    readonly resultFormat?: ResultFormat | undefined
    readonly metrics?: Metrics | undefined
    /**
     * Why the result file's metrics are impossible (Results.ts `invalidMetricOf`: NaN, negative, a
     * fractional count), naming the field; negative values and fractional counts in `metrics` are
     * found without it.
     */
    readonly invalidMetric?: string | undefined
    /**
     * A serving attempt (docs/design.md#classified-from-what-happened): the server's exit code when
     * it exited on its own while the client ran (the runner's serve.json). Then the engine broke,
     * whatever the client did: vLLM's client exits 0 with `completed: 0`, SGLang's raises; both are
     * this one fact. `null`: the engine was gone and its exit code is not known (a sweep's engine
     * whose runner ended with the lease).
     */
    readonly serverExitCode?: number | null | undefined
  }
  /**
   * A serving attempt's server (docs/design.md#classified-from-what-happened) exited, or did not
   * answer its readiness check in time, before the client could run. `outputTail` is the server
   * log's tail; `runtimeSec` the server's own runtime; `exitCode` null when it did not exit (the
   * ready timeout).
   */
  ServerNotReady: {
    readonly exitCode: number | null
    readonly runtimeSec: number
    readonly outputTail: string
    /** Set when the server never answered within the ready timeout (it was then stopped). */
    readonly readyTimeoutSec?: number | undefined
    readonly outputSignature?: string | undefined
    readonly evidence?: ReadonlyArray<string> | undefined
  }
}>

export const AttemptOutcome = Data.taggedEnum<AttemptOutcome>()

/** A classified attempt: what the stop rules consume and what the state records. */
export interface AttemptResult {
  /** `null` on success. */
  readonly errorClass: FailureClass | null
  readonly exitCode: number | null
  readonly runtimeSec: number | null
  /** The error text (≤ MAX_ERROR_CHARS, a tail, marker first when present); `null` on success. */
  readonly error: string | null
  /**
   * The failure's output tail (≤ MAX_ERROR_CHARS, marker first when present), the launch log the
   * enablement lane hands to the enablement command; `""` when the attempt printed nothing.
   */
  readonly launchLog: string
  /** The measurement when it is a finite number (also for `invalid_measurement` of 0 or < 0). */
  readonly throughput: number | null
  /**
   * The signature of the attempt's whole output (`v1:<sha-256>`), recorded for a counted failure instead of
   * the fold of the displayed tail; absent when the attempt had no output of its own to digest.
   */
  readonly outputSignature?: string | undefined
  /**
   * The result file's format and the serving metrics (docs/design.md#results-and-metrics), when the
   * attempt wrote a known format.
   */
  readonly resultFormat?: ResultFormat | undefined
  readonly metrics?: Metrics | undefined
  /** What the validity checks said and what they read (docs/trust.md#is-the-number-valid), kept in the record. */
  readonly validity?: RunValidity | undefined
  /** The `--max-failed` share it was judged with (kept for `hyperloom check`). */
  readonly maxFailed?: number | undefined
  readonly client?: ClientCounts | undefined
  /** What the client sent (docs/clients.md#the-workload-on-record), where its report says. */
  readonly workload?: Workload | undefined
  /** What was left out, computed or doubtful in reading its result, naming field and file. */
  readonly resultNotes?: ReadonlyArray<string> | undefined
  readonly check?: CheckRun | null | undefined
  readonly warmup?: WarmupRun | null | undefined
  /** What the node sampled while the client ran, and the engine's effective configuration (docs/design.md#samplers). */
  readonly observations?: Observations | null | undefined
  readonly engineConfig?: EngineConfig | null | undefined
}

/**
 * KV-cache out-of-memory messages. The first three are those of docs/design.md#failure-classes; the
 * others are the engines' own (fixtures in test/fixtures/serving/ say where each comes from):
 * - vLLM, vllm/v1/core/kv_cache_utils.py (`check_enough_kv_cache_memory`): "No available memory for
 *   the cache blocks. Try increasing `gpu_memory_utilization` …" and "To serve at least one request
 *   with the models's max seq len (…), (… GiB KV cache is needed, which is larger than the available
 *   KV cache memory (… GiB)."; the older engine: "… is larger than the maximum number of tokens that
 *   can be stored in KV cache (…)".
 * - SGLang, sglang/srt/model_executor/pool_configurator.py and model_runner.py: "Not enough memory.
 *   Please try to increase --mem-fraction-static."
 */
const KV_CACHE_OOM_PATTERNS = [
  "no gpu memory for the kv cache",
  "leave no gpu memory",
  "raise --mem-fraction-static above",
  "no available memory for the cache blocks",
  "larger than the available kv cache memory",
  "can be stored in kv cache",
  "please try to increase --mem-fraction-static"
] as const

/**
 * Argument errors: those of docs/design.md#failure-classes, plus CPython's argparse messages
 * (Lib/argparse.py), which both `vllm serve` (FlexibleArgumentParser) and SGLang's launch_server
 * print: "the following arguments are required", "expected one argument", "ambiguous option",
 * "argument --x: invalid int value".
 */
const ARG_ERROR_PATTERNS = [
  "unrecognized arguments",
  "invalid choice",
  "unknown attention backend",
  "not a valid",
  "the following arguments are required",
  "expected one argument",
  "ambiguous option"
] as const

/** argparse's "argument --tensor-parallel-size/-tp: invalid int value: 'x'". */
const ARGPARSE_TYPE_ERROR = /\binvalid [a-z_]+ value: /i

/**
 * argparse's own error line for an argument it refused, whatever the message (CPython's argparse
 * prints `PROG: error: argument NAME: MESSAGE` after the usage line and exits 2): vLLM's own types
 * say "Value 4kk cannot be converted to …" (vllm/engine/arg_utils.py `parse_type`), a custom check
 * its own words ("must be at least 1"); SGLang's launch_server is argparse too.
 */
const ARGPARSE_ARGUMENT_ERROR = /: error: argument [^\s:]+: /

/**
 * `valueerror:` counts as an argument error only when the message on the same line names one of
 * these (case-insensitive, at a word start; `cli` as a whole word so `client` does not count).
 * Matching on the line of the ValueError rather than anywhere in the tail keeps ordinary log lines
 * ("Using FLASH_ATTN backend", an args dump) from turning an unrelated ValueError into an argument error.
 */
const VALUE_ERROR_LINE = /valueerror:(.*)$/gim
const VALUE_ERROR_WORDS = /\b(?:argument|argparse|backend|choice|invalid|option|flag|unknown|cli\b)/i

/**
 * The tail mentions that the KV cache got no GPU memory (`kv_cache_oom`,
 * docs/design.md#failure-classes).
 */
export const isKvCacheOom = (tail: string): boolean => {
  const t = tail.toLowerCase()
  return KV_CACHE_OOM_PATTERNS.some((p) => t.includes(p))
}

/**
 * The benchmark clients' own words when their first request failed (SGLang's bench_serving:
 * "Warmup failed - Please make sure benchmark arguments are correctly specified. Error: …"; vLLM's:
 * "Initial test run failed - Please make sure …"). They blame the arguments whatever happened; what
 * happened is the request's error after "Error:" (a broken stream, a reset connection, an HTTP
 * error), so such a line is no argument error by its wording
 * (docs/design.md#classified-from-what-happened).
 */
const CLIENT_REQUEST_FAILED =
  /(?:warmup|initial test run) failed - please make sure benchmark arguments are correctly specified/i

/**
 * The runners' line when a process outside the lease listened on the engine's port (issue 27 item
 * 1, python/hyperloom/listener.py): `port_taken: port P is served by pid N of user U (…), not by
 * the lease's engine …`. Whatever answered there was not the engine, so nothing was measured.
 */
export const PORT_TAKEN_MARKER = "port_taken: port "

/** The first line of the text that says the engine's port was taken, from the marker on; undefined if none. */
export const portTakenLine = (text: string): string | undefined => {
  const at = text.indexOf(PORT_TAKEN_MARKER)
  if (at < 0) return undefined
  const eol = text.indexOf("\n", at)
  return text.slice(at, eol < 0 ? undefined : eol).trim()
}

/**
 * The tail reads like a rejected argument / option / backend (`fast_exit_arg_error`,
 * docs/design.md#failure-classes).
 */
export const hasArgErrorText = (text: string): boolean => {
  const tail = CLIENT_REQUEST_FAILED.test(text)
    ? text
        .split("\n")
        .filter((l) => !CLIENT_REQUEST_FAILED.test(l))
        .join("\n")
    : text
  const t = tail.toLowerCase()
  if (ARG_ERROR_PATTERNS.some((p) => t.includes(p))) return true
  if (ARGPARSE_TYPE_ERROR.test(tail)) return true
  if (ARGPARSE_ARGUMENT_ERROR.test(tail)) return true
  for (const m of tail.matchAll(VALUE_ERROR_LINE)) {
    if (VALUE_ERROR_WORDS.test(m[1] ?? "")) return true
  }
  return false
}

/**
 * A line that can decide a class (a KV-cache OOM or an argument error): the baseline program keeps
 * such lines from the WHOLE output as evidence, so a root cause printed long before the end (vLLM's
 * engine core error, then the API server's "Engine core initialization failed. See root cause
 * above" traceback) still classifies the attempt.
 */
export const isTellingLine = (line: string): boolean =>
  isKvCacheOom(line) || hasArgErrorText(line) || line.includes(PORT_TAKEN_MARKER)

/**
 * The line decided the attempt's class: it matches the class's own patterns (a KV-cache OOM line
 * for `kv_cache_oom`, an argument-error line for `fast_exit_arg_error`). Other classes have no
 * such line.
 */
export const decidesClass = (line: string, errorClass: string | null): boolean =>
  errorClass === "kv_cache_oom"
    ? isKvCacheOom(line)
    : errorClass === "fast_exit_arg_error"
      ? hasArgErrorText(line)
      : false

/** `ValueError: …`, `RuntimeError: …`: where an exception's own message starts in a log line. */
const EXCEPTION_AT = /\b[A-Z][A-Za-z0-9_]*(?:Error|Exception): /

/**
 * The root cause among telling lines, in output order: the first exception message
 * (`ValueError: No available memory for the cache blocks…`) rather than the source line that raised
 * it (`raise ValueError("No available memory …"`), which a traceback prints first; else the first.
 */
export const rootCauseLine = (lines: ReadonlyArray<string>): string | undefined => {
  const told = lines.filter((l) => l.trim() !== "")
  return told.find((l) => EXCEPTION_AT.test(l)) ?? told[0]
}

/** A log line from its exception's name on (`ValueError: …`), without the logger's prefix; else as is. */
export const fromException = (line: string): string => {
  const at = EXCEPTION_AT.exec(line)?.index
  return at === undefined ? line : line.slice(at)
}

/** At most this many telling lines are kept per attempt (the first ones: root causes come first). */
export const MAX_EVIDENCE_LINES = 8

/** True when the text carries the infeasibility marker anywhere (case-insensitive). */
export const hasInfeasibleMarker = (text: string): boolean => text.toLowerCase().includes(INFEASIBLE_MARKER)

const ELLIPSIS = "…"

/** The last `max` characters of a text, with `…` in front when something was cut. */
const tailOf = (text: string, max: number): string => {
  if (max <= 0) return ""
  if (text.length <= max) return text
  if (max === 1) return ELLIPSIS
  return ELLIPSIS + text.slice(text.length - (max - 1))
}

/**
 * The bounded text of an attempt: at most MAX_ERROR_CHARS, a tail of the output, but with the line
 * carrying the `ray_cluster_infeasible` marker moved first (from the marker on) so neither the cut nor
 * a reader misses it, then `header` (a short description the classifier wrote), then the tail of
 * everything else. Blank input and no header give `""`.
 */
export const boundedErrorText = (text: string, header?: string): string => {
  let rest = text.trim()
  const lead: Array<string> = []
  const at = rest.toLowerCase().indexOf(INFEASIBLE_MARKER)
  if (at >= 0) {
    const eol = rest.indexOf("\n", at)
    lead.push(rest.slice(at, eol < 0 ? undefined : eol).trim())
    const before = rest.slice(0, at).trimEnd()
    const after = eol < 0 ? "" : rest.slice(eol + 1).trimStart()
    rest = before === "" ? after : after === "" ? before : `${before}\n${after}`
  }
  if (header !== undefined && header !== "") lead.push(header)
  const first = lead.join("\n")
  if (first.length >= MAX_ERROR_CHARS) return first.slice(0, MAX_ERROR_CHARS - 1) + ELLIPSIS
  if (first === "") return tailOf(rest, MAX_ERROR_CHARS)
  if (rest === "") return first
  return first + "\n" + tailOf(rest, MAX_ERROR_CHARS - first.length - 1)
}

const fmtSec = (s: number): string => (Number.isInteger(s) ? String(s) : s.toFixed(1))

const describe = (value: unknown): string => {
  if (typeof value === "number") return String(value)
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

/** The class of a failed exit: `kv_cache_oom` at any runtime, then a fast argument error, else non-zero. */
const failedExitClass = (text: string, runtimeSec: number): FailureClass =>
  portTakenLine(text) !== undefined
    ? "port_taken"
    : isKvCacheOom(text)
      ? "kv_cache_oom"
      : runtimeSec < FAST_EXIT_SEC && hasArgErrorText(text)
        ? "fast_exit_arg_error"
        : "subprocess_nonzero"

const evidenceText = (evidence: ReadonlyArray<string> | undefined) =>
  evidence === undefined || evidence.length === 0 ? "" : `${evidence.join("\n")}\n`

/**
 * The root cause to show first: the telling line of the whole output that `rootCauseLine` picks,
 * when the tail that is kept (MAX_ERROR_CHARS) does not hold it; undefined otherwise.
 */
const causeHeader = (outputTail: string, evidence: ReadonlyArray<string> | undefined): string | undefined => {
  const first = rootCauseLine(evidence ?? [])
  if (first === undefined) return undefined
  const kept = outputTail.trim().slice(-MAX_ERROR_CHARS)
  return kept.includes(first.trim()) ? undefined : `root cause: ${first.trim().slice(0, 400)}`
}

/** A positive finite number is a measurement; anything else is not. */
export const isValidThroughput = (value: unknown): value is number =>
  typeof value === "number" && Number.isFinite(value) && value > 0

/**
 * Classifies one attempt (docs/design.md#failure-classes). Order for a non-zero exit:
 * `kv_cache_oom` (at any runtime), then `fast_exit_arg_error` (runtime strictly under
 * FAST_EXIT_SEC), then `subprocess_nonzero`. For exit 0: `no_report` without a throughput,
 * `invalid_measurement` when it is not a positive finite number, else success (`errorClass: null`).
 */
export const classifyAttempt = (outcome: AttemptOutcome): AttemptResult =>
  AttemptOutcome.$match(outcome, {
    LeaseInfeasible: ({ message }): AttemptResult => {
      // The typed error's message starts with the marker; keep it first even if a caller wrapped it.
      const text = hasInfeasibleMarker(message) ? message : `${INFEASIBLE_MARKER}: ${message}`
      const error = boundedErrorText(text)
      return {
        errorClass: "ray_cluster_infeasible",
        exitCode: null,
        runtimeSec: null,
        error,
        launchLog: error,
        throughput: null
      }
    },
    TimedOut: ({ outputSignature, outputTail, runtimeSec, timeoutSec }): AttemptResult => ({
      errorClass: "timeout",
      exitCode: null,
      runtimeSec,
      error: boundedErrorText(outputTail, `attempt timed out after ${fmtSec(timeoutSec)} s and was killed`),
      launchLog: boundedErrorText(outputTail),
      throughput: null,
      outputSignature
    }),
    StoppedByRun: ({ cause, outputTail, runtimeSec }): AttemptResult => ({
      errorClass: cause === "deadline" ? "session_time_exhausted" : "orchestrator_cancelled",
      exitCode: null,
      runtimeSec,
      error: boundedErrorText(
        outputTail,
        cause === "deadline"
          ? "attempt stopped: the session deadline passed"
          : "attempt stopped: the run was cancelled"
      ),
      launchLog: boundedErrorText(outputTail),
      throughput: null
    }),
    ServerNotReady: ({
      evidence,
      exitCode,
      outputSignature,
      outputTail,
      readyTimeoutSec,
      runtimeSec
    }): AttemptResult => {
      const taken = portTakenLine(`${evidenceText(evidence)}${outputTail}`)
      if (taken !== undefined) {
        // another process answered on the engine's port: its failure, whatever the engine then did
        return {
          errorClass: "port_taken",
          exitCode,
          runtimeSec,
          error: boundedErrorText(outputTail, taken),
          launchLog: boundedErrorText(outputTail),
          throughput: null,
          outputSignature
        }
      }
      const what =
        readyTimeoutSec !== undefined
          ? `the server was not ready within ${fmtSec(readyTimeoutSec)} s and was stopped`
          : `the server exited with code ${exitCode} after ${fmtSec(Math.round(runtimeSec * 10) / 10)} s, before it was ready`
      const cause = causeHeader(outputTail, evidence)
      const header = cause === undefined ? what : `${what}\n${cause}`
      const error = boundedErrorText(outputTail, header)
      const launchLog = boundedErrorText(outputTail, cause)
      if (readyTimeoutSec !== undefined) {
        return {
          errorClass: "timeout",
          exitCode,
          runtimeSec,
          error,
          launchLog,
          throughput: null,
          outputSignature
        }
      }
      return {
        errorClass: failedExitClass(`${evidenceText(evidence)}${outputTail}`, runtimeSec),
        exitCode,
        runtimeSec,
        error,
        launchLog,
        throughput: null,
        outputSignature
      }
    },
    Exited: ({
      evidence,
      exitCode,
      invalidMetric,
      metrics,
      outputSignature,
      outputTail,
      resultFormat,
      runtimeSec,
      serverExitCode,
      throughput
    }): AttemptResult => {
      const launchLog = boundedErrorText(outputTail)
      const measured = typeof throughput === "number" && Number.isFinite(throughput) ? throughput : null
      const result = { resultFormat, metrics }
      if (serverExitCode !== undefined) {
        // The engine died under the client: one class whichever client ran and however it exited
        // (a KV-cache OOM in the engine's log still names itself).
        const cause = causeHeader(outputTail, evidence)
        const code = serverExitCode === null ? "" : ` with code ${serverExitCode}`
        const what = `the server exited${code} while the client ran (client exit ${exitCode})`
        return {
          errorClass: isKvCacheOom(`${evidenceText(evidence)}${outputTail}`)
            ? "kv_cache_oom"
            : "subprocess_nonzero",
          exitCode,
          runtimeSec,
          error: boundedErrorText(outputTail, cause === undefined ? what : `${what}\n${cause}`),
          launchLog: boundedErrorText(outputTail, cause),
          throughput: measured,
          outputSignature,
          ...result
        }
      }
      if (exitCode !== 0) {
        const errorClass = failedExitClass(`${evidenceText(evidence)}${outputTail}`, runtimeSec)
        // The output tail is the error (its root cause first when the tail lost it); a silent
        // failure gets a one-line description instead.
        const cause = causeHeader(outputTail, evidence)
        const error =
          launchLog !== ""
            ? boundedErrorText(outputTail, cause)
            : `exited with code ${exitCode} and printed nothing`
        return {
          errorClass,
          exitCode,
          runtimeSec,
          error,
          launchLog: boundedErrorText(outputTail, cause),
          throughput: measured,
          outputSignature,
          ...result
        }
      }
      if (throughput === undefined) {
        return {
          errorClass: "no_report",
          exitCode,
          runtimeSec,
          error: boundedErrorText(outputTail, "exited 0 but reported no throughput in HYPERLOOM_RESULT_FILE"),
          launchLog,
          throughput: null,
          outputSignature,
          ...result
        }
      }
      if (metrics?.completed === 0) {
        return {
          errorClass: "invalid_measurement",
          exitCode,
          runtimeSec,
          error: boundedErrorText(
            outputTail,
            "exited 0 but its result has completed 0: every request failed, not a measurement"
          ),
          launchLog,
          throughput: measured,
          outputSignature,
          ...result
        }
      }
      const impossible = invalidMetric ?? impossibleMetricOf(metrics)
      if (impossible !== undefined) {
        return {
          errorClass: "invalid_measurement",
          exitCode,
          runtimeSec,
          error: boundedErrorText(outputTail, `exited 0 but its result is impossible: ${impossible}`),
          launchLog,
          throughput: measured,
          outputSignature,
          ...result
        }
      }
      if (!isValidThroughput(throughput)) {
        return {
          errorClass: "invalid_measurement",
          exitCode,
          runtimeSec,
          error: boundedErrorText(
            outputTail,
            `exited 0 but reported throughput ${describe(throughput)}, not a positive finite number`
          ),
          launchLog,
          throughput: measured,
          outputSignature,
          ...result
        }
      }
      return { errorClass: null, exitCode, runtimeSec, error: null, launchLog: "", throughput, ...result }
    }
  })
