#!/usr/bin/env python3
"""The group bridge: holds one serving group (docs/design.md#serving-groups-across-nodes) for
hyperloom (`python PYDIR group`).

A group is one Ray placement group of N bundles {"GPU": G, "serving_slot": 1} with strategy
STRICT_SPREAD (one bundle per node) and one rank actor per bundle. Each rank is the lease actor of
hyperloom.actor (same class, same command supervisor: everything
docs/design.md#invariants-under-faults says of a lease holds per rank), with one extra method that
tells rank 0's node address and a free port on it. The placement group is detached and named for the
group and one token per bundle (hyperloom.leasename.hold_name): this bridge's death does not free the
slots while a rank's command still runs; a sweep removes it once hyperloom.gone finds nothing of any
rank (the next lease's bridge, or hyperloom's tidy when it saw this bridge die). Standard library
and `ray` only.

Protocol: JSON lines as in hyperloom.bridge (stdout carries protocol lines only):

hyperloom -> bridge (stdin):

    {"op": "group", "address": "host:port", "nodes": N, "gpus": G, "serving_slot": true,
     "argv": [...], "env": {...}, "cwd": "/dir", "name": "optional: the placement group's name, before its tokens",
     "namespace": "optional", "stop_grace_sec": 3, "gpu_clean_timeout_sec": 30}
        N >= 1 (hyperloom sends N >= 2). Each rank's command gets `env` plus HYPERLOOM_RANK,
        HYPERLOOM_WORLD_SIZE, HYPERLOOM_LEADER_HOST, HYPERLOOM_LEADER_PORT, and its actor's own
        device variables (CUDA_VISIBLE_DEVICES…) laid over it. Optional: "leader_argv" (rank 0
        runs it instead of argv, e.g. a serving engine plus its benchmark client; when it is
        hyperloom's own entry, [PYTHON, PYDIR, COMMAND, ...] with PYDIR this package's folder, rank
        0 runs COMMAND with its node's own Python from files that travel with the rank class, so
        a rank 0 on another node needs nothing of hyperloom) and
        "end_with_leader": true (rank 0's end stops the others and ends the group), "rank_ports":
        true (every rank also gets HYPERLOOM_PORT, a free port on its own node, and
        HYPERLOOM_BASE_URL=http://127.0.0.1:PORT, for a server each rank runs), "env_base":
        "node" (`env` is laid over the rank's own node's environment, the Ray worker's, instead of
        being the command's whole environment: hyperloom sends only HYPERLOOM_* and the names the
        user lists, never the launching host's PATH), "stdin": true (rank 0's command reads what
        `stdin` ops send, as in hyperloom.bridge; e.g. the sweep runner's requests).
    {"op": "stdin", "data": "<base64>"}  /  {"op": "stdin", "eof": true}
        With "stdin": bytes for rank 0's command's stdin, in order, then its end; each data op is
        answered by `stdin_written` (and `stdin_closed` once that stdin is gone), as in
        hyperloom.bridge.
    {"op": "release"}
        Stop every rank's command, kill the rank actors, remove the placement group, disconnect,
        exit. Also on EOF on stdin, SIGTERM/SIGINT/SIGHUP, and stdout closed.

bridge -> hyperloom (stdout):

    {"event": "connected", "job_id": "<hex>"}
    {"event": "submitted", "placement_group_id": "<hex>"}   the placement group was asked for
                                                            (waits while another lease holds a slot)
    {"event": "placed", "node_ids": ["<hex>", ...]}          every bundle is reserved; rank r runs on
                                                            node_ids[r] (rank 0 on this driver's
                                                            own node when a bundle is there); the
                                                            ranks are created now
    {"event": "leader", "host": "a.b.c.d", "port": P,       rank 0's node address and free port;
     "heartbeat_sec": H, "node_death_sec": D}               a rank that hears nothing from this
                                                            bridge for H seconds stops its command
                                                            by itself; D: how long Ray takes to
                                                            declare an unreachable node dead
    {"event": "started", "rank": r, "pid": P|null, "pgid": G, "actor_pid": A, "node_id": "<hex>",
     "cuda_visible_devices": "0"|null, "actor_id": "<hex>"}
    {"event": "gpu_busy", "rank": r, "holders": [...], "waited_sec": S, "node_id": "<hex>",
     "node_address": "a.b.c.d"}                             rank r's GPUs stayed held outside the
                                                            group on that node (the holders' pids
                                                            are that node's): no rank's command
                                                            started, the rank exits 125 and the
                                                            others 143
    {"event": "output", "rank": r, "stream": "stdout"|"stderr", "line": "..."}
    {"event": "exit", "rank": r, "code": N}                 a rank's command ended. When one
                                                            exits non-zero, the others are stopped
                                                            (their exits follow, 143 for TERM)
    {"event": "ended", "code": N, "failed_rank": r|null}    every rank ended; the actors are
                                                            killed and the placement group removed
                                                            (the slots are free); N is the first
                                                            failing rank's code, else 0 (exits
                                                            caused by the group's stop not counted)
    {"event": "error", "kind": K, "message": "..."}          as in hyperloom.bridge, plus
                                                            K "placement" (the group could not be
                                                            asked for) and "rank_died" (a rank's
                                                            actor died)
    {"event": "released"}                                   last line

Exit status: 0 after a release with no error, 1 after an error event.

All ranks or none, also at the clean-GPU gate (docs/design.md#clean-gpus): each rank's supervisor
checks its own node's GPUs, then holds its command back (hyperloom.supervisor --hold-fd) until this
bridge has heard from every rank that its GPUs are clean, and only then tells each to start. A rank
whose GPUs stay held fails with gpu_busy; the others are stopped before their commands ever ran.

The heartbeat (docs/design.md#fencing-an-unreachable-node, hyperloom.fence): while the ranks run,
this bridge calls every rank's `beat` every second. A rank cut off from it (a network partition,
the launching host gone) hears nothing, and after H seconds stops its command (TERM, the grace,
KILL) by itself, H being below the time Ray takes to declare the rank's node dead (D, read from
the cluster's health-check settings), so the command is gone before the slot can be given to
anyone else.
"""

