/**
 * `hyperloom mcp` (docs/agents.md): hyperloom as a Model Context Protocol server for agents, on
 * stdio or streamable HTTP, with the guard rails an agent cannot talk its way around: one session
 * root, an allow-list of programs, a budget, no repair unless allowed. The server's modules
 * (@effect/ai's McpServer and its peers) are loaded only when it runs.
 */
import * as path from "node:path"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Clock, Effect, Option } from "effect"
import { UsageError } from "../Exit.js"
import { positiveSeconds } from "../Shared.js"

const http = Options.integer("http").pipe(
  Options.withPseudoName("PORT"),
  Options.withDescription(
    "Serve streamable HTTP on PORT (path /mcp) instead of stdio, bound to 127.0.0.1 unless --host says otherwise."
  ),
  Options.optional
)

const host = Options.text("host").pipe(
  Options.withPseudoName("ADDR"),
  Options.withDescription("With --http: the address to bind (default 127.0.0.1: this host only)."),
  Options.withDefault("127.0.0.1")
)

const sessions = Options.text("sessions").pipe(
  Options.withPseudoName("DIR"),
  Options.withDescription(
    "The one directory the agent's sessions live in (created if missing): every session is named relative to it; nothing outside it (after `..` and symlinks) is read or written."
  )
)

const allowServer = Options.text("allow-server").pipe(
  Options.withPseudoName("PROGRAMS"),
  Options.withDescription(
    "Programs the agent's engine and client command lines may start (e.g. vllm,python3; repeat or comma-separate). None by default: every sweep is refused until some are named."
  ),
  Options.repeated
)

const maxEngineStarts = Options.integer("max-engine-starts").pipe(
  Options.withPseudoName("N"),
  Options.withDescription(
    "The server's budget of engine starts (every combination's engine and every baseline attempt counts); a start past it is refused and the run stopped, naming what is left."
  ),
  Options.optional
)

const maxGpuHours = Options.float("max-gpu-hours").pipe(
  Options.withPseudoName("H"),
  Options.withDescription(
    "The server's budget of GPU hours (engines up, times their GPUs); work past it is refused, and a run is bounded to what is left."
  ),
  Options.optional
)

const deadline = positiveSeconds(
  "deadline",
  "Seconds from the server's start after which it takes no new work; runs in flight stop (resumable) at it."
)

const allowRepair = Options.boolean("allow-repair").pipe(
  Options.withDescription(
    "Let a lease repair the head (restart it with serving_slot) when every guard holds; without it this server never repairs, whatever the guards say."
  )
)

const onDisconnect = Options.choice("on-disconnect", ["cancel", "continue"] as const).pipe(
  Options.withDescription(
    "When the client goes away (stdin closes): cancel the runs in flight as Ctrl-C does (default), or let them run to their end; the server exits after."
  ),
  Options.withDefault("cancel" as const)
)

/** What `--allow-repair`'s absence makes the guards say. */
export const REPAIR_REFUSED =
  "this hyperloom is an MCP server started without --allow-repair: it never repairs the head (ask the operator to run `hyperloom ray repair`, or to restart the server with --allow-repair)"

export const mcpCommand = Command.make(
  "mcp",
  { http, host, sessions, allowServer, maxEngineStarts, maxGpuHours, deadline, allowRepair, onDisconnect },
  (o) =>
    Effect.gen(function* () {
      if (o.sessions.trim() === "")
        return yield* new UsageError({ detail: "--sessions must name a directory, got an empty string" })
      const port = Option.getOrUndefined(o.http)
      if (port !== undefined && (port < 0 || port > 65535))
        return yield* new UsageError({ detail: `--http must be a port (0-65535), got ${port}` })
      for (const [name, v] of [
        ["--max-engine-starts", Option.getOrUndefined(o.maxEngineStarts)],
        ["--max-gpu-hours", Option.getOrUndefined(o.maxGpuHours)]
      ] as const)
        if (v !== undefined && !(v >= 0))
          return yield* new UsageError({ detail: `${name} must be a number >= 0, got ${v}` })
      const now = yield* Clock.currentTimeMillis
      const { allowListOf } = yield* Effect.promise(() => import("../mcp/Policy.js"))
      const options = {
        http: port,
        host: o.host,
        sessions: path.resolve(o.sessions),
        allow: allowListOf(o.allowServer),
        budget: {
          maxEngineStarts: Option.getOrUndefined(o.maxEngineStarts),
          maxGpuHours: Option.getOrUndefined(o.maxGpuHours),
          deadlineAt: Option.getOrUndefined(Option.map(o.deadline, (s) => now + s * 1000))
        },
        allowRepair: o.allowRepair,
        onDisconnect: o.onDisconnect
      }
      if (port === undefined) {
        const server = yield* Effect.promise(() => import("../mcp/Server.js"))
        return yield* server.serveStdio(options)
      }
      const server = yield* Effect.promise(() => import("../mcp/Http.js"))
      return yield* server.serveHttp(options)
    })
).pipe(
  Command.withDescription(
    "Serve hyperloom's tools to an agent over the Model Context Protocol (stdio, or --http PORT): doctor, queue, plan_sweep, start_sweep, sweep_status, show, compare, check, baseline_run, cancel; sessions as resources; a prompt. Every run is leased, contained and validated as the CLI's, under a budget, one session root and an allow-list of programs (docs/agents.md)."
  )
)
