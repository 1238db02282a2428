import { createHash } from "node:crypto"
import { FileSystem } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Context, Effect, Layer, Option, Stream } from "effect"
import { parseAiperfRuns } from "../domain/ClientReports.js"
import { type ParsedResult, parseResult } from "../domain/Results.js"
import { parseServeStatus, type ServeStatus } from "../domain/Serving.js"
import { splitPath, writeFileAtomically } from "./AtomicWrite.js"
import { checkRegularFile, RESULT_FILE_MAX_BYTES, readRegularFile } from "./BoundedRead.js"
import { StateIoFailed } from "./StateStore.js"

/**
 * The files of a baseline session besides its state (docs/design.md#session-state): one folder per
 * attempt, `<session>/attempts/<n>/`, holding the result file the command writes (its path is
 * handed over in `HYPERLOOM_RESULT_FILE`) and, when the enablement lane runs, the launch log handed
 * to the enablement command (`HYPERLOOM_LAUNCH_LOG`).
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
  /**
   * The result file read by its format (`{"throughput"}`, vLLM's JSON, SGLang's JSON lines,
   * GuideLLM's report, AIPerf's export; see domain/Results.ts); `undefined` when it is missing or of
   * no known format. Without a result file, the folder it would be in is read as AIPerf's artifact
   * directory (docs/clients.md#aiperf): its `profile_export_aiperf.json`, or one in each of its
   * sub-folders (AIPerf's runs at several loads), each with the `profile_export.jsonl` beside it.
   */
  readonly readResult: (resultFile: string) => Effect.Effect<ParsedResult | undefined>
  /** Writes a launch log, replacing one of the same name. */
  readonly writeLaunchLog: (file: string, text: string) => Effect.Effect<void, StateIoFailed>
  /**
   * Reads a log file line by line (memory flat however long it is): every line goes to `onLine`;
   * returns the last `tailChars` characters, or `undefined` when the file does not exist.
   */
  readonly scanLog: (
    file: string,
    onLine: (line: string) => void,
    tailChars: number
  ) => Effect.Effect<string | undefined>
  /** The serving runner's `serve.json`; `undefined` when missing or unreadable. */
  readonly readServeStatus: (file: string) => Effect.Effect<ServeStatus | undefined>
  /** Writes a JSON document atomically (AtomicWrite.ts). */
  readonly writeJson: (file: string, value: unknown) => Effect.Effect<void, StateIoFailed>
  /** A JSON document (the session's environment record); `undefined` when missing or not JSON. */
  readonly readJson: (file: string) => Effect.Effect<unknown>
  /** Writes a text file (a report), replacing one of the same name atomically (AtomicWrite.ts). */
  readonly writeText: (file: string, text: string) => Effect.Effect<void, StateIoFailed>
  /**
   * A local file's size and SHA-256 (a dataset on record, docs/clients.md#the-workload-on-record);
   * `undefined` when it is not a regular file or cannot be read.
   */
  readonly fileFacts: (
    file: string
  ) => Effect.Effect<{ readonly bytes: number; readonly sha256: string } | undefined>
  /** Whether something is at this path (a file of any kind; one that cannot be looked at counts). */
  readonly exists: (file: string) => Effect.Effect<boolean>
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

  /**
   * A file a command or the runner wrote, read safely (BoundedRead.ts: a FIFO or /dev/zero is
   * refused at once); missing → `undefined`, refused or unreadable → a warning and `undefined`.
   */
  const readBounded = <A>(file: string, what: string, parse: (text: string) => A) =>
    readRegularFile(file, RESULT_FILE_MAX_BYTES).pipe(
      Effect.map((text) => (Option.isSome(text) ? parse(text.value) : undefined)),
      Effect.catchAll((e) => Effect.as(Effect.logWarning(`cannot read ${what}${e.message}`), undefined))
    )

  const readThroughput = Effect.fn("AttemptFiles.readThroughput")(function* (resultFile: string) {
    return yield* readBounded(resultFile, "the result file ", throughputOf)
  })

  const writeLaunchLog = Effect.fn("AttemptFiles.writeLaunchLog")(function* (file: string, text: string) {
    yield* fs
      .writeFileString(file, text.endsWith("\n") ? text : `${text}\n`)
      .pipe(Effect.mapError(io("write", file)))
  })

  const readText = (file: string) =>
    readRegularFile(file, RESULT_FILE_MAX_BYTES).pipe(
      Effect.map(Option.getOrUndefined),
      Effect.catchAll((e) => Effect.as(Effect.logWarning(`cannot read ${e.message}`), undefined))
    )
  /** The sub-folders of a folder, by name (none when it cannot be listed). */
  const listDir = (dir: string) =>
    fs.readDirectory(dir).pipe(
      Effect.flatMap((names) =>
        Effect.filter([...names].sort(), (name) =>
          fs.stat(`${dir}/${name}`).pipe(
            Effect.map((info) => info.type === "Directory"),
            Effect.orElseSucceed(() => false)
          )
        )
      ),
      Effect.orElseSucceed((): ReadonlyArray<string> => [])
    )

  const readResult = Effect.fn("AttemptFiles.readResult")(function* (resultFile: string) {
    return yield* readResultWith(resultFile, readText, listDir)
  })

  const scanLog = Effect.fn("AttemptFiles.scanLog")(function* (
    file: string,
    onLine: (line: string) => void,
    tailChars: number
  ) {
    let tail = ""
    // Streamed (memory flat), but never a FIFO (it would block) or a device (/dev/zero never ends).
    const exists = yield* checkRegularFile(file).pipe(
      Effect.catchAll((e) => Effect.as(Effect.logWarning(`cannot read ${e.message}`), false))
    )
    if (!exists) return undefined
    return yield* fs.stream(file).pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.runForEach((line) =>
        Effect.sync(() => {
          onLine(line)
          tail = keepTail(`${tail}${line}\n`, tailChars)
        })
      ),
      // (read `tail` when the stream has ended, not when the pipeline is built)
      Effect.map(() => tail),
      Effect.catchAll((e) =>
        Effect.as(Effect.logWarning(`cannot read ${file}: ${e.message}`), tail === "" ? undefined : tail)
      )
    )
  })

  const readServeStatus = Effect.fn("AttemptFiles.readServeStatus")(function* (file: string) {
    return yield* readBounded(file, "", parseServeStatus)
  })

  /** `text` to `file` atomically (AtomicWrite.ts: temp file, fsync, rename, fsync of the folder). */
  const writeAtomically = (file: string, text: string) => {
    const { base, dir } = splitPath(file)
    return writeFileAtomically(dir, base, text).pipe(
      Effect.mapError(io("write", file)),
      Effect.provideService(FileSystem.FileSystem, fs)
    )
  }

  const writeJson = Effect.fn("AttemptFiles.writeJson")(function* (file: string, value: unknown) {
    yield* writeAtomically(file, `${JSON.stringify(value, null, 2)}\n`)
  })

  const readJson = Effect.fn("AttemptFiles.readJson")(function* (file: string) {
    return yield* readBounded(file, "", (text): unknown => {
      try {
        return JSON.parse(text)
      } catch {
        return undefined
      }
    })
  })

  const writeText = Effect.fn("AttemptFiles.writeText")(function* (file: string, text: string) {
    yield* writeAtomically(file, text)
  })

  const exists = (file: string) => fs.exists(file).pipe(Effect.orElseSucceed(() => true))

  // A dataset file is hashed once per content seen, not once per run: a sweep's runs name the same
  // file again and again, and a dataset can be gigabytes. Keyed by path, size and modification time,
  // so a file changed between runs is read again.
  const facts = new Map<string, { readonly bytes: number; readonly sha256: string }>()
  const fileFacts = Effect.fn("AttemptFiles.fileFacts")(function* (file: string) {
    const info = yield* fs.stat(file).pipe(Effect.option)
    if (Option.isNone(info) || info.value.type !== "File") return undefined
    const key = Option.match(info.value.mtime, {
      onNone: () => undefined,
      onSome: (t) => `${file}\0${info.value.size}\0${t.getTime()}`
    })
    const known = key === undefined ? undefined : facts.get(key)
    if (known !== undefined) return known
    const hash = createHash("sha256")
    let bytes = 0
    const ok = yield* fs.stream(file).pipe(
      Stream.runForEach((chunk) =>
        Effect.sync(() => {
          hash.update(chunk)
          bytes += chunk.length
        })
      ),
      Effect.as(true),
      Effect.orElseSucceed(() => false)
    )
    if (!ok) return undefined
    const got = { bytes, sha256: hash.digest("hex") }
    if (key !== undefined) facts.set(key, got)
    return got
  })

  return AttemptFiles.of({
    fileFacts,
    exists,
    readJson,
    writeText,
    prepare,
    readThroughput,
    readResult,
    writeLaunchLog,
    scanLog,
    readServeStatus,
    writeJson
  })
})

