"""The lease bridge: holds one serving lease (a Ray actor, hyperloom.actor) for hyperloom.

    python PYDIR bridge        JSON lines on stdin/stdout

Protocol
--------
One JSON object per line, UTF-8, both directions. stdout carries ONLY protocol lines: the bridge
moves file descriptor 1 onto stderr before importing Ray, so Ray's (and anyone's) prints land on
stderr, which is free-form diagnostics.

hyperloom -> bridge (stdin):

    {"op": "lease", "address": "host:port", "gpus": N, "serving_slot": true,
     "argv": ["cmd", "arg", ...], "env": {"K": "V", ...}, "cwd": "/dir",
     "name": "optional actor name", "namespace": "optional, default hyperloom",
     "lease_id": "optional: the lease's id in the host's queue (named in the default actor name)",
     "stop_grace_sec": 3, "stdin": false, "raw_output": false, "gpu_clean_timeout_sec": 30}
        At most one per bridge. `gpus` >= 0 (fractions allowed), `serving_slot` defaults to true,
        `env` is the command's whole environment (default: the bridge's), `cwd` defaults to the
        bridge's working directory. `stdin`: CMD reads what `stdin` ops send (else /dev/null).
        `raw_output`: `output` events carry CMD's bytes unchanged (`data`) instead of lines.
        `gpu_clean_timeout_sec` bounds the clean-GPU gate's wait (hyperloom.gpus). `stop_grace_sec`
        and `gpu_clean_timeout_sec` are required: their defaults are hyperloom's, which sends them.
        The protocol carries no version: the bridge ships in the package with the side that speaks it.
    {"op": "stdin", "data": "<base64>"}  /  {"op": "stdin", "eof": true}
        Bytes for CMD's stdin, in order, then its end (only with "stdin": true). Each data op is
        answered by `stdin_written` once CMD's stdin took it (the sender bounds what is in flight).
    {"op": "release"}
        Stop the command's process tree, kill the actor, disconnect, exit. Also triggered by EOF
        on stdin (hyperloom went away), by SIGTERM/SIGINT/SIGHUP, and by stdout being closed.

bridge -> hyperloom (stdout), in this order:

    {"event": "connected", "job_id": "<hex>"}              ray.init succeeded (this driver's job)
    {"event": "submitted", "actor_id": "<hex>"}            actor creation sent (may now wait for
                                                           the slot/GPUs: contention)
    {"event": "started", "pid": P|null, "pgid": G, "actor_pid": A, "node_id": "<hex>",
     "cuda_visible_devices": "0"|null}                     the actor runs, CMD was started (pid
                                                           null when CMD could not start)
    {"event": "gpu_busy", "holders": [{"pid", "gpu", "via", "user", "command", "memory_mib",
     "alive"}], "waited_sec": S}                        the leased GPUs stayed held outside the
                                                           lease for gpu_clean_timeout_sec: CMD
                                                           never started (then "started" with
                                                           pid null and "exit")
    {"event": "output", "stream": "stdout"|"stderr", "line": "..."}   live, one per line (no
                                                           newline; lines over 64 KiB are split)
    {"event": "output", "stream": "stdout"|"stderr", "data": "<base64>"}   with raw_output: the
                                                           bytes as CMD wrote them, in order
    {"event": "stdin_written", "bytes": N}                 a `stdin` op's N bytes were written
    {"event": "stdin_closed"}                              CMD's stdin is gone (CMD ended or
                                                           closed it): send no more
    {"event": "exit", "code": N}                           CMD ended: its exit code, 128+signal
                                                           when killed, 127 when it could not
                                                           start (with an explanatory stderr
                                                           line starting "hyperloom: "); also
                                                           sent on a release that stopped CMD
                                                           (143 for TERM) if it comes within 2 s
    {"event": "error", "kind": K, "message": "one line"}   fatal; the bridge then releases
        K: "protocol"      bad input line / second lease / missing fields
           "ray_import"    `import ray` failed in this Python
           "ray_init"      ray.init(address=...) failed (message: Ray's reason); an address
                           refusing TCP fails at once instead of Ray's minutes of retries
           "actor_creation" the actor could not be created (e.g. name taken)
           "actor_died"    the actor died while the lease was pending or running, or it stopped CMD
                           cut off from this bridge (the heartbeat fence, below; no `exit` then)
           "actor_failed"  the actor's method raised
           "internal"      a bug in this file
    {"event": "released"}                                  last line; the actor is killed, the
                                                           driver disconnected

Exit status of the bridge: 0 after a release with no error, 1 after an error event.
The lease's resources (its GPUs, the serving slot) are held by a placement group of one bundle
that this bridge creates, the actor runs in it: a dead worker's resources go back to the group,
not to the node. The actor is killed and the group removed as soon as CMD's exit was reported
(the supervisor reports it once nothing of the lease runs; the slot frees at once); otherwise
(the actor died, or did not stop in time) the group goes only once nothing of the lease runs on
its node (hyperloom.gone, by the lease's token). The bridge itself stays until released so that
hyperloom decides when it ends.

The heartbeat fence (hyperloom.fence, as a group's ranks have it): when the actor runs on a node
other than this bridge's (a sweep's lease on another host), the bridge calls its `beat` every
second from its placement on; cut off from the bridge past the heartbeat timeout (below Ray's
node-death time, from the cluster's health-check settings), the actor stops the command by
itself (TERM, the grace, KILL; stderr line "hyperloom lease: nothing from the bridge for N s:
stopping the command (fenced)"), so the command is gone before Ray can grant its slot again. An
actor on the bridge's own node is not fenced: nothing cuts a node from itself, and the keeper
ends the command with the bridge there.
"""

