/**
 * The project's minimal GCS proto against the installed Ray wheel, field by field: every message,
 * enum and service in `proto/gcs.proto` must exist in Ray under the same full name, and every
 * field must have the same name, number, type (and message/enum type name), label (repeated,
 * proto3 optional) and map key/value types. Ray's descriptors come from its generated modules
 * (`ray.core.generated.*_pb2`), dumped as JSON by a small Python snippet run with the Ray
 * installation's Python. No Ray cluster is needed.
 */
import { execFile } from "node:child_process"
import { createRequire } from "node:module"
import { promisify } from "node:util"
import { assert, beforeAll, describe, it } from "vitest"
import { gcsProtoPath } from "../../src/services/GcsClient.js"
import { rayPython } from "../support/ray.js"

const execFileP = promisify(execFile)

// protobufjs is what @grpc/proto-loader parses the proto with at run time: check what it reads.
const protobuf = createRequire(createRequire(import.meta.url).resolve("@grpc/proto-loader"))(
  "protobufjs"
) as typeof import("protobufjs")

interface FieldShape {
  readonly name: string
  readonly number: number
  readonly type: string
  readonly typeName: string
  readonly repeated: boolean
  readonly proto3Optional: boolean
  readonly map: { readonly key: string; readonly value: string; readonly valueTypeName: string } | null
}

interface Dump {
  readonly messages: Record<string, { readonly fields: ReadonlyArray<FieldShape> } | null>
  readonly enums: Record<string, { readonly values: Record<string, number> } | null>
  readonly services: Record<
    string,
    { readonly methods: Record<string, { readonly input: string; readonly output: string }> } | null
  >
  readonly rayVersion: string
}

const PY_DUMP = `
import json, sys
import ray
from ray.core.generated import gcs_service_pb2, gcs_pb2, common_pb2, autoscaler_pb2  # noqa: F401
from google.protobuf import descriptor_pb2, descriptor_pool

pool = descriptor_pool.Default()
want = json.loads(sys.stdin.read())
T = descriptor_pb2.FieldDescriptorProto

def kind(fp):
    return T.Type.Name(fp.type)

def message(name):
    try:
        d = pool.FindMessageTypeByName(name)
    except KeyError:
        return None
    dp = descriptor_pb2.DescriptorProto()
    d.CopyToProto(dp)
    nested = {n.name: n for n in dp.nested_type}
    fields = []
    for fp in dp.field:
        fd = d.fields_by_name[fp.name]
        entry = None
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            k, v = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
            kp = T(); vp = T()
            e = nested[fd.message_type.name]
            for f in e.field:
                if f.name == "key": kp = f
                if f.name == "value": vp = f
            vt = v.message_type.full_name if v.message_type else (v.enum_type.full_name if v.enum_type else "")
            entry = {"key": kind(kp), "value": kind(vp), "valueTypeName": vt}
        # a map's entry type is synthetic (FooEntry): its key and value types are what count
        tn = "" if entry else (fd.message_type.full_name if fd.message_type else (fd.enum_type.full_name if fd.enum_type else ""))
        fields.append({
            "name": fp.name,
            "number": fp.number,
            "type": kind(fp),
            "typeName": tn,
            "repeated": fp.label == T.LABEL_REPEATED,
            "proto3Optional": bool(fp.proto3_optional),
            "map": entry,
        })
    return {"fields": fields}

def enum(name):
    try:
        e = pool.FindEnumTypeByName(name)
    except KeyError:
        return None
    return {"values": {v.name: v.number for v in e.values}}

def service(name):
    try:
        s = pool.FindServiceByName(name)
    except KeyError:
        return None
    return {"methods": {m.name: {"input": m.input_type.full_name, "output": m.output_type.full_name} for m in s.methods}}

print(json.dumps({
    "messages": {n: message(n) for n in want["messages"]},
    "enums": {n: enum(n) for n in want["enums"]},
    "services": {n: service(n) for n in want["services"]},
    "rayVersion": ray.__version__,
}))
`

const SCALAR = (t: string) => `TYPE_${t.toUpperCase()}`

/** A field of our proto as protobufjs reads it, in the same shape as the Python dump. */
const ourField = (f: import("protobufjs").Field): FieldShape => {
  const resolved = f.resolvedType
  const kindOf = (r: typeof resolved) =>
    r instanceof protobuf.Enum ? "TYPE_ENUM" : r instanceof protobuf.Type ? "TYPE_MESSAGE" : SCALAR(f.type)
  const fullName = (r: typeof resolved) => (r ? r.fullName.replace(/^\./, "") : "")
  if (f.map) {
    const mf = f as unknown as import("protobufjs").MapField
    return {
      name: f.name,
      number: f.id,
      type: "TYPE_MESSAGE",
      typeName: "",
      repeated: true,
      proto3Optional: false,
      map: { key: SCALAR(mf.keyType), value: kindOf(resolved), valueTypeName: fullName(resolved) }
    }
  }
  return {
    name: f.name,
    number: f.id,
    type: kindOf(resolved),
    typeName: fullName(resolved),
    repeated: f.repeated,
    proto3Optional: f.options?.proto3_optional === true,
    map: null
  }
}

interface Ours {
  readonly messages: Map<string, ReadonlyArray<FieldShape>>
  readonly enums: Map<string, Record<string, number>>
  readonly services: Map<string, Record<string, { input: string; output: string }>>
}

