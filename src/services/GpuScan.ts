/**
 * GpuScan: who holds this host's GPUs, for `ray doctor` (docs/design.md#clean-gpus). It asks the
 * module the lease's supervisor gates with (`python -I <package>/python gpus --json`,
 * python/hyperloom/gpus.py), so each format (the /proc fd links, nvidia-smi's CSV, amd-smi's
 * JSON) keeps one parser. Only the presence check is here: a host with no GPU device file and no
 * vendor tool on PATH is not scanned (no Python started), which keeps doctor's cost there as it was.
 */

import * as fs from "node:fs"
import * as path from "node:path"
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import { Context, Effect, Layer, Schema } from "effect"
import { type GpuHolder, GpuHolderJson } from "../domain/GpuHolders.js"
import { pythonEntry } from "./PackagePaths.js"
import { rayPython } from "./RayInstall.js"
import { Settings } from "./Settings.js"
import { runBounded } from "./Subprocess.js"

export interface GpuScanReport {
  /** False when the host has no GPU device file and no vendor tool: nothing to scan. */
  readonly scanned: boolean
  readonly holders: ReadonlyArray<GpuHolder>
  /** Processes whose descriptors could not be read (another user's, without root). */
  readonly unreadable: number
  /** Why the scan could not be made (no Python of the Ray installation, a bad answer). */
  readonly error: string | null
}

export interface GpuScanShape {
  /** Never fails: a scan that cannot be made says why in `error`. */
  readonly scan: Effect.Effect<GpuScanReport>
}

export class GpuScan extends Context.Tag("hyperloom/services/GpuScan")<GpuScan, GpuScanShape>() {}

const Answer = Schema.parseJson(
  Schema.Struct({ holders: Schema.Array(GpuHolderJson), unreadable: Schema.Number })
)

const SCAN_TIMEOUT_SEC = 30

/** Whether `dev` holds a GPU device file, or PATH a vendor tool (what python/hyperloom/gpus.py scans). */
export const hasGpuDevices = (env: Readonly<Record<string, string | undefined>>, dev = "/dev"): boolean => {
  const list = (dir: string) => {
    try {
      return fs.readdirSync(dir)
    } catch {
      return []
    }
  }
  if (list(dev).some((n) => /^nvidia[0-9]+$/.test(n) || n === "kfd")) return true
  if (list(path.join(dev, "dri")).some((n) => n.startsWith("renderD"))) return true
  return (env.PATH ?? "")
    .split(":")
    .some((d) => d !== "" && ["nvidia-smi", "amd-smi"].some((t) => fs.existsSync(path.join(d, t))))
}

const make = Effect.gen(function* () {
  const settings = yield* Settings
  const executor = yield* CommandExecutor.CommandExecutor
  const none: GpuScanReport = { scanned: false, holders: [], unreadable: 0, error: null }
  const scan = Effect.gen(function* () {
    if (!hasGpuDevices(settings.env)) return none
    const python = yield* rayPython(settings)
    const run = yield* runBounded([python, "-I", ...pythonEntry("gpus"), "--json"], {
      timeoutSec: SCAN_TIMEOUT_SEC,
      env: settings.env
    }).pipe(Effect.provideService(CommandExecutor.CommandExecutor, executor))
    if (run.timedOut)
      return { ...none, scanned: true, error: `the GPU scan did not finish in ${SCAN_TIMEOUT_SEC} s` }
    const answer = Schema.decodeUnknownEither(Answer)(run.stdout)
    if (answer._tag === "Left" || run.exitCode !== 0) {
      return {
        ...none,
        scanned: true,
        error: `the GPU scan failed: ${run.stderr.trim().split("\n").at(-1) ?? ""}`
      }
    }
    return { scanned: true, holders: answer.right.holders, unreadable: answer.right.unreadable, error: null }
  }).pipe(
    Effect.catchAll((e) =>
      Effect.succeed({ ...none, scanned: true, error: `the GPU scan failed: ${e.message}` })
    ),
    Effect.withSpan("GpuScan.scan")
  )
  return GpuScan.of({ scan })
})

/** The live service: needs Settings and a CommandExecutor. */
export const layer: Layer.Layer<GpuScan, never, Settings | CommandExecutor.CommandExecutor> = Layer.effect(
  GpuScan,
  make
)

/** A fixed answer (default: nothing to scan). */
export const layerTest = (report: Partial<GpuScanReport> = {}): Layer.Layer<GpuScan> =>
  Layer.succeed(
    GpuScan,
    GpuScan.of({
      scan: Effect.succeed({ scanned: false, holders: [], unreadable: 0, error: null, ...report })
    })
  )
