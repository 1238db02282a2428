/**
 * `hyperloom mcp` driven by clients no one here wrote (docs/agents.md): the official TypeScript
 * SDK's client over stdio and over streamable HTTP, and the MCP Inspector's command-line mode.
 * Protocol conformance (initialize and capabilities, tools/list schemas, tools/call structured
 * content, resources, the prompt) and every refusal an agent can meet, as typed tool errors
 * (`isError`), with the server going on after each. Nothing here needs Ray: the stand-in `ray`
 * records any call and fails, and no test reaches it (a sweep on a real head: test/ray/mcp.test.ts).
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Effect } from "effect"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { initialSweep, renderSweep } from "../../src/domain/Sweep.js"
import { bundleCliWithRecordingRay, bundledEnv, root } from "../support/bundle.js"
import { freePort } from "../support/freePort.js"
import { lockHolderProcess } from "../support/lockHolder.js"
import { sweepExperiment } from "../support/sweep.js"

let work: string
let cli: string
let sessions: string
let rayLog: string
let env: Record<string, string>

const ENGINE = `node ${path.join(root, "examples/fake-engine.mjs")} --port $HYPERLOOM_PORT --max-num-seqs {s}`
const CLIENT = ["node", path.join(root, "examples/fake-bench-client.mjs"), "--max-concurrency", "{c}"]
const EXPERIMENT = { server: ENGINE, client: CLIENT, params: ["s=8,16"], load: "c=1,2", repeats: 2, gpus: 0 }

const serverArgs = (extra: ReadonlyArray<string> = []) => [
  cli,
  "mcp",
  "--sessions",
  sessions,
  "--allow-server",
  "node",
  ...extra
]

const connect = async (extra: ReadonlyArray<string> = []) => {
  const client = new Client({ name: "hyperloom-test", version: "0.0.0" })
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: serverArgs(extra),
    env: bundledEnv(cli, env) as Record<string, string>,
    cwd: work,
    stderr: "pipe"
  })
  await client.connect(transport)
  return client
}

/** A tool call's result, its structured content typed loosely. */
const call = async (client: Client, name: string, args: Record<string, unknown>) =>
  (await client.callTool({ name, arguments: args })) as {
    readonly isError?: boolean
    readonly structuredContent?: any
    readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string }>
  }

const refusal = async (client: Client, name: string, args: Record<string, unknown>, tag: string) => {
  const r = await call(client, name, args)
  assert.isTrue(r.isError, `${name} is a tool error`)
  assert.strictEqual(r.structuredContent?.error?.tag, tag, JSON.stringify(r.structuredContent))
  assert.include(r.content[0]?.text ?? "", r.structuredContent.error.message)
  return r.structuredContent.error.message as string
}

beforeAll(async () => {
  const built = await bundleCliWithRecordingRay()
  work = built.work
  cli = built.cli
  rayLog = built.rayLog
  sessions = path.join(work, "sessions")
  env = { HYPERLOOM_RAY: built.fakeRay }
  // a sweep session to show and read: the experiment laid out, nothing run
  const doc = initialSweep(sweepExperiment({ repeats: 1 }), new Date(0).toISOString())
  fs.mkdirSync(path.join(sessions, "laid-out"), { recursive: true })
  fs.writeFileSync(path.join(sessions, "laid-out", "sweep.json"), renderSweep(doc))
})

afterAll(() => {
  fs.rmSync(work, { recursive: true, force: true })
})

