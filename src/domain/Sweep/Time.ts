/**
 * Where a sweep's time went (docs/design.md#time-to-the-answer), per combination and in total. Pure
 * accounting over what the sweep document records (older documents, without the newer fields,
 * account what they can). Every figure adds up: a combination's wall is the sum of its parts plus
 * hyperloom's own, and so is the total's, less the time combinations ran at once.
 *
 * - `wall_sec` of a combination: its engine starts' own spans (asking for the lease to the engine
 *   stopped), summed; never the time between two `sweep run` invocations of a grown or resumed
 *   session, when nothing of it ran;
 * - `lease_wait_sec`: from asking for a combination's lease to its engine's launch (the host's
 *   queue, Ray's grant, the bridge): a ready start's span up to ready less the engine's own
 *   launch-to-ready time;
 * - `engine_start_sec`: the engine's launch to ready (`ready_sec`, measured on the node); a start
 *   that never became ready counts whole here;
 * - `client_sec`: every client run's own runtime (failed and interrupted ones too);
 * - `between_sec`: the `--between` commands;
 * - `own_sec`: the rest of the wall time: hyperloom's own (writing the state, handing runs to the
 *   node, stopping engines and releasing leases; in the total also the time between combinations);
 * - `at_once_sec` (the total's, with `--parallel`): combination time that ran beside another
 *   combination's, counted once in the wall: wall = the parts + own − at once;
 * - `time_to_best_sec`: on the sweep's own clock (the invocations' running time, not the calendar
 *   between them), from its start to the end of the first measured run of the point finally
 *   reported best.
 *
 * The total's wall time is the sum of the `sweep run` invocations' own times (`wall_sec`, kept by
 * the program) when recorded, else the document's created → updated span. Each invocation's start
 * and the wall time before it (`invocations`) place a moment of the calendar on the sweep's own
 * clock; a span a dead invocation left open ends where that invocation's time ended.
 */

export interface TimeParts {
  readonly wall_sec: number
  readonly lease_wait_sec: number
  readonly engine_start_sec: number
  readonly client_sec: number
  readonly between_sec: number
  readonly own_sec: number
}

export interface CombinationTime extends TimeParts {
  readonly index: number
}

export interface SweepTime {
  readonly total: TimeParts & {
    /** With `--parallel`: combination time beside another's, counted once in the wall (absent: none). */
    readonly at_once_sec?: number | undefined
  }
  readonly combinations: ReadonlyArray<CombinationTime>
  readonly time_to_best_sec: number | null
  /** Engine starts made (failed ones and retries included). */
  readonly engine_starts: number
  /** Client runs made (retries and interrupted ones included). */
  readonly client_runs: number
}

/** What the accounting reads of a sweep document (a structural subset of SweepDoc). */
export interface TimedDoc {
  readonly created_at: string
  readonly updated_at: string
  readonly wall_sec?: number | undefined
  /** The session's `sweep run` invocations (absent in documents written before). */
  readonly invocations?: ReadonlyArray<Invocation> | undefined
  readonly combinations: ReadonlyArray<{
    readonly index: number
    readonly engine_starts: ReadonlyArray<{
      readonly started_at: string
      readonly ended_at: string | null
      readonly ready_sec: number | null
      readonly ready_at?: string | undefined
    }>
    readonly points: ReadonlyArray<{
      readonly load: string
      readonly runs: ReadonlyArray<TimedRun>
      readonly interrupted_runs: ReadonlyArray<TimedRun>
    }>
  }>
  readonly summary: { readonly best: { readonly combination: number; readonly load: string } | null }
}

interface TimedRun {
  readonly started_at: string
  readonly ended_at: string | null
  readonly status: string | null
  readonly runtime_sec: number | null
  readonly between_sec?: number | null | undefined
}

const ms = (iso: string) => Date.parse(iso)
const round = (x: number) => Math.round(x * 1000) / 1000
const sum = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => a + b, 0)

/** One `sweep run` invocation of the session: when it began, and the session's wall time before it. */
export interface Invocation {
  readonly started_at: string
  readonly wall_before_sec: number
}

/** The windows (ms) in which the session's invocations ran, in order. */
interface Window {
  readonly from: number
  readonly to: number
  readonly before: number
}

