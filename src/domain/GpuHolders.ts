/**
 * Who holds a GPU (SPEC §13 "Clean GPUs"): the pure half of the clean-GPU gate. Before a leased
 * command starts, the processes outside the lease that hold the leased GPUs are looked for in two
 * ways, both parsed here:
 *
 * - open device files: a process whose `/proc/<pid>/fd/*` points at a GPU's own device file
 *   (`/dev/nvidia<N>` for NVIDIA GPU N, `/dev/dri/renderD<M>` for a DRM render node, `/dev/kfd`
 *   for AMD's compute interface, which every AMD GPU shares) holds it. `/dev/nvidiactl` and
 *   `/dev/nvidia-uvm` are opened by every CUDA process whatever its GPU and say nothing about one.
 * - the vendors' tools where installed: `nvidia-smi --query-compute-apps` (CSV) and
 *   `amd-smi process --json`; formats in test/fixtures/gpu/README.md.
 *
 * What is done with a holder is policy: the gate waits and then fails with class `gpu_busy`
 * naming each holder; it never kills one.
 */

/** One process holding one GPU, with what is known of it. */
export interface GpuHolder {
  readonly pid: number
  /** The GPU index (as CUDA_VISIBLE_DEVICES names it); `undefined` for a device shared by all (`/dev/kfd`). */
  readonly gpu: number | undefined
  /** How it was seen: the device file's path, or the tool that reported it. */
  readonly via: string
  readonly user?: string | undefined
  readonly command?: string | undefined
  /** GPU memory in MiB, where the tool reports it. */
  readonly memoryMiB?: number | undefined
}

/** The GPU indices in CUDA_VISIBLE_DEVICES (`"0,2"`); UUIDs and MIG names are not indices and are skipped. */
export const visibleGpuIndices = (cudaVisibleDevices: string | undefined): ReadonlyArray<number> =>
  (cudaVisibleDevices ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => /^[0-9]+$/.test(s))
    .map(Number)

/**
 * What a device file that a process has open says about the leased GPUs: the GPU it belongs to,
 * `"shared"` for `/dev/kfd` (any AMD GPU), or `undefined` when it is no GPU's own device.
 * Render nodes are numbered from 128 in the order the DRM driver probed the cards; that order is
 * taken as the GPU index (the usual case on a single-vendor host).
 */
export const gpuOfDevicePath = (target: string): number | "shared" | undefined => {
  const nvidia = /^\/dev\/nvidia([0-9]+)$/.exec(target)
  if (nvidia) return Number(nvidia[1])
  const render = /^\/dev\/dri\/renderD([0-9]+)$/.exec(target)
  if (render) return Number(render[1]) - 128 >= 0 ? Number(render[1]) - 128 : undefined
  if (target === "/dev/kfd") return "shared"
  return undefined
}

/** One line of `nvidia-smi --query-compute-apps=pid,process_name,gpu_uuid,used_memory --format=csv,noheader`. */
export interface NvidiaComputeApp {
  readonly pid: number
  readonly processName: string | undefined
  readonly gpuUuid: string
  readonly usedMemoryMiB: number | undefined
}

const notAvailable = (v: string) => v === "" || /^\[.*\]$/.test(v)

/** Parses the compute-apps CSV; lines that are not four fields with a numeric pid are skipped. */
export const parseNvidiaComputeApps = (csv: string): ReadonlyArray<NvidiaComputeApp> =>
  csv
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "")
    .flatMap((line) => {
      const fields = line.split(",").map((f) => f.trim())
      if (fields.length < 4) return []
      // A process name may itself hold ", ": pid first, uuid and memory last, the name between.
      const pid = fields[0]!
      const memory = fields[fields.length - 1]!
      const uuid = fields[fields.length - 2]!
      const name = fields.slice(1, -2).join(", ")
      if (!/^[0-9]+$/.test(pid)) return []
      const mib = /^([0-9]+)\s*MiB$/.exec(memory)
      return [
        {
          pid: Number(pid),
          processName: notAvailable(name) ? undefined : name,
          gpuUuid: uuid,
          usedMemoryMiB: mib ? Number(mib[1]) : undefined
        }
      ]
    })

/** `nvidia-smi --query-gpu=index,uuid --format=csv,noheader` → uuid → index. */
export const parseNvidiaGpuIndex = (csv: string): ReadonlyMap<string, number> =>
  new Map(
    csv
      .split("\n")
      .map((line) => line.split(",").map((f) => f.trim()))
      .filter((f) => f.length === 2 && /^[0-9]+$/.test(f[0]!) && f[1] !== "")
      .map((f) => [f[1]!, Number(f[0])] as const)
  )

/** The holders nvidia-smi reports, by GPU index (an app on a GPU the index map lacks is kept with `gpu` undefined). */
export const holdersFromNvidiaSmi = (
  apps: ReadonlyArray<NvidiaComputeApp>,
  indexOf: ReadonlyMap<string, number>
): ReadonlyArray<GpuHolder> =>
  apps.map((a) => ({
    pid: a.pid,
    gpu: indexOf.get(a.gpuUuid),
    via: "nvidia-smi",
    command: a.processName,
    memoryMiB: a.usedMemoryMiB
  }))

