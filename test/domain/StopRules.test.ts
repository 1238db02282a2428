import { assert, describe, it } from "@effect/vitest"
import { INFEASIBLE_MARKER } from "../../src/domain/Errors.js"
import { AttemptOutcome, type AttemptResult, classifyAttempt } from "../../src/domain/Failure.js"
import { foldSignature } from "../../src/domain/Signature.js"
import {
  beginAttempt,
  finishEnablement,
  initialState,
  reopenStoppedByRun,
  type SessionState,
  type StopReason
} from "../../src/domain/State.js"
import {
  applyAttempt,
  type Decision,
  type RuleContext,
  STALL_LIMIT,
  stopByRun
} from "../../src/domain/StopRules.js"

// ---------------------------------------------------------------------------------------------
// Attempt results, built through the real classifier.

const exited = (exitCode: number, outputTail: string, runtimeSec = 120, throughput?: unknown) =>
  classifyAttempt(AttemptOutcome.Exited({ exitCode, runtimeSec, outputTail, throughput }))

/** A `subprocess_nonzero` whose text folds the same for every `n`. */
const crashA = (n = 1) => exited(1, `RuntimeError: worker ${n} died at 10.0.0.${n}:6379 after ${n}.5s`)
const crashB = () => exited(1, "RuntimeError: NCCL error: unhandled system error")
const crashC = () => exited(1, "Segmentation fault (core dumped)")
const silentCrash = () => exited(1, "")
const argError = () => exited(2, "error: unrecognized arguments: --bogus", 3)
const kvOom = () => exited(1, "ValueError: No GPU memory for the KV cache", 200)
const timedOut = (tail = "") =>
  classifyAttempt(AttemptOutcome.TimedOut({ runtimeSec: 60, timeoutSec: 60, outputTail: tail }))
const noReport = () => exited(0, "done", 100)
const invalid = () => exited(0, "done", 100, 0)
const success = (tput = 1500) => exited(0, "done", 100, tput)
const infeasible = () =>
  classifyAttempt(
    AttemptOutcome.LeaseInfeasible({
      message: `${INFEASIBLE_MARKER}: existing Ray head has no serving_slot resource; restart it`
    })
  )
/** A plain non-zero exit whose output carries the marker (e.g. the benchmark leased by itself). */
const crashWithMarker = () =>
  exited(1, `Traceback …\nError: ${INFEASIBLE_MARKER}: cluster has 0 GPU(s), 1 requested`)
const deadline = () =>
  classifyAttempt(AttemptOutcome.StoppedByRun({ cause: "deadline", runtimeSec: 5, outputTail: "x" }))
const cancel = () =>
  classifyAttempt(AttemptOutcome.StoppedByRun({ cause: "cancel", runtimeSec: 5, outputTail: "x" }))
const interrupted = (): AttemptResult => ({
  errorClass: "interrupted",
  exitCode: null,
  runtimeSec: 3,
  error: "attempt interrupted",
  launchLog: "",
  throughput: null
})

const NOW = "2024-06-01T12:00:00.000Z"
const LOG_PATH = "session/launch-log.txt"
const plain: RuleContext = { now: NOW, enablementAvailable: false }
const lane: RuleContext = { now: NOW, enablementAvailable: true, launchLogPath: LOG_PATH }

type Step = AttemptResult | "reopen"

const play = (steps: ReadonlyArray<Step>, context: RuleContext, from: SessionState = initialState()) => {
  let state = from
  const decisions: Array<Decision> = []
  for (const step of steps) {
    if (step === "reopen") {
      state = reopenStoppedByRun(state)
      continue
    }
    const applied = applyAttempt(state, step, context)
    state = applied.state
    decisions.push(applied.decision)
  }
  return { state, decisions, tags: decisions.map((d) => d._tag), last: decisions[decisions.length - 1]! }
}

const stopReason = (d: Decision): StopReason | undefined => (d._tag === "stop" ? d.reason : undefined)

