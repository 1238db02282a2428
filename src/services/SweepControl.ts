import { FileSystem } from "@effect/platform"
import { Context, Duration, Effect, Layer, Option, Schedule } from "effect"
import {
  CONTROL_DIR,
  type ControlRequest,
  ENGINE_STATUS_FILE,
  type EngineStatus,
  parseEngineStatus,
  parseRunDone,
  type RunDone
} from "../domain/Sweep/Runner.js"
import { readRegularFile } from "./BoundedRead.js"
import { StateIoFailed } from "./StateStore.js"

/**
 * The sweep runner's control channel (domain/Sweep/Runner.ts): requests written into the engine
 * directory, the runner's answers read back from it. Polled, every POLL_MS: the gap it adds
 * between two client runs is a few tens of milliseconds (bench/sweep.mjs measures it).
 */
export interface SweepControlShape {
  /** Creates the engine directory and its control directory (fresh). */
  readonly prepare: (engineDir: string) => Effect.Effect<void, StateIoFailed>
  /** Writes request `seq` atomically. */
  readonly send: (
    engineDir: string,
    seq: number,
    request: ControlRequest
  ) => Effect.Effect<void, StateIoFailed>
  /** The runner's engine.json; undefined while it has written none. */
  readonly engine: (engineDir: string) => Effect.Effect<EngineStatus | undefined>
  /** Waits until the runner answered request `seq`. */
  readonly awaitDone: (engineDir: string, seq: number) => Effect.Effect<RunDone>
  /** Waits until engine.json says something other than `starting`. */
  readonly awaitEngine: (engineDir: string) => Effect.Effect<EngineStatus>
}

export class SweepControl extends Context.Tag("hyperloom/services/SweepControl")<
  SweepControl,
  SweepControlShape
>() {}

export const POLL_MS = 20

const poll = <A>(read: Effect.Effect<A | undefined>): Effect.Effect<A> =>
  read.pipe(
    Effect.flatMap((a) => (a === undefined ? Effect.fail("not yet" as const) : Effect.succeed(a))),
    Effect.retry(Schedule.spaced(Duration.millis(POLL_MS))),
    Effect.orDie
  )

const requestFile = (dir: string, seq: number) => `${dir}/${CONTROL_DIR}/${seq}.json`
const doneFile = (dir: string, seq: number) => `${dir}/${CONTROL_DIR}/${seq}.done.json`

/** The live channel on a platform FileSystem. */
export const layer: Layer.Layer<SweepControl, never, FileSystem.FileSystem> = Layer.effect(
  SweepControl,
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const io = (operation: string, path: string) => (e: { readonly message: string }) =>
      new StateIoFailed({ path, operation, detail: e.message })
    // Bounded, regular files only (BoundedRead.ts): a FIFO in the engine directory hung the poll.
    const readText = (file: string) =>
      readRegularFile(file, 1024 * 1024).pipe(
        Effect.map(Option.getOrUndefined),
        Effect.orElseSucceed(() => undefined)
      )
    const engine = (dir: string) =>
      Effect.map(readText(`${dir}/${ENGINE_STATUS_FILE}`), (t) =>
        t === undefined ? undefined : parseEngineStatus(t)
      )
    return SweepControl.of({
      prepare: (dir) =>
        fs
          .makeDirectory(`${dir}/${CONTROL_DIR}`, { recursive: true })
          .pipe(Effect.mapError(io("create", dir))),
      send: (dir, seq, request) => {
        const file = requestFile(dir, seq)
        const tmp = `${file}.tmp`
        return fs
          .writeFileString(tmp, `${JSON.stringify(request)}\n`)
          .pipe(Effect.zipRight(fs.rename(tmp, file)), Effect.mapError(io("write", file)))
      },
      engine,
      awaitDone: (dir, seq) =>
        poll(
          Effect.map(readText(doneFile(dir, seq)), (t) => (t === undefined ? undefined : parseRunDone(t)))
        ),
      awaitEngine: (dir) =>
        poll(Effect.map(engine(dir), (s) => (s === undefined || s.state === "starting" ? undefined : s)))
    })
  })
)

/** In-memory channel for tests: `files` maps paths to texts; a fake runner reads requests and writes answers there. */
export const makeMemorySweepControl = (files: Map<string, string> = new Map()) => {
  const readText = (file: string) => Effect.sync(() => files.get(file))
  const engine = (dir: string) =>
    Effect.map(readText(`${dir}/${ENGINE_STATUS_FILE}`), (t) =>
      t === undefined ? undefined : parseEngineStatus(t)
    )
  const service: SweepControlShape = {
    prepare: () => Effect.void,
    send: (dir, seq, request) =>
      Effect.sync(() => void files.set(requestFile(dir, seq), JSON.stringify(request))),
    engine,
    awaitDone: (dir, seq) =>
      poll(Effect.map(readText(doneFile(dir, seq)), (t) => (t === undefined ? undefined : parseRunDone(t)))),
    awaitEngine: (dir) =>
      poll(Effect.map(engine(dir), (s) => (s === undefined || s.state === "starting" ? undefined : s)))
  }
  return { service, files, requestFile, doneFile }
}

export const layerTest = (files: Map<string, string> = new Map()): Layer.Layer<SweepControl> =>
  Layer.succeed(SweepControl, makeMemorySweepControl(files).service)
