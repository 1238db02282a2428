/**
 * A sweep's environment record (issue 27, item 14), as a baseline session keeps one
 * (docs/design.md#what-a-serving-session-keeps): `<session>/environment.json`, rewritten each time
 * a combination's engine is ready, with the hyperloom and Ray versions, the node (host, GPUs,
 * accelerator model), the serving engines the node's Python imports with their versions, and that
 * combination's server and client command lines. The report shows it beside the sweep's duration
 * (sweep.json's first and last write). Pure.
 */
import type { EnvironmentRecord, NodeFacts } from "../Serving.js"

export const sweepEnvironmentRecord = (input: {
  readonly now: string
  /** The combination whose engine was ready. */
  readonly combination: number
  readonly hyperloomVersion: string
  readonly requestedGpus: number
  readonly node: NodeFacts | undefined
  readonly server: string
  readonly clientArgv: ReadonlyArray<string>
}): EnvironmentRecord & { readonly combination: number } => {
  const cvd = input.node?.cuda_visible_devices ?? null
  const visible = cvd === null ? [] : cvd.split(",").filter((d) => d.trim() !== "")
  return {
    recorded_at: input.now,
    attempt: 0,
    combination: input.combination,
    hyperloom_version: input.hyperloomVersion,
    ray_version: input.node?.ray_version ?? null,
    node: {
      id: null,
      hostname: input.node?.hostname ?? null,
      gpu_count: visible.length > 0 ? visible.length : input.requestedGpus,
      cuda_visible_devices: cvd,
      accelerators: input.node?.gpus ?? []
    },
    server_argv: ["sh", "-c", input.server],
    client_argv: input.clientArgv,
    engines: input.node?.engines ?? {},
    python: input.node?.python ?? null
  }
}

/** `1 h 02 min`, `3 min 20 s`, `42 s`: how long from the sweep's first write to its last. */
export const sweepDuration = (createdAt: string, updatedAt: string): string => {
  const s = Math.max(0, Math.round((Date.parse(updatedAt) - Date.parse(createdAt)) / 1000))
  if (!Number.isFinite(s)) return "–"
  if (s >= 3600)
    return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")} min`
  if (s >= 60) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`
  return `${s} s`
}
