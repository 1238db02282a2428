/**
 * `ray doctor`'s containment (docs/design.md#contained), judged from a recorded /proc and cgroup
 * tree.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Containment from "../../src/services/Containment.js"

const tree = (mountinfo: string, cgroup: string, withKill: boolean) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "hl-containment-"))
  const mount = path.join(root, "cg")
  fs.mkdirSync(path.join(root, "proc/self"), { recursive: true })
  fs.mkdirSync(path.join(mount, "lease.slice"), { recursive: true })
  if (withKill) fs.writeFileSync(path.join(mount, "lease.slice/cgroup.kill"), "")
  fs.writeFileSync(path.join(root, "proc/self/mountinfo"), mountinfo.replaceAll("MOUNT", mount))
  fs.writeFileSync(path.join(root, "proc/self/cgroup"), cgroup)
  return path.join(root, "proc")
}
const v2 = "41 31 0:38 / MOUNT rw,relatime - cgroup2 cgroup2 rw\n"

describe("Containment.probe", () => {
  it.effect("a writable cgroup v2 with cgroup.kill: a cgroup per lease", () =>
    Effect.map(Containment.probe(tree(v2, "0::/lease.slice\n", true)), (c) =>
      assert.deepStrictEqual(c, { mode: "cgroup", reason: null })
    )
  )
  it.effect("no cgroup v2 mounted (cgroup v1 only): the subreaper alone, and why", () =>
    Effect.map(
      Containment.probe(
        tree("30 25 0:26 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n", "4:memory:/\n", true)
      ),
      (c) => assert.deepStrictEqual(c, { mode: "subreaper", reason: "no cgroup v2 hierarchy" })
    )
  )
  it.effect("a cgroup that is not there (not writable): the subreaper alone", () =>
    Effect.map(Containment.probe(tree(v2, "0::/elsewhere\n", true)), (c) => {
      assert.strictEqual(c.mode, "subreaper")
      assert.match(c.reason ?? "", /is not writable$/)
    })
  )
})
