/**
 * The Python lease bridge spoken to directly over stdio (the protocol documented at the top of
 * python/hyperloom/bridge.py), against real heads where a cluster is needed. The service on top
 * of it is tested in lease-bridge.test.ts.
 */
import { afterEach, assert, describe, it } from "@effect/vitest"
import {
  type BridgeEvent,
  closeGcs,
  gcsActors,
  isAlive,
  killBridges,
  leaseOp,
  markerSleep,
  pidsWithArg,
  spawnBridge,
  waitGone,
  waitNoLeaseActor
} from "../support/lease.js"
import { type Head, prepareRay, startHead, teardownRay } from "../support/ray.js"

const PORT = 6392
/** A port where no GCS listens. */
const DEAD_PORT = 6393

const names = (events: ReadonlyArray<BridgeEvent>) => events.map((e) => e.event)

describe("bridge protocol without a cluster", () => {
  afterEach(() => killBridges())

  it("a line that is not JSON is a protocol error; the bridge releases and exits 1", async () => {
    const b = spawnBridge()
    b.child.stdin!.write("this is not json\n")
    const { code } = await b.exited
    assert.strictEqual(code, 1)
    assert.deepStrictEqual(names(b.events), ["error", "released"])
    assert.strictEqual(b.events[0]!.kind, "protocol")
    assert.deepStrictEqual(b.junk, [])
  })

  it("a lease without argv is a protocol error naming the field", async () => {
    const b = spawnBridge()
    b.send({ op: "lease", address: "127.0.0.1:1", gpus: 0 })
    const { code } = await b.exited
    assert.strictEqual(code, 1)
    assert.strictEqual(b.events[0]!.kind, "protocol")
    assert.include(b.events[0]!.message, "argv")
  })

  it("release (or EOF) before any lease: released, exit 0", async () => {
    const a = spawnBridge()
    a.send({ op: "release" })
    assert.strictEqual((await a.exited).code, 0)
    assert.deepStrictEqual(names(a.events), ["released"])
    const b = spawnBridge()
    b.closeStdin()
    assert.strictEqual((await b.exited).code, 0)
    assert.deepStrictEqual(names(b.events), ["released"])
  })

  it("a dead address fails fast with kind ray_init (not Ray's minutes of retries)", async () => {
    const b = spawnBridge()
    b.send({ ...leaseOp({ gcsAddress: `127.0.0.1:${DEAD_PORT}` } as Head, {}), argv: ["true"] })
    const { code } = await b.exited
    assert.strictEqual(code, 1)
    assert.deepStrictEqual(names(b.events), ["error", "released"])
    assert.strictEqual(b.events[0]!.kind, "ray_init")
    assert.include(b.events[0]!.message, "Connection refused")
    assert.isBelow(b.since(), 10_000)
  })
})

describe("bridge protocol on a real head", () => {
  let head: Head
  afterEach(async () => {
    killBridges()
    closeGcs()
    await teardownRay()
  })
  const setup = async () => {
    await prepareRay()
    head = await startHead({ numGpus: 2, slot: true, port: PORT })
  }

  it("emits connected, submitted, started, output, exit, released in order; stdout is protocol only", async () => {
    await setup()
    const b = spawnBridge()
    b.send(leaseOp(head, { argv: ["sh", "-c", "echo out1; echo err1 >&2; printf 'no newline'"] }))
    const exit = await b.waitEvent((e) => e.event === "exit")
    b.send({ op: "release" })
    const { code } = await b.exited
    const ms = b.since()
    assert.strictEqual(code, 0, b.stderr())
    assert.deepStrictEqual(b.junk, [], "nothing but protocol lines on stdout")
    // `placed` (Ray placed the lease's group) comes from a thread of its own: its place among
    // these is Ray's; it names the node the command then starts on
    const seq = names(b.events).filter((n) => n !== "placed")
    assert.deepStrictEqual(seq.slice(0, 3), ["connected", "submitted", "started"])
    assert.deepStrictEqual(seq.slice(-2), ["exit", "released"])
    const [connected, submitted, started] = b.events.filter((e) => e.event !== "placed")
    const placed = b.events.find((e) => e.event === "placed")
    assert.strictEqual(placed?.node_id, started!.node_id)
    assert.match(connected!.job_id, /^[0-9a-f]{8}$/)
    assert.match(submitted!.actor_id, /^[0-9a-f]{32}$/)
    assert.isNumber(started!.pid)
    assert.isNumber(started!.actor_pid)
    assert.match(started!.node_id, /^[0-9a-f]{56}$/)
    const outputs = b.events.filter((e) => e.event === "output").map((e) => `${e.stream}:${e.line}`)
    assert.sameMembers(outputs, ["stdout:out1", "stderr:err1", "stdout:no newline"])
    assert.strictEqual(exit.code, 0)
    console.log(
      `bridge round trip (spawn → exit → released): ${ms} ms; connected at ${connected!.at} ms, started at ${started!.at} ms, exit at ${exit.at} ms`
    )
    await waitNoLeaseActor(head, 5_000)
  })

  it("EOF on stdin releases a running lease: CMD stopped, actor killed, exit 0", async () => {
    await setup()
    const marker = markerSleep()
    const b = spawnBridge()
    b.send(leaseOp(head, { argv: ["sleep", marker] }))
    const started = await b.waitEvent((e) => e.event === "started")
    assert.isTrue(isAlive(started.pid))
    const actors = await gcsActors(head)
    assert.isTrue(actors.some((a) => a.state === "ALIVE" && a.className.includes("HyperloomLease")))
    b.closeStdin()
    const { code } = await b.exited
    assert.strictEqual(code, 0)
    assert.deepStrictEqual(names(b.events).slice(-2), ["exit", "released"])
    assert.strictEqual(b.events.at(-2)!.code, 143, "CMD ended by SIGTERM")
    assert.deepStrictEqual(pidsWithArg(marker), [])
    await waitNoLeaseActor(head, 5_000)
  })

  it("SIGTERM to the bridge releases the lease the same way", async () => {
    await setup()
    const marker = markerSleep()
    const b = spawnBridge()
    b.send(leaseOp(head, { argv: ["sleep", marker], gpus: 0, serving_slot: false }))
    await b.waitEvent((e) => e.event === "started")
    b.child.kill("SIGTERM")
    const { code } = await b.exited
    assert.strictEqual(code, 0, `${JSON.stringify(b.events)} ${b.stderr().slice(-3000)}`)
    assert.strictEqual(b.events.at(-1)!.event, "released")
    assert.deepStrictEqual(pidsWithArg(marker), [])
    await waitNoLeaseActor(head, 5_000)
  })

  it("a taken actor name fails with kind actor_creation", async () => {
    await setup()
    const marker = markerSleep()
    const a = spawnBridge()
    a.send(leaseOp(head, { argv: ["sleep", marker], gpus: 0, serving_slot: false, name: "hl-test-lease" }))
    await a.waitEvent((e) => e.event === "started")
    const b = spawnBridge()
    b.send(leaseOp(head, { argv: ["true"], gpus: 0, serving_slot: false, name: "hl-test-lease" }))
    const { code } = await b.exited
    assert.strictEqual(code, 1)
    const error = b.events.find((e) => e.event === "error")
    assert.strictEqual(error?.kind, "actor_creation", JSON.stringify(b.events))
    assert.notInclude(error!.message, "\n")
    a.send({ op: "release" })
    assert.strictEqual((await a.exited).code, 0)
    await waitGone("CMD", () => pidsWithArg(marker), 5_000)
  })
})
