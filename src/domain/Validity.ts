/**
 * Is the number what it claims? (docs/trust.md#is-the-number-valid) A verdict per measured run:
 * `valid`, or findings `{check, severity, evidence, source}`, each check a pure function of the
 * run's record, what the node observed during it (Observations.ts), the engine's reported
 * configuration and the session's settings. Pure: no clock, no I/O.
 *
 * Severity: an `invalid` run is kept (files, metrics) but enters no statistic, SLO verdict, best or
 * compare; a `suspect` run counts and is flagged wherever it is shown. A check that cannot be made
 * (no metrics from the engine, no GPU tool) is not passed: it is named in `not_checked`, which the
 * session says once.
 *
 * The thresholds, each named and justified where it is declared:
 * - CLIENT_BOUND_CORES 0.9: the load clients are single-threaded asyncio/Node loops; at 90 % of
 *   one core the loop is late to read tokens and to send, so the timings are partly the client's.
 * - LOAD_SHORTFALL 10 %: the engine's in-flight count (running + waiting) or its request rate more
 *   than 10 % under what was asked means the point measured a smaller load than its label.
 * - COUNTS_TOLERANCE 5 %, plus one request's worth: the engine's counter over the run also counts
 *   the one warm-up request both clients send before measuring (vLLM's "initial test run",
 *   SGLang's warmup); beyond that, tokenisation drift stays well under 5 %.
 * - DEFAULT_MAX_FAILED 1 %: a p99 is the 1 % tail; more failures than that hide the tail.
 * - requestsForBound: a distribution-free bound (order statistics): the largest of n samples is
 *   above the q-quantile with probability 1 − qⁿ; a 95 % bound needs qⁿ ≤ 0.05, n ≥ ln 0.05 ÷ ln q
 *   (p99: 299). Fewer than 100 ÷ (100 − XX) requests and the pXX *is* the maximum.
 * - CLOCK_DROP 10 %: an SM clock 10 % under the session's median is the sustained-load fall users
 *   report (20 %), well outside boost jitter (a few %).
 * - COLD_MARGIN 5 %: the same margin that calls a point noisy (Stats.NOISY_CV).
 */
import { Schema } from "effect"
import { type EngineConfig, type GpuSamples, type Observations, reportedValue } from "./Observations.js"
import type { ClientCounts, Metrics } from "./Results.js"
import { median, NOISY_CV } from "./Stats.js"
import type { Slo } from "./Sweep/Slo.js"

export const CLIENT_BOUND_CORES = 0.9
export const LOAD_SHORTFALL = 0.1
export const COUNTS_TOLERANCE = 0.05
export const DEFAULT_MAX_FAILED = 0.01
export const CLOCK_DROP = 0.1
export const COLD_MARGIN = NOISY_CV
export const BOUND_CONFIDENCE = 0.95

export const CHECKS = [
  "not_engaged",
  "check_failed",
  "cold",
  "client_bound",
  "load_not_delivered",
  "counts_disagree",
  "failed_requests",
  "too_few_requests",
  "throttled",
  "gpu_shared"
] as const
export type Check = (typeof CHECKS)[number]

export const Severity = Schema.Literal("invalid", "suspect")
export type Severity = typeof Severity.Type

export const Finding = Schema.Struct({
  check: Schema.Literal(...CHECKS),
  severity: Severity,
  /** In numbers: "asked 256, the engine runs 128". */
  evidence: Schema.String,
  /** Where the numbers came from: "/get_server_info", "lease cgroup cpu.stat", "nvidia-smi". */
  source: Schema.String
})
export type Finding = typeof Finding.Type

export const Verdict = Schema.Literal("valid", "suspect", "invalid")
export type Verdict = typeof Verdict.Type

export const RunValidity = Schema.Struct({
  verdict: Verdict,
  findings: Schema.Array(Finding),
  /** `--param`s the engine does not report: not checked, listed. */
  unverified: Schema.optional(Schema.Array(Schema.String)),
  /** Checks that could not be made on this run, and why. */
  not_checked: Schema.optional(Schema.Array(Schema.String))
})
export type RunValidity = typeof RunValidity.Type

