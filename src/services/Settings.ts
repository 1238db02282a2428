import * as nodePath from "node:path"
import { Config, ConfigProvider, Context, Effect, Either, Layer, Option, Redacted } from "effect"
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
  /** A group's rank directory (`--rank-cwd`); undefined: DEFAULT_RANK_CWD (SPEC §11). */
  readonly rankCwd?: string | undefined
  /** Variables a group's ranks get besides HYPERLOOM_* (`--rank-env NAME`…, SPEC §11). */
  readonly rankEnv?: ReadonlyArray<string> | undefined
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
  /** Ray's temp dir (`<RAY_TMPDIR, else TMPDIR, else /tmp>/ray`), resolved as the installed Ray does. */
  readonly rayTempDir: string
  /** RAY_AUTH_MODE; with `token`, every GCS call carries `authorization: Bearer <token>`. */
  readonly authMode: string | undefined
  /** RAY_AUTH_TOKEN: a secret, redacted wherever settings are shown or logged. */
  readonly authToken: Redacted.Redacted<string> | undefined
  readonly authTokenPath: string | undefined
  /** The environment the settings were read from, for children that need it (the lease command). */
  readonly env: Readonly<Record<string, string | undefined>>
}

export class Settings extends Context.Tag("hyperloom/services/Settings")<Settings, SettingsShape>() {}

export interface SettingsOverrides {
  readonly nodes?: number | undefined
  readonly rankCwd?: string | undefined
  readonly rankEnv?: ReadonlyArray<string> | undefined
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

/**
 * Ray's temp dir exactly as the installed Ray resolves it (Ray 2.58, `ray/_common/utils.py`
 * `get_default_system_temp_dir`): `RAY_TMPDIR` if it is set, else on Linux `TMPDIR` if it is set,
 * else `/tmp`; then `ray`. "Set" is `in os.environ`: an empty value counts (and gives a relative
 * `ray`, as it does for Ray). The current-cluster file and the session live under it.
 */
export const rayTempDirFor = (env: Readonly<Record<string, string | undefined>>): string => {
  const base =
    env.RAY_TMPDIR !== undefined
      ? env.RAY_TMPDIR
      : process.platform === "linux" && env.TMPDIR !== undefined
        ? env.TMPDIR
        : "/tmp"
  return nodePath.posix.join(base, "ray")
}

/** One variable as a string, or undefined when it is not set (a ConfigError is a defect: there is none to expect). */
const variable = (name: string) => Config.option(Config.string(name)).pipe(Config.map(Option.getOrUndefined))

/**
 * The variables hyperloom reads, as an Effect Config: from the environment in the live layer, from
 * `ConfigProvider.fromMap` in tests. The auth token is a secret: `Redacted`, never logged.
 */
export const variables = Config.all({
  RAY_ADDRESS: variable("RAY_ADDRESS"),
  HYPERLOOM_NODES: variable("HYPERLOOM_NODES"),
  HYPERLOOM_RAY_STATUS_TIMEOUT_SEC: variable("HYPERLOOM_RAY_STATUS_TIMEOUT_SEC"),
  HYPERLOOM_RAY_START_TIMEOUT_SEC: variable("HYPERLOOM_RAY_START_TIMEOUT_SEC"),
  HL_RAY_HEAD_PORT: variable("HL_RAY_HEAD_PORT"),
  HYPERLOOM_RAY: variable("HYPERLOOM_RAY"),
  HYPERLOOM_RAY_PYTHON: variable("HYPERLOOM_RAY_PYTHON"),
  HYPERLOOM_RAY_NUM_GPUS: variable("HYPERLOOM_RAY_NUM_GPUS"),
  RAY_TMPDIR: variable("RAY_TMPDIR"),
  TMPDIR: variable("TMPDIR"),
  RAY_AUTH_MODE: variable("RAY_AUTH_MODE"),
  RAY_AUTH_TOKEN: Config.option(Config.redacted("RAY_AUTH_TOKEN")).pipe(Config.map(Option.getOrUndefined)),
  RAY_AUTH_TOKEN_PATH: variable("RAY_AUTH_TOKEN_PATH")
})

/**
 * Reads the settings through Config and validates them (a bad value is one InvalidSetting or
 * InvalidAddress naming the variable). `env` is the environment handed to children (the leased
 * command); the live layer passes `process.env`.
 */
export const load = (
  env: Readonly<Record<string, string | undefined>>,
  overrides: SettingsOverrides = {}
): Effect.Effect<SettingsShape, InvalidSetting | InvalidAddress> =>
  Effect.gen(function* () {
    const v = yield* Effect.orDie(variables)
    const rayAddress = yield* parseRayAddress(v.RAY_ADDRESS)
    const nodes = overrides.nodes ?? (yield* parseNodeCount("HYPERLOOM_NODES", v.HYPERLOOM_NODES))
    const statusTimeoutSec = yield* positiveNumber(
      "HYPERLOOM_RAY_STATUS_TIMEOUT_SEC",
      v.HYPERLOOM_RAY_STATUS_TIMEOUT_SEC,
      5
    )
    const startTimeoutSec = yield* positiveNumber(
      "HYPERLOOM_RAY_START_TIMEOUT_SEC",
      v.HYPERLOOM_RAY_START_TIMEOUT_SEC,
      120
    )
    const headPort = (yield* wholeNumber("HL_RAY_HEAD_PORT", v.HL_RAY_HEAD_PORT, 1, 65535)) ?? 6379
    const numGpusOverride = yield* wholeNumber("HYPERLOOM_RAY_NUM_GPUS", v.HYPERLOOM_RAY_NUM_GPUS, 0, 1024)
    const nonEmpty = (x: string | undefined) => (x !== undefined && x.trim() !== "" ? x.trim() : undefined)
    const token = v.RAY_AUTH_TOKEN
    return {
      rayAddress,
      nodes,
      rankCwd: overrides.rankCwd,
      rankEnv: overrides.rankEnv,
      statusTimeoutSec,
      startTimeoutSec,
      headPort,
      rayExecutable: nonEmpty(v.HYPERLOOM_RAY),
      rayPython: nonEmpty(v.HYPERLOOM_RAY_PYTHON),
      numGpusOverride,
      rayTempDir: rayTempDirFor({ RAY_TMPDIR: v.RAY_TMPDIR, TMPDIR: v.TMPDIR }),
      authMode: nonEmpty(v.RAY_AUTH_MODE),
      authToken:
        token !== undefined && Redacted.value(token).trim() !== ""
          ? Redacted.make(Redacted.value(token).trim())
          : undefined,
      authTokenPath: nonEmpty(v.RAY_AUTH_TOKEN_PATH),
      env
    }
  })

/** The settings of an environment given as a record (tests, tools): `load` over `ConfigProvider.fromMap`. */
export const readSettings = (
  env: Readonly<Record<string, string | undefined>>,
  overrides: SettingsOverrides = {}
): Effect.Effect<SettingsShape, InvalidSetting | InvalidAddress> =>
  load(env, overrides).pipe(
    Effect.withConfigProvider(
      ConfigProvider.fromMap(
        new Map(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined))
      )
    )
  )

/** The live layer: the settings of this process's environment. */
export const layer: Layer.Layer<Settings, InvalidSetting | InvalidAddress> = Layer.effect(
  Settings,
  Effect.suspend(() => load(process.env))
)

/** The live layer with overrides from the command line (e.g. --nodes). */
export const layerWith = (
  overrides: SettingsOverrides
): Layer.Layer<Settings, InvalidSetting | InvalidAddress> =>
  Layer.effect(
    Settings,
    Effect.suspend(() => load(process.env, overrides))
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
