/**
 * `hyperloom compare A B [--metric M…] [--fail-on 'M<-3%'…] [--json]`
 * (docs/design.md#trusted-answers): two sweep sessions, or two baseline sessions, side by side with
 * 95 % intervals and a verdict; a gate for CI (EXIT.compareRegression when a metric regresses past its threshold).
 * Reads the sessions, never modifies them.
 */
import * as path from "node:path"
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Console, Effect, Option } from "effect"
import {
  baselineSide,
  type CompareSide,
  compareSessions,
  type Gate,
  judgeGate,
  parseGate,
  sweepSide
} from "../../domain/Compare.js"
import { SessionNotFound } from "../../domain/Errors.js"
import { METRIC_KEYS, type MetricKey } from "../../domain/Results.js"
import { ENVIRONMENT_FILE, environmentOf } from "../../domain/Serving.js"
import type { SweepDoc } from "../../domain/Sweep.js"
import { AttemptFiles } from "../../services/AttemptFiles.js"
import { StateStore } from "../../services/StateStore.js"
import { SweepStore } from "../../services/SweepStore.js"
import { EXIT, ExitWith, UsageError } from "../Exit.js"
import { compareJson, renderCompareText } from "../RenderCompare.js"
import { withJsonErrors } from "../Run.js"
import { json } from "../Shared.js"

const sessionArg = (name: string, what: string) =>
  Args.text({ name }).pipe(
    Args.withDescription(what),
    Args.map((d) => path.resolve(d))
  )

const metric = Options.text("metric").pipe(
  Options.withPseudoName("NAME"),
  Options.withDescription(
    `A metric to compare (default output_throughput); repeat for more. One of: ${METRIC_KEYS.join(", ")}.`
  ),
  Options.repeated
)

const failOn = Options.text("fail-on").pipe(
  Options.withPseudoName("METRIC<-P%"),
  Options.withDescription(
    `A gate for CI: 'output_throughput<-3%' fails (exit ${EXIT.compareRegression}) when the overall change (the geometric mean over the points both measured ok) is below -3 % with 95 % confidence; 'p99_ttft_ms>+5%' when above +5 %. With one run per point on a side it says no confidence can be claimed and judges the raw change. Repeat for more gates.`
  ),
  Options.repeated
)

const allowWorkloadChange = Options.boolean("allow-workload-change").pipe(
  Options.withDescription(
    "Compare even when the two sessions sent different workloads (client, dataset and its SHA-256, input lengths, arrivals, requests; docs/clients.md#the-workload-on-record). Without it, such a comparison lists the differences first and gives no verdict (a --fail-on gate then fails: it cannot judge)."
  )
)

/**
 * The facts of the nodes a sweep's engines ran on, from each ready engine start's record in
 * sweep.json (the runner's own files stay on its node: nothing is read from there).
 */
const sweepNodes = (doc: SweepDoc) =>
  Effect.succeed(
    doc.combinations.flatMap((c) =>
      c.engine_starts.flatMap((s) =>
        s.outcome === "ready" && s.node !== undefined && s.node !== null
          ? [
              [
                s.node.hostname ?? "?",
                s.node.gpu_count === 0
                  ? `no GPU${s.node.cpu_model !== null ? `, ${s.node.cpu_model}` : ""}`
                  : `${s.node.gpu_count} GPU(s): ${s.node.gpu_model ?? "?"}`,
                ...(s.node.driver !== null ? [`driver ${s.node.driver}`] : [])
              ].join(", ")
            ]
          : []
      )
    )
  )

export const loadSide = (dir: string) =>
  Effect.gen(function* () {
    const sweep = yield* Effect.flatMap(SweepStore, (s) => s.load(dir))
    if (Option.isSome(sweep)) return sweepSide(dir, sweep.value, yield* sweepNodes(sweep.value))
    const state = yield* Effect.flatMap(StateStore, (s) => s.load(dir))
    if (Option.isNone(state)) return yield* new SessionNotFound({ sessionDir: dir })
    const env = yield* Effect.flatMap(AttemptFiles, (f) => f.readJson(path.join(dir, ENVIRONMENT_FILE)))
    return baselineSide(dir, state.value, environmentOf(env))
  })

export const compareCommand = Command.make(
  "compare",
  {
    a: sessionArg("A", "The session compared against (the reference: last week's, main's)."),
    b: sessionArg("B", "The session compared (this week's, the change's)."),
    metric,
    failOn,
    allowWorkloadChange,
    json
  },
  (o) =>
    Effect.gen(function* () {
      const metrics: Array<MetricKey> = []
      for (const m of o.metric.length === 0 ? ["output_throughput"] : o.metric) {
        if (!METRIC_KEYS.includes(m as MetricKey))
          return yield* new UsageError({
            detail: `--metric: unknown metric '${m}' (known: ${METRIC_KEYS.join(", ")})`
          })
        if (!metrics.includes(m as MetricKey)) metrics.push(m as MetricKey)
      }
      const gates: Array<Gate> = []
      for (const text of o.failOn) {
        const g = parseGate(text)
        if (!g.ok) return yield* new UsageError({ detail: g.error })
        gates.push(g.gate)
        if (!metrics.includes(g.gate.metric)) metrics.push(g.gate.metric)
      }
      const a: CompareSide = yield* loadSide(o.a)
      const b: CompareSide = yield* loadSide(o.b)
      if (a.kind !== b.kind)
        return yield* new UsageError({
          detail: `compare takes two sweep sessions or two baseline sessions: ${o.a} is a ${a.kind} session, ${o.b} a ${b.kind} session`
        })
      const comparison = compareSessions(a, b, metrics, { allowWorkloadChange: o.allowWorkloadChange })
      const results = gates.map((g) => judgeGate(comparison, g))
      const code = results.some((r) => r.failed) ? EXIT.compareRegression : EXIT.ok
      yield* o.json
        ? Console.log(JSON.stringify(compareJson(comparison, results, code), null, 2))
        : Console.log(renderCompareText(comparison, results))
      if (code !== EXIT.ok) return yield* Effect.fail(new ExitWith({ code }))
    }).pipe(withJsonErrors(o.json), Effect.scoped)
).pipe(
  Command.withDescription(
    `Compare two sweep sessions or two baseline sessions, point by point, with confidence intervals. Sweep points are matched on params and load, baselines as a whole: what differs between their records first, then per matched point the change with its 95 % interval and a verdict (faster, slower, no difference beyond the noise), the overall geometric-mean change and best against best; unmatched points are listed. With one run per point on a side the raw change is shown, with no confidence claimed. --fail-on makes it a CI gate: exit ${EXIT.compareRegression} when a metric regresses past its threshold (or nothing could be compared), else ${EXIT.ok}. Never modifies the sessions. How it judges: docs/trust.md#hyperloom-compare-a-b.`
  )
)
