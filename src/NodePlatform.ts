/**
 * Node's platform services as hyperloom uses them: commands, the file system, paths and the
 * terminal. This is @effect/platform-node's `NodeContext.layer` without its worker manager, which
 * no command uses: importing NodeContext evaluates the Worker modules, their schemas and
 * node:worker_threads on every start (~4% of a cold `hyperloom ray doctor`'s CPU,
 * docs/performance.md). main.ts, LiveCluster.ts and Live.ts provide this one layer.
 */
import type { CommandExecutor } from "@effect/platform/CommandExecutor"
import type { FileSystem } from "@effect/platform/FileSystem"
import type { Path } from "@effect/platform/Path"
import type { Terminal } from "@effect/platform/Terminal"
import * as NodeCommandExecutor from "@effect/platform-node/NodeCommandExecutor"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import * as NodeTerminal from "@effect/platform-node/NodeTerminal"
import { Layer } from "effect"

/** The services of `layer`. */
export type NodePlatform = CommandExecutor | FileSystem | Path | Terminal

/** Node's command executor, file system, path and terminal (NodeContext.layer's, built alike). */
export const layer: Layer.Layer<NodePlatform> = Layer.mergeAll(
  NodePath.layer,
  NodeCommandExecutor.layer,
  NodeTerminal.layer
).pipe(Layer.provideMerge(NodeFileSystem.layer))
