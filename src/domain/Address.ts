import { Either } from "effect"
import { InvalidAddress } from "./Errors.js"

/**
 * How RAY_ADDRESS is read (docs/design.md#addresses-and-the-host). `Auto` is the only form
 * hyperloom may repair: everything else is an operator's explicit choice.
 */
export type RayAddress =
  | { readonly _tag: "Auto" }
  | { readonly _tag: "Local"; readonly raw: string }
  | { readonly _tag: "HostPort"; readonly raw: string; readonly host: string; readonly port: number }
  | { readonly _tag: "RayClient"; readonly raw: string }

export const isExplicit = (address: RayAddress): boolean => address._tag !== "Auto"

export const parseRayAddress = (value: string | undefined): Either.Either<RayAddress, InvalidAddress> => {
  const raw = (value ?? "").trim()
  if (raw === "" || raw.toLowerCase() === "auto") return Either.right({ _tag: "Auto" })
  if (raw.toLowerCase() === "local") return Either.right({ _tag: "Local", raw })
  if (/^ray:\/\//i.test(raw)) return Either.right({ _tag: "RayClient", raw })
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(raw)
  if (m === null) {
    return Either.left(
      new InvalidAddress({ value: raw, reason: "expected auto, local, host:port or ray://host:port" })
    )
  }
  const port = Number(m[3])
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    return Either.left(new InvalidAddress({ value: raw, reason: `port ${m[3]} is out of range 1-65535` }))
  }
  return Either.right({ _tag: "HostPort", raw, host: m[1] ?? m[2]!, port })
}

/** `host:port` as gRPC wants it (IPv6 in brackets). */
export const formatHostPort = (host: string, port: number): string =>
  host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`
