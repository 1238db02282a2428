import { FileSystem } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Context, Effect, Layer } from "effect"
import { StateIoFailed } from "./StateStore.js"

/**
 * The files of a baseline session besides its state (SPEC §6): one folder per attempt,
 * `<session>/attempts/<n>/`, holding the result file the command writes (its path is handed over in
 * `HYPERLOOM_RESULT_FILE`) and, when the enablement lane runs, the launch log handed to the
 * enablement command (`HYPERLOOM_LAUNCH_LOG`).
 *
 * The result file is `{"throughput": <number>}`. Reading it never fails: a missing file, text that
 * is not a JSON object, or an object without `throughput` all read as "no report" (`undefined`);
 * anything else is the raw JSON value, which the classifier judges.
 */
export interface AttemptFilesShape {
  /** Creates the attempt's folder and removes a result file already there, so each attempt's file is fresh. */
  readonly prepare: (attemptDir: string, resultFile: string) => Effect.Effect<void, StateIoFailed>
  /** The raw `throughput` value of a result file; `undefined` when there is none (see above). */
  readonly readThroughput: (resultFile: string) => Effect.Effect<unknown>
  /** Writes a launch log, replacing one of the same name. */
  readonly writeLaunchLog: (file: string, text: string) => Effect.Effect<void, StateIoFailed>
}

export class AttemptFiles extends Context.Tag("hyperloom/services/AttemptFiles")<
  AttemptFiles,
  AttemptFilesShape
>() {}

/** The `throughput` value of a result file's text; `undefined` when the text does not report one. */
export const throughputOf = (text: string): unknown => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    return undefined
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) return undefined
  return "throughput" in json ? (json as { throughput: unknown }).throughput : undefined
}

const isNotFound = (e: PlatformError) => e._tag === "SystemError" && e.reason === "NotFound"

const makeLive = Effect.gen(function* () {
  const fs = yield* FileSystem.FileSystem
  const io = (operation: string, target: string) => (e: PlatformError) =>
    new StateIoFailed({ path: target, operation, detail: e.message })

  const prepare = Effect.fn("AttemptFiles.prepare")(function* (attemptDir: string, resultFile: string) {
    yield* fs.makeDirectory(attemptDir, { recursive: true }).pipe(Effect.mapError(io("create", attemptDir)))
    yield* fs.remove(resultFile).pipe(
      Effect.catchIf(isNotFound, () => Effect.void),
      Effect.mapError(io("remove", resultFile))
    )
  })

  const readThroughput = Effect.fn("AttemptFiles.readThroughput")(function* (resultFile: string) {
    return yield* fs.readFileString(resultFile).pipe(
      Effect.map(throughputOf),
      Effect.catchAll((e) =>
        isNotFound(e)
          ? Effect.succeed(undefined)
          : Effect.as(Effect.logWarning(`cannot read the result file ${resultFile}: ${e.message}`), undefined)
      )
    )
  })

  const writeLaunchLog = Effect.fn("AttemptFiles.writeLaunchLog")(function* (file: string, text: string) {
    yield* fs
      .writeFileString(file, text.endsWith("\n") ? text : `${text}\n`)
      .pipe(Effect.mapError(io("write", file)))
  })

  return AttemptFiles.of({ prepare, readThroughput, writeLaunchLog })
})

/** An in-memory store of the session files, for tests: `files` maps paths to contents. */
export interface MemoryAttemptFiles {
  readonly service: AttemptFilesShape
  readonly files: Map<string, string>
  readonly dirs: Set<string>
}

export const makeMemoryAttemptFiles = (): MemoryAttemptFiles => {
  const files = new Map<string, string>()
  const dirs = new Set<string>()
  const service: AttemptFilesShape = {
    prepare: (attemptDir, resultFile) =>
      Effect.sync(() => {
        dirs.add(attemptDir)
        files.delete(resultFile)
      }),
    readThroughput: (resultFile) =>
      Effect.sync(() => {
        const text = files.get(resultFile)
        return text === undefined ? undefined : throughputOf(text)
      }),
    writeLaunchLog: (file, text) =>
      Effect.sync(() => {
        files.set(file, text.endsWith("\n") ? text : `${text}\n`)
      })
  }
  return { service, files, dirs }
}

/** The live service on a platform FileSystem. */
export const layer: Layer.Layer<AttemptFiles, never, FileSystem.FileSystem> = Layer.effect(
  AttemptFiles,
  makeLive
)

/** A fresh in-memory service (use `makeMemoryAttemptFiles` to inspect or seed the files). */
export const layerTest = (memory: MemoryAttemptFiles = makeMemoryAttemptFiles()): Layer.Layer<AttemptFiles> =>
  Layer.succeed(AttemptFiles, memory.service)
