/**
 * The stop grace and the clean-GPU timeout have one definition, on the TypeScript side
 * (DEFAULT_STOP_GRACE_SEC in src/services/BridgeProcess.ts, DEFAULT_GPU_CLEAN_TIMEOUT_SEC in
 * src/domain/GpuHolders.ts), which every bridge request carries (test/services/LeaseBridge.test.ts,
 * GroupBridge.test.ts). The Python side requires both, in a bridge's request and in the
 * supervisor's argv, and keeps no default of its own that could drift from them. Without Ray.
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

describe("the stop grace and the clean-GPU timeout come from hyperloom", () => {
  it("a lease or group request without either is refused, naming it; with both, the request's values hold", () => {
    const r = py(`
import json
from hyperloom import bridge, endpoint, group
base = {"op": "lease", "address": "127.0.0.1:6379", "gpus": 1, "argv": ["true"], "env": {}, "cwd": "/tmp",
        "stop_grace_sec": 7, "gpu_clean_timeout_sec": 11}
def refusal(parse, msg):
    try:
        parse(msg)
        return "accepted"
    except endpoint.ProtocolError as e:
        return str(e)
without = lambda key: {k: v for k, v in base.items() if k != key}
lease = bridge.parse_lease(base)
grp = group.parse_group(dict(base, op="group", nodes=2))
print(json.dumps({
    "lease": [lease["stop_grace_sec"], lease["gpu_clean_timeout_sec"]],
    "group": [grp["stop_grace_sec"], grp["gpu_clean_timeout_sec"]],
    "refused": [refusal(bridge.parse_lease, without("stop_grace_sec")),
                refusal(bridge.parse_lease, without("gpu_clean_timeout_sec")),
                refusal(group.parse_group, dict(without("stop_grace_sec"), op="group", nodes=2))],
}))
`)
    assert.deepStrictEqual(r.lease, [7, 11])
    assert.deepStrictEqual(r.group, [7, 11])
    assert.deepStrictEqual(r.refused, [
      "lease: stop_grace_sec must be a number >= 0",
      "lease: gpu_clean_timeout_sec must be a number >= 0",
      // a group request's lease fields are checked as a lease's
      "lease: stop_grace_sec must be a number >= 0"
    ])
  })

  it("the supervisor needs --grace, and --gpu-clean-timeout with --gpus; Python defines neither default", () => {
    const r = py(`
import contextlib, io, json
from hyperloom import endpoint, gpus, supervisor
def usage(args):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = supervisor.parse_args(args)
        return [ns.grace, ns.gpus, ns.gpu_clean_timeout]
    except SystemExit as e:
        return [e.code, err.getvalue().strip().splitlines()[-1]]
print(json.dumps({
    "no grace": usage(["--", "true"]),
    "gpus, no timeout": usage(["--grace", "2", "--gpus=0", "--", "true"]),
    "no gpus": usage(["--grace", "2", "--", "true"]),
    "both": usage(["--grace", "2", "--gpus=0", "--gpu-clean-timeout", "9", "--", "true"]),
    "python defaults": [hasattr(endpoint, "DEFAULT_STOP_GRACE_SEC"), hasattr(gpus, "DEFAULT_CLEAN_TIMEOUT_SEC")],
}))
`)
    assert.strictEqual(r["no grace"][0], 2)
    assert.include(r["no grace"][1], "--grace")
    assert.strictEqual(r["gpus, no timeout"][0], 2)
    assert.include(r["gpus, no timeout"][1], "--gpu-clean-timeout")
    assert.deepStrictEqual(r["no gpus"], [2, [], null])
    assert.deepStrictEqual(r.both, [2, [0], 9])
    assert.deepStrictEqual(r["python defaults"], [false, false])
  })
})