interface Case {
  readonly name: string
  readonly context: RuleContext
  readonly steps: ReadonlyArray<Step>
  /** The decision tag after each attempt. */
  readonly tags: ReadonlyArray<Decision["_tag"]>
  readonly reason?: StopReason
  readonly check?: (state: SessionState, decisions: ReadonlyArray<Decision>) => void
}

// ---------------------------------------------------------------------------------------------

const outside: ReadonlyArray<Case> = [
  {
    name: "rule 1: an infeasible lease stops at the first occurrence",
    context: plain,
    steps: [infeasible()],
    tags: ["stop"],
    reason: "baseline_failed",
    check: (s) => {
      assert.strictEqual(s.baseline_attempts[0]!.error_class, "ray_cluster_infeasible")
      assert.isTrue(s.baseline_attempts[0]!.error!.startsWith(INFEASIBLE_MARKER))
      assert.strictEqual(s.baseline_total_failures, 1)
    }
  },
  {
    name: "rule 1: the marker in a plain failure's text stops at once too",
    context: plain,
    steps: [crashWithMarker()],
    tags: ["stop"],
    reason: "baseline_failed",
    check: (s) => assert.strictEqual(s.baseline_attempts[0]!.error_class, "subprocess_nonzero")
  },
  {
    name: "rule 1 after other failures",
    context: plain,
    steps: [crashB(), infeasible()],
    tags: ["retry", "stop"],
    reason: "baseline_failed"
  },
  {
    name: "rule 2: two argument errors in a row stop baseline_arg_error",
    context: plain,
    steps: [argError(), argError()],
    tags: ["retry", "stop"],
    reason: "baseline_arg_error",
    check: (s) => {
      assert.strictEqual(s.baseline_arg_error_streak, 2)
      // Rule 2 is not rule 3: argument errors add neither to the failure streak nor to the total.
      assert.strictEqual(s.baseline_failure_streak, 0)
      assert.strictEqual(s.baseline_total_failures, 0)
    }
  },
  {
    name: "rule 3 resets the arg-error streak",
    context: plain,
    steps: [argError(), crashB(), argError(), argError()],
    tags: ["retry", "retry", "retry", "stop"],
    reason: "baseline_arg_error",
    check: (s) => assert.strictEqual(s.baseline_total_failures, 1)
  },
  {
    name: "rule 3: the same subprocess_nonzero twice in a row stops at the second",
    context: plain,
    steps: [crashA(1), crashA(2)],
    tags: ["retry", "stop"],
    reason: "baseline_failed",
    check: (s, ds) => {
      assert.include(ds[1]!.why, "same way")
      assert.strictEqual(s.baseline_failure_streak, 2)
      assert.strictEqual(s.baseline_last_failure_signature, foldSignature(crashA(7).error!))
    }
  },
  {
    name: "rule 3: two different subprocess_nonzero go on, the third failure stops",
    context: plain,
    steps: [crashA(), crashB(), crashC()],
    tags: ["retry", "retry", "stop"],
    reason: "baseline_failed",
    check: (s, ds) => {
      assert.include(ds[2]!.why, "3 failures")
      assert.strictEqual(s.baseline_total_failures, 3)
    }
  },
  {
    name: "rule 3: any counted classes, three failures stop",
    context: plain,
    steps: [kvOom(), noReport(), invalid()],
    tags: ["retry", "retry", "stop"],
    reason: "baseline_failed"
  },
  {
    name: "rule 3: two identical timeouts are not the signature rule (only subprocess_nonzero is)",
    context: plain,
    steps: [timedOut("hang"), timedOut("hang")],
    tags: ["retry", "retry"],
    check: (s) => assert.isNull(s.baseline_last_failure_signature)
  },
  {
    name: "rule 4: another counted class between identical failures breaks 'consecutive'",
    context: plain,
    steps: [crashA(1), argError(), crashA(2)],
    tags: ["retry", "retry", "retry"],
    check: (s) => {
      assert.strictEqual(s.baseline_total_failures, 2)
      assert.strictEqual(s.baseline_last_failure_signature, foldSignature(crashA(2).error!))
    }
  },
  {
    name: "rule 4: a timeout between identical failures breaks 'consecutive' (then three failures stop)",
    context: plain,
    steps: [crashA(1), timedOut(), crashA(2)],
    tags: ["retry", "retry", "stop"],
    reason: "baseline_failed",
    check: (_, ds) => assert.include(ds[2]!.why, "3 failures")
  },
  {
    name: "rule 4: an interrupted round between identical failures keeps them consecutive",
    context: plain,
    steps: [crashA(1), interrupted(), crashA(2)],
    tags: ["retry", "retry", "stop"],
    reason: "baseline_failed",
    check: (s, ds) => {
      assert.include(ds[2]!.why, "same way")
      assert.strictEqual(s.baseline_failure_streak, 2)
      assert.strictEqual(s.baseline_attempts[1]!.error_class, "interrupted")
    }
  },
  {
    name: "rule 4: a deadline round and a resume between identical failures keep them consecutive",
    context: plain,
    steps: [crashA(1), deadline(), "reopen", crashA(2)],
    tags: ["retry", "stop", "stop"],
    reason: "baseline_failed",
    check: (s, ds) => {
      assert.strictEqual(stopReason(ds[1]!), "session_time_exhausted")
      assert.include(ds[2]!.why, "same way")
      assert.strictEqual(s.baseline_total_failures, 2)
    }
  },
  {
    name: "a deadline is not charged and ends the run",
    context: plain,
    steps: [crashA(), deadline()],
    tags: ["retry", "stop"],
    reason: "session_time_exhausted",
    check: (s) => {
      assert.strictEqual(s.status, "stopped")
      assert.strictEqual(s.stop_ts, NOW)
      assert.strictEqual(s.baseline_total_failures, 1)
      assert.strictEqual(s.baseline_failure_streak, 1)
      assert.strictEqual(s.baseline_last_failure_signature, foldSignature(crashA().error!))
      assert.isNull(s.baseline_attempts[1]!.signature)
    }
  },
  {
    name: "a cancel is not charged and ends the run as cancelled",
    context: plain,
    steps: [argError(), cancel()],
    tags: ["retry", "stop"],
    reason: "orchestrator_cancelled",
    check: (s) => {
      assert.strictEqual(s.status, "cancelled")
      assert.strictEqual(s.baseline_arg_error_streak, 1)
    }
  },
  {
    name: "an interrupted round charges nothing",
    context: plain,
    steps: [interrupted(), interrupted(), interrupted(), interrupted()],
    tags: ["retry", "retry", "retry", "retry"],
    check: (s) => {
      assert.strictEqual(s.baseline_total_failures, 0)
      assert.strictEqual(s.baseline_failure_streak, 0)
      assert.strictEqual(s.status, "running")
    }
  },
  {
    name: "rule 6: success records the throughput and resets streaks and signature",
    context: plain,
    steps: [crashA(), argError(), success(1234.5)],
    tags: ["retry", "retry", "succeeded"],
    check: (s) => {
      assert.strictEqual(s.status, "succeeded")
      assert.strictEqual(s.baseline_tput, 1234.5)
      assert.strictEqual(s.baseline_failure_streak, 0)
      assert.strictEqual(s.baseline_arg_error_streak, 0)
      assert.isNull(s.baseline_last_failure_signature)
      assert.isNull(s.stop_reason)
      assert.isFalse(s.enablement.succeeded)
      // The total is a record of what happened, not a streak.
      assert.strictEqual(s.baseline_total_failures, 1)
      assert.isNull(s.baseline_attempts[2]!.error_class)
    }
  },
  {
    name: "without an enablement command a failure with a launch log is just retried",
    context: plain,
    steps: [crashB()],
    tags: ["retry"],
    check: (s) => assert.strictEqual(s.enablement.attempts, 0)
  }
]