/** invalid over suspect over valid. */
export const verdictOf = (findings: ReadonlyArray<Finding>): Verdict =>
  findings.some((f) => f.severity === "invalid")
    ? "invalid"
    : findings.some((f) => f.severity === "suspect")
      ? "suspect"
      : "valid"

export const VALID: RunValidity = { verdict: "valid", findings: [] }

/** Does a run with this validity enter statistics, SLO verdicts, the best and compare? (absent: yes, an older record) */
export const counts = (v: RunValidity | null | undefined): boolean => v == null || v.verdict !== "invalid"

/** A finding's one line: `not_engaged (invalid): asked 256, the engine runs 128 (from /get_server_info)`. */
export const renderFinding = (f: Finding): string =>
  `${f.check} (${f.severity}): ${f.evidence} (from ${f.source})`

// ---------------------------------------------------------------------------------------------
// Numbers in evidence

const num = (x: number): string =>
  Number.isInteger(x)
    ? String(x)
    : Math.abs(x) >= 100
      ? x.toFixed(0)
      : Math.abs(x) >= 10
        ? x.toFixed(1)
        : x.toFixed(2)
const pct = (x: number): string => `${(x * 100).toFixed(x < 0.1 ? 1 : 0)} %`

// ---------------------------------------------------------------------------------------------
// Engaged

/** The two values are the same setting: equal numbers, equal booleans, else equal text (case ignored). */
export const sameValue = (asked: string, effective: EngineConfig["values"][string]): boolean => {
  if (effective === null) return false
  const a = asked.trim()
  if (typeof effective === "number") {
    const n = Number(a)
    return a !== "" && Number.isFinite(n) && Math.abs(n - effective) <= 1e-9 * Math.max(1, Math.abs(n))
  }
  if (typeof effective === "boolean") {
    const l = a.toLowerCase()
    return effective ? ["true", "1", "yes", "on"].includes(l) : ["false", "0", "no", "off"].includes(l)
  }
  const e = effective.trim()
  const an = Number(a)
  const en = Number(e)
  if (a !== "" && e !== "" && Number.isFinite(an) && Number.isFinite(en)) return an === en
  return a.toLowerCase() === e.toLowerCase()
}

export interface Engaged {
  readonly findings: ReadonlyArray<Finding>
  /** Params the engine did not report: "max_num_batched_tokens (not reported by the engine)". */
  readonly unverified: ReadonlyArray<string>
}

/**
 * Each `--param` against the engine's reported value of the same name (case, `-` and `_`
 * ignored): a different value is `not_engaged` (invalid: re-running cannot help, the engine will
 * adjust it again); a param the engine does not report is unverified. No config at all: every param
 * unverified.
 */
export const notEngaged = (
  config: EngineConfig | null | undefined,
  params: Readonly<Record<string, string>>
): Engaged => {
  const findings: Array<Finding> = []
  const unverified: Array<string> = []
  for (const [name, asked] of Object.entries(params)) {
    const hit = config == null ? undefined : reportedValue(config, name)
    if (hit === undefined) {
      unverified.push(name)
      continue
    }
    if (!sameValue(asked, hit.value))
      findings.push({
        check: "not_engaged",
        severity: "invalid",
        evidence: `${hit.key} asked ${asked}, the engine runs ${hit.value === null ? "none" : String(hit.value)}`,
        source: hit.source ?? "the engine's report"
      })
  }
  return { findings, unverified }
}

// ---------------------------------------------------------------------------------------------
// Correct

/** The check command's last non-empty line (what the finding quotes). */
export const lastLine = (output: string): string =>
  output
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "")
    .at(-1) ?? ""

