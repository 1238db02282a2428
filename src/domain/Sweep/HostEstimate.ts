/**
 * `--dry-run`'s estimate from the host's recent sweeps (docs/design.md#time-to-the-answer): each sweep run that measured
 * something leaves a record (its medians and the counts they rest on, and its engine); the estimate
 * is the median over the recent sweeps of the same engine (the server command's program and model:
 * a vLLM sweep is never estimated from a stand-in's 0.3 s engine starts), each session counted once
 * (its last record: a resumed session's medians cover everything it measured), naming the sessions
 * it rests on; when none is alike it says so, naming what they ran. The choice: the options, else
 * the session's own measurements, else the host's. Pure.
 */
import { type Estimate, type MeasuredSession, measuredTimes, medianSec, sessionEstimate } from "./Plan.js"

/**
 * What an engine is, for matching like sweeps: the server command's program (the script or the
 * module an interpreter runs: `vllm`, `sglang.launch_server`, `fake-engine.mjs`) and its model
 * (`vllm serve MODEL`, `--model`, `--model-path`, `--model-id`, `-m`), null when the command names none.
 */
export interface EngineId {
  readonly program: string
  readonly model: string | null
}

const INTERPRETERS = new Set(["python", "python3", "node", "bun", "deno", "bash", "sh", "uv", "uvx", "ruby"])
const WRAPPERS = new Set(["env", "exec", "nohup", "nice", "stdbuf", "taskset", "numactl", "time"])
const MODEL_FLAGS = new Set(["--model", "--model-path", "--model-id", "--model-name-or-path"])

/** The words of a shell command line (quotes removed; no expansion). */
const words = (line: string): ReadonlyArray<string> =>
  [...line.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3] ?? "")

const base = (w: string) => w.replace(/\/+$/, "").split("/").at(-1) ?? w

/** The engine a server command runs (see EngineId). */
export const engineOf = (server: string): EngineId => {
  const ws = words(server)
  let i = 0
  // leading assignments and wrappers (`VAR=x env exec …`), their own flags too
  while (
    i < ws.length &&
    (/^[A-Za-z_][A-Za-z0-9_]*=/.test(ws[i]!) ||
      WRAPPERS.has(base(ws[i]!)) ||
      (i > 0 && WRAPPERS.has(base(ws[i - 1]!)) && ws[i]!.startsWith("-")))
  )
    i++
  let program = base(ws[i] ?? "")
  let interpreted = false
  if (INTERPRETERS.has(program.replace(/[0-9.]+$/, ""))) {
    interpreted = true
    let j = i + 1
    // `uv run X`, `python -u -m X`, `node --flag script.mjs`
    if ((program === "uv" || program === "uvx") && ws[j] === "run") j++
    while (j < ws.length && ws[j]!.startsWith("-") && ws[j] !== "-m") j++
    if (ws[j] === "-m" && ws[j + 1] !== undefined) {
      program = ws[j + 1]!
      i = j + 1
    } else if (ws[j] !== undefined) {
      program = base(ws[j]!)
      i = j
    }
  }
  const rest = ws.slice(i + 1)
  let model: string | null = null
  for (let k = 0; k < rest.length && model === null; k++) {
    const w = rest[k]!
    const eq = w.indexOf("=")
    if (eq > 0 && MODEL_FLAGS.has(w.slice(0, eq))) model = w.slice(eq + 1)
    else if ((MODEL_FLAGS.has(w) || (w === "-m" && !interpreted)) && rest[k + 1] !== undefined)
      model = rest[k + 1]!
  }
  // `vllm serve MODEL`: the model is the word after `serve`
  if (model === null && rest[0] === "serve" && rest[1] !== undefined && !rest[1].startsWith("-"))
    model = rest[1]
  return { program, model }
}

export const renderEngine = (e: EngineId): string =>
  e.model === null ? e.program : `${e.program}, model ${e.model}`

const sameEngine = (a: EngineId, b: EngineId) => a.program === b.program && a.model === b.model

