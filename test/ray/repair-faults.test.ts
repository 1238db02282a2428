/**
 * One repairer per host, under faults (docs/design.md#one-repairer-per-host): the repairing process
 * SIGKILLed at each step of a repair (before `ray stop`, between stop and start, before the slot
 * shows), then the next `hyperloom ray ensure` leaves a healthy head with the slot, at once (the
 * kernel released the dead holder's lock: nobody waits for it); and two processes racing repairs
 * never overlap. The steps are reached deterministically with the test-only
 * HYPERLOOM_TEST_REPAIR_PAUSE. bench/repair-faults.mjs runs the same faults many times and prints
 * the counts.
 */
import { afterEach, assert, beforeEach, describe, it } from "@effect/vitest"
import { runCli } from "../support/cli.js"
import { prepareRay, startHead, teardownRay } from "../support/ray.js"
import { killRepairAt, raceEnsures, type Step } from "../support/repairFaults.js"

const PORT = 6393
const ENV = { HL_RAY_HEAD_PORT: String(PORT) }

const healthy = async () => {
  const s = await runCli(["ray", "status", "--json"], { env: ENV })
  assert.strictEqual(s.code, 0, s.stderr)
  assert.strictEqual(s.json.resources.total.serving_slot, 1)
  assert.strictEqual(s.json.nodes.filter((n: any) => n.state === "ALIVE").length, 1)
  assert.match(s.json.address, new RegExp(`:${PORT}$`))
  return s.json
}

describe("a repair killed at each step, and repairs racing", () => {
  beforeEach(async () => {
    await prepareRay()
  })
  afterEach(async () => {
    await teardownRay()
  })

  for (const step of ["before_stop", "before_start", "before_slot"] as const satisfies ReadonlyArray<Step>) {
    it(`SIGKILL ${step}: the next ensure leaves a healthy head with the slot, without waiting for the dead holder`, async () => {
      await startHead({ port: PORT, numCpus: 2 })
      const killed = await killRepairAt(step, ENV)
      assert.strictEqual(killed.signal, "SIGKILL", killed.stderr)
      const next = await runCli(["ray", "ensure", "--json"], { env: ENV })
      assert.strictEqual(next.code, 0, next.stderr)
      // The dead process's lock went with it: nothing stale to wait for.
      assert.notInclude(next.stderr, "waiting for")
      const expected = { before_stop: "repaired", before_start: "started", before_slot: "reused" }[step]
      assert.strictEqual(next.json.action, expected, next.stderr)
      const s = await healthy()
      // A restart keeps the old head's CPUs; after a kill between stop and start there is no old
      // head left to copy, and ensure starts a fresh one.
      if (step !== "before_start") assert.strictEqual(s.resources.total.CPU, 2)
    })
  }

  it("two processes racing repairs on a slot-less head: one repairs, the other waits and reuses, never overlapping", async () => {
    for (let round = 0; round < 2; round++) {
      if (round > 0) await teardownRay()
      await startHead({ port: PORT })
      const race = await raceEnsures(ENV)
      assert.deepStrictEqual(
        race.runs.map((r) => r.code),
        [0, 0],
        race.runs.map((r) => r.stderr).join("\n---\n")
      )
      assert.strictEqual(race.repairs, 1, race.runs.map((r) => r.stderr).join("\n---\n"))
      assert.strictEqual(race.overlaps, 0)
      await healthy()
    }
  })
})
