"""The sweep runner: one server combination of a sweep (SPEC section 12), run as the leased command.

    python PYDIR sweep --server 'SERVER CMD' --ready-path PATH --ready-timeout SEC --stop-grace SEC
        --progress-every SEC --dir ENGINE_DIR --cwd DIR

Every flag is required: their defaults live in one place, hyperloom's (domain/Serving.ts), which
always passes them all.

It runs on the leased node, inside the lease, holding its GPUs: it starts the engine ONCE and runs
many client invocations against it, one at a time, as hyperloom asks (domain/Sweep/Runner.ts):

1. A free port on 127.0.0.1 (HYPERLOOM_PORT, HYPERLOOM_BASE_URL for the server and every client);
   the server (`sh -c`) in a process group led by a keeper (hyperloom.keeper), its whole output in
   ENGINE_DIR/server.log; ENGINE_DIR/engine.json says `starting`.
2. GET BASE_URL/READY_PATH polled until it answers 200 (a progress line every PROGRESS_EVERY s);
   engine.json then says `ready`. A server that exits or is not ready in time: `failed` (exit 3).
3. Requests ENGINE_DIR/control/1.json, 2.json, ... (hyperloom writes each atomically), polled:
   `{"argv", "dir", "env", "between", "timeout_sec"}` runs `between` (sh -c) and then the client
   (argv, no shell, $HYPERLOOM_* expanded, in a process group of its own led by a second keeper,
   timed out after timeout_sec), its output copied live to this runner's stdout/stderr and, whole,
   to DIR/client.log; the answer goes to control/N.done.json. `{"stop": true}` ends the loop.
   An engine that dies while a client runs: the client gets a short grace, the answer says
   `engine_alive: false`, the runner ends (exit 4); one that dies while idle ends it too.
4. The server's whole group is stopped (TERM, STOP_GRACE, KILL) and confirmed gone before this
   runner exits, so before the lease is released. SIGTERM/SIGINT/SIGHUP (the lease going, Ctrl-C):
   the client and the server are stopped the same way, exit 143. SIGKILL of this runner: the
   keepers kill both groups (their pipes' only writer is gone).
Standard library only; Python >= 3.8; Linux.
"""

import argparse
import os
import signal
import subprocess
import sys
import threading
import time

from hyperloom import jsonfile, keeper, listener, procgroup
from hyperloom.serve import add_runner_flags, expand, free_port, last_line, node_facts, probe
from hyperloom.tee import Tee

ENGINE_FILE = "engine.json"
CONTROL_DIR = "control"
SERVER_LOG = "server.log"
PORT_TAKEN_EXIT = 3  # a client run refused: a process outside the lease listens on the engine's port
CLIENT_LOG = "client.log"
NOT_READY_EXIT = 3
ENGINE_DIED_EXIT = 4
STOPPED_EXIT = 143
POLL_SEC = 0.01
# A client still running this long after the engine died is stopped (the real clients end fast).
AFTER_DEATH_GRACE_SEC = 10.0


def log(msg):
    sys.stderr.write("hyperloom-sweep: %s\n" % msg)
    sys.stderr.flush()


