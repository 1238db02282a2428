/**
 * One combination (docs/design.md#combinations-and-points): its engine life, one engine start at
 * a time under a lease of its own (Sweep/Engine.ts), its points run while the engine serves
 * (Sweep/Points.ts). What each start's end means for the document and for the combination (start
 * again, go on, requeue, stop the sweep) is pure: domain/Sweep/EngineLife.ts.
 */
import { Effect } from "effect"
import type { NodeFacts } from "../../domain/Serving.js"
import { ENVIRONMENT_FILE, SERVER_LOG } from "../../domain/Serving.js"
import { fitsClass, refineClass } from "../../domain/Sweep/ClassChoice.js"
import { afterEngine, afterLeaseFailure, type EngineEnd } from "../../domain/Sweep/EngineLife.js"
import { engineNote } from "../../domain/Sweep/EngineNote.js"
import {
  afterSetback,
  avoidIds,
  emptyRequeue,
  isNotInstalled,
  renderSetback
} from "../../domain/Sweep/Requeue.js"
import {
  beginEngine,
  classOf,
  comboRef,
  type HardwareClass,
  type NodeRecord,
  nodeName,
  onNode,
  renderClass,
  type SweepDoc,
  sameClass,
  substitute,
  sweepEnvironmentRecord,
  updateEngine
} from "../../domain/Sweep.js"
import { checkFailed, renderFinding } from "../../domain/Validity.js"
import type { LeaseActorFailed } from "../../services/BridgeProcess.js"
import { comboDir, lastLine, NodeSetback, nowIso, runPoints } from "./Points.js"
import type { SweepState } from "./State.js"

/** The ids of the nodes the sweep leaves alone (another hardware class). */
const leftAloneIds = (nodes: ReadonlyArray<NodeRecord> | undefined) =>
  (nodes ?? []).flatMap((n) => (n.node_id === null ? [] : [n.node_id]))

/**
 * Whether the sweep takes the node it was granted (docs/design.md#sweeps-at-cluster-scale,
 * "Comparable nodes"): the class decided before the first lease (Sweep.ts, from what the nodes
 * told), else the first node granted's, sets the sweep's hardware class (a resumed sweep keeps its
 * own); a node granted that turns out of another class (one Ray could not tell apart) is left alone (its Ray id avoided by every later lease of
 * the sweep) and named once. A node that tells nothing, or no Ray id, is taken (it cannot be
 * steered away from). Decided on the latest document in the same step that saves it: two
 * combinations granted at once agree on the first.
 */
const admitNode = (state: SweepState, node: NodeRecord | undefined) =>
  Effect.gen(function* () {
    if (node === undefined) return true
    const cls = classOf(node)
    type Admission =
      | { readonly _tag: "first" | "taken" | "known" }
      | { readonly _tag: "leave"; readonly sweepClass: HardwareClass }
    const verdict = yield* state.decide((doc): readonly [Admission, SweepDoc | undefined] => {
      const sweepClass = doc.hardware_class
      if (sweepClass === undefined) return [{ _tag: "first" }, { ...doc, hardware_class: cls }]
      if (node.node_id === null) return [{ _tag: "taken" }, undefined]
      // of the class as far as both tell it (Ray's token, the vendor's name); the class then says
      // what the node told beyond it (domain/Sweep/ClassChoice.ts)
      if (fitsClass(sweepClass, node)) {
        const refined = refineClass(sweepClass, node)
        return [
          { _tag: "taken" },
          sameClass(refined, sweepClass) ? undefined : { ...doc, hardware_class: refined }
        ]
      }
      const left = doc.left_alone ?? []
      if (left.some((n) => n.node_id === node.node_id)) return [{ _tag: "known" }, undefined]
      return [
        { _tag: "leave", sweepClass },
        { ...doc, left_alone: [...left, node] }
      ]
    })
    switch (verdict._tag) {
      case "first":
        yield* Effect.logInfo(
          `sweep: the hardware class is ${renderClass(cls)} (the first node granted, ${nodeName(node)})`
        )
        return true
      case "taken":
        return true
      case "known":
        return false
      case "leave":
        yield* Effect.logWarning(
          `sweep: leaving node ${nodeName(node)} (${node.node_id}) alone: it is ${renderClass(cls)}, the sweep runs on ${renderClass(verdict.sweepClass)}; no combination of this sweep is granted it again`
        )
        return false
    }
  })

