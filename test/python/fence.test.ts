/**
 * The heartbeat fence of a single lease's actor (python/hyperloom/fence.py, docs/multi-node.md
 * "Fencing …"), without Ray: the lease actor's class driven directly, with a stand-in for the few
 * Ray calls it makes, its node "node-b". An actor on another node than its bridge's that hears no
 * `beat` for the heartbeat stops its command (TERM, the grace, KILL) and says so; one that is
 * beaten, or that runs on the bridge's own node, lets its command end by itself.
 */
import { spawnSync } from "node:child_process"
import { assert, describe, it } from "@effect/vitest"
import { pythonDir } from "../support/lease.js"
import { rayPython } from "../support/ray.js"

const SCRIPT = `
import json, threading, time, types
from hyperloom import actor
context = types.SimpleNamespace(get_node_id=lambda: "node-b")
ray = types.SimpleNamespace(method=lambda **k: (lambda f: f), get_gpu_ids=lambda: [], get_runtime_context=lambda: context)
cls = actor.make_actor_class(ray)

def lease(argv, beater_node, beat_every=None):
    held = cls()
    over = threading.Event()
    if beat_every:
        def beats():
            while not over.wait(beat_every):
                held.beat()
        threading.Thread(target=beats, daemon=True).start()
    t0 = time.monotonic()
    run = held.run(argv, {"PATH": "/usr/bin:/bin"}, "/tmp", 0.5, heartbeat=1.5, beater_node=beater_node)
    events = [ev for batch in run for ev in batch]
    over.set()
    return {"code": [e["code"] for e in events if e["event"] == "exit"], "sec": time.monotonic() - t0,
            "fenced": [e.get("fenced") for e in events if e["event"] == "exit"],
            "stderr": [e["line"] for e in events if e["event"] == "output" and e["stream"] == "stderr"]}

out = {}
cases = {"silent": (["sleep", "30"], "node-a"), "beaten": (["sleep", "3"], "node-a", 0.3), "same_node": (["sleep", "3"], "node-b")}
threads = [threading.Thread(target=lambda k=k, a=a: out.__setitem__(k, lease(*a))) for k, a in cases.items()]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(out))
`

describe("a single lease's heartbeat fence", () => {
  it("an actor on another node that hears nothing for the heartbeat stops its command; a beaten one, or one on the bridge's node, does not", () => {
    const r = spawnSync(rayPython, ["-c", SCRIPT], {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", PYTHONPATH: pythonDir },
      encoding: "utf8",
      timeout: 60_000
    })
    assert.strictEqual(r.status, 0, r.stderr)
    const out = JSON.parse(r.stdout)
    // heartbeat 1.5 s, grace 0.5 s: `sleep 30` is TERMed (143) within the heartbeat, the watch's poll and the grace
    assert.deepStrictEqual(out.silent.code, [143])
    assert.isBelow(out.silent.sec, 1.5 + 0.3 + 0.5 + 2)
    assert.isAtLeast(out.silent.sec, 1.5)
    const line = "hyperloom lease: nothing from the bridge for 2 s: stopping the command (fenced)"
    assert.deepStrictEqual(out.silent.stderr, [line])
    assert.deepStrictEqual(out.silent.fenced, [line], "its exit says it was fenced")
    // 3 s of command, twice the heartbeat: it ran to its own end
    for (const kept of [out.beaten, out.same_node]) {
      assert.deepStrictEqual(kept.code, [0])
      assert.deepStrictEqual(kept.fenced, [null])
      assert.deepStrictEqual(kept.stderr, [])
      assert.isAtLeast(kept.sec, 3)
    }
  }, 60_000)
})

const BRIDGE = `
import io, json
from hyperloom import bridge
line = "hyperloom lease: nothing from the bridge for 5 s: stopping the command (fenced)"
def serve(batch):
    out = io.StringIO()
    b = bridge.Bridge(out)
    b.inbox.put(("batch", batch))
    b.inbox.put(("msg", {"op": "release"}))
    code = b.serve()
    return {"code": code, "events": [json.loads(x) for x in out.getvalue().splitlines()]}
print(json.dumps({
    "fenced": serve([{"event": "output", "stream": "stderr", "line": line}, {"event": "exit", "code": 143, "fenced": line}]),
    "own": serve([{"event": "exit", "code": 143}]),
}))
`

describe("the lease bridge on a fenced end", () => {
  it("says the node was lost (actor_died, the fence's line), not the command's exit; a command's own end stays an exit", () => {
    const r = spawnSync(rayPython, ["-c", BRIDGE], {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", PYTHONPATH: pythonDir },
      encoding: "utf8",
      timeout: 30_000
    })
    assert.strictEqual(r.status, 0, r.stderr)
    const out = JSON.parse(r.stdout)
    const line = "hyperloom lease: nothing from the bridge for 5 s: stopping the command (fenced)"
    assert.strictEqual(out.fenced.code, 1)
    assert.deepStrictEqual(out.fenced.events, [
      { event: "output", stream: "stderr", line },
      {
        event: "error",
        kind: "actor_died",
        message: `${line}; the link came back before Ray declared the node dead`
      },
      { event: "released" }
    ])
    assert.strictEqual(out.own.code, 0)
    assert.deepStrictEqual(out.own.events, [{ event: "exit", code: 143 }, { event: "released" }])
  })
})
