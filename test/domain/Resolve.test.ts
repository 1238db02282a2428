import { assert, describe, it } from "@effect/vitest"
import { Either, Option } from "effect"
import { parseRayAddress, type RayAddress } from "../../src/domain/Address.js"
import { type ResolvedCluster, type ResolveInput, resolveCluster } from "../../src/domain/Resolve.js"
import type { RayDaemon, RayletDaemon } from "../../src/domain/Snapshot.js"

const FILE = "/tmp/ray/ray_current_cluster"

const address = (raw: string | undefined): RayAddress => Either.getOrThrow(parseRayAddress(raw))

const raylet = (pid: number, gcsAddress: string | undefined, isHead = true): RayletDaemon => ({
  kind: "raylet",
  pid,
  nodeId: `${pid}`.padStart(56, "0"),
  gcsAddress,
  isHead,
  sessionName: "session_x",
  staticResources: {}
})

const gcs = (pid: number, port: number): RayDaemon => ({
  kind: "gcs_server",
  pid,
  port,
  sessionName: "session_x",
  nodeIp: "192.0.2.2"
})

const input = (
  raw: string | undefined,
  file: string | undefined,
  daemons: ReadonlyArray<RayDaemon> | string = []
): ResolveInput => ({
  address: address(raw),
  currentClusterPath: FILE,
  currentClusterFile: Option.fromNullable(file),
  daemons: typeof daemons === "string" ? Either.left(daemons) : Either.right(daemons)
})

const ok = (i: ResolveInput): ResolvedCluster => {
  const r = resolveCluster(i)
  if (Either.isLeft(r)) throw new Error(`expected a cluster, got ${r.left.message}`)
  return r.right
}

const err = (i: ResolveInput) => {
  const r = resolveCluster(i)
  if (Either.isRight(r)) throw new Error(`expected an error, got ${JSON.stringify(r.right)}`)
  return r.left
}

describe("resolveCluster: explicit addresses", () => {
  const rows: ReadonlyArray<[string, Omit<ResolvedCluster, "explicit" | "source">]> = [
    ["192.0.2.2:6379", { gcsAddress: "192.0.2.2:6379", host: "192.0.2.2", port: 6379 }],
    [" 10.0.0.5:7000 ", { gcsAddress: "10.0.0.5:7000", host: "10.0.0.5", port: 7000 }],
    ["head.example:6380", { gcsAddress: "head.example:6380", host: "head.example", port: 6380 }],
    ["[::1]:6379", { gcsAddress: "[::1]:6379", host: "::1", port: 6379 }],
    ["[fd00::2]:6390", { gcsAddress: "[fd00::2]:6390", host: "fd00::2", port: 6390 }]
  ]
  for (const [raw, expected] of rows) {
    it(`RAY_ADDRESS=${raw.trim()} is read as given, explicit, whatever runs locally`, () => {
      const r = ok(input(raw, "192.0.2.2:1234", [raylet(1, "192.0.2.2:1234"), raylet(2, "192.0.2.2:1235")]))
      assert.deepStrictEqual(r, { ...expected, explicit: true, source: "RAY_ADDRESS" })
    })
  }

  it("a ray:// Ray Client URL is refused with a reason asking for the GCS host:port", () => {
    const e = err(input("ray://192.0.2.2:10001", "192.0.2.2:6379"))
    assert.strictEqual(e._tag, "InvalidAddress")
    if (e._tag !== "InvalidAddress") return
    assert.strictEqual(e.value, "ray://192.0.2.2:10001")
    assert.match(e.reason, /Ray Client/)
    assert.match(e.reason, /GCS host:port/)
    assert.match(e.message, /^invalid Ray address "ray:\/\/192\.0\.2\.2:10001": /)
  })
})