const windowsOf = (
  wall: number,
  invocations: ReadonlyArray<Invocation> | undefined
): ReadonlyArray<Window> => {
  if (invocations === undefined || invocations.length === 0) return []
  const sorted = [...invocations].sort((a, b) => ms(a.started_at) - ms(b.started_at))
  return sorted.map((inv, i) => {
    const next = sorted[i + 1]
    const own = (next === undefined ? wall : next.wall_before_sec) - inv.wall_before_sec
    const from = ms(inv.started_at)
    return { from, to: from + Math.max(0, own) * 1000, before: inv.wall_before_sec }
  })
}

/**
 * A span (ms) cut to the window of the invocation it began in (a span belongs to one invocation: one
 * a dead invocation left open, closed by the next, ends where the dead one's time ended).
 */
const clip = (ws: ReadonlyArray<Window>, a: number, b: number): ReadonlyArray<readonly [number, number]> => {
  if (b <= a) return []
  if (ws.length === 0) return [[a, b]]
  const w = [...ws].reverse().find((x) => x.from <= a) ?? ws[0]!
  const x = Math.max(a, w.from)
  const y = Math.min(b, w.to)
  return y > x ? [[x, y]] : []
}

const spanSec = (ws: ReadonlyArray<Window>, a: string, b: string) =>
  sum(clip(ws, ms(a), ms(b)).map(([x, y]) => y - x)) / 1000

/** Seconds covered by the union of the pieces. */
const unionSec = (pieces: ReadonlyArray<readonly [number, number]>): number => {
  const sorted = [...pieces].sort((p, q) => p[0] - q[0])
  let total = 0
  let end = Number.NEGATIVE_INFINITY
  for (const [a, b] of sorted) {
    if (b <= end) continue
    total += b - Math.max(a, end)
    end = b
  }
  return total / 1000
}

/** A moment of the calendar on the sweep's own clock (seconds since its start). */
const ownClock = (ws: ReadonlyArray<Window>, createdAt: string, t: string): number => {
  const at = ms(t)
  if (ws.length === 0) return Math.max(0, (at - ms(createdAt)) / 1000)
  const w = [...ws].reverse().find((x) => x.from <= at) ?? ws[0]!
  return w.before + Math.max(0, Math.min(at, w.to) - w.from) / 1000
}

const millis = (x: number) => Math.round(x * 1000)

/** The parts in whole milliseconds, and the rest of the wall as hyperloom's own: they sum to the wall. */
const parts = (wall: number, p: Omit<TimeParts, "wall_sec" | "own_sec">, atOnce = 0): TimeParts => {
  const w = millis(wall)
  const lease = millis(p.lease_wait_sec)
  const engine = millis(p.engine_start_sec)
  const client = millis(p.client_sec)
  const between = millis(p.between_sec)
  return {
    wall_sec: w / 1000,
    lease_wait_sec: lease / 1000,
    engine_start_sec: engine / 1000,
    client_sec: client / 1000,
    between_sec: between / 1000,
    own_sec: Math.max(0, w + millis(atOnce) - lease - engine - client - between) / 1000
  }
}

