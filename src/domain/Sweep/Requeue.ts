/**
 * A combination that meets a fault of its node, not of its engine (docs/design.md#sweeps-at-cluster-scale,
 * "Faults" and "No shared filesystem"), as data and decisions:
 * - its node was lost (the raylet died, or Ray declared the node dead after a cut): the run in
 *   flight becomes `interrupted` (moved to its point's `interrupted_runs`, as a resume does), the
 *   engine start `interrupted`, and the combination goes back to the queue, to run again from its
 *   first point not done on whichever node Ray grants (another one, or the same one once back);
 * - the node lacks the engine, the client or the `--between` command (the shell's 127 "not found",
 *   126 "not executable"; the sweep runner's own 127 for a client it cannot start; Python's "No
 *   module named" for the module `python -m` launches): the same, and
 *   the combination avoids that node from then on; when no node that can hold it is left, it fails
 *   naming each node and what was missing there.
 * Neither is charged to the combination (its points keep every finished run; nothing runs twice).
 * A combination whose node is lost MAX_NODE_LOSSES times fails (a cluster that keeps dying under it
 * is not a measurement). Pure: the sweep program (programs/Sweep.ts) decides when.
 */
import { aliveNodes, type ClusterSnapshot } from "../Snapshot.js"
import { type NodeRecord, nodeName } from "./Nodes.js"
import type { SweepDoc } from "./Schema.js"
import { recoverInterrupted } from "./Transitions.js"

/** Node losses one combination survives; the next one fails it. */
export const MAX_NODE_LOSSES = 3

/**
 * Python's own last line when `python -m MODULE` finds no MODULE (CPython's runpy: the interpreter's
 * path, then "No module named a.b" — unquoted, unlike an ImportError's — or "Error while finding
 * module specification for 'a.b' (ModuleNotFoundError: …)"; exit 1): the launched engine or client
 * is not installed there (`python -m sglang.launch_server` on a node without SGLang).
 */
