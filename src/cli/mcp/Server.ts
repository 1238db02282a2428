/**
 * `hyperloom mcp` (docs/agents.md): hyperloom as a Model Context Protocol server, built on
 * `@effect/ai`'s McpServer (its JSON-RPC, its stdio and HTTP transports: nothing hand-written).
 *
 * - Tools (./Tools.ts) with Schema-typed arguments; their results are the CLI's JSON documents as
 *   structured content. Every failure of a tool, and a call to a tool that does not exist, is a
 *   result with `isError` and a sentence an agent can act on, never a protocol error or a crash:
 *   McpServer's own `tools/call` answers an unknown tool with a protocol error, so this server's
 *   McpServer routes `tools/call` to its own table first (and passes the call's progress token).
 * - Sessions as resources (`hyperloom://session/{session}/document|summary|report`), a prompt.
 * - Runs in the server's background (./Runs.ts) under the budget; when the client goes away
 *   (stdin closes), they are cancelled as Ctrl-C cancels (engines stopped, leases released) or
 *   run to their end, as `--on-disconnect` says; the server then exits.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as McpSchema from "@effect/ai/McpSchema"
import * as McpServer from "@effect/ai/McpServer"
import * as NodeSink from "@effect/platform-node/NodeSink"
import * as NodeStream from "@effect/platform-node/NodeStream"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as RpcServer from "@effect/rpc/RpcServer"
import {
  Cause,
  Clock,
  Effect,
  Exit,
  Fiber,
  JSONSchema,
  Layer,
  Option,
  ParseResult,
  Queue,
  Schema,
  SchemaAST,
  Scope
} from "effect"
import { ENVIRONMENT_FILE, environmentOf } from "../../domain/Serving.js"
import { AttemptFiles } from "../../services/AttemptFiles.js"
import { SweepStore } from "../../services/SweepStore.js"
import { VERSION } from "../../version.js"
import { renderSweepReport } from "../RenderSweepReport.js"
import { type Budget, renderLeft } from "./Policy.js"
import { makeRuns, type Runs, ToolError } from "./Runs.js"
import {
  BaselineArgs,
  baselineTool,
  type CallContext,
  CompareArgs,
  cancelTool,
  checkTool,
  compareTool,
  DoctorArgs,
  doctorTool,
  PlanArgs,
  planTool,
  queueTool,
  type ServerPolicy,
  SessionArgs,
  StartArgs,
  StatusArgs,
  sessionIn,
  showSession,
  showTool,
  startTool,
  statusTool
} from "./Tools.js"

export interface McpOptions {
  /** Serve streamable HTTP on this port (else stdio). */
  readonly http?: number | undefined
  readonly host: string
  /** The session root as given (resolved, its links followed, created if missing). */
  readonly sessions: string
  readonly allow: ReadonlyArray<string>
  readonly budget: Budget
  readonly allowRepair: boolean
  readonly onDisconnect: "continue" | "cancel"
}

/** The HTTP endpoint's path. */
export const MCP_PATH = "/mcp"

// ---------------------------------------------------------------------------------------------
// Tool results

const text = (t: string) => ({ type: "text" as const, text: t })

/** A plain JSON object (structured content must be one). */
const plain = (value: unknown): Record<string, unknown> => JSON.parse(JSON.stringify(value ?? null)) ?? {}

const success = (value: unknown) => {
  const structured = plain(value)
  return new McpSchema.CallToolResult({
    isError: false,
    structuredContent: structured,
    content: [text(JSON.stringify(structured, null, 2))]
  })
}

const failure = (e: ToolError, left: unknown) =>
  new McpSchema.CallToolResult({
    isError: true,
    structuredContent: plain({
      error: { tag: e.tag, message: e.message, ...(e.detail ?? {}) },
      budget: { left }
    }),
    content: [text(`${e.tag}: ${e.message}`)]
  })

// ---------------------------------------------------------------------------------------------
// The tool table

interface ToolSpec {
  readonly name: string
  readonly title: string
  readonly description: string
  readonly args: Schema.Schema<any, any, never>
  readonly readOnly: boolean
  readonly destructive: boolean
  readonly run: (args: any, call: CallContext) => Effect.Effect<unknown, ToolError, any>
}

