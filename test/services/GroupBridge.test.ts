/**
 * The live GroupBridge service against a scripted stand-in for the Python group bridge (no Ray):
 * the request, the events folded into a session, error mapping, the messages of a bridge that
 * dies or says something unexpected, and the bounded release (TERM → KILL).
 */
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as GroupBridge from "../../src/services/GroupBridge.js"
import { isAlive } from "../support/lease.js"
import { assertStubbornBridgeKilled, requestsIn, scriptedBridge } from "../support/scriptedBridge.js"

/** Stands in for `python PYDIR group`: behaviour chosen by FAKE_BRIDGE_MODE. */
const { dir, layerFor } = scriptedBridge(GroupBridge.layer, {
  prelude: `const rank = (r) => ({ event: "started", rank: r, pid: 5000 + r, pgid: 5000 + r, actor_pid: 4000 + r, actor_id: String(r).repeat(32), node_id: String(r + 1).repeat(56), cuda_visible_devices: "0" })
const placed = () => { out({ event: "connected", job_id: "02000000" }); out({ event: "submitted", placement_group_id: "e".repeat(36) }); out({ event: "placed", node_ids: ["1".repeat(56), "2".repeat(56)] }); out({ event: "leader", host: "10.0.0.5", port: 29500 }); out(rank(1)); out(rank(0)) }`,
  cases: `      case "normal":
        placed(); out({ event: "output", rank: 0, stream: "stdout", line: "hello" }); out({ event: "output", rank: 1, stream: "stderr", line: "oops" }); out({ event: "exit", rank: 1, code: 2 }); out({ event: "exit", rank: 0, code: 143 }); out({ event: "ended", code: 2, failed_rank: 1 }); break
      case "stubborn": placed(); break
      case "crash": placed(); process.stderr.write("Traceback (most recent call last):\\nRuntimeError: boom\\n"); process.exit(1)
      case "early": placed(); out({ event: "released" }); process.exit(0)
      case "garbage": process.stdout.write("this is not a protocol line\\n"); break
      case "rankdied": placed(); setTimeout(() => { out({ event: "error", kind: "rank_died", message: "ActorDiedError: gone" }); out({ event: "released" }); process.exit(1) }, 50); break
      case "connected": out({ event: "connected", job_id: "02000000" }); break
      case "silent": break`
})

const spec: GroupBridge.GroupSpec = {
  gcsAddress: "192.0.2.9:6379",
  nodes: 2,
  gpus: 1,
  servingSlot: true,
  argv: ["vllm", "serve", "m"],
  env: { PATH: "/usr/bin", UNSET: undefined },
  cwd: "/tmp",
  endWithLeader: true
}

const openAnd = <A, E>(
  f: (s: GroupBridge.GroupSession) => Effect.Effect<A, E>,
  over: Partial<GroupBridge.GroupSpec> = {}
) =>
  Effect.scoped(
    Effect.flatMap(GroupBridge.GroupBridge, (b) => Effect.flatMap(b.open({ ...spec, ...over }), f))
  )

