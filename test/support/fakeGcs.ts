/**
 * A tiny in-process GCS: a grpc-js server implementing the project's `proto/gcs.proto` and serving
 * recorded replies (`test/fixtures/gcs/*.json`, recorded from a real head by
 * `test/fixtures/gcs/record.mjs`). Replies can be swapped for errors, error statuses or hangs,
 * and every call's method, request and metadata is recorded.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as grpc from "@grpc/grpc-js"
import * as loader from "@grpc/proto-loader"
import { gcsProtoPath } from "../../src/services/GcsClient.js"

export const fixturesDir = path.resolve(import.meta.dirname, "../fixtures")

/** A recorded set of replies, by method name. */
export type Replies = Record<string, object>

export const loadReplies = (name: string): Replies =>
  JSON.parse(fs.readFileSync(path.join(fixturesDir, "gcs", `${name}.json`), "utf8"))

/** What a method does: answer with a reply object, fail with a gRPC status, or never answer. */
export type Behaviour = object | { readonly grpcError: { code: grpc.status; details: string } } | "hang"

export interface FakeGcsOptions {
  readonly replies: Replies
  /** Per-method overrides of the recorded replies. */
  readonly behaviours?: Record<string, Behaviour>
  /** Services to leave out (their methods then answer UNIMPLEMENTED). */
  readonly omitServices?: ReadonlyArray<string>
  /** When set, every call without `authorization: Bearer <token>` fails UNAUTHENTICATED. */
  readonly requireToken?: string
  /** Host to bind (default 127.0.0.1; `[::1]` for IPv6). */
  readonly host?: string
  /** Port to bind (default: any free one). */
  readonly port?: number
}

export interface RecordedCall {
  readonly method: string
  readonly request: Record<string, unknown>
  readonly metadata: Record<string, string>
}

export interface FakeGcs {
  readonly address: string
  readonly port: number
  readonly calls: Array<RecordedCall>
  stop(): Promise<void>
}

/** The proto loaded in the recordings' shapes: bytes as base64, 64-bit integers as strings, enums by name. */
export const recordedDefinition = () =>
  loader.loadSync(gcsProtoPath(), {
    keepCase: true,
    longs: String,
    enums: String,
    bytes: String,
    defaults: true
  })

const SERVICES = [
  "ray.rpc.NodeInfoGcsService",
  "ray.rpc.ActorInfoGcsService",
  "ray.rpc.JobInfoGcsService",
  "ray.rpc.NodeResourceInfoGcsService",
  "ray.rpc.PlacementGroupInfoGcsService"
]

export const startFakeGcs = async (options: FakeGcsOptions): Promise<FakeGcs> => {
  const def = recordedDefinition()
  const server = new grpc.Server()
  const calls: Array<RecordedCall> = []
  const hanging = new Set<grpc.ServerUnaryCall<unknown, unknown>>()
  for (const serviceName of SERVICES) {
    if (options.omitServices?.includes(serviceName)) continue
    const service = def[serviceName] as grpc.ServiceDefinition
    const impl: grpc.UntypedServiceImplementation = {}
    for (const method of Object.keys(service)) {
      impl[method] = (call: grpc.ServerUnaryCall<any, any>, callback: grpc.sendUnaryData<any>) => {
        const metadata: Record<string, string> = {}
        for (const [k, v] of Object.entries(call.metadata.getMap())) metadata[k] = String(v)
        calls.push({ method, request: call.request, metadata })
        if (
          options.requireToken !== undefined &&
          metadata.authorization !== `Bearer ${options.requireToken}`
        ) {
          callback({ code: grpc.status.UNAUTHENTICATED, details: "Invalid or missing authentication token" })
          return
        }
        const behaviour = options.behaviours?.[method] ?? options.replies[method] ?? {}
        if (behaviour === "hang") {
          hanging.add(call)
          return
        }
        if ("grpcError" in behaviour) {
          callback(behaviour.grpcError)
          return
        }
        callback(null, behaviour)
      }
    }
    server.addService(service, impl)
  }
  const host = options.host ?? "127.0.0.1"
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${options.port ?? 0}`, grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p)
    )
  )
  return {
    address: `${host}:${port}`,
    port,
    calls,
    stop: () =>
      new Promise<void>((resolve) => {
        server.forceShutdown()
        hanging.clear()
        resolve()
      })
  }
}

/** A local port on which nothing listens (bound, then released). */
export const deadPort = async (): Promise<number> => {
  const net = await import("node:net")
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.once("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const addr = s.address()
      const port = typeof addr === "object" && addr !== null ? addr.port : 0
      s.close(() => resolve(port))
    })
  })
}

export interface TcpProxy {
  readonly address: string
  /** Connections accepted so far. */
  accepted(): number
  /** Connections open right now. */
  open(): number
  close(): Promise<void>
}

/** A TCP proxy in front of a server, counting the client connections made through it. */
export const startTcpProxy = async (targetPort: number, targetHost = "127.0.0.1"): Promise<TcpProxy> => {
  const net = await import("node:net")
  const sockets = new Set<import("node:net").Socket>()
  let accepted = 0
  const server = net.createServer((client) => {
    accepted++
    sockets.add(client)
    const upstream = net.connect(targetPort, targetHost)
    client.pipe(upstream).pipe(client)
    const done = () => {
      sockets.delete(client)
      client.destroy()
      upstream.destroy()
    }
    client.on("close", done).on("error", done)
    upstream.on("close", done).on("error", done)
  })
  const port = await new Promise<number>((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const addr = server.address()
      resolve(typeof addr === "object" && addr !== null ? addr.port : 0)
    })
  })
  return {
    address: `127.0.0.1:${port}`,
    accepted: () => accepted,
    open: () => sockets.size,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      })
  }
}
