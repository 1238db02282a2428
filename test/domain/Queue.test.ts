import { assert, describe, it } from "@effect/vitest"
import {
  blockers,
  estimateWaitSec,
  LeaseWaitExpired,
  type QueueEntry,
  splitQueue,
  typicalHoldSec
} from "../../src/domain/Queue.js"

const entry = (ticket: number, holdingSince?: number): QueueEntry => ({
  ticket,
  leaseId: `h-${ticket}`,
  pid: 100 + ticket,
  uid: 0,
  user: "root",
  command: `hyperloom lease run -- job ${ticket}`,
  gpus: ticket % 3,
  joinedAt: ticket * 1000,
  holding: holdingSince === undefined ? undefined : { since: holdingSince, actorId: `a${ticket}` }
})

describe("the host queue's order", () => {
  it("only those that arrived before and do not hold the slot yet block a lease, in arrival order", () => {
    const entries = [entry(5), entry(2, 0), entry(3), entry(7), entry(1)]
    assert.deepStrictEqual(
      blockers(entries, 7).map((e) => e.ticket),
      [1, 3, 5]
    )
    assert.deepStrictEqual(blockers(entries, 1), [])
    const { holders, waiters } = splitQueue(entries)
    assert.deepStrictEqual(
      holders.map((e) => e.ticket),
      [2]
    )
    assert.deepStrictEqual(
      waiters.map((e) => e.ticket),
      [1, 3, 5, 7]
    )
  })
})

describe("the estimate from the host's recent leases", () => {
  const hist = (secs: ReadonlyArray<number>) => secs.map((heldSec, i) => ({ endedAt: i, heldSec, gpus: 1 }))

  it("is the median of the last 20 hold times; none without history", () => {
    assert.isUndefined(typicalHoldSec([]))
    assert.strictEqual(typicalHoldSec(hist([10, 30, 20])), 20)
    assert.strictEqual(typicalHoldSec(hist([10, 20, 30, 40])), 25)
    // Only the last 20 count: 30 old leases of 1000 s are forgotten.
    assert.strictEqual(typicalHoldSec(hist([...Array(30).fill(1000), ...Array(20).fill(5)])), 5)
  })

  it("waiter p waits what the holder has left of a typical lease, then a typical lease per waiter ahead", () => {
    const now = 100_000
    const holders = [entry(1, now - 15_000)]
    const h = hist([60, 60, 60])
    assert.strictEqual(estimateWaitSec(1, holders, h, now), 45)
    assert.strictEqual(estimateWaitSec(3, holders, h, now), 45 + 120)
    // A holder past the typical time has nothing left by the estimate.
    assert.strictEqual(estimateWaitSec(1, [entry(1, now - 600_000)], h, now), 0)
    assert.strictEqual(estimateWaitSec(2, [], h, now), 60)
    assert.isUndefined(estimateWaitSec(1, holders, [], now))
  })
})

describe("LeaseWaitExpired", () => {
  it("names the holder and how many leases were still ahead, marker first", () => {
    const e = new LeaseWaitExpired({ waitSec: 30, holder: "lease h-1 of root (pid 7)", ahead: 2 })
    assert.strictEqual(
      e.message,
      "lease_wait_expired: the lease was not granted within --wait 30 s: the serving slot is held by lease h-1 of root (pid 7); 2 lease(s) of this host's queue were still ahead of it; nothing was run"
    )
    assert.include(
      new LeaseWaitExpired({ waitSec: 1, holder: undefined, ahead: 0 }).message,
      "nobody visible"
    )
  })
})
