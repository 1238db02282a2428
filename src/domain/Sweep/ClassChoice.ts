/**
 * The sweep's hardware class decided before any engine starts (docs/design.md#sweeps-at-cluster-scale,
 * issue 33 item 3). Pure: the program reads the cluster once before the first lease and asks here.
 *
 * - What each node tells before a lease: Ray's GPU count (`GPU` total) and its accelerator type
 *   (the `accelerator_type:<NAME>` resource Ray sets from the vendor's GPU name: "NVIDIA L4" → L4);
 *   the vendor tool's model where the node has told it (an engine of this sweep ran there before:
 *   its record keeps what the tool said).
 * - The nodes that could serve: alive, with the serving slot and at least the GPUs a lease asks.
 *   They fall into classes (GPU count and model per node; with no GPU, the CPU model where told).
 * - The decision: a resumed sweep keeps its class; `--hardware-class` chooses one of those present;
 *   else the class with the most such nodes (a tie goes to the class of the node Ray lists first).
 *   The other classes' nodes are left alone from the first lease on (their Ray ids avoided) and
 *   named once.
 * - Matching a model told at two depths: Ray's type is a token of the vendor's name, so a class of
 *   "L4" holds a node whose tool says "NVIDIA L4"; two vendor names are compared whole (an
 *   A100-SXM4-40GB is not an A100-SXM4-80GB), which only the tool can tell.
 */
import type { ClusterSnapshot } from "../Snapshot.js"
import { classOf, type HardwareClass, type NodeRecord, nodeName, renderClass } from "./Nodes.js"

/** Ray's accelerator type of an NVIDIA name (ray/_private/accelerators/nvidia_gpu.py). */
const NVIDIA_NAME = /^\w+\s+((?:[A-Z]+\s+)*[A-Z0-9]*\d[A-Z0-9]*)/

/**
 * The token Ray makes of a GPU model: "NVIDIA L4" → "L4", "Tesla V100-SXM2-16GB" → "V100",
 * "NVIDIA GeForce RTX 5090" → "GeForce-RTX-5090"; a name that already is a token stays as it is.
 */
export const acceleratorToken = (model: string): string => {
  const m = NVIDIA_NAME.exec(model)
  const t = m?.[1]?.replace(/ /g, "-")
  if (t !== undefined && t.length > 1) return t
  return model
    .replace(/^NVIDIA\s+/, "")
    .trim()
    .replace(/ /g, "-")
}

/** Whether `model` is only Ray's token (not the vendor tool's fuller name). */
const isToken = (model: string) => acceleratorToken(model) === model

const norm = (s: string) => s.toLowerCase()

/** Two GPU models that could be the same hardware (see the header); null is "not told": any. */
export const sameModel = (a: string | null, b: string | null): boolean => {
  if (a === null || b === null) return true
  if (isToken(a) || isToken(b)) {
    const x = norm(acceleratorToken(a))
    const y = norm(acceleratorToken(b))
    return x === y || x.startsWith(`${y}-`) || y.startsWith(`${x}-`)
  }
  return a === b
}

/** Whether a node belongs to the class: the GPU count, and the model as far as both tell it. */
export const fitsClass = (cls: HardwareClass, node: NodeRecord): boolean => {
  const n = classOf(node)
  if (n.gpu_count !== cls.gpu_count) return false
  if (cls.gpu_count > 0) return sameModel(cls.gpu_model, n.gpu_model)
  return cls.cpu_model === null || n.cpu_model === null || cls.cpu_model === n.cpu_model
}

/**
 * The class once a node granted tells more (the vendor tool's name where the class had Ray's token,
 * a CPU model where none was told); the class as it was otherwise.
 */
