/**
 * Who holds a GPU (docs/design.md#clean-gpus), as hyperloom's Python side reports it. The scanning
 * and every format it reads (the `/proc/<pid>/fd` links to `/dev/nvidia<N>`,
 * `/dev/dri/renderD<M>`, `/dev/kfd`; `nvidia-smi --query-compute-apps` CSV; `amd-smi process
 * --json`) live in one place, python/hyperloom/gpus.py: the gate must run on the node that runs
 * the command (a group rank on another node checks its own), which only the lease's supervisor
 * does, and `ray doctor` asks the same module (`python -I PYDIR gpus --json`) for the local view
 * rather than keeping a second parser of the same formats here.
 *
 * Here: the holder records Python sends (its `gpu_busy` event, its doctor document), the
 * `gpu_busy` failure and its words. What is done with a holder is policy: the gate waits up to
 * `--gpu-clean-timeout` and then fails naming each holder; it never kills one.
 */
import { Data, Schema } from "effect"
import { shortId } from "./Text.js"

/** The gate's default wait (`--gpu-clean-timeout`): VRAM is freed asynchronously after a crash. */
export const DEFAULT_GPU_CLEAN_TIMEOUT_SEC = 30

/** One process holding one GPU, as python/hyperloom/gpus.py reports it (snake_case, its JSON). */
export const GpuHolderJson = Schema.Struct({
  pid: Schema.Number,
  /** The GPU index (as CUDA_VISIBLE_DEVICES names it); null for `/dev/kfd`, which every AMD GPU shares. */
  gpu: Schema.NullOr(Schema.Number),
  /** How it was seen: the device file(s), and/or the tool that listed it (`/dev/nvidia1, nvidia-smi`). */
  via: Schema.String,
  user: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null }),
  command: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null }),
  /** GPU memory in MiB, where a tool reports it. */
  memory_mib: Schema.optionalWith(Schema.NullOr(Schema.Number), { default: () => null }),
  /** False for a pid a tool lists that this node's /proc does not show (gone, or another PID namespace). */
  alive: Schema.optionalWith(Schema.Boolean, { default: () => true })
})
export type GpuHolder = typeof GpuHolderJson.Type

/** One holder in words: `GPU 1: pid 51007 (user alice, VLLM::EngineCore, 71234 MiB, via nvidia-smi)`. */
export const describeGpuHolder = (h: GpuHolder): string => {
  const facts = [
    h.user === null ? undefined : `user ${h.user}`,
    h.command ?? undefined,
    h.memory_mib === null ? undefined : `${h.memory_mib} MiB`
  ].filter((f): f is string => f !== undefined)
  const where = h.gpu === null ? "all AMD GPUs (/dev/kfd)" : `GPU ${h.gpu}`
  return `${where}: pid ${h.pid} (${[...facts, `via ${h.via}`].join(", ")})`
}

/** The `gpu_busy` error text: marker first, every holder, how long it waited, and that nothing was killed. */
export const gpuBusyMessage = (holders: ReadonlyArray<GpuHolder>, waitedSec: number): string =>
  `gpu_busy: the leased GPU(s) are in use by process(es) outside this lease after waiting ${waitedSec} s (--gpu-clean-timeout): ${holders.map(describeGpuHolder).join("; ")}; hyperloom does not kill them: stop them, or wait until they have freed the GPU`

/**
 * The lease's GPUs stayed held by processes outside it for `--gpu-clean-timeout`
 * (docs/design.md#clean-gpus): the command never started (in a group: no rank's did); every holder
 * is named, none was signalled.
 */
export class GpuBusy extends Data.TaggedError("GpuBusy")<{
  readonly holders: ReadonlyArray<GpuHolder>
  readonly waitedSec: number
  /** The group rank whose node found them (serving groups); undefined for a single lease. */
  readonly rank?: number | undefined
  /** The node that found them (the holders' pids are that node's), when the bridge said. */
  readonly nodeId?: string | undefined
  readonly nodeAddress?: string | undefined
}> {
  override get message(): string {
    const node =
      this.nodeId === undefined
        ? undefined
        : this.nodeAddress === undefined
          ? `on node ${shortId(this.nodeId)}`
          : `on node ${this.nodeAddress} (${shortId(this.nodeId)})`
    const where = [this.rank === undefined ? undefined : `rank ${this.rank}`, node].filter(
      (w) => w !== undefined
    )
    const text = gpuBusyMessage(this.holders, this.waitedSec)
    return where.length === 0 ? text : text.replace(/^gpu_busy: /, `gpu_busy: ${where.join(" ")}: `)
  }
  /** The failure class (docs/design.md#clean-gpus). */
  get class(): "gpu_busy" {
    return "gpu_busy"
  }
}
