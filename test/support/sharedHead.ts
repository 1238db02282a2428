/**
 * One head for the tests of a `describe` block that do not need a fresh one. A head's start and
 * stop is the costliest step of a real-Ray test (seconds of CPU each on the 2-core CI machine), so a
 * file starts one per block where its tests leave the head as they found it.
 *
 *   describe("… on one shared head", () => {
 *     const shared = useSharedHead({ port: PORT, slot: true }, {
 *       // before each test: the head is as the tests expect it (here: no lease actor left)
 *       ready: (head) => waitNoLeaseActor(head)
 *     })
 *     it("…", async () => {
 *       const head = shared.head()
 *       …
 *     })
 *   })
 *
 * Before each test it checks that the head's daemons are still the ones started for the block (a
 * test that restarted or stopped the head fails the next one loudly instead of passing on another
 * head), then runs `ready`. A test that must change the head (stop, repair, restart it, another
 * node) starts a head of its own in a block of its own, with `prepareRay`/`teardownRay`.
 */
import { afterAll, assert, beforeAll, beforeEach } from "vitest"
import { daemonPids, type Head, type HeadOptions, prepareRay, startHead, teardownRay } from "./ray.js"

export interface SharedHead {
  /** The block's head (started in its beforeAll). */
  readonly head: () => Head
}

export const useSharedHead = (
  options: HeadOptions,
  hooks: { readonly ready?: (head: Head) => Promise<unknown> } = {}
): SharedHead => {
  let head: Head | undefined
  let daemons: ReturnType<typeof daemonPids> | undefined
  beforeAll(async () => {
    await prepareRay()
    head = await startHead(options)
    daemons = daemonPids()
  })
  beforeEach(async () => {
    assert.isDefined(head, "the shared head did not start")
    assert.deepStrictEqual(daemonPids(), daemons, "the shared head is the one started for these tests")
    await hooks.ready?.(head!)
  })
  afterAll(async () => {
    await teardownRay()
  })
  return {
    head: () => {
      if (head === undefined) throw new Error("useSharedHead: the head is started in beforeAll")
      return head
    }
  }
}
