/**
 * A command evaluates only its own modules (src/cli/Cli.ts, scripts/bundle-cli.mjs): `hyperloom ray
 * doctor` loads the ray commands and the cluster's services, not the lease, baseline, state and
 * sweep commands, their programs and schemas, nor the whole of the "effect" and
 * "@effect/platform" barrels. Checked on the executable's own bundle (esbuild's metafile): what a
 * command can evaluate is what main.ts reaches by static imports plus what that command's loader
 * imports.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { Metafile } from "esbuild"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { bundleCli } from "../../scripts/bundle-cli.mjs"
import { loadRootCommand, SUBCOMMANDS, topLevelFor } from "../../src/cli/Cli.js"
import { commandPathError } from "../../src/cli/RenderHelp.js"

let work: string
let metafile: Metafile

beforeAll(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), "hyperloom-lazy-"))
  ;({ metafile } = await bundleCli({ outfile: path.join(work, "hyperloom.mjs") }))
}, 120_000)

afterAll(() => {
  fs.rmSync(work, { recursive: true, force: true })
})

const CLI = "src/cli/Cli.ts"

/**
 * The modules a run can evaluate: main.ts's static imports, closed over, plus the modules Cli.ts
 * imports lazily for the top-level commands `loaded` names (by path suffix), and every other lazy
 * import (grpc-js, the GCS codec: loaded when a command reads the GCS).
 */
const reachable = (loaded: ReadonlyArray<string>, runTimeOnly: ReadonlyArray<string> = []) => {
  const inputs = metafile.inputs
  const seen = new Set<string>()
  const queue = ["src/cli/main.ts"]
  while (queue.length > 0) {
    const file = queue.pop()!
    if (seen.has(file)) continue
    seen.add(file)
    for (const i of inputs[file]?.imports ?? []) {
      if (i.external) continue
      const lazyFromCli = i.kind === "dynamic-import" && file === CLI
      if (lazyFromCli && !loaded.some((suffix) => i.path.endsWith(suffix))) continue
      // what a command's handler imports when it runs (`hyperloom mcp`'s server), left out on request
      if (i.kind === "dynamic-import" && runTimeOnly.some((suffix) => i.path.endsWith(suffix))) continue
      queue.push(i.path)
    }
  }
  return [...seen]
}

/** What `hyperloom mcp`'s handler imports when it runs: the server, its transports and its policy. */
const MCP_SERVER = ["src/cli/mcp/Server.ts", "src/cli/mcp/Http.ts", "src/cli/mcp/Policy.ts"]

const has = (files: ReadonlyArray<string>, suffix: string) => files.some((f) => f.endsWith(suffix))

/** Modules only other commands need: commands, programs, schemas, services. */
const OTHERS = [
  "src/cli/commands/lease.ts",
  "src/cli/commands/baseline.ts",
  "src/cli/commands/sweep.ts",
  "src/cli/commands/state.ts",
  "src/cli/commands/report.ts",
  "src/cli/commands/compare.ts",
  "src/cli/commands/queue.ts",
  "src/cli/commands/check.ts",
  "src/Live.ts",
  "src/programs/Sweep.ts",
  "src/programs/Baseline.ts",
  "src/programs/Lease.ts",
  "src/domain/Sweep.ts",
  "src/domain/State.ts",
  "src/services/LeaseBridge.ts",
  "src/services/SweepStore.ts",
  "src/services/StateStore.ts"
]