import argparse
import os
import queue
import sys
import threading

from hyperloom import actor as lease_actor
from hyperloom import deadlease, endpoint, fence, gone, leasename, shipping
from hyperloom.bridge import Bridge as LeaseBridge, parse_lease

RANK_START_TIMEOUT_SEC = 120.0


class GroupBridge(endpoint.JsonLinesEndpoint):
    OP = "group"
    WHO = "hyperloom group"

    def __init__(self, out):
        super().__init__(out)
        self.pg = None
        self.pg_removed = False
        self.placed = False  # every bundle is reserved (the sweep stops)
        self.tokens = []  # per bundle, in bundle order: what is left of its rank is found by (hyperloom.gone)
        self.ranks = []  # per rank: {"actor", "started", "exited", "code"}
        self.exits = []  # (rank, code) in arrival order
        self.decided = None  # len(self.exits) when the group was told to stop (a failure, the leader's end)
        self.ended = False
        self.spec = None
        self.went = False  # every rank's GPUs were clean and every rank was told to start
        self.stdin = None  # with "stdin": the queue of rank 0's stdin chunks (None: EOF)

    # -- lifecycle

    def parse(self, msg):
        return parse_group(msg)

    # `stdin` ops go to rank 0's command, as a single lease's to its command (hyperloom.bridge).
    feed_stdin = LeaseBridge.feed_stdin
    on_stdin = LeaseBridge.on_stdin

    def start(self, spec):
        """Connects and asks for the placement group. None on success, else the exit status."""
        from ray.util.placement_group import placement_group

        self.spec = spec
        self.grace = spec["stop_grace_sec"]
        if spec["stdin"]:
            # Bytes for rank 0's stdin wait here until its actor runs (feed_stdin, start_ranks).
            self.stdin = queue.SimpleQueue()
        code = self.connect(spec)
        if code is not None:
            return code
        threading.Thread(target=self.sweep, args=(lambda: not (self.placed or self.ended),), daemon=True).start()
        # One token per bundle: what is left of a rank is found by it on the bundle's node.
        self.tokens = [leasename.new_token() for _ in range(spec["nodes"])]
        try:
            # Detached, as a single lease's: the death of this bridge (the job's driver) must not
            # free the slots before every rank's command is gone (the GCS would at once); a
            # sweep (the next lease's bridge, or the CLI's tidy) removes it once nothing is left.
            base = spec["name"] or "group of %d: %s" % (
                spec["nodes"], leasename.lease_name(spec["argv"], spec["bundle"].get("GPU", 0)))
            self.pg = placement_group(
                [dict(spec["bundle"]) for _ in range(spec["nodes"])], strategy="STRICT_SPREAD",
                name=leasename.hold_name(base, self.tokens), lifetime="detached",
            )
        except Exception as e:
            self.emit_error("placement", endpoint.describe(e))
            return 1
        self.emit("submitted", placement_group_id=self.pg.id.hex())
        threading.Thread(target=self.wait_placed, daemon=True).start()
        return None

    def wait_placed(self):
        try:
            self.ray.get(self.pg.ready())
            self.placed = True
            self.inbox.put(("placed", None))
        except BaseException as e:
            self.inbox.put(("placement_error", e))

    def start_ranks(self):
        """Every bundle is placed: create one rank actor per bundle, then start CMD in each."""
        ray = self.ray
        spec = self.spec
        from ray.util.placement_group import placement_group_table
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        table = placement_group_table(self.pg)
        node_of = [n or "" for n in deadlease.bundle_nodes(table, spec["nodes"])]
        # Rank 0 goes to the bundle on this driver's own node when there is one, so that files
        # rank 0 writes (the baseline's result file) land where hyperloom reads them.
        local = ray.get_runtime_context().get_node_id()
        order = sorted(range(spec["nodes"]), key=lambda i: 0 if node_of[i] == local else 1)
        self.emit("placed", node_ids=[node_of[i] for i in order])
        cls = ray.remote(make_rank_class(ray))
        for i in order:
            options = lease_actor.actor_options(
                spec,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=self.pg, placement_group_bundle_index=i
                ),
            )
            actor = cls.options(**options).remote()
            self.ranks.append({
                "actor": actor, "started": False, "exited": False, "code": None, "clean": False,
                "node": node_of[i] or None, "token": self.tokens[i],
            })
        # Bounded: the serve loop (and so a release) waits on this. The bundle is reserved, so the
        # only wait is a worker process starting.
        host, port = ray.get(self.ranks[0]["actor"].endpoint.remote(), timeout=RANK_START_TIMEOUT_SEC)
        own_ports = []
        if spec["rank_ports"]:
            asked = [r["actor"].endpoint.remote() for r in self.ranks]
            own_ports = [p for _, p in ray.get(asked, timeout=RANK_START_TIMEOUT_SEC)]
        beat, death = fence.timing(ray, self.grace)
        self.emit("leader", host=host, port=port, heartbeat_sec=beat, node_death_sec=death)
        world = str(spec["nodes"])
        for rank, r in enumerate(self.ranks):
            env = dict(spec["env"])
            env.update(
                HYPERLOOM_RANK=str(rank),
                HYPERLOOM_WORLD_SIZE=world,
                HYPERLOOM_LEADER_HOST=host,
                HYPERLOOM_LEADER_PORT=str(port),
            )
            if spec["rank_ports"]:
                # Another free port on the rank's own node, for a server each rank runs (the
                # leader's may be taken by HYPERLOOM_LEADER_PORT's user).
                own = own_ports[rank]
                env.update(HYPERLOOM_PORT=str(own), HYPERLOOM_BASE_URL="http://127.0.0.1:%d" % own)
            argv = spec["leader_argv"] if rank == 0 and spec["leader_argv"] else spec["argv"]
            own_entry = rank == 0 and shipping.is_own_entry(spec["leader_argv"])
            # The group bridge owns every rank: a rank's keeper ends its command the moment we die.
            gen = r["actor"].run_rank.remote(
                argv, env, spec["env_base"], spec["cwd"], self.grace, lease_actor.owner_info(), beat, own_entry,
                spec["gpu_clean_timeout_sec"], r["token"], stdin=rank == 0 and spec["stdin"],
            )
            threading.Thread(target=self.pump, args=(rank, gen), daemon=True).start()
            if rank == 0 and spec["stdin"]:
                threading.Thread(target=self.feed_stdin, args=(r["actor"],), daemon=True).start()
        # The heartbeat: every rank still running hears from this bridge every second.
        threading.Thread(
            target=fence.beat_loop, args=(self.running_ranks, fence.beat_every(beat), lambda: self.ended or self.releasing),
            daemon=True,
        ).start()

    def running_ranks(self):
        return [r["actor"] for r in list(self.ranks) if r.get("actor") is not None and not r["exited"]]

    def pump(self, rank, gen):
        ray = self.ray
        try:
            for ref in gen:
                self.inbox.put(("batch", (rank, ray.get(ref))))
            self.inbox.put(("pump_done", rank))
        except BaseException as e:
            self.inbox.put(("pump_error", (rank, e)))

    def serve(self):
        ray = self.ray
        while True:
            kind, payload = self.inbox.get()
            if kind == "msg" and payload.get("op") == "stdin" and self.on_stdin(payload):
                continue
            if kind == "placed":
                try:
                    self.start_ranks()
                except BaseException as e:
                    if isinstance(e, ray.exceptions.RayActorError):
                        self.emit_error("rank_died", endpoint.describe(e))
                    else:
                        self.emit_error("actor_creation", endpoint.describe(e))
                    return self.release(1)
            elif kind == "placement_error":
                if self.releasing:
                    continue
                self.emit_error("placement", endpoint.describe(payload))
                return self.release(1)
            elif kind == "batch":
                rank, batch = payload
                self.relay(rank, batch)
            elif kind == "pump_done":
                rank = payload
                if not self.ranks[rank]["exited"] and not self.ended:
                    self.emit_error("actor_failed", "rank %d's output stream ended without an exit code" % rank)
                    return self.release(1)
            elif kind == "pump_error":
                rank, e = payload
                if self.ranks[rank]["exited"] or self.releasing or self.ended:
                    continue
                if isinstance(e, ray.exceptions.RayActorError):
                    self.emit_error("rank_died", "rank %d: %s" % (rank, endpoint.describe(e)))
                else:
                    self.emit_error("actor_failed", "rank %d: %s" % (rank, endpoint.describe(e)))
                return self.release(1)
            elif kind == "stopped":
                pass
            else:
                return self.on_control(kind, payload)

    def relay(self, rank, batch):
        r = self.ranks[rank]
        for ev in batch:
            name = ev.pop("event")
            if name == "gpu_clean":  # held by its supervisor until every rank is clean
                r["clean"] = True
                self.start_if_all_clean()
                continue
            ev["rank"] = rank
            ev.pop("fenced", None)  # its stderr line said it; the rank's exit ends the group as any other
            if name == "started":
                r["started"] = True
                try:
                    ev["actor_id"] = r["actor"]._actor_id.hex()
                except Exception:
                    pass
            self.emit(name, **ev)
            if name == "exit":
                self.on_rank_exit(rank, ev["code"])

    def start_if_all_clean(self):
        """Every rank's GPUs are clean (each rank's gate passed): tell every rank to start."""
        if self.went or self.releasing or self.ended or self.decided is not None:
            return
        if not all(r["clean"] for r in self.ranks):
            return
        self.went = True
        for r in self.ranks:
            actor = r.get("actor")
            if actor is not None:
                actor.go.remote()  # a rank that died meanwhile: its pump reports it

    def on_rank_exit(self, rank, code):
        r = self.ranks[rank]
        r["exited"] = True
        r["code"] = code
        self.exits.append((rank, code))
        self.kill_actor(r)
        # All ranks or none: the first failing rank stops the others; with end_with_leader, so
        # does rank 0's end (a serving benchmark is over when its client, beside rank 0, is).
        # The exits that come after that decision are the stop's, not failures of their own.
        ends_group = code != 0 or (rank == 0 and self.spec["end_with_leader"])
        if ends_group and self.decided is None:
            self.decided = len(self.exits)
            for other in self.ranks:
                if not other["exited"]:
                    threading.Thread(target=self.stop_rank, args=(other,), daemon=True).start()
        if all(x["exited"] for x in self.ranks):
            counted = self.exits if self.decided is None else self.exits[: self.decided]
            failed = next(((k, c) for k, c in counted if c != 0), None)
            self.remove_group()
            self.ended = True
            self.emit("ended", code=failed[1] if failed else 0, failed_rank=failed[0] if failed else None)

    def stop_rank(self, r, wait=None):
        actor = r.get("actor")
        if actor is None:
            return
        try:
            self.ray.get(actor.stop.remote(self.grace), timeout=wait if wait is not None else self.grace + 5.0)
        except Exception as e:
            if r["started"] and not r["exited"]:
                sys.stderr.write("hyperloom group: stopping a rank failed: %s\n" % endpoint.describe(e))
        self.inbox.put(("stopped", None))

    def kill_actor(self, r):
        actor, r["actor"] = r.get("actor"), None
        if actor is None:
            return
        try:
            self.ray.kill(actor, no_restart=True)
        except Exception as e:
            sys.stderr.write("hyperloom group: ray.kill failed: %s\n" % endpoint.describe(e))

    def remove_group(self):
        """Removes the placement group once nothing of any rank runs: a rank whose exit was not
        relayed (its supervisor confirms the end with it) may have lost its worker, which frees
        nothing of the group's but kills the rank's supervisor (hyperloom.gone)."""
        if self.pg is None or self.pg_removed:
            return
        self.pg_removed = True
        unconfirmed = [r for r in self.ranks if not r["exited"]]
        ends = [threading.Thread(target=self.end_rank, args=(r,), daemon=True) for r in unconfirmed]
        for t in ends:
            t.start()
        for t in ends:
            t.join(gone.END_TIMEOUT_SEC + 35.0)
        try:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(self.pg)
        except Exception as e:
            sys.stderr.write("hyperloom group: removing the placement group failed: %s\n" % endpoint.describe(e))

    def end_rank(self, r):
        deadlease.end_before_letting_go(self.ray, r["node"], r["token"], self.WHO, "a rank's")

    def drain(self, timeout):
        """After stopping the ranks: relays their last output and exit codes if they come in time."""
        for kind, payload in self.inbox_until(timeout, lambda: all(r["exited"] for r in self.ranks)):
            if kind == "batch":
                self.relay(*payload)

    def free(self):
        running = [r for r in self.ranks if not r["exited"] and r.get("actor") is not None]
        if running:
            # Stop each command through its actor before killing it (Ray SIGKILLs a worker's
            # direct children with it); a rank not started yet gets a short while.
            threads = []
            for r in running:
                t = threading.Thread(
                    target=self.stop_rank, args=(r, self.grace + 5.0 if r["started"] else 1.5), daemon=True
                )
                t.start()
                threads.append(t)
            for t in threads:
                t.join(self.grace + 6.0)
            self.drain(2.0)
        for r in self.ranks:
            self.kill_actor(r)
        self.remove_group()