/** `--check` exited non-zero: the combination is not measured (invalid), its last line quoted. */
export const checkFailed = (exitCode: number | null, output: string, source = "--check"): Finding => ({
  check: "check_failed",
  severity: "invalid",
  evidence: `the check ${exitCode === null ? "did not finish" : `exited ${exitCode}`}${
    lastLine(output) === "" ? "" : `: ${JSON.stringify(lastLine(output))}`
  }`,
  source
})

// ---------------------------------------------------------------------------------------------
// Warm

/**
 * The first run after an engine start against the point's other runs (output throughput): outside
 * the others' [min, max] widened by COLD_MARGIN of their mean is `cold` (suspect). Needs at least
 * one other run (repeats); undefined otherwise.
 */
export const cold = (first: number, others: ReadonlyArray<number>): Finding | undefined => {
  if (others.length === 0) return undefined
  const lo = Math.min(...others)
  const hi = Math.max(...others)
  const m = others.reduce((a, b) => a + b, 0) / others.length
  const margin = COLD_MARGIN * m
  if (first >= lo - margin && first <= hi + margin) return undefined
  const range = lo === hi ? num(lo) : `${num(lo)}–${num(hi)}`
  return {
    check: "cold",
    severity: "suspect",
    evidence: `first run after the engine start ${num(first)} tok/s, the other ${others.length} run${
      others.length === 1 ? "" : "s"
    } ${range} tok/s (${pct(Math.abs(first - m) / m)} off, beyond ${pct(COLD_MARGIN)})`,
    source: "the point's repeats"
  }
}

// ---------------------------------------------------------------------------------------------
// Delivered

/**
 * The client's mean CPU ≥ CLIENT_BOUND_CORES of a core, or its busiest thread (the event loop)
 * wanting a CPU (running, or waiting on a run queue) ≥ CLIENT_BOUND_CORES of the time:
 * `client_bound` (suspect). The second catches a client that is the bottleneck on a host too busy
 * to give it its core: it ran 0.6 of a core and waited the rest.
 */
export const clientBound = (obs: Observations | null | undefined): Finding | undefined => {
  const cpu = obs?.client_cpu
  if (cpu == null || cpu.includes_engine === true) return undefined
  const source = cpu.source === "cgroup" ? "the lease's cgroup" : "/proc of the client's process tree"
  const over = `over ${num(Math.round(obs!.duration_s))} s (≥ ${CLIENT_BOUND_CORES})`
  if (cpu.cores_mean >= CLIENT_BOUND_CORES)
    return {
      check: "client_bound",
      severity: "suspect",
      evidence: `client CPU ${cpu.cores_mean.toFixed(2)} core ${over}`,
      source
    }
  const wanted = cpu.busiest_thread_runnable
  if (wanted === undefined || !(wanted >= CLIENT_BOUND_CORES)) return undefined
  return {
    check: "client_bound",
    severity: "suspect",
    evidence: `the client's busiest thread wanted a CPU ${pct(wanted)} of the time (ran or waited for one; the client ran ${cpu.cores_mean.toFixed(2)} core in all) ${over}`,
    source: `${source}; its threads' schedstat`
  }
}

/** What load a run asked for: a concurrency (in flight) or a request rate (per second). */
export interface AskedLoad {
  readonly concurrency?: number | undefined
  readonly rate?: number | undefined
}

/**
 * The asked load from a load name and value (`max_concurrency=64`, `--request-rate 8`): names with
 * "concurrency" are in-flight counts, with "rate" request rates; `inf` and anything else: none.
 */
export const askedLoadOf = (name: string, value: string): AskedLoad => {
  const n = Number(value)
  if (!Number.isFinite(n) || n <= 0) return {}
  const k = name.toLowerCase()
  if (k.includes("concurrency")) return { concurrency: n }
  if (k.includes("rate")) return { rate: n }
  return {}
}

/**
 * The engine's own view of the load against the asked one: mean in flight (running + waiting) more
 * than LOAD_SHORTFALL under the asked concurrency, or its finished-request rate more than
 * LOAD_SHORTFALL under the asked rate while it kept up (nothing waiting: a queue means the engine,
 * not the client, set the pace), is `load_not_delivered` (invalid).
 */
