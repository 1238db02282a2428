// Static code for the GCS calls, generated from proto/gcs.proto (the source of truth) at build time.
//
// At run time @grpc/proto-loader parses the .proto, builds descriptors and has protobufjs generate
// each message's decoder and converter with `new Function` (~25 ms in a cold CLI, none of it
// code-cacheable). This emits the very functions protobufjs would generate (its own `decoder`,
// `encoder` and `converter` code generators, run here on the same parsed proto), wired like
// proto-loader wires them (`serialize(obj) = encode(fromObject(obj))`,
// `deserialize(buf) = toObject(decode(buf), options)`), as the body of a function of the
// protobufjs runtime (`protobufjs/minimal`). scripts/bundle-cli.mjs puts it into the CLI bundle in
// place of src/services/GcsProto.ts; test/services/GcsProto.test.ts checks that it decodes like
// proto-loader.
import { createRequire } from "node:module"

const require = createRequire(import.meta.url)
const protobuf = require("protobufjs")

/** The function body: `$protobuf` (protobufjs/minimal) and `options` (toObject options) in scope; returns `{ "Service/Method": { path, requestSerialize, responseDeserialize } }`. */
export const generateGcsCodecBody = (protoFile) => {
  const root = new protobuf.Root()
  root.loadSync(protoFile, { keepCase: true })
  root.resolveAll()

  const services = []
  const visit = (ns) => {
    for (const child of ns.nestedArray) {
      if (child instanceof protobuf.Service) services.push(child)
      else if (child instanceof protobuf.Namespace) visit(child)
    }
  }
  visit(root)

  // Every type the methods reach, requests and replies, nested messages and enums.
  const types = new Map()
  const reach = (t) => {
    if (types.has(t)) return
    types.set(t, `t${types.size}`)
    if (t instanceof protobuf.Type) for (const f of t.fieldsArray) if (f.resolvedType) reach(f.resolvedType)
  }
  for (const s of services) {
    for (const m of s.methodsArray) {
      reach(m.resolvedRequestType)
      reach(m.resolvedResponseType)
    }
  }

  const out = [
    "var Reader = $protobuf.Reader, Writer = $protobuf.Writer, util = $protobuf.util;",
    "function enumValues(byName) { var byId = {}, values = Object.create(byId); for (var k in byName) byId[values[k] = byName[k]] = k; return values }"
  ]
  for (const [t, id] of types) {
    out.push(
      t instanceof protobuf.Enum
        ? `var ${id} = { name: ${JSON.stringify(t.name)}, values: enumValues(${JSON.stringify(t.values)}) };`
        : `var ${id} = { name: ${JSON.stringify(t.name)} };`
    )
  }
  const scoped = (typeRefs, fn) => `(function (types) { return ${fn} })([${typeRefs}])`
  for (const [t, id] of types) {
    if (!(t instanceof protobuf.Type)) continue
    const refs = t.fieldsArray.map((f) => (f.resolvedType ? types.get(f.resolvedType) : "null")).join(", ")
    out.push(`${id}.ctor = ${protobuf.Type.generateConstructor(t).toString()};`)
    out.push(`${id}.decode = ${scoped(refs, protobuf.decoder(t).toString())};`)
    out.push(`${id}.toObject = ${scoped(refs, protobuf.converter.toObject(t).toString())};`)
    out.push(`${id}.encode = ${scoped(refs, protobuf.encoder(t).toString())};`)
    out.push(`${id}.fromObject = ${scoped(refs, protobuf.converter.fromObject(t).toString())};`)
  }
  // As @grpc/proto-loader's createSerializer / createDeserializer.
  out.push(
    "function serializer(cls) { return function serialize(arg) { if (Array.isArray(arg)) throw new Error('Failed to serialize message: expected object with ' + cls.name + ' structure, got array instead'); return cls.encode(cls.fromObject(arg)).finish() } }",
    "function deserializer(cls) { return function deserialize(buf) { return cls.toObject(cls.decode(buf), options) } }",
    "var methods = {};"
  )
  for (const s of services) {
    const service = s.fullName.replace(/^\./, "")
    for (const m of s.methodsArray) {
      const key = `${service}/${m.name}`
      out.push(
        `methods[${JSON.stringify(key)}] = { path: ${JSON.stringify(`/${key}`)}, requestSerialize: serializer(${types.get(m.resolvedRequestType)}), responseDeserialize: deserializer(${types.get(m.resolvedResponseType)}) };`
      )
    }
  }
  out.push("return methods;")
  const body = out.join("\n")

  // The generated code may only use what the minimal runtime has.
  const minimal = require("protobufjs/minimal")
  for (const [, name] of body.matchAll(/\butil\.(\w+)/g)) {
    if (!(name in minimal.util))
      throw new Error(`gcs-codec: generated code uses util.${name}, absent from protobufjs/minimal`)
  }
  for (const [, name] of body.matchAll(/\bReader\.(\w+)/g)) {
    if (!(name in minimal.Reader))
      throw new Error(`gcs-codec: generated code uses Reader.${name}, absent from protobufjs/minimal`)
  }
  return body
}

/** The ES module the bundle uses in place of src/services/GcsProto.ts (same exports). */
export const generateGcsCodecModule = (protoFile) =>
  [
    "// Generated from proto/gcs.proto by scripts/gcs-codec.mjs at build time: do not edit.",
    'import * as $protobuf from "protobufjs/minimal.js"',
    "export const loadGcsMethods = async (_file, options) => {",
    generateGcsCodecBody(protoFile),
    "}",
    ""
  ].join("\n")
