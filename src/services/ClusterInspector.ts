/**
 * ClusterInspector: which cluster hyperloom works on, and what it looks like. It resolves the
 * cluster as Ray itself would (RAY_ADDRESS; else the current-cluster file under Ray's temp dir;
 * else the single GCS the host's raylets name in /proc) and answers the programs' snapshots
 * through GcsClient, which owns the GCS transport and decoding.
 */
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { Context, Effect, Either, Layer, Option } from "effect"
import type {
  ClusterUnreachable,
  InvalidAddress,
  MultipleClusters,
  NoClusterFound
} from "../domain/Errors.js"
import {
  type ResolvedCluster,
  type ResolveError,
  readsLocalCluster,
  resolveCluster
} from "../domain/Resolve.js"
import type { ClusterSnapshot } from "../domain/Snapshot.js"
import * as GcsClient from "./GcsClient.js"
import { ProcFs } from "./ProcFs.js"
import { Settings } from "./Settings.js"

export type { ResolvedCluster } from "../domain/Resolve.js"
export type { SnapshotAnswer } from "./GcsClient.js"

export interface ClusterInspectorShape {
  /** Resolves the cluster like Ray does: RAY_ADDRESS, else the current-cluster file, else the single local GCS. */
  readonly resolve: Effect.Effect<ResolvedCluster, InvalidAddress | NoClusterFound | MultipleClusters>
  /** Reads cluster id, nodes, actors, jobs, per-node resources, queued demand and placement groups from the GCS. */
  readonly snapshot: (gcsAddress: string) => Effect.Effect<ClusterSnapshot, ClusterUnreachable>
}

export class ClusterInspector extends Context.Tag("hyperloom/services/ClusterInspector")<
  ClusterInspector,
  ClusterInspectorShape
>() {}

// ---- the live service ------------------------------------------------------------------------

const make = Effect.gen(function* () {
  const settings = yield* Settings
  const procFs = yield* ProcFs
  const gcs = yield* GcsClient.GcsClient
  const currentClusterPath = path.join(settings.rayTempDir, "ray_current_cluster")

  const resolve = Effect.fn("ClusterInspector.resolve")(function* () {
    const address = settings.rayAddress
    if (!readsLocalCluster(address)) {
      return yield* resolveCluster({
        address,
        currentClusterPath,
        currentClusterFile: Option.none(),
        daemons: Either.right([])
      })
    }
    // A missing or unreadable file is "no current cluster", as for Ray itself.
    const currentClusterFile = yield* Effect.tryPromise(() => fs.readFile(currentClusterPath, "utf8")).pipe(
      Effect.option
    )
    const daemons = Option.exists(currentClusterFile, (s) => s.trim() !== "")
      ? Either.right([])
      : yield* procFs.rayDaemons.pipe(
          Effect.mapError((e) => e.message),
          Effect.either
        )
    return yield* resolveCluster({ address, currentClusterPath, currentClusterFile, daemons })
  })()

  return ClusterInspector.of({ resolve, snapshot: gcs.snapshot })
})

/**
 * The live layer: resolves from the settings and /proc, reads snapshots through the GcsClient it
 * is given (Live.ts provides one, whose connection cache the programs and RayCli's probe share).
 */
export const layer: Layer.Layer<ClusterInspector, never, Settings | ProcFs | GcsClient.GcsClient> =
  Layer.effect(ClusterInspector, make)

// ---- the test layer --------------------------------------------------------------------------

export interface TestOptions extends GcsClient.TestOptions {
  /** What `resolve` gives (default: the auto-resolved local head at 192.0.2.2:6379). */
  readonly resolved?: ResolvedCluster | ResolveError
}

export const DEFAULT_TEST_CLUSTER: ResolvedCluster = {
  gcsAddress: "192.0.2.2:6379",
  host: "192.0.2.2",
  port: 6379,
  explicit: false,
  source: "current_cluster_file"
}

/**
 * A test layer returning the given resolution and snapshots (or errors), answered like
 * GcsClient's test layer: unknown addresses fail as nothing answering.
 */
export const layerTest = (options: TestOptions = {}): Layer.Layer<ClusterInspector> => {
  const resolved = options.resolved ?? DEFAULT_TEST_CLUSTER
  return Layer.succeed(
    ClusterInspector,
    ClusterInspector.of({
      resolve: "_tag" in resolved ? Effect.fail(resolved) : Effect.succeed(resolved),
      snapshot: GcsClient.makeTest(options).snapshot
    })
  )
}
