import { Data } from "effect"

/** The stable marker carried by every infeasibility error through the baseline program. */
export const INFEASIBLE_MARKER = "ray_cluster_infeasible"

export type InfeasibleReason = "no_serving_slot" | "insufficient_gpus" | "insufficient_nodes"

/**
 * A serving lease can never be granted by the connected cluster as it is.
 * `detail` is the text after the marker; a refused repair appends its reasons, a failed
 * restart appends its failure, and the message keeps the marker first.
 */
export class RayClusterInfeasible extends Data.TaggedError("RayClusterInfeasible")<{
  readonly reason: InfeasibleReason
  readonly detail: string
  readonly refusals: ReadonlyArray<string>
  readonly restartFailure: string | undefined
}> {
  override get message(): string {
    let text = `${INFEASIBLE_MARKER}: ${this.detail}`
    if (this.refusals.length > 0) text += `; not restarting it automatically: ${this.refusals.join("; ")}`
    if (this.restartFailure !== undefined) text += `; restarting the head failed: ${this.restartFailure}`
    return text
  }
  get marker(): typeof INFEASIBLE_MARKER {
    return INFEASIBLE_MARKER
  }
  withRefusals(refusals: ReadonlyArray<string>): RayClusterInfeasible {
    return new RayClusterInfeasible({ ...this.fields(), refusals })
  }
  withRestartFailure(failure: string): RayClusterInfeasible {
    return new RayClusterInfeasible({ ...this.fields(), restartFailure: failure })
  }
  private fields() {
    return {
      reason: this.reason,
      detail: this.detail,
      refusals: this.refusals,
      restartFailure: this.restartFailure
    }
  }
}

/** No `ray` executable could be found. */
export class RayNotFound extends Data.TaggedError("RayNotFound")<{
  readonly searched: ReadonlyArray<string>
  /** What is missing: the `ray` executable (default) or the Python of the Ray installation. */
  readonly what?: "executable" | "python"
}> {
  override get message(): string {
    return this.what === "python"
      ? `no Python of the Ray installation found (looked at ${this.searched.join(", ")}); set HYPERLOOM_RAY_PYTHON to it`
      : `no ray executable found (looked at ${this.searched.join(", ")}); install Ray core as Ray documents it (pip install -U "ray==2.58.0", in a virtualenv) and put its ray on PATH, or set HYPERLOOM_RAY to the ray executable`
  }
}

/** A `ray` invocation exited non-zero. */
export class RayCommandFailed extends Data.TaggedError("RayCommandFailed")<{
  readonly argv: ReadonlyArray<string>
  readonly exitCode: number
  readonly output: string
}> {
  override get message(): string {
    const tail = this.output.trim().split("\n").slice(-3).join(" | ")
    return `\`${this.argv.join(" ")}\` exited with code ${this.exitCode}${tail ? `: ${tail}` : ""}`
  }
}

/** A `ray` invocation did not finish within its timeout; its process tree was killed. */
export class RayCommandTimeout extends Data.TaggedError("RayCommandTimeout")<{
  readonly argv: ReadonlyArray<string>
  readonly timeoutSec: number
}> {
  override get message(): string {
    return `\`${this.argv.join(" ")}\` did not finish within ${this.timeoutSec} s and was killed`
  }
}

/** RAY_ADDRESS (or another address) is malformed or cannot be read over the GCS. */
export class InvalidAddress extends Data.TaggedError("InvalidAddress")<{
  readonly value: string
  readonly reason: string
}> {
  override get message(): string {
    return `invalid Ray address ${JSON.stringify(this.value)}: ${this.reason}`
  }
}

/** No local cluster could be found (no current-cluster file, no raylet on the host). */
export class NoClusterFound extends Data.TaggedError("NoClusterFound")<{
  readonly detail: string
}> {
  override get message(): string {
    return `Ray is not running: ${this.detail}; start a head with \`hyperloom ray ensure\``
  }
}

/** Several local clusters and no way to pick one, as Ray itself would refuse. */
export class MultipleClusters extends Data.TaggedError("MultipleClusters")<{
  readonly addresses: ReadonlyArray<string>
}> {
  override get message(): string {
    return `found multiple active Ray instances: ${this.addresses.join(", ")}; set RAY_ADDRESS to the GCS host:port of the one to use`
  }
}

/** The GCS at an address did not answer (or answered with an error). */
export class ClusterUnreachable extends Data.TaggedError("ClusterUnreachable")<{
  readonly address: string
  readonly detail: string
}> {
  override get message(): string {
    return `cannot reach the Ray GCS at ${this.address}: ${this.detail}`
  }
}

/** A setting (environment variable or option) has a value that cannot be used. */
export class InvalidSetting extends Data.TaggedError("InvalidSetting")<{
  readonly name: string
  readonly value: string
  readonly reason: string
}> {
  override get message(): string {
    return `invalid ${this.name} ${JSON.stringify(this.value)}: ${this.reason}`
  }
}

/** Ensure found nothing answering and may not start a head (explicit address, multi-node, foreign daemons). */
export class EnsureRefused extends Data.TaggedError("EnsureRefused")<{
  readonly detail: string
}> {
  override get message(): string {
    return `not starting a local Ray head: ${this.detail}`
  }
}

/** `state show` or `report` on a directory that holds no session state. */
export class SessionNotFound extends Data.TaggedError("SessionNotFound")<{
  readonly sessionDir: string
  /** What was looked for: a baseline session (state.json, the default) or a sweep (sweep.json). */
  readonly kind?: "baseline" | "sweep"
}> {
  override get message(): string {
    if (this.kind === "sweep")
      return `no sweep session in ${this.sessionDir} (no sweep.json there); start one with \`hyperloom sweep run --session ${this.sessionDir} --gpus N --server '…' --param NAME=V1,V2 --load NAME=V1,V2 -- CLIENT…\` (see \`hyperloom sweep run --help\`)`
    return `no baseline session in ${this.sessionDir} (no state.json there); start one with \`hyperloom baseline run --session ${this.sessionDir} --gpus N -- CMD…\``
  }
}