describe("a command's modules", () => {
  it("ray doctor reaches the ray commands and the cluster's services, none of the others", () => {
    const files = reachable(["src/cli/commands/ray.ts", "src/LiveCluster.ts"])
    for (const needed of ["src/cli/commands/ray.ts", "src/LiveCluster.ts", "src/programs/Inspect.ts"]) {
      assert.isTrue(has(files, needed), `${needed} is reached`)
    }
    for (const other of OTHERS) assert.isFalse(has(files, other), `${other} is not reached`)
  })

  it("no module reaches a barrel that would initialise a whole package", () => {
    const files = reachable(["src/cli/commands/ray.ts", "src/LiveCluster.ts"])
    assert.isFalse(has(files, "/effect/dist/esm/index.js"), "the effect barrel")
    assert.isFalse(has(files, "/@effect/platform/dist/esm/index.js"), "the @effect/platform barrel")
    // what the barrels re-export is still there, module by module
    assert.isTrue(has(files, "/effect/dist/esm/Effect.js"))
  })

  it("no module reaches Node's worker manager, which no command uses", () => {
    // @effect/platform-node's NodeContext.layer carries one (its Worker and WorkerError schemas,
    // node:worker_threads): evaluating them cost a cold doctor ~4% of its CPU (docs/performance.md).
    // Only the MCP server loads them (@effect/rpc's RpcServer and Node's HTTP server layer import
    // them), once, when `hyperloom mcp` runs.
    for (const files of [
      reachable(["src/cli/commands/ray.ts", "src/LiveCluster.ts"]),
      reachable([""], MCP_SERVER)
    ]) {
      for (const worker of [
        "/@effect/platform-node/dist/esm/NodeContext.js",
        "/@effect/platform-node/dist/esm/NodeWorker.js",
        "/@effect/platform/dist/esm/Worker.js",
        "/@effect/platform/dist/esm/WorkerError.js"
      ])
        assert.isFalse(has(files, worker), `${worker} is not reached`)
    }
  })

  it("the MCP server's modules (@effect/ai, @effect/rpc) load only when `hyperloom mcp` runs", () => {
    const server = ["src/cli/mcp/Server.ts", "src/cli/mcp/Http.ts", "src/cli/mcp/Policy.ts"]
    for (const files of [
      reachable(["src/cli/commands/ray.ts", "src/LiveCluster.ts"]),
      reachable([""], server)
    ]) {
      assert.isFalse(has(files, "src/cli/mcp/Server.ts"), "the server")
      assert.isFalse(
        files.some((f) => f.includes("/@effect/ai/") || f.includes("/@effect/rpc/")),
        "@effect/ai and @effect/rpc"
      )
    }
    // and the server does reach them (the check above is not vacuous)
    const all = reachable([""])
    assert.isTrue(has(all, "src/cli/mcp/Server.ts"))
    assert.isTrue(all.some((f) => f.includes("/@effect/ai/")))
  })

  it("every command together reaches all of them (the root's help, completions)", () => {
    const files = reachable([""])
    for (const other of OTHERS) assert.isTrue(has(files, other), `${other} is reached`)
  })
})

describe("the top-level commands a command line loads", () => {
  const ALL = ["ray", "lease", "baseline", "state", "sweep", "report", "compare", "check", "queue", "mcp"]

  it("is the one its first word names", () => {
    assert.deepStrictEqual(topLevelFor(["ray", "doctor", "--json"]), ["ray"])
    assert.deepStrictEqual(topLevelFor(["sweep", "run", "--help"]), ["sweep"])
    assert.deepStrictEqual(topLevelFor(["lease", "run", "--gpus", "0", "--", "hyperloom", "--completions"]), [
      "lease"
    ])
    assert.deepStrictEqual(topLevelFor(["report"]), ["report"])
    assert.deepStrictEqual(topLevelFor(["queue", "--json"]), ["queue"])
  })

  it("knows each group's subcommands as the tree has them", async () => {
    const all = await loadRootCommand([])
    for (const [group, subcommands] of Object.entries(SUBCOMMANDS)) {
      for (const name of subcommands ?? [])
        assert.isUndefined(commandPathError(all, [group, name]), `${group} ${name}`)
      // a name the group lacks is refused with the group's own commands, which must be these
      const refused = commandPathError(all, [group, "zzzzzz"])?.message ?? ""
      assert.include(refused, `the commands of \`hyperloom ${group}\` are ${subcommands?.join(", ")}`)
    }
  }, 60_000)

  it("is every one for the root, an unknown word, a completion script or the wizard", () => {
    for (const args of [
      [],
      ["--help"],
      ["-h"],
      ["--version"],
      ["--completions", "bash"],
      ["ray", "doctor", "--completions", "zsh"],
      ["ray", "--wizard"],
      ["rya", "doctor"],
      ["toString"],
      ["constructor"],
      ["ray"],
      ["ray", "--json"],
      ["ray", "--help"],
      ["sweep", "--bogus", "run"],
      ["lease", "doctor"],
      ["state", "toString"]
    ]) {
      assert.deepStrictEqual([...topLevelFor(args)], ALL, args.join(" "))
    }
  })

  it("builds a root with those commands only", async () => {
    const ray = await loadRootCommand(["ray", "doctor"])
    const all = await loadRootCommand([])
    for (const name of ALL) {
      assert.isUndefined(commandPathError(all, [name]), `the whole tree has ${name}`)
      const error = commandPathError(ray, [name])
      if (name === "ray") assert.isUndefined(error)
      else assert.include(error?.message ?? "", `unknown command \`hyperloom ${name}\``)
    }
  }, 60_000)
})
