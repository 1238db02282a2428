import { PassThrough } from "node:stream"
import { FileSystem } from "@effect/platform"
import { Context, Duration, Effect, Layer, Schedule, type Scope } from "effect"
import {
  type ControlRequest,
  type EngineStatus,
  parseRunnerMessage,
  RUNNER_MESSAGE_PREFIX,
  type RunDone
} from "../domain/Sweep/Runner.js"
import { rankPrefix } from "./GroupBridge.js"
import type { LeaseOutput } from "./LeaseBridge.js"

/**
 * The sweep runner's control channel (domain/Sweep/Runner.ts), through the lease and nothing else
 * (docs/design.md#sweeps-at-cluster-scale: the leased node shares nothing with this host but Ray):
 * requests go to the runner's stdin, which the lease forwards; the runner's answers, its engine's
 * status and the bytes of every file it keeps come back as lines of its stdout that start with
 * RUNNER_MESSAGE_PREFIX. Those files are written here, under the engine's folder or a run's folder
 * (the only places the runner may name), as they come: a node that dies loses at most the run in
 * flight.
 */
export interface EngineChannel {
  /** The runner's stdin (give it to the lease: LeaseTerminal.stdin). */
  readonly stdin: NodeJS.ReadableStream
  /** One line of the runner's output: true when it was a message of this channel (taken). */
  readonly take: (output: LeaseOutput) => Effect.Effect<boolean>
  /** Sends a request (its `dir` is where the run's files come back to). */
  readonly send: (seq: number, request: ControlRequest) => Effect.Effect<void>
  /** The engine's last status; undefined while the runner has said none. */
  readonly engine: Effect.Effect<EngineStatus | undefined>
  /** Waits until the runner answered request `seq`. */
  readonly awaitDone: (seq: number) => Effect.Effect<RunDone>
  /** Waits until the engine's status says something other than `starting`. */
  readonly awaitEngine: Effect.Effect<EngineStatus>
  /** The answer to request `seq`, if it came. */
  readonly done: (seq: number) => Effect.Effect<RunDone | undefined>
}

export interface SweepControlShape {
  /** A channel for the engine whose folder (here) is `engineDir`; stdin ends with the scope. */
  readonly open: (engineDir: string) => Effect.Effect<EngineChannel, never, Scope.Scope>
}

export class SweepControl extends Context.Tag("hyperloom/services/SweepControl")<
  SweepControl,
  SweepControlShape
>() {}

export const POLL_MS = 20

/** Where the engine's last status is kept, under the engine's folder. */
export const ENGINE_STATUS_FILE = "engine.json"

/** Where each answer is kept, under the engine's folder (`<seq>.done.json`). */
export const ANSWERS_DIR = "control"

/** How a group's rank 0 lines come (services/GroupBridge.ts rankPrefix(0)). */
const LEADER_PREFIX = rankPrefix(0)

const poll = <A>(read: Effect.Effect<A | undefined>): Effect.Effect<A> =>
  read.pipe(
    Effect.flatMap((a) => (a === undefined ? Effect.fail("not yet" as const) : Effect.succeed(a))),
    Effect.retry(Schedule.spaced(Duration.millis(POLL_MS))),
    Effect.orDie
  )

const parentOf = (file: string) => file.slice(0, Math.max(1, file.lastIndexOf("/")))

/** Is `file` inside folder `root` (no `..` to climb out)? */
export const isUnder = (file: string, root: string) => {
  const r = root.replace(/\/+$/, "")
  return file.startsWith(`${r}/`) && !file.split("/").includes("..")
}

/** Where the channel's files go: a platform FileSystem (live) or a map (tests). */
export interface ChannelFiles {
  /**
   * Writes `bytes` at offset `at` of `file` (0: the file starts anew, its folders made below
   * `root`, the engine's or the run's folder it belongs to, which must still be there).
   */
  readonly write: (file: string, at: number, bytes: Uint8Array, root: string) => Effect.Effect<void>
}