describe("hyperloom mcp over stdio, with the SDK's client", () => {
  let client: Client

  beforeAll(async () => {
    client = await connect(["--max-engine-starts", "1"])
  })
  afterAll(async () => {
    await client?.close()
  })

  it("initializes: its name and version, tools, resources and prompts as capabilities", () => {
    assert.strictEqual(client.getServerVersion()?.name, "hyperloom")
    const caps = client.getServerCapabilities()
    assert.isDefined(caps?.tools)
    assert.isDefined(caps?.resources)
    assert.isDefined(caps?.prompts)
  })

  it("lists every tool with an object input schema, its required arguments and hints", async () => {
    const { tools } = await client.listTools()
    assert.deepStrictEqual(
      tools.map((t) => t.name),
      [
        "doctor",
        "queue",
        "plan_sweep",
        "start_sweep",
        "sweep_status",
        "show",
        "compare",
        "check",
        "baseline_run",
        "cancel"
      ]
    )
    for (const t of tools) {
      assert.strictEqual(t.inputSchema.type, "object", t.name)
      assert.isAbove(t.description?.length ?? 0, 40, t.name)
    }
    const start = tools.find((t) => t.name === "start_sweep")!
    assert.includeMembers((start.inputSchema.required ?? []) as Array<string>, [
      "session",
      "server",
      "client"
    ])
    assert.strictEqual((start.inputSchema.properties as any).repeats.type, "integer")
    assert.isTrue(tools.find((t) => t.name === "show")!.annotations?.readOnlyHint)
    assert.isTrue(tools.find((t) => t.name === "cancel")!.annotations?.destructiveHint)
  })

  it("plan_sweep: the dry run as structured content, with the allow-list and the budget's verdict", async () => {
    const r = await call(client, "plan_sweep", { session: "plan-1", ...EXPERIMENT })
    assert.isFalse(r.isError)
    const plan = r.structuredContent
    assert.isTrue(plan.dry_run)
    assert.strictEqual(plan.combinations, 2)
    assert.strictEqual(plan.runs, 2 * 2 * 2)
    assert.isTrue(plan.allowed)
    assert.include(plan.refused, "needs 2 engine start(s) and the server's budget has 1 left")
    assert.strictEqual(plan.budget.left.engine_starts, 1)
    assert.deepStrictEqual(JSON.parse(r.content[0]!.text!), plan)
    assert.isFalse(fs.existsSync(path.join(sessions, "plan-1")), "a plan writes nothing")
    // start_sweep's validity options are plan_sweep's too, the check judged by the allow-list
    const checked = await call(client, "plan_sweep", {
      session: "plan-1",
      ...EXPERIMENT,
      check: "curl -s $HYPERLOOM_BASE_URL/v1/models",
      warmup: 0
    })
    assert.isFalse(checked.isError)
    assert.isFalse(checked.structuredContent.allowed)
    assert.include(checked.structuredContent.refused, "the check program 'curl'")
  })

  it("show: a session's document with its trust block (no confidence where there is none)", async () => {
    const r = await call(client, "show", { session: "laid-out" })
    assert.isFalse(r.isError)
    assert.strictEqual(r.structuredContent.kind, "sweep")
    assert.strictEqual(r.structuredContent.document.kind, "hyperloom.sweep")
    assert.strictEqual(r.structuredContent.trust.confidence, "none")
    assert.deepStrictEqual(r.structuredContent.trust.findings, [])
    assert.deepStrictEqual(
      r.structuredContent.trust.validity,
      r.structuredContent.document.summary.validity ?? null
    )
  })

  it("check: a session's validity judged again from its records, nothing written", async () => {
    const before = fs.readFileSync(path.join(sessions, "laid-out", "sweep.json"), "utf8")
    const r = await call(client, "check", { session: "laid-out" })
    assert.isFalse(r.isError, JSON.stringify(r.structuredContent))
    assert.strictEqual(r.structuredContent.kind, "sweep")
    assert.strictEqual(r.structuredContent.session, "laid-out")
    assert.deepStrictEqual(r.structuredContent.runs, [], "nothing measured, nothing re-judged")
    assert.isTrue(r.structuredContent.agrees)
    assert.strictEqual(fs.readFileSync(path.join(sessions, "laid-out", "sweep.json"), "utf8"), before)
    assert.strictEqual(
      (await call(client, "check", { session: "../x" })).structuredContent.error.tag,
      "OutsideSessionRoot"
    )
  })

  it("sessions are resources: a template per view, read by URI", async () => {
    const { resourceTemplates } = await client.listResourceTemplates()
    assert.deepStrictEqual(
      resourceTemplates.map((t) => t.uriTemplate),
      [
        "hyperloom://session/{session}/document",
        "hyperloom://session/{session}/summary",
        "hyperloom://session/{session}/report"
      ]
    )
    const doc = await client.readResource({ uri: "hyperloom://session/laid-out/summary" })
    const summary = JSON.parse((doc.contents[0] as { text: string }).text)
    assert.strictEqual(summary.summary.verdict, "none")
    assert.strictEqual(summary.trust.confidence, "none")
    const report = await client.readResource({ uri: "hyperloom://session/laid-out/report" })
    assert.include((report.contents[0] as { text: string }).text, "<html")
  })

  it("the prompt: find the best configuration of an engine under an SLO", async () => {
    const { prompts } = await client.listPrompts()
    assert.deepStrictEqual(
      prompts.map((p) => p.name),
      ["find_best_configuration"]
    )
    const p = await client.getPrompt({
      name: "find_best_configuration",
      arguments: { engine: "vllm serve m", slo: "p99_ttft_ms<=500", client: "vllm bench serve" }
    })
    const text = (p.messages[0]!.content as { text: string }).text
    assert.include(text, "p99_ttft_ms<=500")
    assert.include(text, "repeats >= 2")
  })

  it("bad input from a model: each a typed tool error with a sentence to act on, and the server goes on", async () => {
    assert.include(await refusal(client, "no_such_tool", {}, "UnknownTool"), "the tools are doctor, queue")
    assert.include(await refusal(client, "show", { sesion: "x" }, "InvalidArguments"), "is missing")
    assert.include(await refusal(client, "show", { session: 3 }, "InvalidArguments"), "Expected string")
    assert.include(await refusal(client, "show", { session: "../x" }, "OutsideSessionRoot"), sessions)
    assert.include(await refusal(client, "show", { session: "/etc" }, "OutsideSessionRoot"), "outside")
    fs.symlinkSync("/tmp", path.join(sessions, "out-link"))
    assert.include(
      await refusal(client, "show", { session: "out-link/s" }, "OutsideSessionRoot"),
      "through a link"
    )
    assert.include(await refusal(client, "show", { session: "nothing-here" }, "SessionNotFound"), "start one")
    const python = { ...EXPERIMENT, server: "python3 -m sglang.launch_server --port $HYPERLOOM_PORT {s}" }
    assert.include(
      await refusal(client, "start_sweep", { session: "s1", ...python }, "NotAllowed"),
      "--allow-server python3"
    )
    assert.include(
      await refusal(
        client,
        "start_sweep",
        { session: "s1", ...EXPERIMENT, server: `${ENGINE}; rm -rf /` },
        "NotAllowed"
      ),
      "shell syntax"
    )
    // the check runs like the engine: an allowed program, no shell
    assert.include(
      await refusal(
        client,
        "start_sweep",
        { session: "s1", ...EXPERIMENT, check: "curl $HYPERLOOM_BASE_URL/v1/models" },
        "NotAllowed"
      ),
      "the check program 'curl' is not on the server's allow-list"
    )
    assert.include(
      await refusal(
        client,
        "start_sweep",
        { session: "s1", ...EXPERIMENT, check: "node x.mjs | grep ok" },
        "NotAllowed"
      ),
      "shell syntax"
    )
    assert.include(
      await refusal(client, "start_sweep", { session: "s1", ...EXPERIMENT, warmup: -1 }, "InvalidArguments"),
      "warmup"
    )
    assert.include(
      await refusal(
        client,
        "start_sweep",
        { session: "s1", ...EXPERIMENT, warmup: 100000 },
        "InvalidArguments"
      ),
      "warmup"
    )
    assert.include(
      await refusal(
        client,
        "baseline_run",
        { session: "b1", command: ["node", "b.mjs"], warmup: 4 },
        "UsageError"
      ),
      "go with server"
    )
    assert.include(
      await refusal(client, "start_sweep", { session: "s1", ...EXPERIMENT }, "BudgetExceeded"),
      "needs 2 engine start(s) and the server's budget has 1 left"
    )
    assert.include(await refusal(client, "cancel", { session: "s1" }, "NotStartedHere"), "never stopped")
    assert.include(
      await refusal(client, "start_sweep", { session: "s1", ...EXPERIMENT, load: undefined }, "UsageError"),
      "exactly one of"
    )
    // the server is still there, and nothing touched Ray or wrote a session
    assert.isFalse((await call(client, "show", { session: "laid-out" })).isError)
    assert.isFalse(fs.existsSync(path.join(sessions, "s1")))
    assert.isFalse(fs.existsSync(rayLog), "no ray call")
  })

  it("a session another process holds: start_sweep says so at once, the holder's lock untouched", async () => {
    const dir = path.join(sessions, "held")
    fs.mkdirSync(dir, { recursive: true })
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const holder = yield* lockHolderProcess(path.join(dir, ".lock"))
          const one = { ...EXPERIMENT, params: ["s=8"] }
          const message = yield* Effect.promise(() =>
            refusal(client, "start_sweep", { session: "held", ...one }, "SessionLocked")
          )
          assert.include(message, `process ${holder.pid}`)
          assert.isNull(holder.exitCode, "the holder runs on")
        })
      )
    )
    const status = await call(client, "sweep_status", { session: "held" })
    assert.isFalse(status.isError)
    assert.strictEqual(status.structuredContent.run, "failed")
    assert.strictEqual(status.structuredContent.error.tag, "SessionLocked")
  })
})

