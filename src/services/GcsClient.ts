/**
 * GcsClient: reads a Ray cluster's snapshot from its GCS over gRPC (proto/gcs.proto):
 * the transport (one grpc-js client per GCS address, deadlines, auth metadata), the seven calls
 * and the decoding of their replies into the domain's `ClusterSnapshot`. Which cluster to read
 * (RAY_ADDRESS, the current-cluster file, /proc) is ClusterInspector's job, built on this one.
 */
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import type * as Grpc from "@grpc/grpc-js"
import type * as ProtoLoader from "@grpc/proto-loader"
import { Context, Effect, Layer, Redacted } from "effect"
import { ClusterUnreachable } from "../domain/Errors.js"
import type {
  ActorInfo,
  ActorState,
  ClusterSnapshot,
  JobInfo,
  NodeInfo,
  NodeResources,
  PlacementGroupInfo,
  PlacementGroupState,
  ResourceDemand,
  ResourceMap
} from "../domain/Snapshot.js"
import { oneLine } from "../domain/Text.js"
import type { GcsMethod, GcsMethods } from "./GcsProto.js"
import { packageFile } from "./PackagePaths.js"
import { Settings, type SettingsShape } from "./Settings.js"

export interface GcsClientShape {
  /** Reads cluster id, nodes, actors, jobs, per-node resources, queued demand and placement groups from the GCS. */
  readonly snapshot: (gcsAddress: string) => Effect.Effect<ClusterSnapshot, ClusterUnreachable>
}

export class GcsClient extends Context.Tag("hyperloom/services/GcsClient")<GcsClient, GcsClientShape>() {}

// ---- the GCS protocol, loaded once per process on first use --------------------------------

/** proto-loader options: snake_case names, bytes as Buffers, 64-bit ints as Numbers, enums as names. */
export const PROTO_LOADER_OPTIONS: ProtoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true
}

/** The project's minimal GCS proto, shipped in the package's `proto/` folder. */
export const gcsProtoPath = (): string => packageFile("proto", "gcs.proto")

const SERVICES = {
  GetClusterId: "ray.rpc.NodeInfoGcsService",
  GetAllNodeInfo: "ray.rpc.NodeInfoGcsService",
  CheckAlive: "ray.rpc.NodeInfoGcsService",
  GetAllActorInfo: "ray.rpc.ActorInfoGcsService",
  GetAllJobInfo: "ray.rpc.JobInfoGcsService",
  GetAllResourceUsage: "ray.rpc.NodeResourceInfoGcsService",
  GetAllPlacementGroup: "ray.rpc.PlacementGroupInfoGcsService"
} as const

type MethodName = keyof typeof SERVICES

interface GrpcRuntime {
  readonly grpc: typeof Grpc
  readonly methods: Readonly<Record<MethodName, GcsMethod>>
}

let runtime: Promise<GrpcRuntime> | undefined

const interop = <A extends object>(mod: A, probe: string): A =>
  probe in mod ? mod : ((mod as { default?: A }).default ?? mod)

/**
 * grpc-js and the GCS methods, loaded lazily and once per process (importing grpc-js costs
 * ~50 ms: commands that never read the GCS never pay it). The methods come from GcsProto.ts: the
 * proto parsed at run time, or in the bundled CLI static code generated from it at build time.
 */
export const loadGrpcRuntime = (): Promise<GrpcRuntime> => {
  runtime ??= (async () => {
    const [grpcModule, gcsProto] = await Promise.all([import("@grpc/grpc-js"), import("./GcsProto.js")])
    const grpc = interop(grpcModule, "Client")
    const file = gcsProtoPath()
    let all: GcsMethods
    try {
      all = await gcsProto.loadGcsMethods(file, PROTO_LOADER_OPTIONS)
    } catch (e) {
      throw new Error(
        `hyperloom: cannot load the GCS proto ${file}: ${e instanceof Error ? e.message : String(e)}`
      )
    }
    const methods = {} as Record<MethodName, GcsMethod>
    for (const [method, service] of Object.entries(SERVICES) as Array<[MethodName, string]>) {
      const def = all[`${service}/${method}`]
      if (def === undefined) throw new Error(`hyperloom: ${file} lacks ${service}.${method}`)
      methods[method] = def
    }
    return { grpc, methods }
  })()
  runtime.catch(() => {
    runtime = undefined
  })
  return runtime
}