/** A channel over `files`. */
export const makeChannel = (engineDir: string, files: ChannelFiles) =>
  Effect.gen(function* () {
    const input = new PassThrough()
    yield* Effect.addFinalizer(() => Effect.sync(() => input.end()))
    let status: EngineStatus | undefined
    const answers = new Map<number, RunDone>()
    const roots = [engineDir]
    let refused = 0
    const take = (o: LeaseOutput): Effect.Effect<boolean> =>
      Effect.suspend(() => {
        // in a group the runner is rank 0, whose lines come prefixed
        const line = o.line.startsWith(LEADER_PREFIX) ? o.line.slice(LEADER_PREFIX.length) : o.line
        if (o.stream !== "stdout" || !line.startsWith(RUNNER_MESSAGE_PREFIX)) return Effect.succeed(false)
        const m = parseRunnerMessage(line)
        if (m === undefined)
          return Effect.as(Effect.logWarning(`sweep runner: a message not understood`), true)
        switch (m._tag) {
          case "engine":
            // kept beside the engine's files too: the engine's state, port and node, as last said
            return Effect.zipRight(
              files.write(
                `${engineDir}/${ENGINE_STATUS_FILE}`,
                0,
                Buffer.from(`${JSON.stringify(m.status)}\n`),
                engineDir
              ),
              Effect.sync(() => {
                status = m.status
                return true
              })
            )
          case "done":
            // kept beside the engine's files as before (bench/sweep.mjs reads the runs' epochs)
            return Effect.zipRight(
              files.write(
                `${engineDir}/${ANSWERS_DIR}/${m.done.seq}.done.json`,
                0,
                Buffer.from(`${JSON.stringify(m.done)}\n`),
                engineDir
              ),
              Effect.sync(() => {
                answers.set(m.done.seq, m.done)
                return true
              })
            )
          case "file": {
            const root = roots.find((r) => isUnder(m.file, r))
            if (root === undefined) {
              refused++
              return Effect.as(
                refused === 1
                  ? Effect.logWarning(`sweep runner: a file outside the sweep's folders refused: ${m.file}`)
                  : Effect.void,
                true
              )
            }
            return Effect.as(files.write(m.file, m.at, Buffer.from(m.data, "base64"), root), true)
          }
        }
      })
    const channel: EngineChannel = {
      stdin: input,
      take,
      send: (seq, request) =>
        Effect.sync(() => {
          if ("dir" in request) roots.push(request.dir)
          input.write(`${JSON.stringify({ seq, ...request })}\n`)
        }),
      engine: Effect.sync(() => status),
      awaitDone: (seq) => poll(Effect.sync(() => answers.get(seq))),
      awaitEngine: poll(
        Effect.sync(() => (status === undefined || status.state === "starting" ? undefined : status))
      ),
      done: (seq) => Effect.sync(() => answers.get(seq))
    }
    return channel
  })

/** The live channel: files written on this host's disk (a write that fails is said, once per file). */
export const layer: Layer.Layer<SweepControl, never, FileSystem.FileSystem> = Layer.effect(
  SweepControl,
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const failed = new Set<string>()
    const write: ChannelFiles["write"] = (file, at, bytes, root) =>
      (at === 0
        ? Effect.zipRight(
            // folders are made below the engine's or the run's folder only, which exist (made
            // before their requests): a session folder deleted under a running sweep is never
            // made again here (issue 27 item 5: the sweep stops, saying the folder vanished)
            Effect.flatMap(fs.exists(root), (there) =>
              there
                ? fs.makeDirectory(parentOf(file), { recursive: true })
                : Effect.fail(new Error(`its folder ${root} is gone`))
            ),
            fs.writeFile(file, bytes, { flag: "w" })
          )
        : fs.writeFile(file, bytes, { flag: "a" })
      ).pipe(
        Effect.catchAll((e) =>
          failed.has(file)
            ? Effect.void
            : Effect.zipRight(
                Effect.sync(() => failed.add(file)),
                Effect.logWarning(`sweep: cannot write ${file}: ${e.message}`)
              )
        )
      )
    return SweepControl.of({
      open: (engineDir) =>
        Effect.zipRight(
          // the engine's folder is there even when the runner sends nothing (a lease that fails)
          fs.makeDirectory(engineDir, { recursive: true }).pipe(Effect.ignore),
          makeChannel(engineDir, { write })
        )
    })
  })
)

/** A channel whose files go to `files` (path → text), for tests. */
export const memoryFiles = (files: Map<string, string> = new Map()): ChannelFiles => ({
  write: (file, at, bytes) =>
    Effect.sync(() => {
      const text = Buffer.from(bytes).toString("utf8")
      files.set(file, at === 0 ? text : `${files.get(file) ?? ""}${text}`)
    })
})

export const layerTest = (files: Map<string, string> = new Map()): Layer.Layer<SweepControl> =>
  Layer.succeed(SweepControl, { open: (engineDir) => makeChannel(engineDir, memoryFiles(files)) })
