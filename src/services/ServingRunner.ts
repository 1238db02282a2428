/**
 * How the Python runners are started: the Ray installation's Python and `python/ serve` (a serving
 * command) or `python/ sweep` (a sweep's engine) from this package. A reference with the live
 * resolution as its default, so every lease can run one without a layer of its own; tests swap in
 * a fixed argv (`layerTest`).
 */
import { Context, Effect, Layer } from "effect"
import type { RayNotFound } from "../domain/Errors.js"
import { pythonEntry } from "./PackagePaths.js"
import { rayPython } from "./RayInstall.js"
import type { SettingsShape } from "./Settings.js"

/** Which runner: `serve` runs a server then one client; `sweep` keeps the server up for many. */
export type RunnerEntry = "serve" | "sweep"

export interface ServingRunnerShape {
  /** The runner's argv before its flags. */
  readonly argv: (
    settings: Pick<SettingsShape, "rayExecutable" | "rayPython" | "env">,
    entry: RunnerEntry
  ) => Effect.Effect<ReadonlyArray<string>, RayNotFound>
}

export class ServingRunner extends Context.Reference<ServingRunner>()("hyperloom/services/ServingRunner", {
  defaultValue: (): ServingRunnerShape => ({
    argv: (settings, entry) => Effect.map(rayPython(settings), (python) => [python, ...pythonEntry(entry)])
  })
}) {}

/** A runner started as `py <entry>.py` (or `argv` for every entry), whatever the settings say. */
export const layerTest = (argv?: ReadonlyArray<string>): Layer.Layer<never> =>
  Layer.succeed(ServingRunner, {
    argv: (_, entry) => Effect.succeed(argv ?? ["py", `${entry}.py`])
  }) as Layer.Layer<never>
