/**
 * Who a waiting lease names as the holder of what it waits for (programs/Lease.ts whoHolds), now
 * that a lease's resources are held by a placement group of its own with the actor inside it.
 */
import { assert, describe, it } from "@effect/vitest"
import type { ClusterSnapshot } from "../../src/domain/Snapshot.js"
import { whoHolds } from "../../src/programs/Lease.js"
import {
  actor,
  HEAD_NODE_ID,
  HEAD_RESOURCES,
  idleHeadSnapshot,
  job,
  jobId,
  nodeResources,
  PLACEMENT_GROUP_ID,
  withGroup
} from "../support/snapshots.js"

const request = { gpus: 1, servingSlot: true }
const leaseGroup = {
  name: "lease `sleep 60` of root, 1 GPU, since 2026-12-01 22:00:00 UTC (bridge h:1) [hl-0123456789abcdef]",
  isDetached: true,
  creatorJobId: jobId(2),
  bundles: [{ index: 0, resources: { GPU: 1, serving_slot: 1 }, nodeId: "" }]
}

/** The head with its slot and one GPU reserved (by a placement group: the node's own names). */
const busyHead = (): ClusterSnapshot => ({
  ...idleHeadSnapshot(),
  resources: [nodeResources({ available: { ...HEAD_RESOURCES, serving_slot: 0, GPU: 1 } })]
})

describe("whoHolds", () => {
  it("a lease whose actor runs in its placement group of one bundle is named once, by its actor, as before", () => {
    const holder = actor({
      name: "lease `sleep 60` of root",
      requiredResources: {
        [`GPU_group_0_${PLACEMENT_GROUP_ID}`]: 1,
        [`serving_slot_group_0_${PLACEMENT_GROUP_ID}`]: 1
      }
    })
    const snapshot = { ...withGroup(busyHead(), leaseGroup), actors: [holder], jobs: [job()] }
    assert.strictEqual(
      whoHolds(snapshot, request, ""),
      "actor lease `sleep 60` of root (pid 4321, job 02000000, driver pid 1234)"
    )
  })

  it("a rank of a group of several bundles is named with its group and bundle", () => {
    const rank = actor({
      name: "rank",
      requiredResources: { [`serving_slot_group_1_${PLACEMENT_GROUP_ID}`]: 1 }
    })
    const bundles = [0, 1].map((index) => ({ index, resources: { serving_slot: 1 }, nodeId: "" }))
    const snapshot = { ...withGroup(busyHead(), { name: "group", bundles }), actors: [rank], jobs: [job()] }
    assert.strictEqual(
      whoHolds(snapshot, request, ""),
      `actor rank (pid 4321, job 02000000, driver pid 1234, placement group ${PLACEMENT_GROUP_ID.slice(0, 12)}… bundle 1)`
    )
  })

  it("a dead bridge's group, its actor gone, is named with what lets it go", () => {
    const snapshot = withGroup(busyHead(), { ...leaseGroup, creatorJobDead: true })
    assert.strictEqual(
      whoHolds(snapshot, request, ""),
      `placement group ${leaseGroup.name} (job 02000000, its driver gone: the next lease lets it go once nothing of it runs)`
    )
  })

  it("a live job's group without an actor yet is named plainly; a pending one holds nothing", () => {
    const held = withGroup(busyHead(), leaseGroup)
    assert.strictEqual(whoHolds(held, request, ""), `placement group ${leaseGroup.name} (job 02000000)`)
    assert.isUndefined(whoHolds(withGroup(busyHead(), { ...leaseGroup, state: "PENDING" }), request, ""))
  })

  it("its own placement group, placed while its actor still starts, is nobody it waits for", () => {
    const own = actor({
      actorId: "ab".repeat(16),
      state: "PENDING_CREATION",
      pid: 0,
      requiredResources: { [`serving_slot_group_0_${PLACEMENT_GROUP_ID}`]: 1 }
    })
    const snapshot = {
      ...withGroup(busyHead(), {
        ...leaseGroup,
        bundles: [{ index: 0, resources: { serving_slot: 1, GPU: 1 }, nodeId: HEAD_NODE_ID }]
      }),
      actors: [own],
      jobs: [job()]
    }
    assert.isUndefined(whoHolds(snapshot, request, own.actorId), "the slot and the GPU are its own")
    assert.match(whoHolds(snapshot, request, "") ?? "", /^placement group lease/, "anyone else waits for it")
  })
})
