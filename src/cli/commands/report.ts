import * as path from "node:path"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Clock, Console, Effect, Option } from "effect"
import { SessionNotFound } from "../../domain/Errors.js"
import { ENVIRONMENT_FILE, environmentOf } from "../../domain/Serving.js"
import { AttemptFiles } from "../../services/AttemptFiles.js"
import { StateStore } from "../../services/StateStore.js"
import { SweepStore } from "../../services/SweepStore.js"
import { renderCompareSection, withCompareSection } from "../RenderCompareReport.js"
import { type ReportSession, renderReport } from "../RenderReport.js"
import { renderSweepReport } from "../RenderSweepReport.js"
import { withJsonErrors } from "../Run.js"
import { json } from "../Shared.js"

const sessions = Options.text("session").pipe(
  Options.withPseudoName("DIR"),
  Options.atLeast(1),
  Options.withDescription(
    "A baseline or sweep session directory; repeat --session to compare sessions side by side."
  ),
  Options.map((dirs) => dirs.map((d) => path.resolve(d)))
)

const out = Options.file("out").pipe(
  Options.withPseudoName("FILE"),
  Options.withDescription(
    "Where to write the HTML page (default: hyperloom-report.html in the working directory)."
  ),
  Options.optional
)

/**
 * `hyperloom report --session A [--session B …] [--out FILE]`
 * (docs/design.md#what-a-serving-session-keeps).
 */
export const reportCommand = Command.make("report", { sessions, out, json }, (o) =>
  Effect.gen(function* () {
    const store = yield* StateStore
    const files = yield* AttemptFiles
    const file = path.resolve(Option.getOrElse(o.out, () => "hyperloom-report.html"))
    const now = new Date(yield* Clock.currentTimeMillis).toISOString()
    // Sweep sessions (sweep.json, docs/design.md#what-a-sweep-keeps) get the sweep report:
    // per-combination charts against load, the Pareto chart.
    const sweeps = yield* Effect.forEach(o.sessions, (dir) => Effect.flatMap(SweepStore, (s) => s.load(dir)))
    if (sweeps.some(Option.isSome)) {
      const docs = o.sessions.map((dir, i) => ({ dir, doc: sweeps[i]! }))
      const plain = docs.find((d) => Option.isNone(d.doc))
      if (plain !== undefined) return yield* new SessionNotFound({ sessionDir: plain.dir, kind: "sweep" })
      const withEnv = yield* Effect.forEach(docs, (d) =>
        Effect.map(files.readJson(path.join(d.dir, ENVIRONMENT_FILE)), (env) => ({
          name: d.dir,
          doc: Option.getOrThrow(d.doc),
          environment: environmentOf(env)
        }))
      )
      const page = renderSweepReport(withEnv, now)
      // Two sweeps (docs/design.md#trusted-answers): both on shared axes with the deltas, first
      const html =
        withEnv.length === 2 ? withCompareSection(page, renderCompareSection(withEnv[0]!, withEnv[1]!)) : page
      yield* files.writeText(file, html)
      return yield* o.json
        ? Console.log(JSON.stringify({ out: file, sessions: o.sessions, bytes: Buffer.byteLength(html) }))
        : Console.log(`wrote ${file} (${docs.length} sweep session(s), ${Buffer.byteLength(html)} bytes)`)
    }
    const loaded: Array<ReportSession> = []
    for (const dir of o.sessions) {
      const state = yield* store.load(dir)
      if (Option.isNone(state)) return yield* new SessionNotFound({ sessionDir: dir })
      const env = yield* files.readJson(path.join(dir, ENVIRONMENT_FILE))
      loaded.push({ name: dir, state: state.value, environment: environmentOf(env) })
    }
    const html = renderReport(loaded, now)
    yield* files.writeText(file, html)
    yield* o.json
      ? Console.log(JSON.stringify({ out: file, sessions: o.sessions, bytes: Buffer.byteLength(html) }))
      : Console.log(`wrote ${file} (${loaded.length} session(s), ${Buffer.byteLength(html)} bytes)`)
  }).pipe(withJsonErrors(o.json), Effect.scoped)
).pipe(
  Command.withDescription(
    "Write one self-contained HTML page (inline SVG and CSS: it fetches nothing) for sessions of one kind. Baseline sessions: throughput and latency (TTFT, TPOT) per attempt, a side-by-side table and each session's attempts. Sweep sessions: per combination, output throughput and p99 TTFT/TPOT against load with the SLO lines, the Pareto chart (tok/s per user against tok/s per GPU), the best with its command lines, the points table and the sweep's environment; two sweeps also on shared axes with the deltas. Never modifies the sessions. What each chart shows: docs/baseline.md#the-report, docs/trust.md#two-sweeps-in-one-report."
  )
)
