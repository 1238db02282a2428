/**
 * Where a sweep's time went (docs/design.md#time-to-the-answer), per combination and in total. Pure
 * accounting over what the sweep document records (older documents, without the newer fields,
 * account what they can):
 *
 * - `lease_wait_sec`: from asking for a combination's lease to its engine's launch (the host's
 *   queue, Ray's grant, the bridge): a ready start's span up to ready less the engine's own
 *   launch-to-ready time;
 * - `engine_start_sec`: the engine's launch to ready (`ready_sec`, measured on the node); a start
 *   that never became ready counts whole here;
 * - `client_sec`: every client run's own runtime (failed and interrupted ones too);
 * - `between_sec`: the `--between` commands;
 * - `own_sec`: the rest of the wall time: hyperloom's own (writing the state, handing runs to the
 *   node, stopping engines and releasing leases);
 * - `time_to_best_sec`: from the sweep's start to the end of the first measured run of the point
 *   finally reported best.
 *
 * The total's wall time is the sum of the `sweep run` invocations' own times (`wall_sec`, kept by
 * the program) when recorded, else the document's created → updated span.
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
  readonly total: TimeParts
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
const sec = (a: string, b: string) => Math.max(0, (ms(b) - ms(a)) / 1000)
const round = (x: number) => Math.round(x * 1000) / 1000
const sum = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => a + b, 0)

const parts = (wall: number, p: Omit<TimeParts, "wall_sec" | "own_sec">): TimeParts => ({
  wall_sec: round(wall),
  lease_wait_sec: round(p.lease_wait_sec),
  engine_start_sec: round(p.engine_start_sec),
  client_sec: round(p.client_sec),
  between_sec: round(p.between_sec),
  own_sec: round(Math.max(0, wall - p.lease_wait_sec - p.engine_start_sec - p.client_sec - p.between_sec))
})

export const sweepTime = (doc: TimedDoc): SweepTime => {
  const combinations = doc.combinations.map((c): CombinationTime => {
    let lease = 0
    let engine = 0
    for (const s of c.engine_starts) {
      if (s.ready_sec !== null && s.ready_at !== undefined) {
        engine += s.ready_sec
        lease += Math.max(0, sec(s.started_at, s.ready_at) - s.ready_sec)
      } else if (s.ready_sec !== null) {
        engine += s.ready_sec
      } else if (s.ended_at !== null) {
        engine += sec(s.started_at, s.ended_at)
      }
    }
    const runs = c.points.flatMap((p) => [...p.runs, ...p.interrupted_runs])
    const client = sum(runs.map((r) => r.runtime_sec ?? 0))
    const between = sum(runs.map((r) => r.between_sec ?? 0))
    const starts = c.engine_starts.map((s) => ms(s.started_at))
    const ends = c.engine_starts.flatMap((s) => (s.ended_at === null ? [] : [ms(s.ended_at)]))
    const wall =
      starts.length === 0 || ends.length === 0 ? 0 : (Math.max(...ends) - Math.min(...starts)) / 1000
    return {
      index: c.index,
      ...parts(Math.max(0, wall), {
        lease_wait_sec: lease,
        engine_start_sec: engine,
        client_sec: client,
        between_sec: between
      })
    }
  })
  const wall = doc.wall_sec ?? sec(doc.created_at, doc.updated_at)
  const best = doc.summary.best
  const firstMeasured =
    best === null
      ? undefined
      : doc.combinations
          .find((c) => c.index === best.combination)
          ?.points.find((p) => p.load === best.load)
          ?.runs.filter((r) => r.status === "ok" && r.ended_at !== null)
          .map((r) => r.ended_at as string)
          .sort()[0]
  return {
    total: parts(wall, {
      lease_wait_sec: sum(combinations.map((c) => c.lease_wait_sec)),
      engine_start_sec: sum(combinations.map((c) => c.engine_start_sec)),
      client_sec: sum(combinations.map((c) => c.client_sec)),
      between_sec: sum(combinations.map((c) => c.between_sec))
    }),
    combinations,
    time_to_best_sec: firstMeasured === undefined ? null : round(sec(doc.created_at, firstMeasured)),
    engine_starts: sum(doc.combinations.map((c) => c.engine_starts.length)),
    client_runs: sum(
      doc.combinations.map((c) => sum(c.points.map((p) => p.runs.length + p.interrupted_runs.length)))
    )
  }
}

const f1 = (x: number) => (x >= 100 ? String(Math.round(x)) : (Math.round(x * 10) / 10).toFixed(1))

/** "wall 12.3 s: lease wait 1.0, engine starts 3.2, client runs 6.0, --between 0.5, hyperloom 1.6". */
export const renderTimeParts = (t: TimeParts): string =>
  `wall ${f1(t.wall_sec)} s: lease wait ${f1(t.lease_wait_sec)} s, engine starts ${f1(t.engine_start_sec)} s, client runs ${f1(t.client_sec)} s, --between ${f1(t.between_sec)} s, hyperloom's own ${f1(t.own_sec)} s`