export const refineClass = (cls: HardwareClass, node: NodeRecord): HardwareClass => {
  if (!fitsClass(cls, node)) return cls
  const n = classOf(node)
  if (cls.gpu_count > 0)
    return n.gpu_model !== null &&
      (cls.gpu_model === null || (isToken(cls.gpu_model) && !isToken(n.gpu_model)))
      ? { ...cls, gpu_model: n.gpu_model }
      : cls
  return cls.cpu_model === null && n.cpu_model !== null ? { ...cls, cpu_model: n.cpu_model } : cls
}

const acceleratorOf = (totals: Readonly<Record<string, number>>): string | null => {
  const k = Object.keys(totals).find((r) => r.startsWith("accelerator_type:"))
  return k === undefined ? null : k.slice("accelerator_type:".length)
}

/**
 * The nodes that could serve one of the sweep's leases (alive, the serving slot, at least `gpus`
 * GPUs), as Ray tells them before a lease, with the vendor tool's model, driver and CPU where an
 * earlier engine start of the sweep recorded them (`known`, by Ray node id; Ray's GPU count wins).
 */
export const servingNodes = (
  snapshot: ClusterSnapshot,
  gpus: number,
  known: ReadonlyArray<NodeRecord> = []
): ReadonlyArray<NodeRecord> =>
  snapshot.nodes
    .filter(
      (n) =>
        n.state === "ALIVE" &&
        (n.resourcesTotal.serving_slot ?? 0) >= 1 &&
        Math.round(n.resourcesTotal.GPU ?? 0) >= gpus
    )
    .map((n) => {
      const told = known.filter((k) => k.node_id === n.nodeId).at(-1)
      const accelerator = acceleratorOf(n.resourcesTotal)
      const gpuCount = Math.round(n.resourcesTotal.GPU ?? 0)
      return {
        hostname: told?.hostname ?? (n.hostname || n.nodeName || n.address || null),
        node_id: n.nodeId,
        gpu_count: gpuCount,
        gpu_model:
          told?.gpu_model !== undefined && told.gpu_model !== null && sameModel(told.gpu_model, accelerator)
            ? told.gpu_model
            : accelerator,
        driver: told?.driver ?? null,
        cpu_model: told?.cpu_model ?? null,
        cpu_count: told?.cpu_count ?? null
      }
    })

export interface ClassGroup {
  readonly cls: HardwareClass
  readonly nodes: ReadonlyArray<NodeRecord>
}

/** The serving nodes by class, in the order Ray lists their first node. */
export const classGroups = (nodes: ReadonlyArray<NodeRecord>): ReadonlyArray<ClassGroup> => {
  const groups: Array<{ cls: HardwareClass; nodes: Array<NodeRecord> }> = []
  for (const n of nodes) {
    const g = groups.find((x) => fitsClass(x.cls, n) && fitsClass(classOf(n), x.nodes[0]!))
    if (g === undefined) groups.push({ cls: classOf(n), nodes: [n] })
    else {
      g.nodes.push(n)
      g.cls = refineClass(g.cls, n)
    }
  }
  return groups
}

export type ClassDecision =
  | {
      readonly _tag: "decided"
      readonly cls: HardwareClass
      /** `kept`: the resumed sweep's; `chosen`: --hardware-class; `most`: the class with the most nodes. */
      readonly why: "kept" | "chosen" | "most"
      /** The nodes of the class that could serve now. */
      readonly nodes: ReadonlyArray<NodeRecord>
      /** The other classes present, their nodes left alone. */
      readonly others: ReadonlyArray<ClassGroup>
    }
  /** No node could serve yet (none alive with the slot and GPUs): the first node granted decides. */
  | { readonly _tag: "undecided" }
  /** --hardware-class named no class present: the classes there are. */
  | { readonly _tag: "unknown"; readonly asked: string; readonly present: ReadonlyArray<ClassGroup> }

/**
 * `--hardware-class TEXT` against a class: `L4`, `NVIDIA L4`, `2xL4` / `2 × L4` (the count per node
 * too), `cpu` (no GPU) or the CPU model; case does not matter.
 */