export const sweepTime = (doc: TimedDoc): SweepTime => {
  const wall = doc.wall_sec ?? Math.max(0, (ms(doc.updated_at) - ms(doc.created_at)) / 1000)
  const ws = windowsOf(wall, doc.invocations)
  const pieces: Array<readonly [number, number]> = []
  const combinations = doc.combinations.map((c): CombinationTime => {
    let lease = 0
    let engine = 0
    let span = 0
    for (const s of c.engine_starts) {
      if (s.ended_at !== null) {
        const cut = clip(ws, ms(s.started_at), ms(s.ended_at))
        pieces.push(...cut)
        span += sum(cut.map(([x, y]) => y - x)) / 1000
      }
      if (s.ready_sec !== null && s.ready_at !== undefined) {
        engine += s.ready_sec
        lease += Math.max(0, spanSec(ws, s.started_at, s.ready_at) - s.ready_sec)
      } else if (s.ready_sec !== null) {
        engine += s.ready_sec
      } else if (s.ended_at !== null) {
        engine += spanSec(ws, s.started_at, s.ended_at)
      }
    }
    const runs = c.points.flatMap((p) => [...p.runs, ...p.interrupted_runs])
    const client = sum(runs.map((r) => r.runtime_sec ?? 0))
    const between = sum(runs.map((r) => r.between_sec ?? 0))
    return {
      index: c.index,
      ...parts(span, {
        lease_wait_sec: lease,
        engine_start_sec: engine,
        client_sec: client,
        between_sec: between
      })
    }
  })
  const best = doc.summary.best
  const firstMeasured =
    best === null
      ? undefined
      : doc.combinations
          .find((c) => c.index === best.combination)
          ?.points.find((p) => p.load === best.load)
          ?.runs.filter((r) => r.status === "ok" && r.ended_at !== null)
          .map((r) => r.ended_at as string)
          .sort((a, b) => ms(a) - ms(b))[0]
  // combination time beside another combination's (--parallel): counted once in the wall
  const atOnce = Math.max(0, sum(combinations.map((c) => c.wall_sec)) - unionSec(pieces))
  const total = {
    lease_wait_sec: sum(combinations.map((c) => c.lease_wait_sec)),
    engine_start_sec: sum(combinations.map((c) => c.engine_start_sec)),
    client_sec: sum(combinations.map((c) => c.client_sec)),
    between_sec: sum(combinations.map((c) => c.between_sec))
  }
  const shared = millis(atOnce) > 0 ? atOnce : 0
  return {
    total: { ...parts(wall, total, shared), ...(shared > 0 ? { at_once_sec: millis(shared) / 1000 } : {}) },
    combinations,
    time_to_best_sec: firstMeasured === undefined ? null : round(ownClock(ws, doc.created_at, firstMeasured)),
    engine_starts: sum(doc.combinations.map((c) => c.engine_starts.length)),
    client_runs: sum(
      doc.combinations.map((c) => sum(c.points.map((p) => p.runs.length + p.interrupted_runs.length)))
    )
  }
}

/**
 * The figures in tenths of a second that add up as shown: each rounded down, then the tenths left
 * over given to the largest remainders, so the parts shown (less what ran at once) sum to the wall
 * shown.
 */
export const shownTenths = (t: SweepTime["total"]): Record<keyof TimeParts | "at_once_sec", string> => {
  const keys = ["lease_wait_sec", "engine_start_sec", "client_sec", "between_sec", "own_sec"] as const
  const wall = Math.round(millis(t.wall_sec) / 100)
  const atOnce = Math.round(millis(t.at_once_sec ?? 0) / 100)
  const exact = keys.map((k) => millis(t[k]))
  const down = exact.map((x) => Math.floor(x / 100))
  let left = wall + atOnce - sum(down)
  const order = exact.map((x, i) => ({ i, r: x % 100 })).sort((a, b) => b.r - a.r)
  for (const o of order) {
    if (left <= 0) break
    down[o.i]!++
    left--
  }
  const txt = (n: number) => (n / 10).toFixed(1)
  return {
    wall_sec: txt(wall),
    lease_wait_sec: txt(down[0]!),
    engine_start_sec: txt(down[1]!),
    client_sec: txt(down[2]!),
    between_sec: txt(down[3]!),
    own_sec: txt(down[4]!),
    at_once_sec: txt(atOnce)
  }
}

/**
 * "wall 12.3 s: lease wait 1.0 s, engine starts 3.2 s, client runs 6.0 s, --between 0.5 s,
 * hyperloom's own 1.6 s" (and, with combinations at once, "; less 4.0 s run at once"): the figures
 * add up as shown.
 */
export const renderTimeParts = (t: SweepTime["total"]): string => {
  const s = shownTenths(t)
  return `wall ${s.wall_sec} s: lease wait ${s.lease_wait_sec} s, engine starts ${s.engine_start_sec} s, client runs ${s.client_sec} s, --between ${s.between_sec} s, hyperloom's own ${s.own_sec} s${(t.at_once_sec ?? 0) > 0 ? `, less ${s.at_once_sec} s of combinations run at once (--parallel)` : ""}`
}

/** "the best first measured 18.5 s into the sweep (its own running time)", or that there is none. */
export const renderTimeToBest = (t: Pick<SweepTime, "time_to_best_sec">): string =>
  t.time_to_best_sec === null
    ? "no best measured yet"
    : `the best first measured ${(Math.round(t.time_to_best_sec * 10) / 10).toFixed(1)} s into the sweep (its own running time)`