/** `<session>/environment.json` (issue 27 item 14): the node and commands of the engine just ready. */
const recordSweepEnvironment = (state: SweepState, index: number, node: NodeFacts | undefined) =>
  Effect.gen(function* () {
    const doc = yield* state.doc
    const c = doc.combinations[index]!
    const record = sweepEnvironmentRecord({
      now: yield* nowIso,
      combination: index,
      hyperloomVersion: state.options.version ?? "unknown",
      requestedGpus: state.options.request.gpus,
      node,
      server: c.server_cmd,
      clientArgv: c.points[0]?.client_argv ?? doc.experiment.client
    })
    yield* state.files
      .writeJson(`${state.dir.replace(/\/+$/, "")}/${ENVIRONMENT_FILE}`, record)
      .pipe(Effect.catchAll((e) => Effect.logWarning(`cannot write the environment record: ${e.message}`)))
  })

/**
 * One engine start of combination `index` under its lease, to its end: left alone, not ready,
 * its points run, or a fault of its node (NodeSetback). The lease's own failures are the caller's.
 */
const startEngine = (state: SweepState, index: number, dir: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      const doc = yield* state.doc
      const c = doc.combinations[index]!
      const counters = yield* state.counters
      const avoid = avoidIds(counters.requeue.get(index), leftAloneIds(doc.left_alone))
      const handle = yield* state.engine.start({
        request: avoid.length === 0 ? state.options.request : { ...state.options.request, avoidNodes: avoid },
        // what runs is the experiment as given; the document keeps it redacted (Redact.ts)
        server: substitute(state.options.experiment.server, c.params),
        dir,
        readiness: state.options.readiness,
        waitSec: state.options.waitSec,
        env: state.options.env,
        cwd: state.options.cwd,
        onOutput: (o) => Effect.logDebug(`[combination #${index}] ${o.line}`),
        check: state.options.check,
        warmup: state.options.warmup
      })
      const node = handle.node
      if (node !== undefined) yield* state.updateCombination(index, (d) => updateEngine(d, index, { node }))
      if (!(yield* admitNode(state, node))) return { _tag: "left_alone" } satisfies EngineEnd as EngineEnd
      if (handle.started._tag === "NotReady") {
        const r = handle.started.result
        const line = lastLine(r.launchLog || r.error || "")
        if (isNotInstalled(r.exitCode, line))
          // the node lacks the engine's command: a fault of the node, not of the combination
          return yield* new NodeSetback({ setback: { _tag: "Missing", what: "engine", node, line } })
        // the engine's own telling line and its server.log, first (docs/design.md#time-to-the-answer)
        return {
          _tag: "not_ready",
          result: r,
          note: engineNote(r, `${dir}/${SERVER_LOG}`)
        } satisfies EngineEnd
      }
      const readySec = handle.started.readySec
      const engineConfig = handle.started.status?.engine_config
      if (readySec !== null) yield* state.count((k) => ({ ...k, startSecs: [...k.startSecs, readySec] }))
      const readyAt = yield* nowIso
      yield* state.updateCombination(index, (d) =>
        updateEngine(d, index, {
          outcome: "ready",
          ready_sec: readySec,
          ready_at: readyAt,
          ...(engineConfig != null ? { engine_config: engineConfig } : {})
        })
      )
      yield* recordSweepEnvironment(state, index, handle.started.status?.node)
      // the check and the warm-up ran after readiness, before `ready` was said (docs/trust.md)
      const check = handle.started.status?.check
      const warmup = handle.started.status?.warmup
      if (check != null || warmup != null)
        yield* state.updateCombination(index, (d) =>
          updateEngine(d, index, {
            ...(check != null ? { check } : {}),
            ...(warmup != null ? { warmup } : {})
          })
        )
      if (check != null && check.exit_code !== 0)
        return {
          _tag: "check_failed",
          finding: `${renderFinding(checkFailed(check.exit_code, check.last_line))}; its output is in ${dir}/${check.log}`
        } satisfies EngineEnd
      yield* Effect.logInfo(
        `sweep: combination #${index}: the engine is ready${onNode(node)}${readySec !== null ? ` after ${readySec} s` : ""}`
      )
      return { _tag: "ran", end: yield* runPoints(state, index, handle) } satisfies EngineEnd
    })
  )