/** AIPerf's files in its artifact directory (aiperf/common/constants: the JSON and JSON-lines exports). */
export const AIPERF_EXPORT = "profile_export_aiperf.json"
export const AIPERF_RECORDS = "profile_export.jsonl"

const dirOf = (file: string) => {
  const i = file.lastIndexOf("/")
  return i < 0 ? "." : i === 0 ? "/" : file.slice(0, i)
}
const baseOf = (file: string) => file.slice(file.lastIndexOf("/") + 1)

/**
 * The result file, read as `readResult` says, on any way to read a text (undefined: none) and to
 * list a folder.
 */
export const readResultWith = <R>(
  resultFile: string,
  readText: (file: string) => Effect.Effect<string | undefined, never, R>,
  /** The sub-folders of a folder. */
  listDir: (dir: string) => Effect.Effect<ReadonlyArray<string>, never, R>
): Effect.Effect<ParsedResult | undefined, never, R> =>
  Effect.gen(function* () {
    const dir = dirOf(resultFile)
    const text = yield* readText(resultFile)
    if (text !== undefined) {
      const parsed = parseResult(text, { file: baseOf(resultFile) })
      if (parsed?.format !== "aiperf") return parsed
      const jsonl = yield* readText(`${dir}/${AIPERF_RECORDS}`)
      return parseResult(text, { file: baseOf(resultFile), jsonl })
    }
    // No result file: AIPerf's artifact directory is the folder itself (or one run per sub-folder)
    const runs: Array<{ doc: Record<string, unknown>; where: string; jsonl?: string | undefined }> = []
    const readRun = (folder: string, where: string) =>
      Effect.gen(function* () {
        const exported = yield* readText(`${folder}/${AIPERF_EXPORT}`)
        if (exported === undefined) return false
        let doc: unknown
        try {
          doc = JSON.parse(exported)
        } catch {
          return false
        }
        if (typeof doc !== "object" || doc === null || Array.isArray(doc)) return false
        const jsonl = yield* readText(`${folder}/${AIPERF_RECORDS}`)
        runs.push({ doc: doc as Record<string, unknown>, where, jsonl })
        return true
      })
    if (!(yield* readRun(dir, AIPERF_EXPORT))) {
      for (const name of yield* listDir(dir)) {
        yield* readRun(`${dir}/${name}`, `${name}/${AIPERF_EXPORT}`)
      }
    }
    return parseAiperfRuns(runs)
  })

