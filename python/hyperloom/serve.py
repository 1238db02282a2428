#!/usr/bin/env python3
"""The serving runner: one serving benchmark attempt (docs/design.md#serving-benchmarks), run as the
leased command.

hyperloom runs this module (`python PYDIR serve`, with the Python of the Ray installation) as the command of a serving
lease, so it runs on the leased node, inside the lease's process group, holding the lease's GPUs:

    python PYDIR serve --server 'SERVER CMD' --ready-path PATH --ready-timeout SEC --stop-grace SEC
        --progress-every SEC --check CMD --warmup N --dir ATTEMPT_DIR --cwd DIR -- CLIENT ARGV...

Every flag is required: their defaults live in one place, hyperloom's (domain/Serving.ts), which
always passes them all.

1. Picks a free TCP port on 127.0.0.1; the server and the client get HYPERLOOM_PORT and
   HYPERLOOM_BASE_URL (http://127.0.0.1:PORT) in their environment, besides everything given.
2. Starts the server, `sh -c 'SERVER CMD'`, in a process group of its own, its whole output in
   ATTEMPT_DIR/server.log.
3. Waits until GET BASE_URL/READY_PATH answers 200. While waiting it prints a progress line to stderr
   every PROGRESS_EVERY seconds: the elapsed time and the server log's last line. A server that
   exits, or is not ready within READY_TIMEOUT seconds, ends the attempt (exit 3).
   Once ready: runs --check CMD (when not empty; hyperloom.ready), its output in
   ATTEMPT_DIR/check.log; a non-zero exit ends the attempt (exit 4, outcome "check_failed", the
   client never runs); then sends --warmup N requests at once, their answers discarded.
4. Runs the client through hyperloom.clientrun, the loop the sweep runner uses too (argv, no
   shell, in a process group of its own led by a keeper; `$HYPERLOOM_PORT`, `${HYPERLOOM_BASE_URL}`
   and the other HYPERLOOM_* variables in its arguments are expanded, since the port is only known
   here); its stdout and stderr are copied live to this runner's stdout and stderr and, whole, to
   ATTEMPT_DIR/client.log. A process outside the lease listening on the engine's port by then: the
   client does not run (`port_taken`, exit 3). The attempt's own timeout is the lease's (a stop).
5. Stops the server's whole process group (TERM, STOP_GRACE seconds, KILL) and waits until none of
   it is left, THEN exits: the runner's exit ends the lease, so the engine is gone before the slot
   is released. Exit status: the client's (3 when the server was never ready).

Stopped (SIGTERM/SIGINT/SIGHUP: the lease is being released, the attempt timed out, the session
deadline passed, Ctrl-C): it stops the client and the server the same way and exits 143.

If this runner is killed outright (SIGKILL), the server group's keeper stops it: the group's leader
is a keeper (hyperloom.keeper, forked by the runner) that ignores TERM/INT/HUP and holds the read end
of a pipe whose only writer is the runner; on EOF (the runner gone, however) it SIGKILLs the whole
group, itself included.

ATTEMPT_DIR/serve.json records what happened (written atomically, also on a stop):
    {"version": 1, "port": P, "base_url": ..., "outcome": "client_exited" | "server_exited" |
     "ready_timeout" | "stopped" | "start_failed" | "port_taken" | "check_failed",
     "server": {"argv": [...], "pid": N, "pgid": N, "ready_sec": S|null, "exit_code": N|null,
                "runtime_sec": S, "stopped_with": "TERM"|"KILL"|null, "gone": true|false},
     "client": {"argv": [...], "exit_code": N|null, "runtime_sec": S|null} | null,
     "check": {"exit_code", "runtime_sec", "last_line", "log"} | null,
     "warmup": {"requests", "ok", "failed", "sec"} | null,
     "node": {"hostname", "python", "ray_version", "engines": {"vllm": "0.x", ...},
              "cuda_visible_devices", "gpus": ["NVIDIA H100 80GB HBM3", ...]}}
Standard library only; Python >= 3.8; Linux (process groups, /proc).
"""

import os
import sys
import threading

from hyperloom import clientrun, engine, jsonfile, ready, sampler
from hyperloom.engine import NOT_READY_EXIT, SERVER_LOG, STOPPED_EXIT

STATUS_FILE = "serve.json"
CHECK_LOG = "check.log"
CHECK_FAILED_EXIT = 4  # --check exited non-zero: the engine answers wrong, nothing was measured


def log(msg):
    sys.stderr.write("hyperloom-serve: %s\n" % msg)
    sys.stderr.flush()