import argparse
import base64
import os
import queue
import re
import sys
import threading

from hyperloom import actor, deadlease, fence, leasename, shipping
from hyperloom.endpoint import JsonLinesEndpoint, ProtocolError, describe, serve_stdio

DEFAULT_NAMESPACE = "hyperloom"


class Bridge(JsonLinesEndpoint):
    OP = "lease"
    WHO = "hyperloom bridge"

    def __init__(self, out):
        super().__init__(out)
        self.actor = None
        self.started = False
        self.exited = False
        self.stdin = None  # the queue of CMD's stdin chunks (None: EOF), when forwarded
        self.pg = None  # the placement group holding the lease's resources (None: it holds none)
        self.token = leasename.new_token()  # names what the lease runs on its node (hyperloom.gone)
        self.node_id = None  # the node the command runs on, once started
        self.placed = False  # the placement group is placed (the actor is created now)
        self.placed_on = None  # its node, when known
        self.own_node = None  # this driver's node: an actor there is not fenced
        self.fenced = None  # the fence's line, when the actor stopped CMD cut off from this bridge

    # -- lifecycle

    def parse(self, msg):
        return parse_lease(msg)

    def start(self, spec):
        """Connects and sends the actor creation. None on success, else the exit status."""
        ray = self.ray
        self.grace = spec["stop_grace_sec"]
        code = self.connect(spec)
        if code is not None:
            return code
        threading.Thread(target=self.sweep, args=(lambda: not self.started,), daemon=True).start()
        try:
            own_entry = shipping.is_own_entry(spec["argv"])
            self.own_node = ray.get_runtime_context().get_node_id()
            heartbeat, _ = fence.timing(ray, self.grace)
            cls = ray.remote(actor.make_actor_class(ray, with_runner=own_entry))
            options = actor.actor_options(spec)
            # Named for whoever meets it as the holder of a busy slot (see leasename.lease_name).
            options["name"] = spec["name"] or leasename.lease_name(spec["argv"], spec["gpus"], lease_id=spec["lease_id"])
            bundle = actor.lease_bundle(spec)
            if bundle:
                # The resources are held by a placement group of this bridge's, the actor runs in
                # it: a dead worker's resources go back to the group, not to the node, and the
                # group is removed only once nothing of the lease runs (`let_go`).
                from ray.util.placement_group import placement_group
                from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

                # Detached: the bridge's death must not free it before the command is gone
                # (the GCS would at once); bridges sweep up those of dead bridges (`sweep`).
                # This driver's own node first when it has room, as Ray schedules an actor (a
                # baseline reads the files its command writes), else any node that has.
                # Nodes the lease must not have (a sweep's other hardware class, docs/design.md#sweeps-at-cluster-scale): Ray's
                # own label selector on the node id keeps the bundle off them.
                avoid = spec.get("avoid_nodes") or []
                extra = {"bundle_label_selector": [{"ray.io/node-id": "!in(%s)" % ",".join(avoid)}]} if avoid else {}
                own = ray.get_runtime_context().get_node_id()
                self.pg = placement_group(
                    [bundle], strategy="STRICT_PACK", name=leasename.hold_name(options["name"], self.token),
                    lifetime="detached", _soft_target_node_id=None if own in avoid else own, **extra,
                )
                options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(self.pg, placement_group_bundle_index=0)
                threading.Thread(target=self.watch_placed, args=(self.pg,), daemon=True).start()
            self.actor = cls.options(**options).remote()
        except Exception as e:
            self.emit_error("actor_creation", describe(e))
            return 1
        self.emit("submitted", actor_id=self.actor._actor_id.hex())
        try:
            gen = self.actor.run.remote(
                spec["argv"], spec["env"], spec["cwd"], self.grace, actor.owner_info(),
                stdin=spec["stdin"], raw_output=spec["raw_output"], gpu_clean_timeout=spec["gpu_clean_timeout_sec"],
                token=self.token, own_entry=own_entry, heartbeat=heartbeat, beater_node=self.own_node,
            )
        except Exception as e:
            self.emit_error("actor_failed", describe(e))
            return 1
        if spec["stdin"]:
            self.stdin = queue.SimpleQueue()
            threading.Thread(target=self.feed_stdin, args=(self.actor,), daemon=True).start()
        threading.Thread(target=self.pump, args=(gen,), daemon=True).start()
        # The heartbeat fence (hyperloom.fence): an actor on another node hears from this bridge
        # every second, else stops its command before Ray can declare that node dead.
        threading.Thread(
            target=fence.beat_loop, args=(self.beaten, fence.beat_every(heartbeat), self.beats_over), daemon=True
        ).start()
        return None

    def beaten(self):
        """The actor, when it is beaten now: it runs (or is being created on its placed bundle:
        before that, beats would only queue), on a node other than this driver's (unknown: beaten)."""
        held = self.actor
        if held is None or self.exited or (self.pg is not None and not (self.placed or self.started)):
            return []
        node = self.node_id or self.placed_on
        return [] if node is not None and node == self.own_node else [held]

    def beats_over(self):
        return self.exited or (self.releasing and self.actor is None)

    def watch_placed(self, pg):
        """Says `placed` (with the bundle's node) once Ray has placed the lease's group: its slot
        and GPUs are held from then, before the command starts. Asks the GCS (no task)."""
        while not (self.started or self.exited or self.pg is not pg):
            try:
                if pg.wait(5):
                    self.inbox.put(("placed", bundle_node(self.ray, pg)))
                    return
            except Exception:
                return

    def pump(self, gen):
        """Moves the actor's streamed event batches into the inbox (blocks while pending)."""
        ray = self.ray
        try:
            for ref in gen:
                self.inbox.put(("batch", ray.get(ref)))
            self.inbox.put(("pump_done", None))
        except BaseException as e:
            self.inbox.put(("pump_error", e))

    def feed_stdin(self, held):
        """Writes the `stdin` ops' bytes to CMD's stdin through the actor, one at a time, in order."""
        open_ = True
        while True:
            data = self.stdin.get()
            if open_:
                try:
                    open_ = self.ray.get(held.feed.remote(data))
                except Exception:
                    open_ = False
                if not open_ and data is not None:
                    self.emit("stdin_closed")  # once: later chunks are only acknowledged
            if data is None:
                return
            self.emit("stdin_written", bytes=len(data))

    def on_stdin(self, msg):
        """A `stdin` op: its bytes (or EOF) for the feeder. False when it is not a valid one."""
        if self.stdin is None:
            return False
        if msg.get("eof") is True:
            self.stdin.put(None)
            return True
        try:
            self.stdin.put(base64.b64decode(msg.get("data"), validate=True))
        except (TypeError, ValueError):
            return False
        return True

    def serve(self):
        ray = self.ray
        while True:
            kind, payload = self.inbox.get()
            if kind == "msg" and payload.get("op") == "stdin" and self.on_stdin(payload):
                continue
            if kind == "batch":
                self.relay(payload)
                if self.exited:
                    # The supervisor reports the exit once nothing of the lease runs: the slot
                    # frees now; release still ends the bridge.
                    self.kill_actor()
                    self.let_go(confirmed=True)
                    if self.fenced:
                        # Cut off from this bridge, the actor stopped CMD (the heartbeat fence):
                        # its node was lost to the lease, as if Ray had declared it dead.
                        self.emit_error("actor_died", "%s; the link came back before Ray declared the node dead" % self.fenced)
                        return self.release(1)
            elif kind == "placed":
                self.placed, self.placed_on = True, payload
                self.emit("placed", node_id=payload)
            elif kind == "pump_done":
                if not self.exited:
                    self.emit_error("actor_failed", "the actor's output stream ended without an exit code")
                    return self.release(1)
            elif kind == "pump_error":
                if self.exited or self.releasing:
                    continue
                if isinstance(payload, ray.exceptions.RayActorError):
                    self.emit_error("actor_died", describe(payload))
                else:
                    self.emit_error("actor_failed", describe(payload))
                return self.release(1)
            else:
                return self.on_control(kind, payload)

    def drain_until_exit(self, timeout):
        """After a stop: relays the command's last output and exit code if they come in time."""
        for kind, payload in self.inbox_until(timeout, lambda: self.exited):
            if kind == "batch":
                self.relay(payload)
            elif kind in ("pump_done", "pump_error"):
                return

    def relay(self, batch):
        for ev in batch:
            name = ev.pop("event")
            if name == "started":
                self.started = True
                self.node_id = ev.get("node_id")
            elif name == "exit":
                self.exited = True
                self.fenced = ev.pop("fenced", None)
                if self.fenced:
                    continue  # said as the error `actor_died` (serve)
            if isinstance(ev.get("data"), bytes):
                ev["data"] = base64.b64encode(ev["data"]).decode("ascii")
            self.emit(name, **ev)

    def kill_actor(self):
        held, self.actor = self.actor, None
        if held is None:
            return
        try:
            self.ray.kill(held, no_restart=True)
        except Exception as e:
            sys.stderr.write("hyperloom bridge: ray.kill failed: %s\n" % describe(e))

    def free(self):
        if self.actor is not None:
            if not self.exited:
                # Stop CMD through the actor before killing it: Ray SIGKILLs the worker's direct
                # children (the supervisor) with it, which would orphan CMD. Also when `started`
                # has not been relayed yet: the command may already run. An actor still waiting
                # to be scheduled cannot answer: give it a short while, then just kill it.
                wait = self.grace + 5.0 if self.started else 1.5
                try:
                    self.ray.get(self.actor.stop.remote(self.grace), timeout=wait)
                    self.drain_until_exit(2.0)
                except Exception as e:
                    if self.started:
                        sys.stderr.write("hyperloom bridge: stopping the command failed: %s\n" % describe(e))
            self.kill_actor()
        self.let_go(confirmed=self.exited)

    def let_go(self, confirmed):
        """Removes the placement group that holds the lease's resources. Unless the supervisor
        confirmed the end (`confirmed`: its exit was relayed), only once nothing of the lease runs
        on its node: the worker may have died, freeing nothing but killing the supervisor."""
        pg, self.pg = self.pg, None
        if pg is None:
            return
        ray = self.ray
        if not confirmed:
            node = self.node_id or bundle_node(ray, pg)
            deadlease.end_before_letting_go(ray, node, self.token, self.WHO, "the lease's")
        try:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(pg)
        except Exception as e:
            sys.stderr.write("hyperloom bridge: removing the placement group failed: %s\n" % describe(e))


