/**
 * The one lease entry: what a lease runs (a `LeasedCommand`: a plain argv, a serving command, or a
 * sweep's engine) and where, on one node or as a group of `nodes` ranks, decided here once from
 * the settings.
 *
 * A serving command runs the serving runner, an engine the sweep runner (`ServingRunner`: the
 * lease's Python and the package's `python/` entry), with every flag. In a group every rank but 0
 * runs the server alone (`sh -c`, on a port of its own node) and rank 0 runs the runner, so the
 * group ends with rank 0: the other ranks' servers never end on their own.
 */
import { Effect } from "effect"
import { type LeasedCommand, type RunnerCommand, runnerArgs, serverArgv } from "../domain/Serving.js"
import { ServingRunner } from "../services/ServingRunner.js"
import { Settings } from "../services/Settings.js"
import { type GroupRunResult, runGroupLeased } from "./Group.js"
import { type LeaseRunResult, type LeaseRunSpec, runLeased } from "./Lease.js"

export { LeasedCommand } from "../domain/Serving.js"

/** A lease's request, environment, bounds and output callback, and the command it runs. */
export interface LeasedSpec extends Omit<LeaseRunSpec, "argv"> {
  readonly command: LeasedCommand
}

/** The runner's argv for a serving or engine command: the lease's Python, the runner, its flags. */
export const runnerArgv = Effect.fn("Leased.runnerArgv")(function* (command: RunnerCommand, cwd: string) {
  const runner = yield* ServingRunner
  const entry = command._tag === "Serving" ? "serve" : "sweep"
  return [...(yield* runner.argv(yield* Settings, entry)), ...runnerArgs(command, cwd)]
})

/** Holds a lease (or a group when the settings' `nodes` is 2 or more), runs the command, releases it. */
export const runLeasedCommand = Effect.fn("Leased.runLeasedCommand")(function* (spec: LeasedSpec) {
  const { command, ...lease } = spec
  const { nodes } = yield* Settings
  const argv = command._tag === "Argv" ? command.argv : yield* runnerArgv(command, spec.cwd)
  const result: LeaseRunResult | GroupRunResult =
    nodes < 2
      ? // A sweep's engine may run on a node without this folder (docs/design.md#sweeps-at-cluster-scale): its runner starts
        // there in /, and runs the engine and the clients in `cwd` where the node has it.
        yield* runLeased({ ...lease, argv, cwd: command._tag === "Engine" ? "/" : lease.cwd })
      : command._tag === "Argv"
        ? yield* runGroupLeased({ ...lease, argv }, nodes)
        : yield* runGroupLeased({ ...lease, argv: serverArgv(command) }, nodes, {
            leaderArgv: argv,
            endWithLeader: true,
            rankPorts: true
          })
  return result
})
