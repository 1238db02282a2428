/**
 * Which GCS to read (docs/design.md#addresses-and-the-host), decided the way Ray itself picks a cluster.
 * Pure: the ClusterInspector service gathers the inputs (RAY_ADDRESS, the current-cluster file,
 * the host's daemons) and calls `resolveCluster`.
 */
import { Either, Option } from "effect"
import { formatHostPort, parseRayAddress, type RayAddress } from "./Address.js"
import { rayletGcsAddresses } from "./Daemons.js"
import { InvalidAddress, MultipleClusters, NoClusterFound } from "./Errors.js"
import type { RayDaemon } from "./Snapshot.js"

/** Which GCS to read and how it was chosen. */
export interface ResolvedCluster {
  /** `host:port` of the GCS (IPv6 hosts in brackets). */
  readonly gcsAddress: string
  readonly host: string
  readonly port: number
  /** RAY_ADDRESS named it (`host:port` or `local`); hyperloom never repairs such a cluster. */
  readonly explicit: boolean
  readonly source: "RAY_ADDRESS" | "current_cluster_file" | "raylet_cmdline"
}

export interface ResolveInput {
  /** RAY_ADDRESS as parsed. */
  readonly address: RayAddress
  /** Path of `<rayTempDir>/ray_current_cluster`, for messages. */
  readonly currentClusterPath: string
  /** The file's content when it exists (it may be stale: the snapshot then fails fast). */
  readonly currentClusterFile: Option.Option<string>
  /**
   * The host's Ray daemons, consulted only when the file is absent (Left: why /proc could not be
   * read). The caller may pass `Either.right([])` when the file is present.
   */
  readonly daemons: Either.Either<ReadonlyArray<RayDaemon>, string>
}

export type ResolveError = InvalidAddress | NoClusterFound | MultipleClusters

const RAY_CLIENT_REASON =
  "a ray:// Ray Client URL cannot be read over the GCS; set RAY_ADDRESS to the head's GCS host:port (e.g. 192.0.2.2:6379) or unset it"

const hostPort = (
  value: string,
  explicit: boolean,
  source: ResolvedCluster["source"],
  what: string
): Either.Either<ResolvedCluster, InvalidAddress> => {
  const parsed = parseRayAddress(value)
  if (Either.isRight(parsed) && parsed.right._tag === "HostPort") {
    const { host, port } = parsed.right
    return Either.right({ gcsAddress: formatHostPort(host, port), host, port, explicit, source })
  }
  return Either.left(new InvalidAddress({ value, reason: `${what} is not a GCS host:port` }))
}

/** The local cluster: the current-cluster file, else the single `--gcs-address` on live raylets. */
const resolveLocal = (
  input: ResolveInput,
  explicit: boolean
): Either.Either<ResolvedCluster, ResolveError> => {
  const file = Option.map(input.currentClusterFile, (s) => s.trim()).pipe(Option.filter((s) => s !== ""))
  if (Option.isSome(file)) {
    return hostPort(
      file.value,
      explicit,
      "current_cluster_file",
      `the address in ${input.currentClusterPath}`
    )
  }
  if (Either.isLeft(input.daemons)) {
    return Either.left(
      new NoClusterFound({
        detail: `no ${input.currentClusterPath} and the host's processes could not be read (${input.daemons.left})`
      })
    )
  }
  const addresses = rayletGcsAddresses(input.daemons.right)
  if (addresses.length === 0) {
    return Either.left(
      new NoClusterFound({ detail: `no ${input.currentClusterPath} and no raylet process on this host` })
    )
  }
  if (addresses.length > 1) return Either.left(new MultipleClusters({ addresses }))
  return hostPort(addresses[0]!, explicit, "raylet_cmdline", "the --gcs-address of the local raylet")
}

export const resolveCluster = (input: ResolveInput): Either.Either<ResolvedCluster, ResolveError> => {
  const address = input.address
  switch (address._tag) {
    case "HostPort":
      return Either.right({
        gcsAddress: formatHostPort(address.host, address.port),
        host: address.host,
        port: address.port,
        explicit: true,
        source: "RAY_ADDRESS"
      })
    case "RayClient":
      return Either.left(new InvalidAddress({ value: address.raw, reason: RAY_CLIENT_REASON }))
    case "Local":
      return resolveLocal(input, true)
    case "Auto":
      return resolveLocal(input, false)
  }
}

/** Whether resolving this address may need the current-cluster file and the host's daemons. */
export const readsLocalCluster = (address: RayAddress): boolean =>
  address._tag === "Auto" || address._tag === "Local"