/** One sweep run's end, as the user's `sweeps.jsonl` keeps it. */
export interface SweepRecord {
  /** When the run ended (ms since the epoch). */
  readonly endedAt: number
  /** The session folder (absolute). */
  readonly session: string
  /** The median engine start (launch to ready) of the session, null when none was ready. */
  readonly startSec: number | null
  /** The median client run of the session, null when none finished. */
  readonly runSec: number | null
  readonly engineStarts: number
  readonly clientRuns: number
  /** The engine it ran; absent in records written before (never alike). */
  readonly engine?: EngineId | undefined
}

/** The record of a sweep run that ended now; null when the session measured nothing. */
export const sweepRecordOf = (
  doc: MeasuredSession & { readonly experiment?: { readonly server: string } | undefined },
  session: string,
  endedAt: number
): SweepRecord | null => {
  const { runs, starts } = measuredTimes(doc)
  if (starts.length === 0 && runs.length === 0) return null
  const r = (xs: ReadonlyArray<number>) => (xs.length === 0 ? null : medianSec(xs))
  return {
    endedAt,
    session,
    startSec: r(starts),
    runSec: r(runs),
    engineStarts: starts.length,
    clientRuns: runs.length,
    ...(doc.experiment === undefined ? {} : { engine: engineOf(doc.experiment.server) })
  }
}

/** The host's sweeps of other engines, when none of them ran this one: what they ran, and how many. */
export interface Unlike {
  readonly engine: string
  readonly ran: ReadonlyArray<{ readonly engine: string; readonly sweeps: number }>
}

/** Each session's last record, in the order of those last records. */
const lastPerSession = (records: ReadonlyArray<SweepRecord>): ReadonlyArray<SweepRecord> => {
  const last = new Map<string, SweepRecord>()
  for (const rec of records) {
    last.delete(rec.session)
    last.set(rec.session, rec)
  }
  return [...last.values()]
}

/**
 * The estimate from the host's recent sweeps of the same engine: medians over them, the sessions it
 * rests on named; null without both figures.
 */
export const hostEstimate = (records: ReadonlyArray<SweepRecord>, engine: EngineId): Estimate | null => {
  const recent = lastPerSession(records).filter((r) => r.engine !== undefined && sameEngine(r.engine, engine))
  const starts = recent.flatMap((s) => (s.startSec === null ? [] : [s.startSec]))
  const runs = recent.flatMap((s) => (s.runSec === null ? [] : [s.runSec]))
  if (starts.length === 0 || runs.length === 0) return null
  const used = recent.filter((s) => s.startSec !== null || s.runSec !== null)
  return {
    start_sec: medianSec(starts),
    run_sec: medianSec(runs),
    source: "host",
    sweeps: used.length,
    last_ended: new Date(Math.max(...used.map((s) => s.endedAt))).toISOString().replace(/\.\d{3}Z$/, "Z"),
    engine: renderEngine(engine),
    sessions: used.map((s) => s.session)
  }
}

/** When the host has recent sweeps but none of this engine: what they ran instead; else undefined. */
export const unlikeSweeps = (records: ReadonlyArray<SweepRecord>, engine: EngineId): Unlike | undefined => {
  const recent = lastPerSession(records)
  if (recent.length === 0 || recent.some((r) => r.engine !== undefined && sameEngine(r.engine, engine)))
    return undefined
  const ran = new Map<string, number>()
  for (const r of recent) {
    const name = r.engine === undefined ? "an engine not recorded (an older record)" : renderEngine(r.engine)
    ran.set(name, (ran.get(name) ?? 0) + 1)
  }
  return { engine: renderEngine(engine), ran: [...ran].map(([e, sweeps]) => ({ engine: e, sweeps })) }
}

/**
 * The explicit options win; then what the session itself measured; then the host's recent sweeps of
 * the same engine (`server`: the server command); `unlike` says what the host ran when none is alike.
 */
export const chooseEstimate = (
  given: Estimate | null,
  session: MeasuredSession | null,
  host: ReadonlyArray<SweepRecord>,
  server: string
): { readonly estimate: Estimate | null; readonly unlike?: Unlike | undefined } => {
  const first = given ?? (session === null ? null : sessionEstimate(session))
  if (first !== null) return { estimate: first }
  const engine = engineOf(server)
  const estimate = hostEstimate(host, engine)
  const unlike = estimate === null ? unlikeSweeps(host, engine) : undefined
  return unlike === undefined ? { estimate } : { estimate, unlike }
}