// ---- decoding replies ------------------------------------------------------------------------

const hex = (b: unknown): string =>
  Buffer.isBuffer(b) ? b.toString("hex") : b instanceof Uint8Array ? Buffer.from(b).toString("hex") : ""

const num = (v: unknown): number => {
  const n = typeof v === "number" ? v : typeof v === "string" ? Number(v) : 0
  return Number.isFinite(n) ? n : 0
}

const str = (v: unknown): string => (typeof v === "string" ? v : "")

const resourceMap = (v: unknown): ResourceMap => {
  const out: Record<string, number> = {}
  if (v !== null && typeof v === "object") {
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) out[k] = num(x)
  }
  return out
}

const list = (v: unknown): ReadonlyArray<Record<string, any>> => (Array.isArray(v) ? v : [])

const ACTOR_STATES: ReadonlySet<string> = new Set([
  "DEPENDENCIES_UNREADY",
  "PENDING_CREATION",
  "ALIVE",
  "RESTARTING",
  "DEAD"
])

const toNode = (n: Record<string, any>): NodeInfo => ({
  nodeId: hex(n.node_id),
  address: str(n.node_manager_address),
  hostname: str(n.node_manager_hostname),
  nodeName: str(n.node_name),
  // An unknown state is not "ALIVE": guards that need a live node then refuse.
  state: n.state === "ALIVE" ? "ALIVE" : "DEAD",
  isHead: n.is_head_node === true,
  resourcesTotal: resourceMap(n.resources_total),
  startTimeMs: num(n.start_time_ms),
  endTimeMs: num(n.end_time_ms)
})

const toActor = (a: Record<string, any>): ActorInfo => ({
  actorId: hex(a.actor_id),
  jobId: hex(a.job_id),
  // An unknown state is not "DEAD": guards that need every actor dead then refuse.
  state: ACTOR_STATES.has(a.state) ? (a.state as ActorState) : "PENDING_CREATION",
  isDetached: a.is_detached === true,
  name: str(a.name),
  className: str(a.class_name),
  pid: num(a.pid),
  nodeId: hex(a.node_id),
  requiredResources: resourceMap(a.required_resources)
})

const toJob = (j: Record<string, any>): JobInfo => ({
  jobId: hex(j.job_id),
  isDead: j.is_dead === true,
  driverPid: num(j.driver_pid),
  driverIp: str(j.driver_ip_address),
  entrypoint: str(j.entrypoint)
})

const toResources = (r: Record<string, any>): NodeResources => ({
  nodeId: hex(r.node_id),
  total: resourceMap(r.resources_total),
  available: resourceMap(r.resources_available)
})

const toDemand = (d: Record<string, any>): ResourceDemand => ({
  shape: resourceMap(d.shape),
  readyQueued: num(d.num_ready_requests_queued),
  infeasibleQueued: num(d.num_infeasible_requests_queued)
})

const GROUP_STATES: ReadonlySet<string> = new Set([
  "PENDING",
  "PREPARED",
  "CREATED",
  "REMOVED",
  "RESCHEDULING"
])