const inLane: ReadonlyArray<Case> = [
  {
    name: "rule 5: a counted failure with a launch log runs the enablement",
    context: lane,
    steps: [crashB()],
    tags: ["run_enablement"],
    check: (s, ds) => {
      const d = ds[0]!
      assert.strictEqual(d._tag === "run_enablement" ? d.launchLog : "", crashB().launchLog)
      assert.strictEqual(s.enablement.attempts, 1)
      assert.isTrue(s.enablement.inflight)
      assert.strictEqual(s.enablement.launch_log_path, LOG_PATH)
      assert.strictEqual(s.enablement.stall_streak, 0)
      // Enablement progress clears the signature.
      assert.isNull(s.baseline_last_failure_signature)
      assert.strictEqual(s.baseline_total_failures, 1)
    }
  },
  {
    name: "rule 5: a failure without a launch log does not run the enablement",
    context: lane,
    steps: [silentCrash(), timedOut()],
    tags: ["retry", "retry"],
    check: (s) => assert.strictEqual(s.enablement.attempts, 0)
  },
  {
    name: "rule 1 in the lane: an infeasible lease stops, never runs the enablement",
    context: lane,
    steps: [infeasible()],
    tags: ["stop"],
    reason: "baseline_failed",
    check: (s) => {
      assert.strictEqual(s.enablement.attempts, 0)
      assert.isNull(s.enablement.launch_log_path)
    }
  },
  {
    name: "rule 1 in the lane: the marker in a failure's output is never stashed as a launch log",
    context: lane,
    steps: [crashWithMarker()],
    tags: ["stop"],
    reason: "baseline_failed",
    check: (s) => assert.strictEqual(s.enablement.attempts, 0)
  },
  {
    name: "rule 1 while engaged: stops at the first infeasible revalidation",
    context: lane,
    steps: [crashB(), infeasible()],
    tags: ["run_enablement", "stop"],
    reason: "baseline_failed",
    check: (s) => {
      assert.strictEqual(s.enablement.attempts, 1)
      assert.isFalse(s.enablement.inflight)
    }
  },
  {
    name: "rule 3 stands down while engaged; 5 failed revalidations stop enablement_stalled",
    context: lane,
    steps: [crashA(1), crashA(2), crashA(3), crashA(4), crashA(5), crashA(6)],
    tags: ["run_enablement", "run_enablement", "run_enablement", "run_enablement", "run_enablement", "stop"],
    reason: "enablement_stalled",
    check: (s) => {
      assert.strictEqual(s.enablement.stall_streak, STALL_LIMIT)
      assert.strictEqual(s.enablement.attempts, 5)
      assert.strictEqual(s.baseline_total_failures, 6)
      assert.strictEqual(s.baseline_failure_streak, 6)
    }
  },
  {
    name: "stalls count failed revalidations that could not run the enablement again",
    context: lane,
    steps: [crashB(), silentCrash(), timedOut(), silentCrash(), noReport(), crashC()],
    tags: ["run_enablement", "retry", "retry", "retry", "run_enablement", "stop"],
    reason: "enablement_stalled",
    check: (s) => assert.strictEqual(s.enablement.attempts, 2)
  },
  {
    name: "rule 2 does not stand down in the lane: arg error, enablement, arg error stops",
    context: lane,
    steps: [argError(), argError()],
    tags: ["run_enablement", "stop"],
    reason: "baseline_arg_error",
    check: (s) => assert.strictEqual(s.enablement.stall_streak, 1)
  },
  {
    name: "an arg error on a revalidation after a crash is a stall and a streak of one",
    context: lane,
    steps: [crashB(), argError(), crashB(), argError()],
    tags: ["run_enablement", "run_enablement", "run_enablement", "run_enablement"],
    check: (s) => {
      assert.strictEqual(s.baseline_arg_error_streak, 1)
      assert.strictEqual(s.enablement.stall_streak, 3)
    }
  },
  {
    name: "a successful revalidation succeeds the run and the enablement",
    context: lane,
    steps: [crashB(), crashC(), success(99)],
    tags: ["run_enablement", "run_enablement", "succeeded"],
    check: (s) => {
      assert.isTrue(s.enablement.succeeded)
      assert.strictEqual(s.enablement.stall_streak, 0)
      assert.isFalse(s.enablement.inflight)
      assert.strictEqual(s.baseline_tput, 99)
      assert.strictEqual(s.status, "succeeded")
    }
  },
  {
    name: "the engaging attempt is still outside the lane: a third failure stops instead of engaging",
    context: lane,
    steps: [silentCrash(), timedOut(), crashB()],
    tags: ["retry", "retry", "stop"],
    reason: "baseline_failed",
    check: (s) => assert.strictEqual(s.enablement.attempts, 0)
  },
  {
    name: "the engaging attempt is still outside the lane: a repeated silent crash stops",
    context: lane,
    steps: [silentCrash(), silentCrash()],
    tags: ["retry", "stop"],
    reason: "baseline_failed"
  },
  {
    name: "uncharged rounds in the lane add no stall",
    context: lane,
    steps: [crashB(), interrupted(), interrupted(), crashC()],
    tags: ["run_enablement", "retry", "retry", "run_enablement"],
    check: (s) => assert.strictEqual(s.enablement.stall_streak, 1)
  }
]