/** A tool's input as JSON Schema: an object (an empty struct is `{}` to Schema, an object to MCP). */
const inputSchema = (schema: Schema.Schema<any, any, never>) => {
  if (SchemaAST.getPropertySignatures(schema.ast).length === 0)
    return { type: "object", properties: {}, additionalProperties: false }
  const { $schema: _, ...rest } = JSONSchema.make(schema) as unknown as Record<string, unknown>
  return rest
}

const toolsOf = (
  policy: ServerPolicy,
  runs: Runs,
  log: (line: string) => Effect.Effect<void>
): ReadonlyArray<ToolSpec> => [
  {
    name: "doctor",
    title: "Check the host",
    description:
      "Whether a serving lease (gpus, with the serving slot) is feasible on this host's Ray cluster, whether a repair would be allowed (never from this server unless it was started with --allow-repair) with every guard, who holds the GPUs, and what is left of the server's budget. Changes nothing. Call it first.",
    args: DoctorArgs,
    readOnly: true,
    destructive: false,
    run: (a) => doctorTool(runs, a)
  },
  {
    name: "queue",
    title: "The host's lease queue",
    description:
      "Who holds the host's serving slot and who waits for it, in the FIFO order every user's leases (this server's included) are granted in, with wait estimates.",
    args: Schema.Struct({}),
    readOnly: true,
    destructive: false,
    run: () => queueTool
  },
  {
    name: "plan_sweep",
    title: "Plan a sweep (dry run)",
    description:
      "The plan of a sweep without running it: combinations, points, client runs, the first combination's command lines, an estimate of its time, what a session that holds the same sweep still has to run, whether the allow-list and the budget would let it start (refused: why). Arguments as start_sweep's.",
    args: PlanArgs,
    readOnly: true,
    destructive: false,
    run: (a) => planTool(policy, runs, a)
  },
  {
    name: "start_sweep",
    title: "Start a sweep",
    description:
      "Starts (or resumes) a sweep of engine parameters and client load for the best configuration under the SLOs, on a session under the server's root, and returns its status at once; it runs in the server's background under serving leases (in the host's FIFO queue like any user's), reporting progress in logging notifications; follow it with sweep_status. wait: true keeps the call open with progress notifications until it ends (cancelling the call cancels the sweep). Refused past the server's budget, for a program not on its allow-list, or on a session another run holds.",
    args: StartArgs,
    readOnly: false,
    destructive: false,
    run: (a, call) => startTool(policy, runs, a, call, log)
  },
  {
    name: "sweep_status",
    title: "A run's status",
    description:
      "A session's run: running, finished, failed, cancelled or stopped by the budget; its status line, client runs done, its stop reason, the summary so far with its trust block (confidence, noisy points, validity findings), and the budget left. wait_sec waits for its end up to that long with progress notifications.",
    args: StatusArgs,
    readOnly: true,
    destructive: false,
    run: (a, call) => statusTool(policy, runs, a, call)
  },
  {
    name: "show",
    title: "Show a session",
    description:
      "A sweep's sweep.json (every point, its statistics, the best or the tie, as `hyperloom sweep show --json` prints it) or a baseline's state, with a trust block: confidence (significant, tie, or none: one run per point, no point meeting the SLOs, a best not shown to beat the others), the noisy points, and every validity finding. Report them; a 'none' is no gain.",
    args: SessionArgs,
    readOnly: true,
    destructive: false,
    run: (a) => showTool(policy, a)
  },
  {
    name: "compare",
    title: "Compare two sessions",
    description:
      "Two sweep sessions (or two baselines) point by point with 95 % intervals and a verdict per point (faster, slower, no difference beyond the noise), the overall change and best against best; with one run per point on a side no confidence is claimed. fail_on gates ('output_throughput<-3%') set gate_failed.",
    args: CompareArgs,
    readOnly: true,
    destructive: false,
    run: (a) => compareTool(policy, a)
  },
  {
    name: "check",
    title: "Re-judge a session's validity",
    description:
      "`hyperloom check --json`: every measured run's validity judged again from what the session recorded (its engine's reported configuration, the client's counts, what the samplers saw), running and writing nothing: per run the verdict recorded and the verdict now, whether they agree, what could not be checked, and a sweep's best as recorded and as re-judged. Report every disagreement.",
    args: SessionArgs,
    readOnly: true,
    destructive: false,
    run: (a) => checkTool(policy, a)
  },
  {
    name: "baseline_run",
    title: "Run a baseline",
    description:
      "Runs a baseline benchmark (command, optionally against a serving engine) under a serving lease with hyperloom's stop rules, in the server's background; returns its status at once (wait: true waits). Same guards as start_sweep.",
    args: BaselineArgs,
    readOnly: false,
    destructive: false,
    run: (a, call) => baselineTool(policy, runs, a, call)
  },
  {
    name: "cancel",
    title: "Cancel a run",
    description:
      "Cancels a run this server started, as Ctrl-C does: its engines stopped, its leases released, its session saved as cancelled (a later start_sweep with the same arguments resumes it). Never stops what this server did not start.",
    args: SessionArgs,
    readOnly: false,
    destructive: true,
    run: (a) => cancelTool(policy, runs, a)
  }
]