def make_rank_class(ray):
    """The lease actor of hyperloom.actor, plus `endpoint` (rank 0's address and a free port)."""
    base = lease_actor.make_actor_class(ray)
    # The runners travel with the rank class like the supervisor (a rank 0 on a node without the
    # package runs them from a copy).
    runner = shipping.package_files(shipping.RUNNER_FILES)

    class HyperloomGroupRank(base):
        @ray.method(num_returns="streaming")
        def run_rank(self, argv, env, env_base, cwd, grace, owner, heartbeat, own_entry=False, gpu_clean_timeout=None,
                     token=None, stdin=False):
            """The lease actor's `run`, in this node's own environment (env_base "node": the
            Ray worker's, with `env` laid over it), watched by the heartbeat (hyperloom.fence) on
            every node, the bridge's own too: with no `beat` for `heartbeat` seconds the bridge
            is unreachable, and the command is stopped before Ray can declare this node dead and
            free its slot. `own_entry`: argv is [PYTHON, PYDIR, COMMAND, ...] of the bridge's
            host; run COMMAND with this node's Python and PYDIR."""
            if own_entry:
                argv = [sys.executable, "-I", shipping.runnable_dir(runner)] + list(argv[2:])
            merged = dict(os.environ) if env_base == "node" else {}
            merged.update(env)
            # Held after its gate: the bridge says when every rank's GPUs are clean.
            yield from base.run(self, argv, merged, cwd, grace, owner, stdin=stdin, gpu_clean_timeout=gpu_clean_timeout,
                                hold=True, token=token, heartbeat=heartbeat)

        def endpoint(self):
            import socket

            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind(("", 0))
                port = s.getsockname()[1]
            finally:
                s.close()
            return ray.util.get_node_ip_address(), port

    # Ray names actors by their class's qualified name: not "make_rank_class.<locals>.…".
    HyperloomGroupRank.__qualname__ = "HyperloomGroupRank"
    return HyperloomGroupRank


