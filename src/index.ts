/**
 * hyperloom as a library for larger Effect programs: the services (tags, live and test layers),
 * the programs (doctor, ensure, repair, leases, the baseline), the typed errors and the pure
 * domain (snapshot model, feasibility, guards, failure classes, folding, stop rules, state).
 *
 *   import { Lease, Live } from "hyperloom"
 *   Lease.runLeased({ request: { gpus: 1, servingSlot: true }, argv: ["nvidia-smi"], env: process.env, cwd: "." })
 *     .pipe(Effect.provide(Live.layer), NodeRuntime.runMain)
 */
export * as Address from "./domain/Address.js"
export * as Daemons from "./domain/Daemons.js"
export * from "./domain/Errors.js"
export * as Failure from "./domain/Failure.js"
export * as Feasibility from "./domain/Feasibility.js"
export * as Group from "./domain/Group.js"
export * as Guards from "./domain/Guards.js"
export * as Resolve from "./domain/Resolve.js"
export * as Restart from "./domain/Restart.js"
export * as Signature from "./domain/Signature.js"
export * as Snapshot from "./domain/Snapshot.js"
export * as State from "./domain/State.js"
export * as StopRules from "./domain/StopRules.js"
export * as Live from "./Live.js"
export * as AttemptRunner from "./programs/AttemptRunner.js"
export * as Baseline from "./programs/Baseline.js"
export * as Cluster from "./programs/Cluster.js"
export * as GroupLease from "./programs/Group.js"
export * as Inspect from "./programs/Inspect.js"
export * as Lease from "./programs/Lease.js"
export * as AttemptFiles from "./services/AttemptFiles.js"
export * as ClusterInspector from "./services/ClusterInspector.js"
export * as Enablement from "./services/Enablement.js"
export * as GcsClient from "./services/GcsClient.js"
export * as GroupBridge from "./services/GroupBridge.js"
export * as LeaseBridge from "./services/LeaseBridge.js"
export * as ProcFs from "./services/ProcFs.js"
export * as RayCli from "./services/RayCli.js"
export * as RayInstall from "./services/RayInstall.js"
export * as Settings from "./services/Settings.js"
export * as StateStore from "./services/StateStore.js"
export * as WorkGate from "./services/WorkGate.js"
export * as Testing from "./Testing.js"
export { VERSION } from "./version.js"
