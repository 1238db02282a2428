/**
 * The live services of the cluster commands (`hyperloom ray status|doctor|ensure|repair`): the
 * settings, the GCS client and the inspector over it, /proc, the `ray` CLI, the work permit and
 * the GPU scan. Live.ts builds every other service on this same composition; the ray commands run
 * on it alone, so their cold start neither loads nor builds the lease, baseline and sweep services.
 */
import { Layer } from "effect"
import * as NodePlatform from "./NodePlatform.js"
import * as ClusterInspector from "./services/ClusterInspector.js"
import * as GcsClient from "./services/GcsClient.js"
import * as GpuScan from "./services/GpuScan.js"
import * as ProcFs from "./services/ProcFs.js"
import * as RayCli from "./services/RayCli.js"
import * as Settings from "./services/Settings.js"
import * as WorkGate from "./services/WorkGate.js"

/** The cluster's services over the given settings layer, on Node's platform services. */
export const onSettings = <E>(settings: Layer.Layer<Settings.Settings, E>) =>
  Layer.mergeAll(RayCli.layer, ProcFs.layer, WorkGate.layer, GpuScan.layer).pipe(
    // one inspector, over one GCS client (one connection cache), for the programs and RayCli's probe
    Layer.provideMerge(ClusterInspector.layer.pipe(Layer.provide(ProcFs.layer))),
    Layer.provideMerge(GcsClient.layer),
    Layer.provideMerge(settings),
    Layer.provide(NodePlatform.layer)
  )

/** The cluster's services, with settings overridden from the command line (e.g. --nodes). */
export const layerWith = (overrides: Settings.SettingsOverrides) => onSettings(Settings.layerWith(overrides))

/** The services a cluster command may need. */
export type Services = Layer.Layer.Success<ReturnType<typeof layerWith>>