def parse_group(msg):
    def need(cond, what):
        if not cond:
            raise endpoint.ProtocolError("group: %s" % what)

    nodes = msg.get("nodes")
    need(isinstance(nodes, int) and not isinstance(nodes, bool) and nodes >= 1, "nodes must be a whole number >= 1")
    lease = parse_lease(dict(msg, op="lease"))
    bundle = {}
    if lease["gpus"] > 0:
        bundle["GPU"] = lease["gpus"]
    if lease["serving_slot"]:
        bundle["serving_slot"] = 1
    need(bundle, "a group needs GPUs or the serving slot in each bundle")
    leader_argv = msg.get("leader_argv")
    need(
        leader_argv is None or (isinstance(leader_argv, list) and leader_argv and all(isinstance(a, str) for a in leader_argv)),
        "leader_argv must be a non-empty list of strings",
    )
    end_with_leader = msg.get("end_with_leader", False)
    need(isinstance(end_with_leader, bool), "end_with_leader must be a boolean")
    rank_ports = msg.get("rank_ports", False)
    need(isinstance(rank_ports, bool), "rank_ports must be a boolean")
    env_base = msg.get("env_base")
    need(env_base in (None, "node"), 'env_base must be "node" when given')
    lease.update(
        nodes=nodes,
        bundle=bundle,
        leader_argv=leader_argv,
        end_with_leader=end_with_leader,
        rank_ports=rank_ports,
        env_base=env_base,
    )
    return lease


def main(argv):
    parser = argparse.ArgumentParser(
        prog="python PYDIR group", description="One serving group: JSON lines on stdin and stdout (see the module's text)."
    )
    parser.parse_args(argv)
    endpoint.serve_stdio(GroupBridge)
    return 0  # not reached: serve_stdio ends the process