const runCase = (c: Case) => {
  const { decisions, state, tags } = play(c.steps, c.context)
  assert.deepStrictEqual(tags, c.tags)
  const last = decisions[decisions.length - 1]!
  assert.strictEqual(stopReason(last), c.reason)
  if (c.reason !== undefined) {
    assert.strictEqual(state.stop_reason, c.reason)
    assert.notStrictEqual(state.status, "running")
  }
  for (const d of decisions) assert.isAbove(d.why.length, 0)
  assert.strictEqual(state.baseline_attempts.length, c.steps.filter((s) => s !== "reopen").length)
  c.check?.(state, decisions)
}

describe("stop rules outside the enablement lane", () => {
  for (const c of outside) it(c.name, () => runCase(c))
})

describe("stop rules in the enablement lane", () => {
  for (const c of inLane) it(c.name, () => runCase(c))
})

describe("applyAttempt bookkeeping", () => {
  it("completes the in-flight record opened before the command ran", () => {
    const opened = beginAttempt(initialState(), "2024-06-01T11:59:00.000Z")
    const { state } = applyAttempt(opened, crashB(), plain)
    assert.strictEqual(state.baseline_attempts.length, 1)
    const a = state.baseline_attempts[0]!
    assert.strictEqual(a.number, 1)
    assert.strictEqual(a.started_at, "2024-06-01T11:59:00.000Z")
    assert.strictEqual(a.ended_at, NOW)
    assert.strictEqual(a.error_class, "subprocess_nonzero")
    assert.strictEqual(a.exit_code, 1)
    assert.strictEqual(a.runtime_sec, 120)
    assert.strictEqual(a.signature, foldSignature(crashB().error!))
  })

  it("numbers appended attempts in order", () => {
    const { state } = play([crashA(), interrupted(), crashB()], plain)
    assert.deepStrictEqual(
      state.baseline_attempts.map((a) => a.number),
      [1, 2, 3]
    )
  })

  it("a success claimed without a valid throughput is an invalid measurement", () => {
    const bogus: AttemptResult = { ...success(), throughput: Number.NaN }
    const { state, decision } = applyAttempt(initialState(), bogus, plain)
    assert.strictEqual(decision._tag, "retry")
    assert.strictEqual(state.baseline_attempts[0]!.error_class, "invalid_measurement")
    assert.strictEqual(state.baseline_total_failures, 1)
  })

  it("rule 3: the total alone stops at 3, even when the streak is shorter", () => {
    // Only a success resets the streak and it ends the run, so in play the two move together;
    // a state where they differ (e.g. carried over from an older release) still obeys the total.
    const from: SessionState = { ...initialState(), baseline_total_failures: 2, baseline_failure_streak: 0 }
    const { state, decision } = applyAttempt(from, crashB(), plain)
    assert.strictEqual(state.baseline_failure_streak, 1)
    assert.strictEqual(stopReason(decision), "baseline_failed")
    const notYet = applyAttempt({ ...from, baseline_total_failures: 1 }, crashB(), plain)
    assert.strictEqual(notYet.decision._tag, "retry")
  })

  it("rule 3: the streak alone stops at 3, even when the total is lower", () => {
    const from: SessionState = { ...initialState(), baseline_total_failures: 0, baseline_failure_streak: 2 }
    assert.strictEqual(stopReason(applyAttempt(from, crashB(), plain).decision), "baseline_failed")
  })

  it("rule 1 branches on the class too, not only on the marker text", () => {
    const refused: AttemptResult = {
      errorClass: "ray_cluster_infeasible",
      exitCode: null,
      runtimeSec: null,
      error: "lease refused",
      launchLog: "lease refused",
      throughput: null
    }
    const { state, decision } = applyAttempt(initialState(), refused, lane)
    assert.strictEqual(stopReason(decision), "baseline_failed")
    assert.strictEqual(state.enablement.attempts, 0)
  })

  it("rule 3's signature stop needs two subprocess_nonzero, not one and another class with equal text", () => {
    const boom = exited(1, "boom")
    const sameTextTimeout: AttemptResult = { ...boom, errorClass: "timeout", exitCode: null }
    const { tags } = play([boom, sameTextTimeout], plain)
    assert.deepStrictEqual(tags, ["retry", "retry"])
    assert.deepStrictEqual(play([boom, boom], plain).tags, ["retry", "stop"])
  })

  it("an ended session is left as it is", () => {
    const stopped = play([argError(), argError()], plain).state
    const { state, decision } = applyAttempt(stopped, success(), plain)
    assert.strictEqual(state, stopped)
    assert.strictEqual(stopReason(decision), "baseline_arg_error")
    const succeeded = play([success(5)], plain).state
    assert.strictEqual(applyAttempt(succeeded, crashA(), plain).decision._tag, "succeeded")
  })

  it("a run resumed without the enablement command is outside the lane again", () => {
    const engaged = play([crashB(), crashC(), crashA()], lane).state
    assert.strictEqual(engaged.status, "running")
    assert.strictEqual(engaged.enablement.attempts, 3)
    const { decisions } = play([kvOom()], plain, finishEnablement(engaged))
    assert.strictEqual(stopReason(decisions[0]!), "baseline_failed")
  })

  it("finishEnablement closes the enablement run; the next failure is a stall", () => {
    const s1 = play([crashB()], lane).state
    const s2 = finishEnablement(s1)
    assert.isFalse(s2.enablement.inflight)
    assert.strictEqual(s2.enablement.attempts, 1)
    const { state } = applyAttempt(s2, crashC(), lane)
    assert.strictEqual(state.enablement.stall_streak, 1)
  })

  it("stopByRun between attempts charges nothing; reopening resumes", () => {
    const s1 = play([crashA()], plain).state
    const s2 = stopByRun(s1, "orchestrator_cancelled", NOW)
    assert.strictEqual(s2.status, "cancelled")
    assert.strictEqual(s2.stop_reason, "orchestrator_cancelled")
    assert.strictEqual(s2.baseline_total_failures, 1)
    const s3 = reopenStoppedByRun(s2)
    assert.strictEqual(s3.status, "running")
    assert.isNull(s3.stop_reason)
    assert.isNull(s3.stop_ts)
    // A stop-rule stop is final.
    const final = play([argError(), argError()], plain).state
    assert.strictEqual(reopenStoppedByRun(final), final)
  })
})
