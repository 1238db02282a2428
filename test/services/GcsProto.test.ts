/**
 * The bundled CLI decodes the GCS replies with static code generated from proto/gcs.proto at build
 * time (scripts/gcs-codec.mjs); the library and the other tests parse the proto at run time with
 * @grpc/proto-loader (src/services/GcsProto.ts). Both must give the same objects.
 */
import type * as loader from "@grpc/proto-loader"
import * as protobuf from "protobufjs/minimal.js"
import { assert, describe, it } from "vitest"
import { generateGcsCodecBody } from "../../scripts/gcs-codec.mjs"
import { gcsProtoPath, PROTO_LOADER_OPTIONS } from "../../src/services/GcsClient.js"
import { type GcsMethods, loadGcsMethods } from "../../src/services/GcsProto.js"
import { loadReplies, recordedDefinition } from "../support/fakeGcs.js"

const staticMethods = (): GcsMethods =>
  new Function("$protobuf", "options", generateGcsCodecBody(gcsProtoPath()))(protobuf, PROTO_LOADER_OPTIONS)

const methodOf = (definition: loader.PackageDefinition, key: string) => {
  const [service, method] = key.split("/") as [string, string]
  return (definition[service] as loader.ServiceDefinition)[method]!
}

describe("static GCS codec", () => {
  it("has every method of the proto, with the same paths", async () => {
    const runtime = await loadGcsMethods(gcsProtoPath(), PROTO_LOADER_OPTIONS)
    const generated = staticMethods()
    assert.deepStrictEqual(Object.keys(generated).sort(), Object.keys(runtime).sort())
    assert.include(Object.keys(generated), "ray.rpc.NodeInfoGcsService/GetAllNodeInfo")
    for (const [key, m] of Object.entries(runtime)) assert.strictEqual(generated[key]!.path, m.path)
  })

  it("decodes the recorded replies of a busy head like proto-loader", async () => {
    const runtime = await loadGcsMethods(gcsProtoPath(), PROTO_LOADER_OPTIONS)
    const generated = staticMethods()
    const recorded = recordedDefinition()
    const replies = loadReplies("busy-head")
    const keys = Object.keys(runtime).filter((k) => k.split("/")[1]! in replies)
    assert.isAtLeast(keys.length, 6)
    for (const key of keys) {
      const bytes = methodOf(recorded, key).responseSerialize(replies[key.split("/")[1]!])
      assert.isAbove(bytes.length, 0)
      const expected = runtime[key]!.responseDeserialize(bytes)
      assert.deepStrictEqual(generated[key]!.responseDeserialize(bytes), expected, key)
    }
  })

  it("decodes defaults, unknown enum values, unknown fields and 64-bit values like proto-loader", async () => {
    const key = "ray.rpc.NodeInfoGcsService/GetAllNodeInfo"
    const runtime = (await loadGcsMethods(gcsProtoPath(), PROTO_LOADER_OPTIONS))[key]!
    const generated = staticMethods()[key]!
    // GetAllNodeInfoReply { status = 1; repeated GcsNodeInfo node_info_list = 2 }
    const node = protobuf.Writer.create()
      .uint32((7 << 3) | 0)
      .int32(9) // state: no such GcsNodeState
      .uint32((23 << 3) | 0)
      .uint64(2 ** 53 + 2) // start_time_ms beyond 2^53
      .uint32((99 << 3) | 2)
      .string("a field this proto does not know")
      .uint32((25 << 3) | 0)
      .bool(true)
      .finish()
    const reply = protobuf.Writer.create()
      .uint32((2 << 3) | 2)
      .bytes(node)
      .uint32((2 << 3) | 2)
      .bytes(new Uint8Array(0)) // an empty node: every default
      .finish()
    const bytes = Buffer.from(reply)
    const expected = runtime.responseDeserialize(bytes)
    assert.strictEqual(expected.node_info_list.length, 2)
    assert.deepStrictEqual(generated.responseDeserialize(bytes), expected)
    assert.deepStrictEqual(
      generated.responseDeserialize(Buffer.alloc(0)),
      runtime.responseDeserialize(Buffer.alloc(0))
    )
  })

  it("encodes requests like proto-loader", async () => {
    const runtime = await loadGcsMethods(gcsProtoPath(), PROTO_LOADER_OPTIONS)
    const generated = staticMethods()
    const key = "ray.rpc.ActorInfoGcsService/GetAllActorInfo"
    for (const request of [{}, { show_dead_jobs: false }, { show_dead_jobs: true, limit: 5 }]) {
      assert.deepStrictEqual(
        Buffer.from(generated[key]!.requestSerialize(request)),
        Buffer.from(runtime[key]!.requestSerialize(request))
      )
    }
    assert.throws(() => generated[key]!.requestSerialize([]), /got array instead/)
  })
})