describe("hyperloom mcp's guard rails from its options", () => {
  it("a server past its deadline takes no new work, saying so", async () => {
    const client = await connect(["--deadline", "0.001"])
    try {
      const message = await refusal(
        client,
        "start_sweep",
        { session: "late", ...EXPERIMENT },
        "BudgetExceeded"
      )
      assert.include(message, "deadline has passed")
      const doctor = await call(client, "plan_sweep", { session: "late", ...EXPERIMENT })
      assert.strictEqual(doctor.structuredContent.budget.left.deadline_sec, 0)
    } finally {
      await client.close()
    }
  })

  it("refuses every program without --allow-server", async () => {
    const client = new Client({ name: "t", version: "0" })
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [cli, "mcp", "--sessions", sessions],
        env: bundledEnv(cli, env) as Record<string, string>,
        stderr: "pipe"
      })
    )
    try {
      const message = await refusal(client, "start_sweep", { session: "x", ...EXPERIMENT }, "NotAllowed")
      assert.include(message, "started without --allow-server")
    } finally {
      await client.close()
    }
  })
})

describe("hyperloom mcp --http, with the SDK's streamable HTTP client", () => {
  it("serves the same tools on 127.0.0.1 only, and answers a call", async () => {
    const port = await freePort()
    const server = spawn(process.execPath, serverArgs(["--http", String(port)]), {
      env: bundledEnv(cli, env),
      stdio: ["ignore", "ignore", "pipe"]
    })
    let stderr = ""
    // the moment the server says it serves, a connection must be taken (it once said so before
    // Node's server listened: a client quick to believe it was refused)
    const announced = new Promise<boolean>((resolve) => {
      let tried = false
      server.stderr.on("data", (d) => {
        stderr += d
        if (!tried && stderr.includes("serving on http")) {
          tried = true
          net
            .connect(port, "127.0.0.1")
            .once("connect", function (this: net.Socket) {
              this.destroy()
              resolve(true)
            })
            .once("error", () => resolve(false))
        }
      })
      setTimeout(() => resolve(false), 10_000)
    })
    try {
      assert.isTrue(await announced, `connected at once when announced: ${stderr}`)
      assert.include(stderr, `serving on http://127.0.0.1:${port}/mcp`)
      const client = new Client({ name: "http-test", version: "0" })
      await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)))
      const { tools } = await client.listTools()
      assert.strictEqual(tools.length, 10)
      const r = await call(client, "plan_sweep", { session: "http-plan", ...EXPERIMENT })
      assert.isFalse(r.isError)
      assert.strictEqual(r.structuredContent.combinations, 2)
      assert.strictEqual((await call(client, "nope", {})).structuredContent.error.tag, "UnknownTool")
      await client.close()
      // bound to the loopback address: the host's other addresses are refused
      const listening = fs.readFileSync("/proc/net/tcp", "utf8")
      const hex = port.toString(16).toUpperCase().padStart(4, "0")
      assert.match(listening, new RegExp(`0100007F:${hex} 00000000:0000 0A`), "listening on 127.0.0.1")
      assert.notMatch(listening, new RegExp(`00000000:${hex} 00000000:0000 0A`), "not on every address")
    } finally {
      server.kill("SIGTERM")
      await new Promise((r) => server.once("exit", r))
    }
  })
})