export const loadNotDelivered = (
  obs: Observations | null | undefined,
  asked: AskedLoad,
  client?: ClientCounts | null
): Finding | undefined => {
  const load = obs?.engine_load
  if (load == null || obs == null) return undefined
  const source = `${load.source === "vllm" ? "vllm:num_requests_running + _waiting" : "sglang:num_running_reqs + num_queue_reqs"} on /metrics`
  if (asked.concurrency !== undefined) {
    // Means from the latency sums are over the client's whole process (its start-up and exit
    // included, when nothing is in flight): over the benchmark's own window (the client's
    // duration) when it says one, as Little's law has it.
    const window = client?.duration_s
    const scale =
      load.means_from === "latency sums" && window !== undefined && window > 0 && window < obs.duration_s
        ? obs.duration_s / window
        : 1
    const inFlight = (load.running_mean + load.waiting_mean) * scale
    if (inFlight < (1 - LOAD_SHORTFALL) * asked.concurrency)
      return {
        check: "load_not_delivered",
        severity: "invalid",
        evidence: `asked ${num(asked.concurrency)} in flight, the engine saw ${num(inFlight)} on average (${pct(
          1 - inFlight / asked.concurrency
        )} under)`,
        source
      }
  }
  if (
    asked.rate !== undefined &&
    load.requests_total_delta !== null &&
    obs.duration_s > 0 &&
    load.waiting_mean < 1
  ) {
    const rate = load.requests_total_delta / obs.duration_s
    if (rate < (1 - LOAD_SHORTFALL) * asked.rate)
      return {
        check: "load_not_delivered",
        severity: "invalid",
        evidence: `asked ${num(asked.rate)} requests/s, the engine finished ${num(rate)}/s with nothing waiting (${pct(
          1 - rate / asked.rate
        )} under)`,
        source: `${load.source}: requests finished over the run on /metrics`
      }
  }
  return undefined
}

// ---------------------------------------------------------------------------------------------
// The client's own counts (its result file)

/** ClientCounts (Results.ts) as persisted with a run. */
export const ClientCountsSchema = Schema.Struct({
  completed: Schema.optional(Schema.Number),
  failed: Schema.optional(Schema.Number),
  output_tokens: Schema.optional(Schema.Number),
  duration_s: Schema.optional(Schema.Number)
})

// ---------------------------------------------------------------------------------------------
// Agreed

/**
 * The client's output tokens against the engine's generation-token counter over the run: apart by
 * more than COUNTS_TOLERANCE of the larger plus one request's tokens (the clients' own warm-up
 * request, which the engine counts too) is `counts_disagree` (invalid).
 */
export const countsDisagree = (
  client: ClientCounts | null | undefined,
  obs: Observations | null | undefined
): Finding | undefined => {
  const engine = obs?.engine_load?.generation_tokens_delta
  const mine = client?.output_tokens
  if (engine == null || mine === undefined) return undefined
  const perRequest = client?.completed ? mine / client.completed : 0
  const gap = Math.abs(engine - mine)
  if (gap <= COUNTS_TOLERANCE * Math.max(engine, mine) + perRequest) return undefined
  return {
    check: "counts_disagree",
    severity: "invalid",
    evidence: `the client counted ${num(mine)} output tokens, the engine generated ${num(engine)} (${pct(
      gap / Math.max(engine, mine, 1)
    )} apart, over ${pct(COUNTS_TOLERANCE)})`,
    source: `${obs!.engine_load!.source}:generation_tokens_total on /metrics`
  }
}

// ---------------------------------------------------------------------------------------------
// Every request counted