def bundle_node(ray, pg):
    """The node the placement group's bundle is on; None while it is not placed."""
    try:
        from ray.util.placement_group import placement_group_table

        return deadlease.bundle_nodes(placement_group_table(pg), 1)[0]
    except Exception:
        return None


def parse_lease(msg):
    def need(cond, what):
        if not cond:
            raise ProtocolError("lease: %s" % what)

    address = msg.get("address")
    need(isinstance(address, str) and address.strip() != "", "address must be a non-empty string")
    gpus = msg.get("gpus", 0)
    need(isinstance(gpus, (int, float)) and not isinstance(gpus, bool) and gpus >= 0, "gpus must be a number >= 0")
    slot = msg.get("serving_slot", True)
    need(isinstance(slot, bool), "serving_slot must be a boolean")
    argv = msg.get("argv")
    need(isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv), "argv must be a non-empty list of strings")
    env = msg.get("env")
    if env is None:
        env = dict(os.environ)
    need(isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()),
         "env must be an object of strings")
    cwd = msg.get("cwd") or os.getcwd()
    need(isinstance(cwd, str), "cwd must be a string")
    name = msg.get("name") or None
    need(name is None or isinstance(name, str), "name must be a string")
    lease_id = msg.get("lease_id") or None
    need(lease_id is None or (isinstance(lease_id, str) and len(lease_id) <= 200), "lease_id must be a string")
    namespace = msg.get("namespace") or DEFAULT_NAMESPACE
    need(isinstance(namespace, str), "namespace must be a string")
    stdin = msg.get("stdin", False)
    need(isinstance(stdin, bool), "stdin must be a boolean")
    raw_output = msg.get("raw_output", False)
    need(isinstance(raw_output, bool), "raw_output must be a boolean")
    # Required, no default here: hyperloom (TypeScript) holds the one definition of both and sends them.
    grace = msg.get("stop_grace_sec")
    need(isinstance(grace, (int, float)) and not isinstance(grace, bool) and grace >= 0,
         "stop_grace_sec must be a number >= 0")
    clean = msg.get("gpu_clean_timeout_sec")
    need(isinstance(clean, (int, float)) and not isinstance(clean, bool) and clean >= 0,
         "gpu_clean_timeout_sec must be a number >= 0")
    avoid = msg.get("avoid_nodes") or []
    need(isinstance(avoid, list) and all(isinstance(n, str) and re.fullmatch(r"[0-9a-f]{8,64}", n) for n in avoid),
         "avoid_nodes must be a list of Ray node ids (hex)")
    return {
        "address": address.strip(),
        "gpus": gpus,
        "serving_slot": slot,
        "argv": argv,
        "env": env,
        "cwd": cwd,
        "name": name,
        "lease_id": lease_id,
        "namespace": namespace,
        "stop_grace_sec": float(grace),
        "stdin": stdin,
        "raw_output": raw_output,
        "gpu_clean_timeout_sec": float(clean),
        "avoid_nodes": avoid,
    }


def main(argv):
    parser = argparse.ArgumentParser(
        prog="python PYDIR bridge", description="One serving lease: JSON lines on stdin and stdout (see the module's text)."
    )
    parser.parse_args(argv)
    serve_stdio(Bridge)
    return 0  # not reached: serve_stdio ends the process