describe("the MCP Inspector's command-line mode", () => {
  const inspector = path.join(
    root,
    "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
  )
  const inspect = (args: ReadonlyArray<string>) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(
        process.execPath,
        [inspector, "--cli", process.execPath, ...serverArgs(), ...args],
        {
          env: bundledEnv(cli, env),
          stdio: ["ignore", "pipe", "pipe"]
        }
      )
      let stdout = ""
      let stderr = ""
      child.stdout.on("data", (d) => (stdout += d))
      child.stderr.on("data", (d) => (stderr += d))
      child.once("exit", (code) => resolve({ code, stdout, stderr }))
    })

  it("lists the tools and calls one", async () => {
    const list = await inspect(["--method", "tools/list"])
    assert.strictEqual(list.code, 0, list.stderr)
    assert.includeMembers(
      JSON.parse(list.stdout).tools.map((t: { name: string }) => t.name),
      ["doctor", "plan_sweep", "start_sweep", "cancel"]
    )
    const show = await inspect([
      "--method",
      "tools/call",
      "--tool-name",
      "show",
      "--tool-arg",
      "session=laid-out"
    ])
    assert.strictEqual(show.code, 0, show.stderr)
    const result = JSON.parse(show.stdout)
    assert.isFalse(result.isError)
    assert.strictEqual(result.structuredContent.trust.confidence, "none")
  }, 60_000)
})