/** K failed of N sent: invalid above `maxFailed` (a fraction), suspect at or under it; none: undefined. */
export const failedRequests = (
  client: ClientCounts | null | undefined,
  maxFailed = DEFAULT_MAX_FAILED
): Finding | undefined => {
  const k = client?.failed
  if (k === undefined || !(k > 0)) return undefined
  const n = k + (client?.completed ?? 0)
  const share = k / n
  return {
    check: "failed_requests",
    severity: share > maxFailed ? "invalid" : "suspect",
    evidence: `${num(k)} of ${num(n)} requests failed (${pct(share)}; --max-failed ${pct(maxFailed)})`,
    source: "the client's result"
  }
}

/** The quantile (in %) a metric is: `p99_ttft_ms` 99, `median_tpot_ms` 50; undefined for means and throughputs. */
export const quantileOf = (metric: string): number | undefined => {
  const p = /^p(\d+(?:\.\d+)?)_/.exec(metric)
  if (p !== null) return Number(p[1])
  return metric.startsWith("median_") ? 50 : undefined
}

/**
 * Failures are misses: an upper bound on a pXX latency cannot hold when more than (100 − XX) % of
 * the requests failed (a failed request never met it). True when the failures alone fail the SLO.
 */
export const failuresMissSlo = (slo: Slo, client: ClientCounts | null | undefined): boolean => {
  const q = quantileOf(slo.metric)
  const k = client?.failed ?? 0
  if (q === undefined || slo.op !== "<=" || k <= 0) return false
  const n = k + (client?.completed ?? 0)
  return k / n > (100 - q) / 100
}

// ---------------------------------------------------------------------------------------------
// Enough requests

/** Requests a distribution-free bound on the q-quantile needs at `confidence`: ⌈ln(1 − c) ÷ ln q⌉ (p99: 299). */
export const requestsForBound = (quantilePct: number, confidence = BOUND_CONFIDENCE): number =>
  Math.ceil(Math.log(1 - confidence) / Math.log(quantilePct / 100))

/** Under 100 ÷ (100 − XX) requests the pXX is the maximum (p99: 100). */
export const requestsForQuantile = (quantilePct: number): number => 100 / (100 - quantilePct)

