/**
 * The live services, composed once: what the `hyperloom` CLI runs on, and what a larger Effect
 * program provides to use hyperloom's programs. Provide it once per program: a second instance
 * would bring a second work permit (WorkGate).
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Effect, Layer } from "effect"
import * as AttemptFiles from "./services/AttemptFiles.js"
import * as ClusterInspector from "./services/ClusterInspector.js"
import * as Enablement from "./services/Enablement.js"
import * as GroupBridge from "./services/GroupBridge.js"
import * as LeaseBridge from "./services/LeaseBridge.js"
import * as ProcFs from "./services/ProcFs.js"
import * as RayCli from "./services/RayCli.js"
import * as RayInstall from "./services/RayInstall.js"
import * as Settings from "./services/Settings.js"
import { StateStore } from "./services/StateStore.js"
import { WorkGate } from "./services/WorkGate.js"

/** RayCli over the `ray` executable the settings point at. */
export const rayCliLayer = Layer.effect(
  RayCli.RayCli,
  Effect.flatMap(Settings.Settings, (s) =>
    RayCli.makeRayCli({ executable: RayInstall.rayExecutable(s), statusTimeoutSec: s.statusTimeoutSec })
  )
)

/**
 * Every live service, reading the settings from the environment (with `overrides`, e.g. the
 * CLI's --nodes). Fails to build with InvalidSetting / InvalidAddress on a bad environment.
 */
export const layer = (overrides: Settings.SettingsOverrides = {}) => {
  const procFs = ProcFs.layerLive()
  const inspector = ClusterInspector.layerLive.pipe(Layer.provide(procFs))
  return Layer.mergeAll(
    rayCliLayer,
    procFs,
    inspector,
    WorkGate.Default,
    LeaseBridge.layer,
    GroupBridge.layer,
    StateStore.Live,
    AttemptFiles.layer,
    Enablement.layer
  ).pipe(Layer.provideMerge(Settings.layerFromEnv(overrides)), Layer.provide(NodeContext.layer))
}
