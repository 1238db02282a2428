import * as nodePath from "node:path"
import {
  Config,
  ConfigError,
  ConfigProvider,
  Context,
  Effect,
  Either,
  Layer,
  Option,
  type Redacted
} from "effect"
import { parseRayAddress, type RayAddress } from "../domain/Address.js"
import { type InvalidAddress, InvalidSetting } from "../domain/Errors.js"
import { REPAIR_STEPS, type RepairStep } from "../domain/Restart.js"

/**
 * Everything hyperloom reads from its environment, read once and validated, so that a bad value
 * is one clear error up front and programs never touch `process.env`.
 */
export interface SettingsShape {
  /** RAY_ADDRESS as parsed: unset, empty or `auto` is the local cluster; anything else the operator's explicit choice. */
  readonly rayAddress: RayAddress
  /** Node count of the run: HYPERLOOM_NODES or --nodes; >= 2 is a multi-node run. */
  readonly nodes: number
  /**
   * A group's rank directory (`--rank-cwd`); undefined: DEFAULT_RANK_CWD
   * (docs/design.md#what-each-node-is-given).
   */
  readonly rankCwd?: string | undefined
  /**
   * Variables a group's ranks get besides HYPERLOOM_* (`--rank-env NAME`…,
   * docs/design.md#what-each-node-is-given).
   */
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
  /** HOME: where Ray's own auth token file is looked for (`~/.ray/auth_token`) when no path is set. */
  readonly home: string | undefined
  /** HYPERLOOM_TEST_REPAIR_PAUSE (test only): the repair step to pause at, so a test can kill it there. */
  readonly testRepairPause: RepairStep | undefined
  /** The environment the settings were read from, for children that need it (the lease command). */
  readonly env: Readonly<Record<string, string | undefined>>
  /**
   * The hyperloom command line this process runs (after the executable), for what others are told
   * it is (the queue's waiters, the host lock's); empty for a program that is not the CLI.
   */
  readonly commandLine: ReadonlyArray<string>
  /** The working directory a leased command runs in unless told otherwise (the live layer's: this process's). */
  readonly cwd: string
  /**
   * Why this process may not repair the head whatever the guards say (`hyperloom mcp` without
   * `--allow-repair`, docs/agents.md); undefined: the guards alone decide.
   */
  readonly repairRefused?: string | undefined
}

export class Settings extends Context.Tag("hyperloom/services/Settings")<Settings, SettingsShape>() {}

export interface SettingsOverrides {
  readonly nodes?: number | undefined
  readonly rankCwd?: string | undefined
  readonly rankEnv?: ReadonlyArray<string> | undefined
  readonly commandLine?: ReadonlyArray<string> | undefined
  readonly cwd?: string | undefined
  readonly repairRefused?: string | undefined
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

/**
 * A provider that reads a variable set to blanks as unset, so its default applies (`X= hyperloom …`
 * is the shell's way to clear it), and trims the others. Ray's temp-dir variables are kept as they
 * are: for Ray an empty RAY_TMPDIR counts as set.
 */
const blankAsUnset = (provider: ConfigProvider.ConfigProvider): ConfigProvider.ConfigProvider => {
  const flat = provider.flattened
  return ConfigProvider.fromFlat(
    ConfigProvider.makeFlat({
      load: (path, primitive, split) =>
        path.length === 1 && AS_SET.has(path[0]!)
          ? flat.load(path, primitive, split)
          : flat.load(
              path,
              Config.primitive(primitive.description, (text) =>
                text.trim() === ""
                  ? Either.left(ConfigError.MissingData([], "set to blanks"))
                  : primitive.parse(text.trim())
              ) as Config.Config.Primitive<never>,
              split
            ),
      enumerateChildren: (path) => flat.enumerateChildren(path),
      patch: flat.patch
    })
  )
}
const AS_SET = new Set(["RAY_TMPDIR", "TMPDIR"])

/** What each checked variable must be, as its error says it (`invalid NAME "value": expected …`). */
const EXPECTED = {
  HYPERLOOM_NODES: "expected a whole number >= 1",
  HYPERLOOM_RAY_STATUS_TIMEOUT_SEC: "expected a positive number",
  HYPERLOOM_RAY_START_TIMEOUT_SEC: "expected a positive number",
  HL_RAY_HEAD_PORT: "expected a whole number from 1 to 65535",
  HYPERLOOM_RAY_NUM_GPUS: "expected a whole number from 0 to 1024",
  HYPERLOOM_TEST_REPAIR_PAUSE: `expected one of ${REPAIR_STEPS.join(", ")} (test only)`,
  HYPERLOOM_DEBUG: "expected 1 or 0 (true/false, yes/no, on/off)"
} as const

/** Seconds, more than 0 (and finite: `Infinity` is no timeout). */
const seconds = (name: keyof typeof EXPECTED, fallback: number) =>
  Config.number(name).pipe(
    Config.validate({ message: EXPECTED[name], validation: (n) => Number.isFinite(n) && n > 0 }),
    Config.withDefault(fallback)
  )

/** A whole number in `[min, max]`. */
const wholeNumber = (name: keyof typeof EXPECTED, min: number, max: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: EXPECTED[name], validation: (n) => n >= min && n <= max })
  )

