/**
 * Settings come from Effect's Config: the live layer reads whatever ConfigProvider is in place
 * (the environment by default; a map here), validates every variable into one clear error, and
 * keeps the auth token Redacted.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Redacted } from "effect"
import * as Settings from "../../src/services/Settings.js"

const fromMap = (vars: Record<string, string>) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(vars))))

const settings = Effect.flatMap(Settings.Settings, Effect.succeed)

describe("Settings.layer reads through Config", () => {
  it.effect("the defaults of an empty environment", () =>
    Effect.gen(function* () {
      const s = yield* settings
      assert.deepStrictEqual(s.rayAddress, { _tag: "Auto" })
      assert.strictEqual(s.nodes, 1)
      assert.strictEqual(s.statusTimeoutSec, 5)
      assert.strictEqual(s.startTimeoutSec, 120)
      assert.strictEqual(s.headPort, 6379)
      assert.strictEqual(s.rayTempDir, "/tmp/ray")
      assert.isUndefined(s.authToken)
    }).pipe(Effect.provide(Settings.layer), fromMap({}))
  )

  it.effect("values from the provider, the token kept secret", () =>
    Effect.gen(function* () {
      const s = yield* settings
      assert.strictEqual(s.statusTimeoutSec, 2.5)
      assert.strictEqual(s.headPort, 6390)
      assert.strictEqual(s.nodes, 2)
      assert.strictEqual(s.rayTempDir, "/scratch/ray")
      assert.strictEqual(s.authMode, "token")
      assert.isTrue(Redacted.isRedacted(s.authToken))
      assert.strictEqual(Redacted.value(s.authToken!), "s3cret")
      assert.notInclude(String(s.authToken), "s3cret")
      assert.notInclude(JSON.stringify({ ...s, env: undefined }), "s3cret")
    }).pipe(
      Effect.provide(Settings.layer),
      fromMap({
        HYPERLOOM_RAY_STATUS_TIMEOUT_SEC: "2.5",
        HL_RAY_HEAD_PORT: "6390",
        HYPERLOOM_NODES: "2",
        RAY_TMPDIR: "/scratch/",
        RAY_AUTH_MODE: "token",
        RAY_AUTH_TOKEN: " s3cret "
      })
    )
  )

  it.effect("a bad value is one error naming the variable", () =>
    Effect.gen(function* () {
      for (const [name, value] of [
        ["HYPERLOOM_RAY_STATUS_TIMEOUT_SEC", "soon"],
        ["HL_RAY_HEAD_PORT", "99999"],
        ["HYPERLOOM_RAY_NUM_GPUS", "-1"],
        ["HYPERLOOM_NODES", "2x"]
      ] as const) {
        const error = yield* Effect.flip(
          settings.pipe(Effect.provide(Settings.layer), fromMap({ [name]: value }))
        )
        assert.strictEqual(error._tag, "InvalidSetting", name)
        assert.include(error.message, name)
        assert.include(error.message, value)
      }
      const address = yield* Effect.flip(
        settings.pipe(Effect.provide(Settings.layer), fromMap({ RAY_ADDRESS: "not an address" }))
      )
      assert.strictEqual(address._tag, "InvalidAddress")
    })
  )

  it.effect("overrides from the command line win (--nodes)", () =>
    Effect.gen(function* () {
      assert.strictEqual((yield* settings).nodes, 3)
    }).pipe(Effect.provide(Settings.layerWith({ nodes: 3 })), fromMap({ HYPERLOOM_NODES: "1" }))
  )

  it.effect("readSettings: the same from a plain record", () =>
    Effect.gen(function* () {
      const s = yield* Settings.readSettings({ HL_RAY_HEAD_PORT: "7000", PATH: "/bin" })
      assert.strictEqual(s.headPort, 7000)
      assert.strictEqual(s.env.PATH, "/bin")
    })
  )
})

// Ray 2.58's ray/_common/utils.py get_default_system_temp_dir: RAY_TMPDIR if set, else on Linux
// TMPDIR if set, else /tmp; the temp dir is `<that>/ray`. hyperloom must read the same files.
describe("Settings.rayTempDir resolves Ray's temp dir as the installed Ray does", () => {
  const tempDir = (env: Record<string, string>) =>
    Effect.map(Settings.readSettings(env), (s) => s.rayTempDir).pipe(fromMap(env))

  it.effect("defaults to /tmp/ray", () =>
    Effect.gen(function* () {
      assert.strictEqual(yield* tempDir({}), "/tmp/ray")
    })
  )

  it.effect("TMPDIR counts when RAY_TMPDIR is not set (as `ray start` under TMPDIR=/x writes /x/ray)", () =>
    Effect.gen(function* () {
      assert.strictEqual(yield* tempDir({ TMPDIR: "/x" }), "/x/ray")
      assert.strictEqual(yield* tempDir({ TMPDIR: "/x/" }), "/x/ray")
    })
  )

  it.effect("RAY_TMPDIR wins over TMPDIR", () =>
    Effect.gen(function* () {
      assert.strictEqual(yield* tempDir({ RAY_TMPDIR: "/r", TMPDIR: "/x" }), "/r/ray")
    })
  )

  it("a set but empty variable counts as set, as `in os.environ` does (a relative ./ray)", () => {
    assert.strictEqual(Settings.rayTempDirFor({ RAY_TMPDIR: "", TMPDIR: "/x" }), "ray")
    assert.strictEqual(Settings.rayTempDirFor({ TMPDIR: "" }), "ray")
  })
})

describe("each bad setting is one line naming the variable (Config all the way)", () => {
  const failure = (vars: Record<string, string>) =>
    Effect.flip(settings.pipe(Effect.provide(Settings.layer), fromMap(vars)))

  it.effect("every checked variable: a bad value is refused in one line with its name and value", () =>
    Effect.gen(function* () {
      for (const [name, value] of [
        ["HYPERLOOM_NODES", "0"],
        ["HYPERLOOM_NODES", "1.5"],
        ["HYPERLOOM_RAY_STATUS_TIMEOUT_SEC", "0"],
        ["HYPERLOOM_RAY_START_TIMEOUT_SEC", "Infinity"],
        ["HL_RAY_HEAD_PORT", "0"],
        ["HL_RAY_HEAD_PORT", "63.5"],
        ["HYPERLOOM_RAY_NUM_GPUS", "1025"],
        ["HYPERLOOM_TEST_REPAIR_PAUSE", "before_lunch"]
      ] as const) {
        const error = yield* failure({ [name]: value })
        assert.strictEqual(error._tag, "InvalidSetting", `${name}=${value}`)
        assert.notInclude(error.message, "\n")
        assert.match(error.message, new RegExp(`^invalid ${name} "${value.replace(".", "\\.")}": expected `))
      }
    })
  )

  it.effect("the test-only repair pause is a setting (a known step), not raw environment", () =>
    Effect.gen(function* () {
      const s = yield* settings
      assert.strictEqual(s.testRepairPause, "before_start")
      assert.strictEqual(s.home, "/home/u")
    }).pipe(
      Effect.provide(Settings.layer),
      fromMap({ HYPERLOOM_TEST_REPAIR_PAUSE: "before_start", HOME: "/home/u" })
    )
  )

  it.effect("a variable set to blanks is unset (its default applies); values are trimmed", () =>
    Effect.gen(function* () {
      const s = yield* settings
      assert.strictEqual(s.nodes, 1)
      assert.strictEqual(s.headPort, 6379)
      assert.strictEqual(s.statusTimeoutSec, 7)
      assert.isUndefined(s.numGpusOverride)
      assert.isUndefined(s.rayExecutable)
    }).pipe(
      Effect.provide(Settings.layer),
      fromMap({
        HYPERLOOM_NODES: "",
        HL_RAY_HEAD_PORT: "  ",
        HYPERLOOM_RAY_STATUS_TIMEOUT_SEC: " 7 ",
        HYPERLOOM_RAY_NUM_GPUS: " ",
        HYPERLOOM_RAY: " "
      })
    )
  )
})