/** Each SLO on a pXX judged from fewer requests than it takes to be more than the maximum: `too_few_requests` (suspect). */
export const tooFewRequests = (
  slos: ReadonlyArray<Slo>,
  metrics: Metrics | null | undefined
): ReadonlyArray<Finding> => {
  const n = metrics?.completed
  if (n === undefined) return []
  const out: Array<Finding> = []
  for (const slo of slos) {
    const q = quantileOf(slo.metric)
    if (q === undefined || q <= 0 || q >= 100 || n >= requestsForQuantile(q)) continue
    out.push({
      check: "too_few_requests",
      severity: "suspect",
      evidence: `${slo.metric} from ${num(n)} requests is their maximum; a distribution-free ${pct(
        BOUND_CONFIDENCE
      )} bound on p${num(q)} needs ${requestsForBound(q)}`,
      source: "the client's result"
    })
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// Steady hardware

const isIdleReason = (r: string): boolean => /idle/i.test(r)

/** The SM clocks of a run's samples (MHz, null ones left out). */
export const smClocks = (gpus: GpuSamples | null | undefined): ReadonlyArray<number> =>
  (gpus?.samples ?? []).flatMap((s) => (s.sm_clock_mhz === null ? [] : [s.sm_clock_mhz]))

/** The session's median SM clock over every sample of every run; null with none. */
export const sessionClockMedian = (runs: ReadonlyArray<Observations | null | undefined>): number | null => {
  const all = runs.flatMap((o) => smClocks(o?.gpus))
  return all.length === 0 ? null : median(all)
}

/**
 * An active throttle reason other than idle in any sample, or the run's median SM clock more than
 * CLOCK_DROP under the session's median: `throttled` (suspect).
 */
export const throttled = (
  gpus: GpuSamples | null | undefined,
  sessionMedian: number | null
): Finding | undefined => {
  if (gpus == null) return undefined
  const reasons = new Set<string>()
  let firstAt: number | undefined
  for (const s of gpus.samples)
    for (const r of s.throttle_reasons)
      if (!isIdleReason(r)) {
        reasons.add(r)
        firstAt ??= s.t_s
      }
  const clocks = smClocks(gpus)
  const runMedian = clocks.length === 0 ? null : median(clocks)
  const slow = runMedian !== null && sessionMedian !== null && runMedian < (1 - CLOCK_DROP) * sessionMedian
  if (reasons.size === 0 && !slow) return undefined
  const parts: Array<string> = []
  if (reasons.size > 0) parts.push(`throttle reason ${[...reasons].join(", ")} from ${num(firstAt ?? 0)} s`)
  if (slow)
    parts.push(
      `SM clock ${num(runMedian!)} MHz, ${pct(1 - runMedian! / sessionMedian!)} under the session's median ${num(sessionMedian!)} MHz`
    )
  return { check: "throttled", severity: "suspect", evidence: parts.join("; "), source: gpus.tool }
}

/** A compute process outside the lease on its GPUs during the run: `gpu_shared` (invalid, re-run). */
export const gpuShared = (gpus: GpuSamples | null | undefined): Finding | undefined => {
  if (gpus == null) return undefined
  const seen = new Map<number, { name: string; gpu: number; at: number }>()
  for (const s of gpus.samples)
    for (const p of s.processes)
      if (p.in_lease === false && !seen.has(p.pid)) seen.set(p.pid, { name: p.name, gpu: s.index, at: s.t_s })
  if (seen.size === 0) return undefined
  const listed = [...seen.entries()].map(
    ([pid, p]) => `pid ${pid} (${p.name}) on GPU ${p.gpu} at ${num(p.at)} s`
  )
  return {
    check: "gpu_shared",
    severity: "invalid",
    evidence: `${listed.join(", ")}: outside the lease`,
    source: gpus.tool
  }
}

/** Re-running can help this run (a GPU shared during it); not a flag the engine will adjust again. */
export const rerunHelps = (v: RunValidity): boolean =>
  v.verdict === "invalid" && v.findings.every((f) => f.severity !== "invalid" || f.check === "gpu_shared")

// ---------------------------------------------------------------------------------------------
// One run

/** The session's settings the checks read. */
export interface Settings {
  /** `--max-failed`, a fraction (default DEFAULT_MAX_FAILED). */
  readonly maxFailed: number
  readonly slos: ReadonlyArray<Slo>
  /** Median SM clock over the session's runs (sessionClockMedian); null when none was sampled. */
  readonly sessionClockMedian: number | null
}

export interface RunInput {
  readonly metrics: Metrics | null | undefined
  readonly client: ClientCounts | null | undefined
  readonly observations: Observations | null | undefined
  /** The engine's effective configuration, read once at its start. */
  readonly engineConfig: EngineConfig | null | undefined
  /** The combination's `--param` values (empty for a baseline). */
  readonly params: Readonly<Record<string, string>>
  readonly asked: AskedLoad
  /** Findings that belong to the run from outside it (`cold`, decided over the point's repeats). */
  readonly extra?: ReadonlyArray<Finding> | undefined
}

/** What could not be checked on this run, and why (said once per session). */
export const notCheckedOf = (input: RunInput): ReadonlyArray<string> => {
  const out: Array<string> = []
  const obs = input.observations
  if (obs == null) {
    out.push(
      "client_bound, load_not_delivered, counts_disagree, throttled, gpu_shared: nothing was sampled during the run"
    )
    return out
  }
  for (const reason of obs.not_checked) out.push(reason)
  if (obs.client_cpu?.includes_engine === true)
    out.push("client_bound: the client's CPU figure includes the engine's (one cgroup)")
  if (obs.engine_load !== null && obs.engine_load.generation_tokens_delta === null)
    out.push("counts_disagree: the engine has no generation-token counter")
  if (obs.engine_load !== null && input.client?.output_tokens === undefined)
    out.push("counts_disagree: the client's result has no output-token total")
  if (obs.gpus?.samples.some((s) => s.processes.some((p) => p.in_lease === null)))
    out.push("gpu_shared: a process on the lease's GPUs could not be told in or out of the lease")
  return out
}

/** Every per-run check of docs/trust.md#is-the-number-valid on one run. */
export const judgeRun = (input: RunInput, settings: Settings): RunValidity => {
  const engaged = notEngaged(input.engineConfig, input.params)
  const findings: Array<Finding> = [...engaged.findings]
  const add = (f: Finding | undefined) => {
    if (f !== undefined) findings.push(f)
  }
  add(clientBound(input.observations))
  add(loadNotDelivered(input.observations, input.asked, input.client))
  add(countsDisagree(input.client, input.observations))
  add(failedRequests(input.client, settings.maxFailed))
  findings.push(...tooFewRequests(settings.slos, input.metrics))
  add(throttled(input.observations?.gpus, settings.sessionClockMedian))
  add(gpuShared(input.observations?.gpus))
  findings.push(...(input.extra ?? []))
  const notChecked = notCheckedOf(input)
  return {
    verdict: verdictOf(findings),
    findings,
    ...(engaged.unverified.length > 0 ? { unverified: engaged.unverified } : {}),
    ...(notChecked.length > 0 ? { not_checked: notChecked } : {})
  }
}

/** A verdict with more findings (`cold`, decided after the point's repeats). */
export const withFindings = (v: RunValidity, more: ReadonlyArray<Finding>): RunValidity => {
  if (more.length === 0) return v
  const findings = [...v.findings, ...more]
  return { ...v, verdict: verdictOf(findings), findings }
}

// ---------------------------------------------------------------------------------------------
// Many runs

export interface Tally {
  readonly runs: number
  readonly valid: number
  readonly suspect: number
  readonly invalid: number
  /** Runs measured before validity was judged. */
  readonly unjudged: number
}

/** How many measured runs were valid, suspect, invalid. */
export const tally = (validities: ReadonlyArray<RunValidity | null | undefined>): Tally => {
  let valid = 0
  let suspect = 0
  let invalid = 0
  let unjudged = 0
  for (const v of validities) {
    if (v == null) unjudged++
    else if (v.verdict === "valid") valid++
    else if (v.verdict === "suspect") suspect++
    else invalid++
  }
  return { runs: validities.length, valid, suspect, invalid, unjudged }
}

/** "7 of 9 runs valid (1 suspect, 1 invalid)"; a summary line's words. */
export const renderTally = (t: Tally): string => {
  const ok = t.valid + t.unjudged
  const rest = [
    t.suspect > 0 ? `${t.suspect} suspect` : "",
    t.invalid > 0 ? `${t.invalid} invalid` : ""
  ].filter((s) => s !== "")
  return `${ok} of ${t.runs} run${t.runs === 1 ? "" : "s"} valid${rest.length > 0 ? ` (${rest.join(", ")})` : ""}`
}

type Runs = ReadonlyArray<RunValidity | null | undefined>

/** The lines `pick` gives over the runs, each once, in first-seen order. */
const onceEach = (
  validities: Runs,
  pick: (v: RunValidity) => ReadonlyArray<string>
): ReadonlyArray<string> => [...new Set(validities.flatMap((v) => (v == null ? [] : pick(v))))]

/** The distinct findings of runs, in first-seen order (a point's reasons). */
export const reasonsOf = (validities: Runs): ReadonlyArray<string> =>
  onceEach(validities, (v) => v.findings.map(renderFinding))

/** Measured runs, none of which counts: the point is `invalid`. */
export const allInvalid = (validities: Runs): boolean =>
  validities.length > 0 && validities.every((v) => !counts(v))

/** The session's "not checked: …" lines, each once. */
export const notCheckedOnce = (validities: Runs): ReadonlyArray<string> =>
  onceEach(validities, (v) => v.not_checked ?? [])

/** Params unverified in any run, each once. */
export const unverifiedOnce = (validities: Runs): ReadonlyArray<string> =>
  onceEach(validities, (v) => v.unverified ?? [])