/** The tools' names, for an unknown tool's error. */
export const TOOL_NAMES = [
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
] as const

// ---------------------------------------------------------------------------------------------
// The server

/**
 * McpServer with `tools/call` routed to `table` first: an unknown tool or bad arguments are a
 * tool error (`isError`), and the handler gets the call's progress token.
 */
const routedServer = (
  table: Map<
    string,
    (args: unknown, token: McpSchema.ProgressToken | undefined) => Effect.Effect<McpSchema.CallToolResult>
  >,
  unknown: (name: string) => Effect.Effect<McpSchema.CallToolResult>
) =>
  Layer.scoped(
    McpServer.McpServer,
    Effect.map(McpServer.McpServer.make, (server) =>
      Object.assign(Object.create(server) as typeof server, {
        callTool: (request: typeof McpSchema.CallTool.payloadSchema.Type) => {
          const handle = table.get(request.name)
          return handle === undefined
            ? unknown(request.name)
            : handle(request.arguments, request._meta?.progressToken)
        }
      })
    )
  )

/** Registers the tools, the session resources and the prompt on the server. */
const register = (policy: ServerPolicy, runs: Runs, table: Map<string, any>, logs: Queue.Queue<string>) =>
  Effect.gen(function* () {
    const server = yield* McpServer.McpServer
    const context = yield* Effect.context<any>()
    const log = (line: string) => Effect.asVoid(Queue.offer(logs, line))
    for (const spec of toolsOf(policy, runs, log)) {
      const decode = Schema.decodeUnknown(spec.args, { onExcessProperty: "error", errors: "all" })
      table.set(spec.name, (args: unknown, token: McpSchema.ProgressToken | undefined) => {
        const call: CallContext = {
          progress: (progress, total, message) =>
            token === undefined
              ? Effect.void
              : server.notifications["notifications/progress"]({
                  progressToken: token,
                  progress,
                  ...(total === undefined ? {} : { total }),
                  message
                }).pipe(Effect.ignore)
        }
        return decode(args ?? {}).pipe(
          Effect.mapError(
            (e) =>
              new ToolError({
                tag: "InvalidArguments",
                message: `${spec.name}'s arguments do not match its input schema (tools/list shows it): ${ParseResult.TreeFormatter.formatErrorSync(e).replace(/\s*\n\s*/g, " ")}`
              })
          ),
          Effect.flatMap((a) => spec.run(a, call)),
          Effect.map(success),
          Effect.catchAllCause((cause) =>
            Effect.flatMap(runs.left, (left) => {
              const failed = Cause.failureOption(cause)
              if (Option.isSome(failed)) return Effect.succeed(failure(failed.value, left))
              if (Cause.isInterruptedOnly(cause)) return Effect.interrupt
              return Effect.as(
                Effect.logError(`mcp ${spec.name}: ${Cause.pretty(cause)}`),
                failure(
                  new ToolError({
                    tag: "InternalError",
                    message: `hyperloom failed inside ${spec.name} (${Cause.squash(cause)}); the server goes on, and no session was lost: try sweep_status, or report this`
                  }),
                  left
                )
              )
            })
          ),
          Effect.provide(context)
        ) as Effect.Effect<McpSchema.CallToolResult>
      })
      yield* server.addTool({
        tool: new McpSchema.Tool({
          name: spec.name,
          title: spec.title,
          description: spec.description,
          inputSchema: inputSchema(spec.args),
          annotations: new McpSchema.ToolAnnotations({
            title: spec.title,
            readOnlyHint: spec.readOnly,
            destructiveHint: spec.destructive,
            idempotentHint: spec.readOnly,
            openWorldHint: false
          })
        }),
        handle: () => Effect.die("routed by the server's own table")
      })
    }
    yield* registerResources(policy)
    yield* registerPrompt
  })