const optional = <A>(config: Config.Config<A>) =>
  Config.option(config).pipe(Config.map(Option.getOrUndefined))

/**
 * Everything hyperloom reads from the environment, as one Effect Config: each number through
 * `Config.number`/`integer`/`port` and its bounds, each default with `withDefault`, the auth token
 * `Config.redacted` (never logged). A bad value fails with the variable's name (`InvalidSetting`).
 */
export const config = Config.all({
  RAY_ADDRESS: optional(Config.string("RAY_ADDRESS")),
  HYPERLOOM_NODES: wholeNumber("HYPERLOOM_NODES", 1, Number.MAX_SAFE_INTEGER).pipe(Config.withDefault(1)),
  HYPERLOOM_RAY_STATUS_TIMEOUT_SEC: seconds("HYPERLOOM_RAY_STATUS_TIMEOUT_SEC", 5),
  HYPERLOOM_RAY_START_TIMEOUT_SEC: seconds("HYPERLOOM_RAY_START_TIMEOUT_SEC", 120),
  HL_RAY_HEAD_PORT: Config.port("HL_RAY_HEAD_PORT").pipe(Config.withDefault(6379)),
  HYPERLOOM_RAY: optional(Config.string("HYPERLOOM_RAY")),
  HYPERLOOM_RAY_PYTHON: optional(Config.string("HYPERLOOM_RAY_PYTHON")),
  HYPERLOOM_RAY_NUM_GPUS: optional(wholeNumber("HYPERLOOM_RAY_NUM_GPUS", 0, 1024)),
  RAY_TMPDIR: optional(Config.string("RAY_TMPDIR")),
  TMPDIR: optional(Config.string("TMPDIR")),
  RAY_AUTH_MODE: optional(Config.string("RAY_AUTH_MODE")),
  RAY_AUTH_TOKEN: optional(Config.redacted("RAY_AUTH_TOKEN")),
  RAY_AUTH_TOKEN_PATH: optional(Config.string("RAY_AUTH_TOKEN_PATH")),
  HOME: optional(Config.string("HOME")),
  HYPERLOOM_TEST_REPAIR_PAUSE: optional(Config.literal(...REPAIR_STEPS)("HYPERLOOM_TEST_REPAIR_PAUSE"))
})

/** The first bad variable of a ConfigError, with its Config message. */
const firstInvalid = (error: ConfigError.ConfigError): { name: string; message: string } | undefined =>
  ConfigError.reduceWithContext(error, undefined, {
    andCase: (_, l, r) => l ?? r,
    orCase: (_, l, r) => l ?? r,
    invalidDataCase: (_, path, message) => ({ name: path.join("_"), message }),
    missingDataCase: () => undefined,
    sourceUnavailableCase: (_, path, message) => ({ name: path.join("_"), message }),
    unsupportedCase: (_, path, message) => ({ name: path.join("_"), message })
  })

/** A ConfigError as one InvalidSetting: the variable, its value as given, what was expected. */
const invalidSetting = (error: ConfigError.ConfigError) =>
  Effect.gen(function* () {
    const bad = firstInvalid(error)
    if (bad === undefined) return yield* Effect.die(error)
    const raw = yield* Effect.orDie(optional(Config.string(bad.name)))
    const reason =
      (EXPECTED as Readonly<Record<string, string>>)[bad.name] ?? bad.message.replace(/^Expected/, "expected")
    return yield* new InvalidSetting({ name: bad.name, value: (raw ?? "").trim(), reason })
  })

