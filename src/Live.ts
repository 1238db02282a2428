/**
 * The live services, composed once: what the `hyperloom` CLI runs on, and what a larger Effect
 * program provides to use hyperloom's programs. Provide it once per program: a second instance
 * would bring a second work permit (WorkGate).
 *
 * Every service module has the same shape: its tag, `layer` (the live layer) and `layerTest(…)`
 * (the test layer); `layerWith(options)` where the live layer takes options.
 */
import { Layer } from "effect"
import * as LiveCluster from "./LiveCluster.js"
import * as NodePlatform from "./NodePlatform.js"
import * as AttemptRunner from "./programs/AttemptRunner.js"
import * as SweepEngine from "./programs/Sweep/Engine.js"
import * as AttemptFiles from "./services/AttemptFiles.js"
import * as Enablement from "./services/Enablement.js"
import * as GroupBridge from "./services/GroupBridge.js"
import * as HostQueue from "./services/HostQueue.js"
import * as LeaseBridge from "./services/LeaseBridge.js"
import * as Settings from "./services/Settings.js"
import * as StateStore from "./services/StateStore.js"
import * as SweepControl from "./services/SweepControl.js"
import * as SweepStore from "./services/SweepStore.js"

/** Every live service over the given settings layer, on Node's platform services. */
const onSettings = <E>(settings: Layer.Layer<Settings.Settings, E>) => {
  const services = Layer.mergeAll(
    LeaseBridge.layer,
    GroupBridge.layer,
    HostQueue.layer,
    StateStore.layer,
    AttemptFiles.layer,
    Enablement.layer,
    SweepStore.layer,
    SweepControl.layer
  ).pipe(
    // the cluster's services (LiveCluster.ts: the ray commands run on them alone) under the others
    Layer.provideMerge(LiveCluster.onSettings(settings)),
    Layer.provide(NodePlatform.layer)
  )
  // The baseline's attempts run the lease program over these same services (one work permit).
  // A sweep's engines run as leases through that same AttemptRunner.
  return SweepEngine.layer.pipe(Layer.provideMerge(AttemptRunner.layer.pipe(Layer.provideMerge(services))))
}

/**
 * Every live service, reading the settings from the environment. Fails to build with
 * InvalidSetting / InvalidAddress on a bad environment.
 */
export const layer = onSettings(Settings.layer)

/** Every live service, with settings overridden from the command line (e.g. --nodes). */
export const layerWith = (overrides: Settings.SettingsOverrides) => onSettings(Settings.layerWith(overrides))

/** Every service a hyperloom program may need. */
export type Services = Layer.Layer.Success<typeof layer>