const readOurs = (): Ours => {
  const root = new protobuf.Root()
  root.loadSync(gcsProtoPath(), { keepCase: true })
  root.resolveAll()
  const ours: Ours = { messages: new Map(), enums: new Map(), services: new Map() }
  const walk = (ns: import("protobufjs").NamespaceBase) => {
    for (const child of ns.nestedArray) {
      const name = child.fullName.replace(/^\./, "")
      if (child instanceof protobuf.Type) {
        ours.messages.set(name, child.fieldsArray.map(ourField))
        walk(child)
      } else if (child instanceof protobuf.Enum) {
        ours.enums.set(name, { ...child.values })
      } else if (child instanceof protobuf.Service) {
        const methods: Record<string, { input: string; output: string }> = {}
        for (const m of child.methodsArray) {
          methods[m.name] = {
            input: m.resolvedRequestType!.fullName.replace(/^\./, ""),
            output: m.resolvedResponseType!.fullName.replace(/^\./, "")
          }
        }
        ours.services.set(name, methods)
      } else if (child instanceof protobuf.Namespace) {
        walk(child)
      }
    }
  }
  walk(root)
  return ours
}

describe("proto/gcs.proto against the installed Ray's descriptors", () => {
  const ours = readOurs()
  let ray: Dump

  beforeAll(async () => {
    const child = execFileP(rayPython, ["-c", PY_DUMP], { timeout: 60_000, maxBuffer: 16 * 1024 * 1024 })
    child.child.stdin!.end(
      JSON.stringify({
        messages: [...ours.messages.keys()],
        enums: [...ours.enums.keys()],
        services: [...ours.services.keys()]
      })
    )
    ray = JSON.parse((await child).stdout)
  })

  it("reads a non-trivial proto in package ray.rpc", () => {
    assert.isAtLeast(ours.messages.size, 20)
    assert.strictEqual(ours.services.size, 5)
    // What the guards read beyond nodes, actors, jobs and resources: placement groups.
    assert.deepStrictEqual(ours.services.get("ray.rpc.PlacementGroupInfoGcsService"), {
      GetAllPlacementGroup: {
        input: "ray.rpc.GetAllPlacementGroupRequest",
        output: "ray.rpc.GetAllPlacementGroupReply"
      }
    })
    for (const name of [...ours.messages.keys(), ...ours.enums.keys(), ...ours.services.keys()]) {
      assert.match(name, /^ray\.rpc\./)
    }
    assert.match(ray.rayVersion, /^\d+\.\d+/)
  })

  it("every message exists in Ray and every field matches name, number, type, label and map", () => {
    const problems: Array<string> = []
    let checked = 0
    for (const [name, fields] of ours.messages) {
      const theirs = ray.messages[name]
      if (!theirs) {
        problems.push(`${name}: no such message in Ray ${ray.rayVersion}`)
        continue
      }
      const byName = new Map(theirs.fields.map((f) => [f.name, f]))
      for (const f of fields) {
        checked++
        const t = byName.get(f.name)
        if (!t) {
          problems.push(`${name}.${f.name}: no such field in Ray`)
          continue
        }
        if (JSON.stringify(f) !== JSON.stringify(t)) {
          problems.push(`${name}.${f.name}: ours ${JSON.stringify(f)} vs Ray's ${JSON.stringify(t)}`)
        }
      }
    }
    assert.deepStrictEqual(problems, [])
    assert.isAtLeast(checked, 60)
  })

  it("every enum value matches", () => {
    const problems: Array<string> = []
    for (const [name, values] of ours.enums) {
      const theirs = ray.enums[name]
      if (!theirs) {
        problems.push(`${name}: no such enum in Ray`)
        continue
      }
      for (const [v, n] of Object.entries(values)) {
        if (theirs.values[v] !== n) problems.push(`${name}.${v}: ours ${n} vs Ray's ${theirs.values[v]}`)
      }
    }
    assert.deepStrictEqual(problems, [])
    assert.deepStrictEqual(ours.enums.get("ray.rpc.PlacementGroupTableData.PlacementGroupState"), {
      PENDING: 0,
      PREPARED: 1,
      CREATED: 2,
      REMOVED: 3,
      RESCHEDULING: 4
    })
    assert.deepStrictEqual(ours.enums.get("ray.rpc.ActorTableData.ActorState"), {
      DEPENDENCIES_UNREADY: 0,
      PENDING_CREATION: 1,
      ALIVE: 2,
      RESTARTING: 3,
      DEAD: 4
    })
  })

  it("every service method exists with the same request and reply types", () => {
    const problems: Array<string> = []
    for (const [name, methods] of ours.services) {
      const theirs = ray.services[name]
      if (!theirs) {
        problems.push(`${name}: no such service in Ray`)
        continue
      }
      for (const [m, io] of Object.entries(methods)) {
        const t = theirs.methods[m]
        if (!t) problems.push(`${name}.${m}: no such method in Ray`)
        else if (t.input !== io.input || t.output !== io.output) {
          problems.push(`${name}.${m}: ours ${io.input} → ${io.output} vs Ray's ${t.input} → ${t.output}`)
        }
      }
    }
    assert.deepStrictEqual(problems, [])
  })

  it("the comparison itself catches a wrong field (sanity check of the checker)", () => {
    const status = ours.messages.get("ray.rpc.GcsStatus")!
    const theirs = new Map(ray.messages["ray.rpc.GcsStatus"]!.fields.map((f) => [f.name, f]))
    const code = status.find((f) => f.name === "code")!
    assert.strictEqual(JSON.stringify(code), JSON.stringify(theirs.get("code")))
    const mutated = { ...code, number: 3 }
    assert.notStrictEqual(JSON.stringify(mutated), JSON.stringify(theirs.get("code")))
  })
})
