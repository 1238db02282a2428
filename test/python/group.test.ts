/**
 * The group bridge's pure parts (python/hyperloom/group.py), without Ray: the heartbeat timeout
 * it picks from the cluster's health-check settings (below Ray's node-death time,
 * docs/design.md#fencing-an-unreachable-node), and the request's env_base.
 */
import { spawnSync } from "node:child_process"
import { assert, describe, it } from "@effect/vitest"
import { pythonDir } from "../support/lease.js"
import { rayPython } from "../support/ray.js"

const py = (code: string) => {
  const r = spawnSync(rayPython, ["-c", code], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", PYTHONPATH: pythonDir },
    encoding: "utf8"
  })
  assert.strictEqual(r.status, 0, r.stderr)
  return JSON.parse(r.stdout)
}

describe("the heartbeat (hyperloom.fence, both bridges)", () => {
  it("Ray's node-death time from its health-check settings; the heartbeat as late as fencing allows: death − period − grace − 2 s", () => {
    const r = py(`
import json, types
from hyperloom import fence
def fake(threshold, period, timeout):
    config = types.SimpleNamespace(
        health_check_failure_threshold=lambda: threshold,
        health_check_period_ms=lambda: period,
        health_check_timeout_ms=lambda: timeout)
    return types.SimpleNamespace(_raylet=types.SimpleNamespace(Config=config))
rays = [fake(5, 3000, 10000), fake(5, 2000, 2000), object()]
deaths = [fence.node_death_sec(r) for r in rays]
beats = [fence.heartbeat_sec(d, fence.health_check(r)[1], 3.0) for d, r in zip(deaths, rays)]
print(json.dumps({"deaths": deaths, "beats": beats + [fence.heartbeat_sec(1.0, 3.0, 3.0)]}))
`)
    // Ray 2.58's defaults (5 × (3 s + 10 s)), the two-host tests' shortened checks, no settings at all.
    assert.deepStrictEqual(r.deaths, [65, 20, 65])
    // A rank fences after that much silence and has its command gone within the grace (3 s) and
    // 2 s more, before Ray's earliest node death (one period before it): a 30 s cut under the
    // defaults no longer ends a group (it did at 20 s).
    assert.deepStrictEqual(r.beats, [57, 13, 57, 1])
  })

  it("env_base is node or absent", () => {
    const r = py(`
import json
from hyperloom import group, endpoint
base = {"op": "group", "address": "127.0.0.1:6379", "nodes": 2, "gpus": 1, "argv": ["true"], "env": {}, "cwd": "/tmp",
        "stop_grace_sec": 3, "gpu_clean_timeout_sec": 30}
out = [group.parse_group(base)["env_base"], group.parse_group(dict(base, env_base="node"))["env_base"]]
try:
    group.parse_group(dict(base, env_base="launcher"))
    out.append("accepted")
except endpoint.ProtocolError as e:
    out.append(str(e))
print(json.dumps(out))
`)
    assert.deepStrictEqual(r, [null, "node", 'group: env_base must be "node" when given'])
  })
})

describe("a lease's placement group name", () => {
  it("carries one token per bundle, read back in bundle order; a name without them has none (a sweep leaves it alone)", () => {
    const r = py(`
import json
from hyperloom import leasename
a, b = leasename.new_token(), leasename.new_token()
print(json.dumps({
    "tokens": [a, b],
    "single": leasename.tokens_of(leasename.hold_name("lease \`true\` of root [x]", a)),
    "group": leasename.tokens_of(leasename.hold_name("group of 2: lease \`sleep 1\` of root", [a, b])),
    "none": [leasename.tokens_of(n) for n in ["", None, "mine [hl-0123]", "theirs [%s] x" % a]],
}))
`)
    assert.match(r.tokens[0], /^hl-[0-9a-f]{16}$/)
    assert.deepStrictEqual(r.single, [r.tokens[0]])
    assert.deepStrictEqual(r.group, r.tokens)
    assert.deepStrictEqual(r.none, [null, null, null, null])
  })
})