const toPlacementGroup = (g: Record<string, any>): PlacementGroupInfo => ({
  groupId: hex(g.placement_group_id),
  name: str(g.name),
  // An unknown state is not "REMOVED": the guards then refuse.
  state: GROUP_STATES.has(g.state) ? (g.state as PlacementGroupState) : "PENDING",
  strategy: str(g.strategy),
  isDetached: g.is_detached === true,
  creatorJobId: hex(g.creator_job_id),
  creatorJobDead: g.creator_job_dead === true,
  bundles: list(g.bundles).map((b, i) => ({
    index: typeof b.bundle_id?.bundle_index === "number" ? b.bundle_id.bundle_index : i,
    resources: resourceMap(b.unit_resources),
    nodeId: hex(b.node_id)
  }))
})

// ---- failures --------------------------------------------------------------------------------

/**
 * grpc-js's `No connection established. Last error: Error: connect ECONNREFUSED 1.2.3.4:5
 * (2026-…). Resolution note: …` → `connect ECONNREFUSED 1.2.3.4:5` (plus the note when it says
 * something).
 */
export const transportReason = (details: string): string => {
  const [head = "", note = ""] = oneLine(details).split(/\.? ?Resolution note: ?/)
  const m = /Last error: (?:\w*Error: )?(.*)$/.exec(head)
  const cause = (m ? m[1]! : head).replace(/ \(\d{4}-\d\d-\d\dT[^)]*\)/g, "").replace(/\.$/, "")
  const reason = cause === "null" || cause === "undefined" ? "" : cause
  const extra = note.trim().replace(/\.$/, "")
  return extra === "" ? reason : reason === "" ? extra : `${reason}; ${extra}`
}

/** A one-line account of a failed call, for `ClusterUnreachable.detail`. */
export const describeCallError = (
  grpc: typeof Grpc,
  method: string,
  err: Grpc.ServiceError,
  deadlineMs: number
): string => {
  const S = grpc.status
  const details = oneLine(err.details ?? err.message ?? "")
  switch (err.code) {
    case S.UNAVAILABLE: {
      const reason = transportReason(details)
      return `nothing answers (is Ray running?)${reason ? `: ${reason}` : ""}`
    }
    case S.DEADLINE_EXCEEDED:
      return `no answer to ${method} within ${deadlineMs / 1000} s (a GCS that hangs, or a host that drops packets)`
    case S.UNAUTHENTICATED:
      return `${method} was refused as unauthenticated (${details}); with RAY_AUTH_MODE=token set RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH to the cluster's token`
    case S.PERMISSION_DENIED:
      return `${method} was refused: ${details}`
    case S.UNIMPLEMENTED:
      return `${method} is not implemented there: not a Ray GCS, or a Ray version this hyperloom cannot read`
    default:
      return `${method} failed with ${S[err.code] ?? err.code}${details ? `: ${details}` : ""}`
  }
}

// ---- the live service ------------------------------------------------------------------------

export interface LiveOptions {
  /** Deadline of each GCS call (default 3000 ms). */
  readonly deadlineMs?: number
}

interface Connection {
  readonly client: Grpc.Client
  readonly metadata: Grpc.Metadata
}

const readTextFile = (file: string) =>
  Effect.tryPromise({
    try: () => fs.readFile(file, "utf8"),
    catch: (e) => e as NodeJS.ErrnoException
  })

/**
 * The home when the settings have no HOME: the password database's (what Ray's `Path.home()`
 * falls back to), never `os.homedir()`, which reads this process's HOME past the Settings layer.
 */
const passwdHome = () => {
  try {
    return os.userInfo().homedir
  } catch {
    return "/"
  }
}

/** `authorization: Bearer <token>` when RAY_AUTH_MODE=token (token: setting, else its file, else ~/.ray/auth_token). */
const authToken = (settings: SettingsShape, address: string) =>
  Effect.gen(function* () {
    if ((settings.authMode ?? "").toLowerCase() !== "token") return undefined
    if (settings.authToken !== undefined) return Redacted.value(settings.authToken)
    const file = settings.authTokenPath ?? path.join(settings.home ?? passwdHome(), ".ray", "auth_token")
    const text = yield* readTextFile(file).pipe(
      Effect.mapError(
        (e) =>
          new ClusterUnreachable({
            address,
            detail: `RAY_AUTH_MODE=token but the token file ${file} cannot be read (${e.code ?? e.message}); set RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH`
          })
      )
    )
    const token = text.trim()
    if (token === "") {
      return yield* new ClusterUnreachable({
        address,
        detail: `RAY_AUTH_MODE=token but the token file ${file} is empty`
      })
    }
    return token
  })