class Runner:
    def __init__(self, a):
        self.a = a
        self.log = log
        self.stop_requested = threading.Event()
        self.engine = engine.Engine(a.server, a.cwd, os.path.join(a.dir, SERVER_LOG), "server", log)
        self.client = None  # the client run (hyperloom.clientrun.Result) once it was tried
        # The seam for samplers around the client (hyperloom.clientrun): (name, sampler) pairs.
        self.samplers = []
        self.engine_config = None  # what the engine reported after readiness (hyperloom.sampler)
        self.client_exit = None
        self.client_runtime = None
        self.outcome = None
        self.node = {}
        self.check = None
        self.warmup = None

    # -- status

    def write_status(self, gone):
        a, e = self.a, self.engine
        doc = {
            "version": 1,
            "port": e.port,
            "base_url": e.base_url,
            "outcome": self.outcome,
            "server": {
                "argv": e.argv,
                "pid": e.pid,
                "pgid": e.pgid,
                "ready_sec": e.ready_sec,
                "exit_code": e.exit_code,
                "runtime_sec": e.runtime_sec,
                "stopped_with": e.stopped_with,
                "gone": gone,
            },
            "client": None if self.client is None else self.client_status(),
            "node": self.node,
            "check": self.check,
            "warmup": self.warmup,
        }
        if self.engine_config is not None:
            doc["engine_config"] = self.engine_config
        seen = self.client.observations.get(sampler.NAME) if self.client is not None else None
        if seen is not None:
            doc["observations"] = seen  # what the samplers saw while the client ran (domain/Observations.ts)
        path = os.path.join(a.dir, STATUS_FILE)
        try:
            jsonfile.write(path, doc)
        except OSError as e:
            log("cannot write %s: %s" % (path, e))

    def client_status(self):
        doc = {"argv": self.a.client, "exit_code": self.client_exit, "runtime_sec": self.client_runtime}
        others = {k: v for k, v in self.client.observations.items() if k != sampler.NAME}
        if others:
            doc["observations"] = others
        return doc

    # -- the client

    def run_client(self, env):
        """The client, once (hyperloom.clientrun: the port check before it, its own process group, the
        samplers around it); at a stop the server is stopped together with it (the lease's grace
        covers both)."""
        a = self.a
        self.client = clientrun.run(
            a.client, env, a.cwd, a.dir, self.engine, self.stop_requested, a.stop_grace, log,
            prefix="hyperloom-serve", on_stop=lambda: self.engine.stop(a.stop_grace), samplers=self.samplers,
        )
        self.client_exit = self.client.exit_code
        self.client_runtime = self.client.runtime_sec

    # -- the whole attempt

    def run(self):
        a = self.a
        self.node = engine.node_facts()
        env = self.engine.environment()
        try:
            self.engine.start(env)
        except OSError as e:
            log("cannot start the server: %s" % (e.strerror or e))
            return self.finish("start_failed", NOT_READY_EXIT)
        self.write_status(False)
        why_not = self.engine.wait_ready(a.ready_path, a.ready_timeout, a.progress_every, self.stop_requested)
        if why_not is not None:
            return self.finish(why_not, STOPPED_EXIT if why_not == "stopped" else NOT_READY_EXIT)
        # what the engine reports of its effective configuration, and the samplers around the client
        self.engine_config = sampler.read_engine_config(self.engine.base_url, self.engine.log_path)
        self.samplers = sampler.run_samplers(self.engine.base_url, log=log)
        self.write_status(False)
        if a.check:
            self.check = ready.check(a.check, env, a.cwd, os.path.join(a.dir, CHECK_LOG), self.stop_requested)
            if self.stop_requested.is_set():
                return self.finish("stopped", STOPPED_EXIT)
            if self.check["exit_code"] != 0:
                log("the check exited %s: %s" % (self.check["exit_code"], self.check["last_line"]))
                return self.finish("check_failed", CHECK_FAILED_EXIT)
        self.warmup = ready.warm_up(self.engine.base_url, a.warmup, log)
        self.write_status(False)
        self.run_client(env)
        if self.stop_requested.is_set():
            return self.finish("stopped", STOPPED_EXIT)
        if self.client.port_taken is not None:
            return self.finish("port_taken", NOT_READY_EXIT)
        return self.finish("client_exited", self.client_exit)

    def finish(self, outcome, code):
        self.outcome = outcome
        gone = self.engine.stop(self.a.stop_grace)
        if not gone:
            log("could not confirm that the server's process group %s is gone" % self.engine.pgid)
        self.write_status(gone)
        return code


def main(argv):
    try:
        a = engine.parse("python PYDIR serve", argv, client=True)
    except ValueError as e:
        log("usage: %s" % e)
        return 2
    os.makedirs(a.dir, exist_ok=True)
    runner = Runner(a)

    def on_error():  # a bug here must still take the server down
        runner.outcome = runner.outcome or "stopped"
        runner.write_status(runner.engine.stop(a.stop_grace))

    code = engine.run_stoppable(runner, on_error)
    sys.stdout.flush()
    sys.stderr.flush()
    return code