class Runner:
    def __init__(self, a):
        self.a = a
        self.stop_requested = threading.Event()
        self.server = None
        self.server_group = None
        self.server_started = None
        self.server_exit = None
        self.server_runtime = None
        self.ready_sec = None
        self.state = "starting"
        self.outcome = None
        self.gone = False
        self.port = None
        self.base_url = None
        self.node = {}
        self.client = None
        self.client_group = None

    def status(self):
        jsonfile.write(os.path.join(self.a.dir, ENGINE_FILE), {
            "version": 1, "state": self.state, "outcome": self.outcome, "port": self.port,
            "base_url": self.base_url, "ready_sec": self.ready_sec, "exit_code": self.server_exit,
            "runtime_sec": self.server_runtime, "gone": self.gone, "node": self.node,
        })

    # -- the engine

    def server_alive(self):
        if self.server is None:
            return False
        if self.server.poll() is None:
            return True
        if self.server_exit is None:
            self.server_exit = procgroup.exit_code(self.server.returncode)
            self.server_runtime = round(time.monotonic() - self.server_started, 3)
        return False

    def start_server(self, env):
        self.server_group = keeper.Group()
        logf = open(os.path.join(self.a.dir, SERVER_LOG), "ab", buffering=0)
        try:
            self.server = subprocess.Popen(
                ["sh", "-c", self.a.server], stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                env=env, cwd=self.a.cwd, close_fds=True, preexec_fn=self.server_group.join(),
            )
        finally:
            logf.close()
        self.server_started = time.monotonic()

    def stop_server(self):
        if self.server_group is None:
            return True
        _, gone = self.server_group.stop(self.a.stop_grace, poll=self.server_alive)
        self.server_alive()
        return gone

    def wait_ready(self):
        url = self.base_url + self.a.ready_path
        log("engine started (pid %d, process group %d, port %d); waiting for %s to answer 200"
            % (self.server.pid, self.server_group.pgid, self.port, url))
        next_progress = time.monotonic() + self.a.progress_every
        self.port_watch = listener.Watch(self.port, os.path.join(self.a.dir, SERVER_LOG))
        while True:
            if self.stop_requested.is_set():
                self.outcome = "stopped"
                return False
            if self.port_watch.check(self.server.pid, self.server_group.pgid, now=not self.server_alive()):
                log(self.port_watch.taken)  # another process took the engine's port
                self.outcome = "port_taken"
                return False
            if not self.server_alive():
                log("the engine exited with code %d after %.1f s, before it was ready; server.log ends: %s"
                    % (self.server_exit, self.server_runtime, last_line(os.path.join(self.a.dir, SERVER_LOG))))
                self.outcome = "server_exited"
                return False
            elapsed = time.monotonic() - self.server_started
            if probe(url) and not self.port_watch.check(self.server.pid, self.server_group.pgid, now=True):
                self.ready_sec = round(elapsed, 3)
                log("engine ready after %.1f s" % self.ready_sec)
                return True
            if elapsed >= self.a.ready_timeout:
                log("the engine was not ready within %s s; stopping it" % self.a.ready_timeout)
                self.outcome = "ready_timeout"
                return False
            if time.monotonic() >= next_progress:
                next_progress = time.monotonic() + self.a.progress_every
                log("waiting for the engine: %d s; server.log: %s"
                    % (elapsed, last_line(os.path.join(self.a.dir, SERVER_LOG)) or "(empty)"))
            self.stop_requested.wait(0.1)

    # -- one client run

    def run_between(self, cmd, env, run_dir):
        started = time.monotonic()
        with open(os.path.join(run_dir, "between.log"), "ab") as logf:
            group = keeper.Group()
            try:
                p = subprocess.Popen(["sh", "-c", cmd], stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                     env=env, cwd=self.a.cwd, close_fds=True, preexec_fn=group.join())
                while p.poll() is None and not self.stop_requested.wait(POLL_SEC):
                    pass
                code = procgroup.exit_code(p.returncode) if p.returncode is not None else None
            except OSError as e:
                logf.write(("cannot run --between: %s\n" % (e.strerror or e)).encode())
                code = 127
            finally:
                group.stop(0.5)
        return code, round(time.monotonic() - started, 3)

    def run_client(self, req, env):
        """Runs one client; returns (exit_code, timed_out, runtime_sec, t0, t1)."""
        run_dir = req["dir"]
        argv = [expand(x, env) for x in req["argv"]]
        tee = Tee(os.path.join(run_dir, CLIENT_LOG), log)
        t0 = time.time()
        started = time.monotonic()
        taken = listener.foreign_listener(self.port, self.server.pid, self.server_group.pgid)
        if taken:  # the run would measure another process: the client does not run
            tee.note(("hyperloom-sweep: %s\n" % taken).encode())
            tee.close()
            log(taken)
            return PORT_TAKEN_EXIT, False, 0.0, t0, time.time()
        self.client_group = keeper.Group()
        try:
            self.client = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=env, cwd=self.a.cwd, close_fds=True, preexec_fn=self.client_group.join(),
            )
        except OSError as e:
            msg = "hyperloom-sweep: cannot start the client %s: %s\n" % (argv[0] if argv else "?", e.strerror or e)
            tee.note(msg.encode())
            tee.close()
            sys.stderr.write(msg)
            self.client_group.stop(0.1)
            self.client_group = None
            return 127, False, 0.0, t0, time.time()

        tee.start(self.client)
        timeout = req.get("timeout_sec")
        timed_out = False
        died_at = None
        while self.client.poll() is None:
            if self.stop_requested.wait(POLL_SEC):
                break
            now = time.monotonic()
            if timeout is not None and now - started >= timeout:
                timed_out = True
                log("the client ran past the point timeout (%s s); stopping it" % timeout)
                break
            if died_at is None and not self.server_alive():
                died_at = now
                log("the engine exited with code %s while the client ran" % self.server_exit)
            if died_at is not None and now - died_at >= AFTER_DEATH_GRACE_SEC:
                break
        if self.client.poll() is None:
            self.client_group.stop(self.a.stop_grace)
            self.client.wait()
        else:
            self.client_group.stop(0.2)  # whatever it left behind in its group
        self.client_group = None
        tee.close()
        code = None if timed_out else procgroup.exit_code(self.client.returncode)
        return code, timed_out, round(time.monotonic() - started, 3), t0, time.time()

    def serve_requests(self, env):
        control = os.path.join(self.a.dir, CONTROL_DIR)
        os.makedirs(control, exist_ok=True)
        seq = 1
        while True:
            path = os.path.join(control, "%d.json" % seq)
            req = None
            while req is None:
                if self.stop_requested.is_set():
                    return STOPPED_EXIT
                if not self.server_alive():
                    log("the engine exited with code %s while idle" % self.server_exit)
                    self.state = "exited"
                    return ENGINE_DIED_EXIT
                if os.path.exists(path):
                    req = jsonfile.read(path)
                if req is None:
                    time.sleep(POLL_SEC)
            if req.get("stop"):
                return 0
            run_dir = req["dir"]
            os.makedirs(run_dir, exist_ok=True)
            run_env = dict(env)
            run_env.update({k: str(v) for k, v in (req.get("env") or {}).items()})
            between_code, between_sec = None, None
            if req.get("between"):
                between_code, between_sec = self.run_between(req["between"], run_env, run_dir)
            if between_code not in (None, 0) or self.stop_requested.is_set():
                code, timed_out, runtime, t0, t1 = None, False, 0.0, None, None
            else:
                code, timed_out, runtime, t0, t1 = self.run_client(req, run_env)
            if self.stop_requested.is_set():
                return STOPPED_EXIT
            alive = self.server_alive()
            jsonfile.write(os.path.join(control, "%d.done.json" % seq), {
                "seq": seq, "exit_code": code, "timed_out": timed_out, "runtime_sec": runtime,
                "between_exit_code": between_code, "between_sec": between_sec, "engine_alive": alive,
                "engine_exit_code": self.server_exit, "client_started": t0, "client_ended": t1,
            })
            if not alive:
                self.state = "exited"
                return ENGINE_DIED_EXIT
            seq += 1

    def run(self):
        self.node = node_facts()
        self.port = free_port("127.0.0.1")
        self.base_url = "http://127.0.0.1:%d" % self.port
        env = dict(os.environ)
        env["HYPERLOOM_PORT"] = str(self.port)
        env["HYPERLOOM_BASE_URL"] = self.base_url
        self.status()
        try:
            self.start_server(env)
        except OSError as e:
            log("cannot start the engine: %s" % (e.strerror or e))
            self.state, self.outcome = "failed", "start_failed"
            return self.finish(NOT_READY_EXIT)
        if not self.wait_ready():
            self.state = "stopped" if self.outcome == "stopped" else "failed"
            return self.finish(STOPPED_EXIT if self.outcome == "stopped" else NOT_READY_EXIT)
        self.state = "ready"
        self.status()
        code = self.serve_requests(env)
        if self.state == "ready":
            self.state = "stopped"
        return self.finish(code)

    def finish(self, code):
        if self.client_group is not None:
            self.client_group.stop(self.a.stop_grace)
        self.gone = self.stop_server()
        if not self.gone:
            log("could not confirm that the engine's process group is gone")
        self.status()
        return code


def parse(argv):
    p = argparse.ArgumentParser(prog="python PYDIR sweep", description="the sweep runner (one server combination)")
    add_runner_flags(p)
    a = p.parse_args(argv)
    if not a.ready_path.startswith("/"):
        a.ready_path = "/" + a.ready_path
    return a


def main(argv):
    a = parse(argv)
    os.makedirs(a.dir, exist_ok=True)
    runner = Runner(a)

    def on_stop(signum, frame):
        runner.stop_requested.set()

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_stop)
    try:
        return runner.run()
    except BaseException as e:  # a bug here must still take the engine down
        log("internal error: %r" % (e,))
        runner.state = "failed" if runner.state == "starting" else "stopped"
        runner.finish(1)
        return 1