const CHANNEL_OPTIONS: Grpc.ChannelOptions = {
  // Never route the GCS through an HTTP(S) proxy from the environment.
  "grpc.enable_http_proxy": 0,
  // Own subchannels: a failed connection's backoff is not shared with the next client we make.
  "grpc.use_local_subchannel_pool": 1,
  "grpc.initial_reconnect_backoff_ms": 100,
  "grpc.max_reconnect_backoff_ms": 1000,
  "grpc.max_receive_message_length": 256 * 1024 * 1024
}

const makeLive = (options: LiveOptions = {}) =>
  Effect.gen(function* () {
    const settings = yield* Settings
    const deadlineMs = options.deadlineMs ?? 3000
    const connections = new Map<string, Connection>()

    const closeAll = Effect.sync(() => {
      for (const c of connections.values()) c.client.close()
      connections.clear()
    })
    yield* Effect.addFinalizer(() => closeAll)

    const evict = (address: string) =>
      Effect.sync(() => {
        const c = connections.get(address)
        if (c !== undefined) {
          connections.delete(address)
          c.client.close()
        }
      })

    const connect = (rt: GrpcRuntime, address: string) =>
      Effect.gen(function* () {
        const cached = connections.get(address)
        if (cached !== undefined) return cached
        const token = yield* authToken(settings, address)
        const created = yield* Effect.try({
          try: () => {
            const metadata = new rt.grpc.Metadata({ waitForReady: false })
            if (token !== undefined) metadata.set("authorization", `Bearer ${token}`)
            const client = new rt.grpc.Client(address, rt.grpc.credentials.createInsecure(), CHANNEL_OPTIONS)
            return { client, metadata }
          },
          catch: (e) =>
            new ClusterUnreachable({
              address,
              detail: `not a usable GCS address (${oneLine(e instanceof Error ? e.message : String(e))})`
            })
        })
        // Another fiber may have connected meanwhile: keep one connection per address.
        const again = connections.get(address)
        if (again !== undefined) {
          created.client.close()
          return again
        }
        connections.set(address, created)
        return created
      })

    const call = (rt: GrpcRuntime, conn: Connection, address: string, method: MethodName, request: object) =>
      Effect.async<Record<string, any>, ClusterUnreachable>((resume) => {
        const def = rt.methods[method]
        const handle = conn.client.makeUnaryRequest(
          def.path,
          def.requestSerialize,
          def.responseDeserialize,
          request,
          conn.metadata.clone(),
          // Not the Effect Clock, deliberately: grpc-js takes an absolute wall-clock deadline and
          // times it with its own real timers, which a TestClock can neither see nor move.
          { deadline: Date.now() + deadlineMs },
          (err, reply) => {
            if (err) {
              resume(
                Effect.fail(
                  new ClusterUnreachable({
                    address,
                    detail: describeCallError(rt.grpc, method, err, deadlineMs)
                  })
                )
              )
              return
            }
            const status = (reply as Record<string, any> | undefined)?.status
            if (status && num(status.code) !== 0) {
              const message = oneLine(str(status.message))
              resume(
                Effect.fail(
                  new ClusterUnreachable({
                    address,
                    detail: `${method} answered with status ${num(status.code)}${message ? `: ${message}` : ""}`
                  })
                )
              )
              return
            }
            resume(Effect.succeed((reply ?? {}) as Record<string, any>))
          }
        )
        return Effect.sync(() => handle.cancel())
      })

    const snapshot = Effect.fn("GcsClient.snapshot")(function* (gcsAddress: string) {
      yield* Effect.annotateCurrentSpan("gcsAddress", gcsAddress)
      const rt = yield* Effect.promise(() => loadGrpcRuntime())
      const conn = yield* connect(rt, gcsAddress)
      const replies = yield* Effect.all(
        {
          clusterId: call(rt, conn, gcsAddress, "GetClusterId", {}),
          nodes: call(rt, conn, gcsAddress, "GetAllNodeInfo", {}),
          alive: call(rt, conn, gcsAddress, "CheckAlive", {}),
          actors: call(rt, conn, gcsAddress, "GetAllActorInfo", { show_dead_jobs: false }),
          jobs: call(rt, conn, gcsAddress, "GetAllJobInfo", {}),
          usage: call(rt, conn, gcsAddress, "GetAllResourceUsage", {}),
          groups: call(rt, conn, gcsAddress, "GetAllPlacementGroup", {})
        },
        { concurrency: "unbounded" }
      ).pipe(Effect.tapError(() => evict(gcsAddress)))
      const usage = replies.usage.resource_usage_data ?? {}
      const version = str(replies.alive.ray_version)
      const result: ClusterSnapshot = {
        gcsAddress,
        clusterId: hex(replies.clusterId.cluster_id),
        nodes: list(replies.nodes.node_info_list).map(toNode),
        actors: list(replies.actors.actor_table_data).map(toActor),
        jobs: list(replies.jobs.job_info_list).map(toJob),
        resources: list(usage.batch).map(toResources),
        demands: list(usage.resource_load_by_shape?.resource_demands).map(toDemand),
        placementGroups: list(replies.groups.placement_group_table_data).map(toPlacementGroup),
        rayVersion: version === "" ? undefined : version
      }
      return result
    })

    return GcsClient.of({ snapshot })
  })

