/**
 * Sweeps at cluster scale (docs/design.md#sweeps-at-cluster-scale), as data and decisions: the
 * facts of the node that ran a combination, the sweep's hardware class and whether a node belongs
 * to it, how many combinations the cluster can hold at once (`--parallel auto`), and the status
 * line (done / running / waiting, runs done of planned, elapsed, an ETA from the times measured so
 * far). Pure: the sweep program (programs/Sweep.ts) decides when.
 */
import { Schema } from "effect"
import type { ClusterSnapshot } from "../Snapshot.js"

/** The facts of the node a combination's engine ran on (rank 0's for a group). */
export const NodeRecord = Schema.Struct({
  hostname: Schema.NullOr(Schema.String),
  /** Ray's node id (56 hex). */
  node_id: Schema.NullOr(Schema.String),
  /** The node's GPUs as Ray counts them (its `GPU` total). */
  gpu_count: Schema.NonNegativeInt,
  /** The GPU model (the driver's, else Ray's `accelerator_type`); null when none is told. */
  gpu_model: Schema.NullOr(Schema.String),
  driver: Schema.NullOr(Schema.String),
  cpu_model: Schema.NullOr(Schema.String),
  cpu_count: Schema.NullOr(Schema.NonNegativeInt)
})
export type NodeRecord = typeof NodeRecord.Type

/** A sweep's hardware class: GPU model and count per node; with no GPU, the CPU model. */
export const HardwareClass = Schema.Struct({
  gpu_count: Schema.NonNegativeInt,
  gpu_model: Schema.NullOr(Schema.String),
  cpu_model: Schema.NullOr(Schema.String)
})
export type HardwareClass = typeof HardwareClass.Type

export const classOf = (n: NodeRecord): HardwareClass =>
  n.gpu_count > 0
    ? { gpu_count: n.gpu_count, gpu_model: n.gpu_model, cpu_model: null }
    : { gpu_count: 0, gpu_model: null, cpu_model: n.cpu_model }

export const sameClass = (a: HardwareClass, b: HardwareClass): boolean =>
  a.gpu_count === b.gpu_count && a.gpu_model === b.gpu_model && a.cpu_model === b.cpu_model

export const renderClass = (c: HardwareClass): string =>
  c.gpu_count > 0
    ? `${c.gpu_count} × ${c.gpu_model ?? "GPU (model not told)"} per node`
    : `no GPU, CPU ${c.cpu_model ?? "(model not told)"}`

/** ` on <node>` for a progress line; nothing when the node told nothing. */
export const onNode = (n: Pick<NodeRecord, "hostname" | "node_id"> | undefined | null): string =>
  n === undefined || n === null ? "" : ` on ${nodeName(n)}`

/** How a node is named in progress lines and tables: its host name, else its short Ray id. */
export const nodeName = (n: Pick<NodeRecord, "hostname" | "node_id"> | undefined | null): string =>
  n === undefined || n === null ? "?" : (n.hostname ?? (n.node_id === null ? "?" : n.node_id.slice(0, 8)))

/** `accelerator_type:<model>` is how Ray tells a node's GPU model among its resources. */
const acceleratorOf = (totals: Readonly<Record<string, number>>): string | null => {
  const k = Object.keys(totals).find((r) => r.startsWith("accelerator_type:"))
  return k === undefined ? null : k.slice("accelerator_type:".length)
}

/** What Ray tells of a node: its host name (or address), GPU total and accelerator type. */
export const rayNodeFacts = (snapshot: ClusterSnapshot, nodeId: string) => {
  const n = snapshot.nodes.find((x) => x.nodeId === nodeId)
  if (n === undefined) return undefined
  return {
    hostname: n.hostname || n.nodeName || n.address || null,
    gpuCount: Math.round(n.resourcesTotal.GPU ?? 0),
    accelerator: acceleratorOf(n.resourcesTotal)
  }
}

/**
 * `--parallel auto`: how many combinations the cluster can hold at once: alive nodes with the
 * serving slot and at least the GPUs a node of the lease needs (`gpus`; a group's K ranks take K
 * nodes), of the sweep's class when it is known (by Ray's GPU count and accelerator type; the CPU
 * model is not Ray's to tell), none of the nodes the sweep leaves alone. At least 1.
 */