export const matchesChoice = (cls: HardwareClass, text: string): boolean => {
  const t = text.trim()
  const m = /^(\d+)\s*[x×*]\s*(.+)$/i.exec(t)
  const count = m === null ? undefined : Number(m[1])
  const model = (m === null ? t : m[2]!).trim()
  if (count !== undefined && count !== cls.gpu_count) return false
  if (cls.gpu_count === 0)
    return (
      /^(cpu|none|no gpu)$/i.test(model) || (cls.cpu_model !== null && norm(cls.cpu_model) === norm(model))
    )
  if (cls.gpu_model === null) return /^(gpu|any)$/i.test(model)
  // case does not matter: Ray's token is made of the upper-case name
  const token = (x: string) => norm(acceleratorToken(x.toUpperCase()))
  return norm(cls.gpu_model) === norm(model) || token(cls.gpu_model) === token(model)
}

/** The class of the sweep before its first lease (see the header). */
export const decideClass = (
  nodes: ReadonlyArray<NodeRecord>,
  o: { readonly kept?: HardwareClass | undefined; readonly chosen?: string | undefined }
): ClassDecision => {
  const groups = classGroups(nodes)
  if (o.kept !== undefined) {
    const kept = o.kept
    return {
      _tag: "decided",
      cls: kept,
      why: "kept",
      nodes: nodes.filter((n) => fitsClass(kept, n)),
      others: classGroups(nodes.filter((n) => !fitsClass(kept, n)))
    }
  }
  const taking = (g: ClassGroup, why: "chosen" | "most"): ClassDecision => ({
    _tag: "decided",
    cls: g.cls,
    why,
    nodes: g.nodes,
    others: groups.filter((x) => x !== g)
  })
  if (o.chosen !== undefined) {
    const g = groups.find((x) => matchesChoice(x.cls, o.chosen!))
    return g === undefined ? { _tag: "unknown", asked: o.chosen, present: groups } : taking(g, "chosen")
  }
  if (groups.length === 0) return { _tag: "undecided" }
  // the most nodes; a tie to the class Ray lists first (groups keep that order; sort is stable)
  return taking([...groups].sort((a, b) => b.nodes.length - a.nodes.length)[0]!, "most")
}

/** The Ray ids of the nodes a decided sweep leaves alone. */
export const leftAloneOf = (d: ClassDecision): ReadonlyArray<NodeRecord> =>
  d._tag === "decided" ? d.others.flatMap((g) => g.nodes) : []

const names = (nodes: ReadonlyArray<NodeRecord>) => nodes.map((n) => nodeName(n)).join(", ")

/**
 * The decision in words, for the plan, `--dry-run` and the log: "hardware class: 1 × L4 per node
 * (3 nodes: a, b, c; the class with the most nodes that could serve); left alone: 2 × L4 per node
 * (d); --hardware-class chooses another".
 */
export const renderDecision = (d: ClassDecision): string => {
  if (d._tag === "undecided")
    return "hardware class: not decided yet (no node could serve now: alive, with the serving slot and the GPUs asked); the first node granted decides it"
  if (d._tag === "unknown")
    return `--hardware-class ${d.asked}: no node of that class could serve; present: ${d.present.length === 0 ? "none" : d.present.map((g) => `${renderClass(g.cls)} (${names(g.nodes)})`).join("; ")}`
  const why =
    d.why === "kept"
      ? "the sweep's own, kept on resume"
      : d.why === "chosen"
        ? "chosen by --hardware-class"
        : d.others.length === 0
          ? "every node that could serve"
          : "the class with the most nodes that could serve"
  const others =
    d.others.length === 0
      ? ""
      : `; left alone (another class): ${d.others.map((g) => `${renderClass(g.cls)} (${names(g.nodes)})`).join("; ")}${d.why === "most" ? "; --hardware-class chooses another" : ""}`
  return `hardware class: ${renderClass(d.cls)} (${d.nodes.length} node(s)${d.nodes.length === 0 ? "" : `: ${names(d.nodes)}`}; ${why})${others}`
}
