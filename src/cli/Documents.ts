/**
 * The CLI's JSON documents that are not a program's own result, beside the renderers that print
 * the same outcomes as text.
 */
import type { EnsureOutcome, RepairOutcome } from "../programs/Cluster.js"

/** The JSON documents of ensure and repair (`ray ensure --json`, `ray repair --json`), in the CLI contract's snake_case. */
export const ensureReport = (r: EnsureOutcome) => ({
  action: r.action,
  address: r.gcsAddress,
  feasible: r.verdict.feasible,
  warnings: r.verdict.warnings,
  guards: r.guards
})

export const repairReport = (r: RepairOutcome) => ({
  action: r.action,
  address: r.gcsAddress,
  feasible: r.verdict.feasible,
  infeasible:
    r.verdict.infeasible === undefined
      ? null
      : {
          marker: r.verdict.infeasible.marker,
          reason: r.verdict.infeasible.reason,
          message: r.verdict.infeasible.message
        },
  plan:
    r.plan === null
      ? null
      : {
          port: r.plan.port,
          num_cpus: r.plan.numCpus ?? null,
          num_gpus: r.plan.numGpus ?? null,
          resources: r.plan.resources
        },
  repair: { allowed: r.action !== "none" || r.guards.every((g) => g.ok), guards: r.guards },
  warnings: r.verdict.warnings
})
