import type * as ProtoLoader from "@grpc/proto-loader"

/** What a GCS call needs of its method: the gRPC path and the message (de)serializers. */
export interface GcsMethod {
  readonly path: string
  readonly requestSerialize: (request: any) => Buffer
  readonly responseDeserialize: (bytes: Buffer) => any
}

/** Methods by `<package>.<Service>/<Method>`, e.g. `ray.rpc.NodeInfoGcsService/GetAllNodeInfo`. */
export type GcsMethods = Readonly<Record<string, GcsMethod>>

const interop = <A extends object>(mod: A, probe: string): A =>
  probe in mod ? mod : ((mod as { default?: A }).default ?? mod)

/**
 * Every method of the GCS proto `file`, its replies decoded with proto-loader `options`.
 *
 * Here the proto is parsed at run time with @grpc/proto-loader (the library and the tests). The
 * bundled CLI swaps this module for static code generated from the same proto at build time
 * (scripts/gcs-codec.mjs, wired in scripts/bundle-cli.mjs), which decodes alike without parsing the
 * proto or generating code at run time.
 */
export const loadGcsMethods = async (file: string, options: ProtoLoader.Options): Promise<GcsMethods> => {
  const loader = interop(await import("@grpc/proto-loader"), "loadSync")
  const definition = loader.loadSync(file, options)
  const methods: Record<string, GcsMethod> = {}
  for (const [name, service] of Object.entries(definition)) {
    if (!("format" in service) && typeof service === "object") {
      for (const [method, def] of Object.entries(service as ProtoLoader.ServiceDefinition)) {
        methods[`${name}/${method}`] = def
      }
    }
  }
  return methods
}