const keepTail = (text: string, max: number) => (text.length > max ? text.slice(text.length - max) : text)

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
    readResult: (resultFile) =>
      readResultWith(
        resultFile,
        (file) => Effect.sync(() => files.get(file)),
        (dir) =>
          Effect.sync(() => {
            const prefix = `${dir}/`
            const names = new Set<string>()
            for (const k of files.keys()) {
              const rest = k.startsWith(prefix) ? k.slice(prefix.length).split("/") : []
              if (rest.length > 1) names.add(rest[0]!)
            }
            return [...names].sort()
          })
      ),
    writeLaunchLog: (file, text) =>
      Effect.sync(() => {
        files.set(file, text.endsWith("\n") ? text : `${text}\n`)
      }),
    scanLog: (file, onLine, tailChars) =>
      Effect.sync(() => {
        const text = files.get(file)
        if (text === undefined) return undefined
        const lines = text.endsWith("\n") ? text.slice(0, -1).split("\n") : text.split("\n")
        for (const line of lines) onLine(line)
        return keepTail(text, tailChars)
      }),
    readServeStatus: (file) =>
      Effect.sync(() => {
        const text = files.get(file)
        return text === undefined ? undefined : parseServeStatus(text)
      }),
    writeJson: (file, value) =>
      Effect.sync(() => {
        files.set(file, `${JSON.stringify(value, null, 2)}\n`)
      }),
    readJson: (file) =>
      Effect.sync(() => {
        const text = files.get(file)
        if (text === undefined) return undefined
        try {
          return JSON.parse(text) as unknown
        } catch {
          return undefined
        }
      }),
    writeText: (file, text) =>
      Effect.sync(() => {
        files.set(file, text)
      }),
    exists: (file) => Effect.sync(() => files.has(file) || dirs.has(file)),
    fileFacts: (file) =>
      Effect.sync(() => {
        const text = files.get(file)
        if (text === undefined) return undefined
        const data = Buffer.from(text, "utf8")
        return { bytes: data.length, sha256: createHash("sha256").update(data).digest("hex") }
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