/**
 * A combination to its end: engine starts until one serves its points, is judged hopeless, or
 * stops the sweep. `next`: go on; `requeue`: back to the queue (a fault of its node); `stop`: the
 * sweep stops (an infeasible cluster).
 */
export const runCombination = (state: SweepState, index: number) =>
  Effect.gen(function* () {
    for (;;) {
      const c = (yield* state.doc).combinations[index]!
      const failedStarts = c.engine_starts.filter((s) => s.outcome === "failed").length
      const dir = `${comboDir(state, index)}/engine-${c.engine_starts.length + 1}`
      // not charged: a start left alone on another class's node is no failure of the combination
      const began = yield* nowIso
      yield* state.updateCombination(index, (d) => beginEngine(d, index, dir, began))
      yield* state.count((k) => ({ ...k, engineStarts: k.engineStarts + 1 }))
      yield* Effect.logInfo(
        `sweep: combination ${comboRef(index, c.params)}: starting the engine under a lease: ${c.server_cmd}`
      )
      const end: EngineEnd = yield* startEngine(state, index, dir).pipe(
        Effect.catchTag("RayClusterInfeasible", (e) =>
          Effect.succeed({ _tag: "infeasible", error: e.message } satisfies EngineEnd as EngineEnd)
        ),
        Effect.catchTag("NodeSetback", (e) => setbackEnd(state, index, e.setback)),
        // the lease's actor died before the engine was ready: its node was lost (not the engine)
        Effect.catchIf(
          (e): e is LeaseActorFailed => e._tag === "LeaseActorFailed" && e.kind === "actor_died",
          (e) =>
            Effect.flatMap(state.doc, (doc) =>
              setbackEnd(state, index, {
                _tag: "NodeLost",
                node: doc.combinations[index]!.engine_starts.at(-1)?.node,
                reason: e.message
              })
            )
        ),
        Effect.tapError((e) =>
          Effect.gen(function* () {
            if (e._tag === "SessionVanished") return
            const now = yield* nowIso
            yield* state.updateCombination(index, (d) =>
              afterLeaseFailure(d, index, now, {
                waitExpired: e._tag === "LeaseWaitExpired",
                message: e.message
              })
            )
            yield* Effect.logError(
              `sweep: the lease failed; the same command resumes the sweep once that is fixed`
            )
          })
        )
      )
      const ended = yield* nowIso
      const after = yield* state.decide((doc) => {
        const a = afterEngine(doc, index, end, { ended, failedStarts })
        return [a, a.doc] as const
      })
      if (after.log !== undefined)
        yield* after.log.level === "warning"
          ? Effect.logWarning(after.log.line)
          : Effect.logInfo(after.log.line)
      if (after.next === "retry") continue
      return after.next
    }
  })

/** A fault of the combination's node: what the requeue decides (its state kept for the next start). */
const setbackEnd = (
  state: SweepState,
  index: number,
  setback: import("../../domain/Sweep/Requeue.js").Setback
) =>
  Effect.gen(function* () {
    const doc = yield* state.doc
    const counters = yield* state.counters
    const verdict = afterSetback(counters.requeue.get(index) ?? emptyRequeue, setback, {
      eligible: yield* state.engine.eligibleNodes(state.options.request.gpus),
      leftAlone: leftAloneIds(doc.left_alone),
      perCombination: doc.experiment.nodes
    })
    if (verdict._tag === "again") {
      const kept = verdict.state
      yield* state.count((k) => ({ ...k, requeue: new Map(k.requeue).set(index, kept) }))
    }
    return {
      _tag: "setback",
      why: renderSetback(setback),
      verdict,
      missing: setback._tag === "Missing"
    } satisfies EngineEnd as EngineEnd
  })