describe("resolveCluster: the local cluster (auto and local)", () => {
  for (const raw of [undefined, "", "auto", " AUTO "]) {
    it(`RAY_ADDRESS=${JSON.stringify(raw)} uses the current-cluster file, not explicit`, () => {
      const r = ok(input(raw, "192.0.2.2:6379"))
      assert.deepStrictEqual(r, {
        gcsAddress: "192.0.2.2:6379",
        host: "192.0.2.2",
        port: 6379,
        explicit: false,
        source: "current_cluster_file"
      })
    })
  }

  it("the file wins over raylets (it may be stale: the snapshot then fails fast)", () => {
    const r = ok(
      input(undefined, "192.0.2.2:6380", [raylet(1, "192.0.2.2:6379"), raylet(2, "192.0.2.2:6381")])
    )
    assert.strictEqual(r.gcsAddress, "192.0.2.2:6380")
  })

  it("the file's whitespace and newline are ignored; an IPv6 address works", () => {
    assert.strictEqual(ok(input(undefined, "192.0.2.2:6379\n")).gcsAddress, "192.0.2.2:6379")
    const v6 = ok(input(undefined, "[fd00::2]:6379"))
    assert.deepStrictEqual([v6.host, v6.port, v6.gcsAddress], ["fd00::2", 6379, "[fd00::2]:6379"])
  })

  it("an empty file counts as absent", () => {
    const r = ok(input(undefined, "  \n", [raylet(1, "192.0.2.2:6379")]))
    assert.strictEqual(r.source, "raylet_cmdline")
  })

  it("a garbled file is an InvalidAddress naming the file", () => {
    const e = err(input(undefined, "not an address"))
    assert.strictEqual(e._tag, "InvalidAddress")
    assert.include(e.message, FILE)
  })

  it("no file: the single --gcs-address on live raylets", () => {
    const r = ok(input(undefined, undefined, [gcs(1, 6379), raylet(2, "192.0.2.2:6379")]))
    assert.deepStrictEqual(r, {
      gcsAddress: "192.0.2.2:6379",
      host: "192.0.2.2",
      port: 6379,
      explicit: false,
      source: "raylet_cmdline"
    })
  })

  it("no file: a head and a worker raylet of one cluster are one cluster", () => {
    const r = ok(
      input(undefined, undefined, [raylet(2, "192.0.2.2:6379"), raylet(3, "192.0.2.2:6379", false)])
    )
    assert.strictEqual(r.gcsAddress, "192.0.2.2:6379")
  })

  it("no file: several clusters are MultipleClusters naming them", () => {
    const e = err(
      input(undefined, undefined, [
        raylet(2, "192.0.2.2:6380"),
        raylet(3, "192.0.2.2:6379"),
        raylet(4, "192.0.2.2:6380")
      ])
    )
    assert.strictEqual(e._tag, "MultipleClusters")
    if (e._tag !== "MultipleClusters") return
    assert.deepStrictEqual(e.addresses, ["192.0.2.2:6379", "192.0.2.2:6380"])
    assert.include(e.message, "192.0.2.2:6379, 192.0.2.2:6380")
  })

  it("no file and no raylet (a lone gcs_server, a raylet without --gcs-address) is NoClusterFound", () => {
    const e = err(input(undefined, undefined, [gcs(1, 6379), raylet(2, undefined)]))
    assert.strictEqual(e._tag, "NoClusterFound")
    assert.include(e.message, FILE)
    assert.include(e.message, "no raylet")
  })

  it("no file and an unreadable process table is NoClusterFound with the reason", () => {
    const e = err(input(undefined, undefined, "cannot read the process table at /proc: EACCES"))
    assert.strictEqual(e._tag, "NoClusterFound")
    assert.include(e.message, "EACCES")
  })

  it("RAY_ADDRESS=local reads the local cluster the same way, but is explicit", () => {
    const fromFile = ok(input("local", "192.0.2.2:6379"))
    assert.deepStrictEqual(
      [fromFile.explicit, fromFile.source, fromFile.gcsAddress],
      [true, "current_cluster_file", "192.0.2.2:6379"]
    )
    const fromRaylet = ok(input("LOCAL", undefined, [raylet(2, "192.0.2.2:6390")]))
    assert.deepStrictEqual(
      [fromRaylet.explicit, fromRaylet.source, fromRaylet.gcsAddress],
      [true, "raylet_cmdline", "192.0.2.2:6390"]
    )
    assert.strictEqual(err(input("local", undefined, []))._tag, "NoClusterFound")
    assert.strictEqual(
      err(input("local", undefined, [raylet(1, "192.0.2.2:1"), raylet(2, "192.0.2.2:2")]))._tag,
      "MultipleClusters"
    )
  })
})
