/**
 * `hyperloom mcp --http PORT`: the MCP server over streamable HTTP (POST /mcp, JSON responses), on
 * Node's HTTP server, bound to 127.0.0.1 unless --host says otherwise. Loaded only for --http: Node's
 * HTTP server layer brings platform modules no other command needs.
 */
import { createServer } from "node:http"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as RpcServer from "@effect/rpc/RpcServer"
import { Layer } from "effect"
import { MCP_PATH, type McpOptions, serveWith } from "./Server.js"

/**
 * The server's HTTP side: POST /mcp carries JSON-RPC; a GET (a client asking for a server-sent
 * event stream) is answered 405, which tells a streamable-HTTP client there is none. The routes are
 * registered before the router is served (Layer.provideMerge builds them first).
 */
export const httpTransport = (options: McpOptions) =>
  HttpRouter.Default.serve().pipe(
    Layer.provide(NodeHttpServer.layerServer(createServer, { port: options.http ?? 0, host: options.host })),
    Layer.provideMerge(
      Layer.merge(
        RpcServer.layerProtocolHttp({ path: MCP_PATH }).pipe(Layer.provide(RpcSerialization.layerJsonRpc())),
        HttpRouter.Default.use((router) => router.get(MCP_PATH, HttpServerResponse.empty({ status: 405 })))
      )
    )
  )

export const serveHttp = (options: McpOptions) => serveWith(options, httpTransport(options))