describe("GroupBridge (live, scripted bridge)", () => {
  it.live("sends the group request and folds the events into a session", () => {
    const log = path.join(dir, "normal.log")
    return Effect.gen(function* () {
      const seen: string[] = []
      const r = yield* openAnd(
        (s) =>
          Effect.all({
            s: Effect.succeed(s),
            placed: s.awaitPlaced,
            started: s.awaitStarted,
            exit: s.awaitExit
          }),
        { onOutput: (o) => Effect.sync(() => seen.push(`${o.rank}:${o.stream}:${o.line}`)) }
      )
      assert.strictEqual(r.s.jobId, "02000000")
      assert.strictEqual(r.s.placementGroupId, "e".repeat(36))
      assert.deepStrictEqual(r.placed, { nodeIds: ["1".repeat(56), "2".repeat(56)] })
      assert.strictEqual(r.started.leaderHost, "10.0.0.5")
      assert.strictEqual(r.started.leaderPort, 29500)
      assert.deepStrictEqual(
        r.started.ranks.map((k) => [k.rank, k.pid, k.actorId]),
        [
          [0, 5000, "0".repeat(32)],
          [1, 5001, "1".repeat(32)]
        ]
      )
      assert.deepStrictEqual(r.exit, {
        exitCode: 2,
        failedRank: 1,
        exits: [
          { rank: 1, code: 2 },
          { rank: 0, code: 143 }
        ],
        stdoutTail: "[rank 0] hello",
        stderrTail: "[rank 1] oops"
      })
      assert.deepStrictEqual(seen, ["0:stdout:hello", "1:stderr:oops"])
      assert.deepStrictEqual(requestsIn(log), [
        {
          op: "group",
          address: "192.0.2.9:6379",
          nodes: 2,
          gpus: 1,
          serving_slot: true,
          argv: ["vllm", "serve", "m"],
          env: { PATH: "/usr/bin" },
          env_base: "node",
          cwd: "/tmp",
          end_with_leader: true,
          stop_grace_sec: 3,
          gpu_clean_timeout_sec: 30
        },
        { op: "release" }
      ])
      assert.isFalse(isAlive(r.s.bridgePid))
    }).pipe(Effect.provide(layerFor("normal", { FAKE_BRIDGE_LOG: log })))
  })

  it.live("a bridge that dies mid-group fails awaitExit with its stderr tail", () =>
    Effect.gen(function* () {
      const error = yield* openAnd((s) => Effect.flip(s.awaitExit))
      assert.strictEqual(error._tag, "LeaseBridgeProtocolError")
      assert.strictEqual(
        error.message,
        "lease bridge failed: the group bridge exited with code 1 before the group ended: Traceback (most recent call last): | RuntimeError: boom"
      )
    }).pipe(Effect.provide(layerFor("crash")))
  )

  it.live("a bridge that releases before the ranks ended says so", () =>
    Effect.gen(function* () {
      const error = yield* openAnd((s) => Effect.flip(s.awaitExit))
      assert.strictEqual(
        error.message,
        "lease bridge failed: the group bridge released the group before every rank ended"
      )
    }).pipe(Effect.provide(layerFor("early")))
  )

  it.live("a non-protocol line fails open with LeaseBridgeProtocolError", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(openAnd(() => Effect.void))
      assert.strictEqual(error._tag, "LeaseBridgeProtocolError")
      assert.strictEqual(
        error.message,
        "lease bridge failed: unexpected line from the group bridge: this is not a protocol line"
      )
    }).pipe(Effect.provide(layerFor("garbage")))
  )

  it.live("rank_died maps to LeaseActorFailed (died)", () =>
    Effect.gen(function* () {
      const error = yield* openAnd((s) => Effect.zipRight(s.awaitStarted, Effect.flip(s.awaitExit)))
      assert.strictEqual(error._tag, "LeaseActorFailed")
      assert.strictEqual(error.message, "the lease actor died: ActorDiedError: gone")
    }).pipe(Effect.provide(layerFor("rankdied")))
  )

  it.live(
    "connect timeouts: no answer is LeaseRayInitFailed, connected but not submitted is LeaseActorFailed",
    () =>
      Effect.gen(function* () {
        const silent = yield* Effect.flip(openAnd(() => Effect.void, { connectTimeoutSec: 0.5 })).pipe(
          Effect.provide(layerFor("silent"))
        )
        assert.strictEqual(silent._tag, "LeaseRayInitFailed")
        assert.strictEqual(
          silent.message,
          "cannot connect a Ray driver to 192.0.2.9:6379: no answer within 500ms"
        )
        // 5 s: the scripted bridge (a process of its own) must say it connected within it, and CI
        // saw it start later than 500 ms beside three Ray lanes (then the connect timed out instead)
        const connected = yield* Effect.flip(openAnd(() => Effect.void, { connectTimeoutSec: 5 })).pipe(
          Effect.provide(layerFor("connected"))
        )
        assert.strictEqual(connected._tag, "LeaseActorFailed")
        assert.strictEqual(
          connected.message,
          "the lease actor could not be created: the placement group was not submitted within 5s"
        )
      })
  )

  it.live("a bridge that ignores the release is TERMed, then KILLed, within bounds", () =>
    Effect.flatMap(GroupBridge.GroupBridge, (bridge) =>
      assertStubbornBridgeKilled(
        (releaseTimeoutSec) => bridge.open({ ...spec, releaseTimeoutSec }),
        (s) => s.awaitStarted
      )
    ).pipe(Effect.provide(layerFor("stubborn")))
  )
})