const NO_LAUNCHED_MODULE =
  /: (No module named [^'\s]+|Error while finding module specification for '[^']+' \(ModuleNotFoundError: .*\))$/

/**
 * The command is not installed on the node: the shell's "command not found" (127) and "not
 * executable" (126) (also the sweep runner's 127 for a client it cannot start), or Python's exit 1
 * with `line` (the output's last line) saying the module `-m` names is not there.
 */
export const isNotInstalled = (exitCode: number | null | undefined, line?: string): boolean =>
  exitCode === 127 ||
  exitCode === 126 ||
  (exitCode === 1 && line !== undefined && NO_LAUNCHED_MODULE.test(line))

export type Setback =
  | {
      readonly _tag: "NodeLost"
      readonly node: NodeRecord | undefined
      /** What the lease said (the actor died, the node was declared dead). */
      readonly reason: string
    }
  | {
      readonly _tag: "Missing"
      readonly what: "engine" | "client" | "--between command"
      readonly node: NodeRecord | undefined
      /** The telling line (`sh: 1: vllm: not found`), when there is one. */
      readonly line: string | undefined
    }

/** What one combination met so far, in this run of the sweep. */
export interface RequeueState {
  /** The nodes it lost, in order (named). */
  readonly lost: ReadonlyArray<string>
  /** The nodes it avoids (something it needs is missing there), each with what was missing. */
  readonly avoid: ReadonlyArray<{ readonly node: NodeRecord; readonly missing: string }>
}

export const emptyRequeue: RequeueState = { lost: [], avoid: [] }

/** One line for the log and the engine start's error. */
export const renderSetback = (s: Setback): string =>
  s._tag === "NodeLost"
    ? `${s.node === undefined ? "its node" : `node ${nodeName(s.node)}`} was lost while the combination ran (${s.reason.split("\n")[0]})`
    : `the ${s.what} is not installed on node ${nodeName(s.node)}${s.line === undefined ? "" : ` ("${s.line}")`}`

export type RequeueVerdict =
  | { readonly _tag: "again"; readonly state: RequeueState }
  | { readonly _tag: "give_up"; readonly error: string }

/**
 * After a setback: the combination goes back to the queue (`again`, with what it avoids from now
 * on), or it fails. `eligible`: Ray's ids of the alive nodes that could hold one of its leases
 * (undefined when the cluster could not be read); `leftAlone`: the nodes the sweep leaves alone;
 * `perCombination`: the nodes one combination takes (`--nodes`).
 */
export const afterSetback = (
  state: RequeueState,
  setback: Setback,
  o: {
    readonly eligible: ReadonlyArray<string> | undefined
    readonly leftAlone: ReadonlyArray<string>
    readonly perCombination: number
  }
): RequeueVerdict => {
  if (setback._tag === "NodeLost") {
    const lost = [...state.lost, nodeName(setback.node)]
    if (lost.length >= MAX_NODE_LOSSES)
      return {
        _tag: "give_up",
        error: `its node was lost ${lost.length} times (${lost.join(", ")}): the combination is not run again in this sweep run`
      }
    return { _tag: "again", state: { ...state, lost } }
  }
  const missing = `the ${setback.what}${setback.line === undefined ? "" : ` ("${setback.line}")`}`
  const avoid =
    setback.node === undefined || setback.node.node_id === null
      ? state.avoid
      : [
          ...state.avoid.filter((a) => a.node.node_id !== setback.node!.node_id),
          { node: setback.node, missing }
        ]
  const named = () => avoid.map((a) => `${nodeName(a.node)} lacks ${a.missing}`).join("; ")
  if (avoid === state.avoid)
    // a node that tells no Ray id cannot be steered away from: going again would meet it again
    return {
      _tag: "give_up",
      error: `${missing} is not installed on node ${nodeName(setback.node)}, which cannot be avoided (Ray did not tell its id)`
    }
  if (o.eligible === undefined)
    return {
      _tag: "give_up",
      error: `${named()}; the cluster could not be read to find another node`
    }
  const skip = new Set(avoidIds({ ...state, avoid }, o.leftAlone))
  const left = o.eligible.filter((id) => !skip.has(id))
  if (left.length < Math.max(1, o.perCombination))
    return {
      _tag: "give_up",
      error: `no node can run it: ${named()}${
        left.length > 0 ? ` (${left.length} other node(s) left, ${o.perCombination} needed)` : ""
      }; install what is missing on those nodes (docs/multi-node.md#sweeping-on-a-cluster)`
    }
  return { _tag: "again", state: { ...state, avoid } }
}

/** The Ray ids a combination's lease must avoid: the sweep's nodes left alone and its own. */
export const avoidIds = (
  state: RequeueState | undefined,
  leftAlone: ReadonlyArray<string>
): Array<string> => [
  ...new Set([
    ...leftAlone,
    ...(state?.avoid ?? []).flatMap((a) => (a.node.node_id === null ? [] : [a.node.node_id]))
  ])
]

/**
 * The alive nodes that could hold one lease of `gpus` GPUs and the serving slot (what `--parallel
 * auto` counts, before the hardware class).
 */
export const eligibleNodes = (snapshot: ClusterSnapshot, gpus: number): Array<string> =>
  aliveNodes(snapshot)
    .filter((n) => (n.resourcesTotal.serving_slot ?? 0) >= 1 && Math.round(n.resourcesTotal.GPU ?? 0) >= gpus)
    .map((n) => n.nodeId)

/**
 * One combination's fault: its engine start and its run in flight become `interrupted` (the run
 * moved to its point's `interrupted_runs`; the point pending again, keeping every run it
 * finished), the start's error says why, and the combination is pending again.
 */
export const interruptCombination = (doc: SweepDoc, index: number, now: string, why: string): SweepDoc => {
  const c = doc.combinations.find((x) => x.index === index)
  if (c === undefined) return doc
  const [recovered] = recoverInterrupted({ ...doc, combinations: [c] }, now).combinations
  const open = c.engine_starts.findIndex((s) => s.ended_at === null)
  const own = {
    ...recovered!,
    status: "pending" as const,
    engine_starts: recovered!.engine_starts.map((s, i) => (i === open ? { ...s, error: why } : s))
  }
  return { ...doc, combinations: doc.combinations.map((x) => (x.index === index ? own : x)) }
}
