import { Context, type Layer } from "effect"
import type { InvalidAddress, InvalidSetting } from "../domain/Errors.js"
import type { AttemptFiles } from "../services/AttemptFiles.js"
import type { ClusterInspector } from "../services/ClusterInspector.js"
import type { Enablement } from "../services/Enablement.js"
import type { GroupBridge } from "../services/GroupBridge.js"
import type { LeaseBridge } from "../services/LeaseBridge.js"
import type { ProcFs } from "../services/ProcFs.js"
import type { RayCli } from "../services/RayCli.js"
import type { Settings, SettingsOverrides } from "../services/Settings.js"
import type { StateStore } from "../services/StateStore.js"
import type { WorkGate } from "../services/WorkGate.js"

/** The services a command's program may use. */
export type AppServices =
  | Settings
  | RayCli
  | ProcFs
  | ClusterInspector
  | WorkGate
  | LeaseBridge
  | GroupBridge
  | StateStore
  | AttemptFiles
  | Enablement

/**
 * Builds the services for one command run from the command's own overrides (e.g. --nodes).
 * main.ts provides the live one; CLI tests provide fakes. Handlers build it only when they run,
 * so `--help` builds nothing.
 */
export class AppLayer extends Context.Tag("hyperloom/cli/AppLayer")<
  AppLayer,
  (overrides: SettingsOverrides) => Layer.Layer<AppServices, InvalidSetting | InvalidAddress>
>() {}