/** A session's name as a URI parameter (one path segment under the root). */
const sessionParam = McpSchema.param("session", Schema.String)

const sessionsUnder = (root: string) =>
  Effect.sync(() => {
    try {
      return fs
        .readdirSync(root, { withFileTypes: true })
        .filter((d) => d.isDirectory())
        .map((d) => d.name)
    } catch {
      return []
    }
  })

const registerResources = (policy: ServerPolicy) =>
  Effect.gen(function* () {
    const completion = { session: () => sessionsUnder(policy.root) }
    const show = (name: string) => Effect.flatMap(sessionIn(policy, name), (dir) => showSession(policy, dir))
    yield* McpServer.registerResource`hyperloom://session/${sessionParam}/document`({
      name: "Session document",
      description:
        "A session's document (sweep.json or state.json) with its trust block, as the show tool returns it.",
      mimeType: "application/json",
      completion,
      content: (_uri, name) => Effect.map(show(name), (s) => JSON.stringify(s, null, 2))
    })
    yield* McpServer.registerResource`hyperloom://session/${sessionParam}/summary`({
      name: "Session summary",
      description:
        "A sweep's summary (verdict, best or tie, per combination its largest passing load) and trust block.",
      mimeType: "application/json",
      completion,
      content: (_uri, name) =>
        Effect.map(show(name), (s) =>
          JSON.stringify(
            { session: s.session, kind: s.kind, summary: s.document.summary ?? null, trust: s.trust },
            null,
            2
          )
        )
    })
    yield* McpServer.registerResource`hyperloom://session/${sessionParam}/report`({
      name: "Session report",
      description:
        "A sweep's HTML report (`hyperloom report`'s page: its charts against load, the Pareto chart).",
      mimeType: "text/html",
      completion,
      content: (_uri, name) =>
        Effect.gen(function* () {
          const dir = yield* sessionIn(policy, name)
          const doc = yield* Effect.flatMap(SweepStore, (s) => s.load(dir))
          if (Option.isNone(doc))
            return yield* new ToolError({ tag: "SessionNotFound", message: `no sweep session at '${name}'` })
          const env = yield* Effect.flatMap(AttemptFiles, (f) => f.readJson(path.join(dir, ENVIRONMENT_FILE)))
          const now = new Date(yield* Clock.currentTimeMillis).toISOString()
          return renderSweepReport([{ name, doc: doc.value, environment: environmentOf(env) }], now)
        })
    })
  })

const registerPrompt = McpServer.registerPrompt({
  name: "find_best_configuration",
  description: "Find the best configuration of a serving engine under an SLO with hyperloom, honestly.",
  parameters: Schema.Struct({
    engine: Schema.String.annotations({
      description: "The engine's command line, e.g. 'vllm serve MODEL --port $HYPERLOOM_PORT'"
    }),
    slo: Schema.String.annotations({ description: "The SLO(s), e.g. 'p99_ttft_ms<=500'" }),
    client: Schema.String.annotations({ description: "The load client's command line" }),
    params: Schema.optional(
      Schema.String.annotations({ description: "Engine parameters to try, e.g. 'max-num-seqs=64,128,256'" })
    )
  }),
  content: (p) =>
    Effect.succeed(
      [
        `Find the best configuration of this engine under this SLO with the hyperloom tools.`,
        `Engine: ${p.engine}`,
        `SLO: ${p.slo}`,
        `Client: ${p.client}`,
        ...(p.params === undefined ? [] : [`Parameters to try: ${p.params}`]),
        "",
        "1. doctor: is a lease feasible here, and what is left of the budget?",
        "2. plan_sweep: how many engine starts and client runs, and is it allowed and within the budget? Shrink it if not.",
        "3. start_sweep with repeats >= 2 (one run per point gives no confidence); then sweep_status until it ends.",
        "4. show: read summary.statement and the trust block. Report the best only with its confidence: a 'tie' is a tie, 'none' is no gain, every noisy point and validity finding is reported, never hidden.",
        "5. compare against a previous session before claiming an improvement over it."
      ].join("\n")
    )
})