export const autoParallel = (
  snapshot: ClusterSnapshot,
  o: {
    readonly gpus: number
    readonly nodes: number
    readonly cls?: HardwareClass | undefined
    readonly leftAlone?: ReadonlyArray<string> | undefined
  }
): number => {
  const skip = new Set(o.leftAlone ?? [])
  const fit = snapshot.nodes.filter((n) => {
    if (n.state !== "ALIVE" || skip.has(n.nodeId)) return false
    const t = n.resourcesTotal
    if ((t.serving_slot ?? 0) < 1) return false
    const gpus = Math.round(t.GPU ?? 0)
    if (gpus < o.gpus) return false
    if (o.cls === undefined) return true
    if (gpus !== o.cls.gpu_count) return false
    const acc = acceleratorOf(t)
    return o.cls.gpu_model === null || acc === null || o.cls.gpu_model.includes(acc)
  })
  return Math.max(1, Math.floor(fit.length / Math.max(1, o.nodes)))
}

/** `--parallel N|auto`: a whole number >= 1, or `auto`. */
export const parseParallel = (
  text: string
):
  | { readonly ok: true; readonly value: number | "auto" }
  | { readonly ok: false; readonly error: string } => {
  const t = text.trim()
  if (t === "auto") return { ok: true, value: "auto" }
  return /^[1-9][0-9]{0,5}$/.test(t)
    ? { ok: true, value: Number(t) }
    : { ok: false, error: `--parallel must be a whole number >= 1 or auto, got '${text}'` }
}

// ---------------------------------------------------------------------------------------------
// The status line

export interface Progress {
  readonly done: number
  readonly running: number
  readonly waiting: number
  readonly runsDone: number
  readonly runsPlanned: number
  readonly elapsedSec: number
  /** Engine starts measured so far (launch to ready), seconds. */
  readonly startSecs: ReadonlyArray<number>
  /** Client runs measured so far, seconds. */
  readonly runSecs: ReadonlyArray<number>
  /** Combinations at once. */
  readonly parallel: number
  /** Combinations not started yet that still need an engine start (waiting). */
  readonly startsLeft: number
  /**
   * `adaptive`: the search decides what runs (and how many at once, up to `parallel`): the ETA
   * shares the work among those running now, and is an upper bound (it may start fewer).
   */
  readonly strategy?: "grid" | "adaptive" | undefined
}

const mean = (xs: ReadonlyArray<number>) =>
  xs.length === 0 ? undefined : xs.reduce((a, b) => a + b, 0) / xs.length

/**
 * Seconds left, from the mean engine start and client run measured so far: the starts and runs
 * still to do, shared among the combinations that run at once. Undefined before one of each.
 */
export const etaSec = (p: Progress): number | undefined => {
  const start = mean(p.startSecs)
  const run = mean(p.runSecs)
  if (start === undefined || run === undefined) return undefined
  const work = p.startsLeft * start + Math.max(0, p.runsPlanned - p.runsDone) * run
  const atOnce = p.strategy === "adaptive" ? p.running : p.running + p.waiting
  return work / Math.max(1, Math.min(p.parallel, atOnce))
}

export const clock = (sec: number): string => {
  const s = Math.max(0, Math.round(sec))
  const h = Math.floor(s / 3600)
  const m = Math.floor((s % 3600) / 60)
  const r = s % 60
  return h > 0
    ? `${h}h${String(m).padStart(2, "0")}m`
    : m > 0
      ? `${m}m${String(r).padStart(2, "0")}s`
      : `${r}s`
}

export const statusLine = (p: Progress): string => {
  const eta = etaSec(p)
  return `sweep: ${p.done} done, ${p.running} running, ${p.waiting} waiting; runs ${p.runsDone}/${p.runsPlanned}; elapsed ${clock(p.elapsedSec)}; ETA ${eta === undefined ? "– (no engine start and run measured yet)" : `${p.strategy === "adaptive" ? "at most " : ""}${clock(eta)}`}`
}
