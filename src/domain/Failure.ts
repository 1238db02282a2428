import { Data } from "effect"
import { INFEASIBLE_MARKER } from "./Errors.js"

/**
 * Failure classes of a baseline attempt (SPEC §6).
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
  "interrupted"
] as const

export type FailureClass = (typeof FAILURE_CLASSES)[number]

/** Classes that are not charged to the baseline: they change no streak, no total, no signature. */
export type UnchargedClass = "session_time_exhausted" | "orchestrator_cancelled" | "interrupted"

export type CountedClass = Exclude<FailureClass, UnchargedClass>

export const isUncharged = (c: FailureClass): c is UnchargedClass =>
  c === "session_time_exhausted" || c === "orchestrator_cancelled" || c === "interrupted"

export const isCounted = (c: FailureClass): c is CountedClass => !isUncharged(c)

/** An attempt exiting non-zero faster than this may be an argument error (SPEC §6). */
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
    /** The `v2:` signature of the attempt's whole output (see Signature.ts), when the program kept one. */
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
    /** The `v2:` signature of the attempt's whole output (see Signature.ts), when the program kept one. */
    readonly outputSignature?: string | undefined
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
   * The signature of the attempt's whole output (`v2:…`), recorded for a counted failure instead of
   * the fold of the displayed tail; absent when the attempt had no output of its own to digest.
   */
  readonly outputSignature?: string | undefined
}

const KV_CACHE_OOM_PATTERNS = [
  "no gpu memory for the kv cache",
  "leave no gpu memory",
  "raise --mem-fraction-static above"
] as const

const ARG_ERROR_PATTERNS = [
  "unrecognized arguments",
  "invalid choice",
  "unknown attention backend",
  "not a valid"
] as const

/**
 * `valueerror:` counts as an argument error only when the message on the same line names one of
 * these (case-insensitive, at a word start; `cli` as a whole word so `client` does not count).
 * Matching on the line of the ValueError rather than anywhere in the tail keeps ordinary log lines
 * ("Using FLASH_ATTN backend", an args dump) from turning an unrelated ValueError into an argument error.
 */
const VALUE_ERROR_LINE = /valueerror:(.*)$/gim
const VALUE_ERROR_WORDS = /\b(?:argument|argparse|backend|choice|invalid|option|flag|unknown|cli\b)/i

/** The tail mentions that the KV cache got no GPU memory (SPEC §6 `kv_cache_oom`). */
export const isKvCacheOom = (tail: string): boolean => {
  const t = tail.toLowerCase()
  return KV_CACHE_OOM_PATTERNS.some((p) => t.includes(p))
}

/** The tail reads like a rejected argument / option / backend (SPEC §6 `fast_exit_arg_error`). */
export const hasArgErrorText = (tail: string): boolean => {
  const t = tail.toLowerCase()
  if (ARG_ERROR_PATTERNS.some((p) => t.includes(p))) return true
  for (const m of tail.matchAll(VALUE_ERROR_LINE)) {
    if (VALUE_ERROR_WORDS.test(m[1] ?? "")) return true
  }
  return false
}

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

/** A positive finite number is a measurement; anything else is not. */
export const isValidThroughput = (value: unknown): value is number =>
  typeof value === "number" && Number.isFinite(value) && value > 0

/**
 * Classifies one attempt (SPEC §6). Order for a non-zero exit: `kv_cache_oom` (at any runtime), then
 * `fast_exit_arg_error` (runtime strictly under FAST_EXIT_SEC), then `subprocess_nonzero`. For exit 0:
 * `no_report` without a throughput, `invalid_measurement` when it is not a positive finite number,
 * else success (`errorClass: null`).
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
    Exited: ({ exitCode, outputSignature, outputTail, runtimeSec, throughput }): AttemptResult => {
      const launchLog = boundedErrorText(outputTail)
      const measured = typeof throughput === "number" && Number.isFinite(throughput) ? throughput : null
      if (exitCode !== 0) {
        const errorClass: FailureClass = isKvCacheOom(outputTail)
          ? "kv_cache_oom"
          : runtimeSec < FAST_EXIT_SEC && hasArgErrorText(outputTail)
            ? "fast_exit_arg_error"
            : "subprocess_nonzero"
        // The output tail is the error; a silent failure gets a one-line description instead.
        const error = launchLog !== "" ? launchLog : `exited with code ${exitCode} and printed nothing`
        return { errorClass, exitCode, runtimeSec, error, launchLog, throughput: measured, outputSignature }
      }
      if (throughput === undefined) {
        return {
          errorClass: "no_report",
          exitCode,
          runtimeSec,
          error: boundedErrorText(outputTail, "exited 0 but reported no throughput in HYPERLOOM_RESULT_FILE"),
          launchLog,
          throughput: null,
          outputSignature
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
          outputSignature
        }
      }
      return { errorClass: null, exitCode, runtimeSec, error: null, launchLog: "", throughput }
    }
  })