// ---------------------------------------------------------------------------------------------
// Running it

/** The MCP protocol layer: stdio (newline-delimited JSON-RPC) or streamable HTTP. */
export type Transport = Layer.Layer<RpcServer.Protocol, never, never>

/** stdout for the protocol, left open when the server ends (main.ts still flushes it). */
const stdout = NodeSink.fromWritable(
  () => process.stdout,
  (cause) => cause,
  { endOnDone: false }
)

export const stdioTransport = (stdin = NodeStream.stdin): Transport =>
  RpcServer.layerProtocolStdio({ stdin, stdout }).pipe(
    Layer.provide(RpcSerialization.layerNdJsonRpc())
  ) as Transport

/**
 * Serves the tools over `transport` until it ends (stdin closed) or the process is interrupted;
 * then the runs are cancelled or awaited as `--on-disconnect` says.
 */
export const serveWith = (options: McpOptions, transport: Layer.Layer<RpcServer.Protocol, unknown, any>) =>
  Effect.gen(function* () {
    fs.mkdirSync(options.sessions, { recursive: true })
    const root = fs.realpathSync(options.sessions)
    const policy: ServerPolicy = {
      root,
      allow: options.allow,
      budget: options.budget,
      allowRepair: options.allowRepair
    }
    // The runs live in a scope of their own: closing it cancels every run cleanly.
    const runsScope = yield* Effect.acquireRelease(Scope.make(), (scope, exit) => Scope.close(scope, exit))
    const runs = yield* makeRuns(runsScope, options.budget)
    const logs = yield* Queue.sliding<string>(1000)
    const table = new Map<string, any>()
    const server = routedServer(table, (name) =>
      Effect.map(runs.left, (left) =>
        failure(
          new ToolError({
            tag: "UnknownTool",
            message: `there is no tool '${name}'; the tools are ${TOOL_NAMES.join(", ")} (tools/list describes each)`
          }),
          left
        )
      )
    )
    const info = { name: "hyperloom", version: VERSION }
    const running = Layer.scopedDiscard(
      Effect.gen(function* () {
        yield* register(policy, runs, table, logs)
        // said once the transport is built: over HTTP, Node's server listens by then (a client that
        // waits for this line must never find the port closed)
        yield* Effect.logInfo(
          `mcp: serving ${options.http === undefined ? "on stdio" : `on http://${options.host}:${options.http}${MCP_PATH}`}; sessions under ${root}; allowed programs: ${options.allow.length === 0 ? "none" : options.allow.join(", ")}; ${renderLeft(yield* runs.left)}; repair ${options.allowRepair ? "allowed through the guards" : "refused"}; on disconnect: ${options.onDisconnect}`
        )
        const mcp = yield* McpServer.McpServer
        // the runs' status lines and warnings, as logging notifications
        yield* Queue.take(logs).pipe(
          Effect.flatMap((line) =>
            mcp.notifications["notifications/message"]({ level: "info", logger: "hyperloom", data: line })
          ),
          Effect.ignore,
          Effect.forever,
          Effect.forkScoped
        )
        return yield* McpServer.run(info)
      })
    ).pipe(Layer.provide(server), Layer.provide(transport))
    const fiber = yield* Effect.fork(Layer.launch(running))
    const exit = yield* Fiber.await(fiber)
    if (Exit.isFailure(exit) && !Exit.isInterrupted(exit))
      yield* Effect.logError(`mcp: the server stopped: ${Cause.pretty(exit.cause)}`)
    const active = runs.all().filter((e) => e.exit === undefined)
    if (active.length > 0) {
      if (options.onDisconnect === "continue") {
        yield* Effect.logInfo(
          `mcp: the client went away; ${active.length} run(s) go on to their end (--on-disconnect continue)`
        )
        yield* runs.awaitAll
      } else {
        yield* Effect.logInfo(
          `mcp: the client went away; cancelling ${active.length} run(s) (--on-disconnect cancel)`
        )
        yield* Effect.forEach(active, (e) => runs.cancel(e), { concurrency: "unbounded", discard: true })
      }
    }
  }).pipe(Effect.scoped)

/** The MCP server on stdio. */
export const serveStdio = (options: McpOptions) => serveWith(options, stdioTransport())