/**
 * The live layer: reads the GCS over gRPC. Scoped: one client per GCS address is kept for warm
 * calls (dropped after a failure, so a restarted head is reached afresh) and all are closed when
 * the layer's scope closes.
 */
export const layer: Layer.Layer<GcsClient, never, Settings> = Layer.scoped(GcsClient, makeLive())

/** The live layer with options (e.g. a shorter call deadline). */
export const layerWith = (options: LiveOptions): Layer.Layer<GcsClient, never, Settings> =>
  Layer.scoped(GcsClient, makeLive(options))

// ---- the test layer --------------------------------------------------------------------------

export type SnapshotAnswer = ClusterSnapshot | ClusterUnreachable

/**
 * What `snapshot(address)` gives: a table by address, or a function (e.g. one that answers
 * differently before and after a repair). Unknown addresses fail as nothing answering.
 */
export type TestSnapshots =
  | Readonly<Record<string, SnapshotAnswer>>
  | ((gcsAddress: string) => SnapshotAnswer | undefined)

export interface TestOptions {
  readonly snapshots?: TestSnapshots
}

/** The test GcsClient's answers, without a layer (ClusterInspector's test layer answers with it too). */
export const makeTest = (options: TestOptions = {}): GcsClientShape => {
  const lookup = (address: string): SnapshotAnswer | undefined =>
    typeof options.snapshots === "function" ? options.snapshots(address) : options.snapshots?.[address]
  return {
    snapshot: (gcsAddress) =>
      Effect.suspend(() => {
        const answer = lookup(gcsAddress)
        if (answer === undefined) {
          return Effect.fail(
            new ClusterUnreachable({ address: gcsAddress, detail: "nothing answers (is Ray running?)" })
          )
        }
        return "_tag" in answer ? Effect.fail(answer) : Effect.succeed(answer)
      })
  }
}

/** A test layer answering with the given snapshots (or errors); nothing is read over the network. */
export const layerTest = (options: TestOptions = {}): Layer.Layer<GcsClient> =>
  Layer.succeed(GcsClient, GcsClient.of(makeTest(options)))