/**
 * Reads the settings through `config` (a bad value is one InvalidSetting or InvalidAddress naming
 * the variable). `env` is the environment handed to children (the leased command); the live layer
 * passes `process.env`.
 */
export const load = (
  env: Readonly<Record<string, string | undefined>>,
  overrides: SettingsOverrides = {}
): Effect.Effect<SettingsShape, InvalidSetting | InvalidAddress> =>
  Effect.configProviderWith((provider) =>
    Effect.gen(function* () {
      const v = yield* Effect.catchAll(config, invalidSetting)
      return {
        rayAddress: yield* parseRayAddress(v.RAY_ADDRESS),
        nodes: overrides.nodes ?? v.HYPERLOOM_NODES,
        rankCwd: overrides.rankCwd,
        rankEnv: overrides.rankEnv,
        statusTimeoutSec: v.HYPERLOOM_RAY_STATUS_TIMEOUT_SEC,
        startTimeoutSec: v.HYPERLOOM_RAY_START_TIMEOUT_SEC,
        headPort: v.HL_RAY_HEAD_PORT,
        rayExecutable: v.HYPERLOOM_RAY,
        rayPython: v.HYPERLOOM_RAY_PYTHON,
        numGpusOverride: v.HYPERLOOM_RAY_NUM_GPUS,
        rayTempDir: rayTempDirFor({ RAY_TMPDIR: v.RAY_TMPDIR, TMPDIR: v.TMPDIR }),
        authMode: v.RAY_AUTH_MODE,
        authToken: v.RAY_AUTH_TOKEN,
        authTokenPath: v.RAY_AUTH_TOKEN_PATH,
        home: v.HOME,
        testRepairPause: v.HYPERLOOM_TEST_REPAIR_PAUSE,
        env,
        commandLine: overrides.commandLine ?? [],
        cwd: overrides.cwd ?? "/",
        ...(overrides.repairRefused === undefined ? {} : { repairRefused: overrides.repairRefused })
      } satisfies SettingsShape
    }).pipe(Effect.withConfigProvider(blankAsUnset(provider)))
  )

/** What the CLI itself reads before any command runs: debug output, the help's width, colour. */
export interface TerminalSettings {
  /** HYPERLOOM_DEBUG (a boolean: 1/0, true/false, yes/no, on/off): debug logs and defects' traces. */
  readonly debug: boolean
  /** COLUMNS, when it is a whole number (another program's variable: a bad one is ignored). */
  readonly columns: number | undefined
  /** NO_COLOR set to anything but blanks (no-color.org). */
  readonly noColor: boolean
}

export const terminalConfig: Config.Config<TerminalSettings> = Config.all({
  debug: Config.boolean("HYPERLOOM_DEBUG").pipe(Config.withDefault(false)),
  columns: Config.integer("COLUMNS").pipe(
    Config.option,
    Config.orElse(() => Config.succeed(Option.none())),
    Config.map(Option.getOrUndefined)
  ),
  noColor: Config.option(Config.string("NO_COLOR")).pipe(Config.map(Option.isSome))
})

/** The terminal settings (a bad HYPERLOOM_DEBUG is one InvalidSetting naming it). */
export const loadTerminal: Effect.Effect<TerminalSettings, InvalidSetting> = Effect.configProviderWith(
  (provider) =>
    Effect.catchAll(terminalConfig, invalidSetting).pipe(Effect.withConfigProvider(blankAsUnset(provider)))
)

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

/** The live layer with overrides from the command line (e.g. --nodes); its command line is this process's. */
export const layerWith = (
  overrides: SettingsOverrides
): Layer.Layer<Settings, InvalidSetting | InvalidAddress> =>
  Layer.effect(
    Settings,
    Effect.suspend(() =>
      load(process.env, { commandLine: process.argv.slice(2), cwd: process.cwd(), ...overrides })
    )
  )

/** The live layer: the settings of this process's environment. */
export const layer: Layer.Layer<Settings, InvalidSetting | InvalidAddress> = layerWith({})

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
  home: undefined,
  testRepairPause: undefined,
  env: {},
  commandLine: [],
  cwd: "/tmp",
  ...fields
})

/** Settings for tests: the defaults of an empty environment, with `fields` replaced. */
export const layerTest = (fields: Partial<SettingsShape> = {}): Layer.Layer<Settings> =>
  Layer.succeed(Settings, testSettings(fields))