const MIB = 1024 * 1024
const bytesOf = (v: unknown): number | undefined => {
  if (typeof v === "number") return v
  if (typeof v !== "object" || v === null) return undefined
  const { value, unit } = v as { value?: unknown; unit?: unknown }
  if (typeof value !== "number") return undefined
  const scale: Record<string, number> = {
    B: 1,
    KB: 1024,
    KiB: 1024,
    MB: MIB,
    MiB: MIB,
    GB: 1024 * MIB,
    GiB: 1024 * MIB
  }
  return typeof unit === "string" && unit in scale ? value * scale[unit]! : value
}

/**
 * Parses `amd-smi process --json`. `process_info` is an object per process, or the string
 * `"No running processes detected"` on an idle GPU (no holder). `undefined` when the text is not
 * that document at all (so a caller can tell "idle" from "could not tell").
 */
export const parseAmdSmiProcesses = (json: string): ReadonlyArray<GpuHolder> | undefined => {
  let doc: unknown
  try {
    doc = JSON.parse(json)
  } catch {
    return undefined
  }
  const gpus = Array.isArray(doc) ? doc : (doc as { gpu_data?: unknown } | null)?.gpu_data
  if (!Array.isArray(gpus)) return undefined
  return gpus.flatMap((g: unknown) => {
    const { gpu, process_list } = (g ?? {}) as { gpu?: unknown; process_list?: unknown }
    if (!Array.isArray(process_list)) return []
    return process_list.flatMap((p: unknown): GpuHolder[] => {
      const info = (p as { process_info?: unknown } | null)?.process_info
      if (typeof info !== "object" || info === null) return []
      const { pid, name, mem_usage, memory_usage } = info as {
        pid?: unknown
        name?: unknown
        mem_usage?: unknown
        memory_usage?: { vram_mem?: unknown }
      }
      if (typeof pid !== "number" || !Number.isInteger(pid) || pid <= 0) return []
      const bytes = bytesOf(memory_usage?.vram_mem) ?? bytesOf(mem_usage)
      return [
        {
          pid,
          gpu: typeof gpu === "number" ? gpu : undefined,
          via: "amd-smi",
          command: typeof name === "string" && name.trim() !== "" ? name : undefined,
          memoryMiB: bytes === undefined ? undefined : Math.round(bytes / MIB)
        }
      ]
    })
  })
}

/**
 * The holders that matter to a lease on `gpus`: on one of them (or on a device all GPUs share),
 * and not one of the lease's own processes. Reports of one pid on one GPU are merged, the richest
 * first (a tool's memory figure beside the device file's path).
 */
export const foreignHolders = (
  holders: ReadonlyArray<GpuHolder>,
  gpus: ReadonlyArray<number>,
  own: ReadonlySet<number>
): ReadonlyArray<GpuHolder> => {
  const merged = new Map<string, GpuHolder>()
  for (const h of holders) {
    if (own.has(h.pid)) continue
    if (h.gpu !== undefined && !gpus.includes(h.gpu)) continue
    if (h.gpu === undefined && h.via !== "/dev/kfd") continue
    const key = `${h.pid}/${h.gpu ?? "*"}`
    const before = merged.get(key)
    merged.set(
      key,
      before === undefined
        ? h
        : {
            ...before,
            via: before.via.includes(h.via) ? before.via : `${before.via}, ${h.via}`,
            user: before.user ?? h.user,
            command: before.command ?? h.command,
            memoryMiB: before.memoryMiB ?? h.memoryMiB
          }
    )
  }
  return [...merged.values()].sort((a, b) => (a.gpu ?? -1) - (b.gpu ?? -1) || a.pid - b.pid)
}

/** One holder in words: `GPU 1: pid 51007 (user alice, VLLM::EngineCore, 71234 MiB; via nvidia-smi)`. */
export const describeGpuHolder = (h: GpuHolder): string => {
  const facts = [
    h.user === undefined ? undefined : `user ${h.user}`,
    h.command,
    h.memoryMiB === undefined ? undefined : `${h.memoryMiB} MiB`
  ].filter((f): f is string => f !== undefined)
  const where = h.gpu === undefined ? "all AMD GPUs (/dev/kfd)" : `GPU ${h.gpu}`
  return `${where}: pid ${h.pid} (${[...facts, `via ${h.via}`].join(", ")})`
}

/** The `gpu_busy` error text: marker first, every holder, how long it waited, and that nothing was killed. */
export const gpuBusyMessage = (holders: ReadonlyArray<GpuHolder>, waitedSec: number): string =>
  `gpu_busy: the leased GPU(s) are in use by process(es) outside this lease after waiting ${waitedSec} s (--gpu-clean-timeout): ${holders.map(describeGpuHolder).join("; ")}; hyperloom does not kill them: stop them, or wait until they have freed the GPU`
