import { Context, Effect, Either, Layer } from "effect"
import { parseNodeCount, parseRayAddress, type RayAddress } from "../domain/Address.js"
import { type InvalidAddress, InvalidSetting } from "../domain/Errors.js"

/**
 * Everything hyperloom reads from its environment, read once and validated, so that a bad value
 * is one clear error up front and programs never touch `process.env`.
 */
export interface SettingsShape {
  /** RAY_ADDRESS as parsed (SPEC §2). */
  readonly rayAddress: RayAddress
  /** Node count of the run: HYPERLOOM_NODES or --nodes; >= 2 is a multi-node run. */
  readonly nodes: number
  /** HYPERLOOM_RAY_STATUS_TIMEOUT_SEC, default 5. */
  readonly statusTimeoutSec: number
  /** HYPERLOOM_RAY_START_TIMEOUT_SEC: how long `ray start` may take, default 120. */
  readonly startTimeoutSec: number
  /** HL_RAY_HEAD_PORT, default 6379. */
  readonly headPort: number
  /** HYPERLOOM_RAY: the `ray` executable to use. */
  readonly rayExecutable: string | undefined
  /** HYPERLOOM_RAY_PYTHON: the Python of the Ray installation (else the `ray` shebang's). */
  readonly rayPython: string | undefined
  /** HYPERLOOM_RAY_NUM_GPUS: GPUs to declare when (re)starting a head. */
  readonly numGpusOverride: number | undefined
  /** Ray's temp dir root (RAY_TMPDIR, default /tmp/ray); the repair lock lives next to it. */
  readonly rayTempDir: string
  /** Bearer token when RAY_AUTH_MODE=token. */
  readonly authMode: string | undefined
  readonly authToken: string | undefined
  readonly authTokenPath: string | undefined
  /** The environment the settings were read from, for children that need it (the lease command). */
  readonly env: Readonly<Record<string, string | undefined>>
}

export class Settings extends Context.Tag("hyperloom/services/Settings")<Settings, SettingsShape>() {}

export interface SettingsOverrides {
  readonly nodes?: number | undefined
}

const positiveNumber = (name: string, raw: string | undefined, fallback: number) => {
  const v = (raw ?? "").trim()
  if (v === "") return Either.right(fallback)
  const n = Number(v)
  return Number.isFinite(n) && n > 0
    ? Either.right(n)
    : Either.left(new InvalidSetting({ name, value: v, reason: "expected a positive number" }))
}

const wholeNumber = (name: string, raw: string | undefined, min: number, max: number) => {
  const v = (raw ?? "").trim()
  if (v === "") return Either.right(undefined)
  const n = Number(v)
  return /^\d+$/.test(v) && n >= min && n <= max
    ? Either.right(n)
    : Either.left(
        new InvalidSetting({ name, value: v, reason: `expected a whole number from ${min} to ${max}` })
      )
}

/** Reads and validates the settings from an environment (pure: tests pass their own). */
export const readSettings = (
  env: Readonly<Record<string, string | undefined>>,
  overrides: SettingsOverrides = {}
): Effect.Effect<SettingsShape, InvalidSetting | InvalidAddress> =>
  Effect.gen(function* () {
    const rayAddress = yield* parseRayAddress(env.RAY_ADDRESS)
    const nodes = overrides.nodes ?? (yield* parseNodeCount("HYPERLOOM_NODES", env.HYPERLOOM_NODES))
    const statusTimeoutSec = yield* positiveNumber(
      "HYPERLOOM_RAY_STATUS_TIMEOUT_SEC",
      env.HYPERLOOM_RAY_STATUS_TIMEOUT_SEC,
      5
    )
    const startTimeoutSec = yield* positiveNumber(
      "HYPERLOOM_RAY_START_TIMEOUT_SEC",
      env.HYPERLOOM_RAY_START_TIMEOUT_SEC,
      120
    )
    const headPort = (yield* wholeNumber("HL_RAY_HEAD_PORT", env.HL_RAY_HEAD_PORT, 1, 65535)) ?? 6379
    const numGpusOverride = yield* wholeNumber("HYPERLOOM_RAY_NUM_GPUS", env.HYPERLOOM_RAY_NUM_GPUS, 0, 1024)
    const nonEmpty = (v: string | undefined) => (v !== undefined && v.trim() !== "" ? v.trim() : undefined)
    const tmp = nonEmpty(env.RAY_TMPDIR)
    return {
      rayAddress,
      nodes,
      statusTimeoutSec,
      startTimeoutSec,
      headPort,
      rayExecutable: nonEmpty(env.HYPERLOOM_RAY),
      rayPython: nonEmpty(env.HYPERLOOM_RAY_PYTHON),
      numGpusOverride,
      rayTempDir: tmp !== undefined ? `${tmp.replace(/\/+$/, "")}/ray` : "/tmp/ray",
      authMode: nonEmpty(env.RAY_AUTH_MODE),
      authToken: nonEmpty(env.RAY_AUTH_TOKEN),
      authTokenPath: nonEmpty(env.RAY_AUTH_TOKEN_PATH),
      env
    }
  })

/** The live layer: the settings of this process's environment. */
export const layer: Layer.Layer<Settings, InvalidSetting | InvalidAddress> = Layer.effect(
  Settings,
  Effect.suspend(() => readSettings(process.env))
)

/** The live layer with overrides from the command line (e.g. --nodes). */
export const layerWith = (
  overrides: SettingsOverrides
): Layer.Layer<Settings, InvalidSetting | InvalidAddress> =>
  Layer.effect(
    Settings,
    Effect.suspend(() => readSettings(process.env, overrides))
  )

const testSettings = (fields: Partial<SettingsShape> = {}): SettingsShape => ({
  rayAddress: { _tag: "Auto" },
  nodes: 1,
  statusTimeoutSec: 5,
  startTimeoutSec: 120,
  headPort: 6379,
  rayExecutable: undefined,
  rayPython: undefined,
  numGpusOverride: undefined,
  rayTempDir: "/tmp/ray",
  authMode: undefined,
  authToken: undefined,
  authTokenPath: undefined,
  env: {},
  ...fields
})

/** Settings for tests: the defaults of an empty environment, with `fields` replaced. */
export const layerTest = (fields: Partial<SettingsShape> = {}): Layer.Layer<Settings> =>
  Layer.succeed(Settings, testSettings(fields))
