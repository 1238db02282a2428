"""The sweep runner: one server combination of a sweep (docs/design.md#combinations-and-points,
docs/design.md#sweeps-at-cluster-scale), run as the leased command.

    python PYDIR sweep --server 'SERVER CMD' --ready-path PATH --ready-timeout SEC --stop-grace SEC
        --progress-every SEC --check CMD --warmup N --dir ENGINE_DIR --cwd DIR

Every flag is required: their defaults live in one place, hyperloom's (domain/Serving.ts), which
always passes them all.

It runs on the leased node, inside the lease, holding its GPUs: it starts the engine ONCE and runs
many client invocations against it, one at a time, as hyperloom asks (domain/Sweep/Runner.ts). The
node shares nothing with hyperloom's host but Ray (docs/design.md#sweeps-at-cluster-scale): requests
come as JSON lines on this runner's stdin (forwarded by the lease), and everything it tells
hyperloom, files included, goes out as lines on its stdout that start with PROTO (the lease brings
them back). ENGINE_DIR and a request's `dir` are hyperloom's folders on ITS host: this runner never
touches them, it names them in the files it sends; its own files live in a private folder on this
node, removed at its end.

1. A free port on 127.0.0.1 (HYPERLOOM_PORT, HYPERLOOM_BASE_URL for the server and every client);
   the server (`sh -c`, in DIR when this node has it, else in /) in a process group led by a keeper
   (hyperloom.keeper), its whole output in server.log; an `engine` message says `starting`.
2. GET BASE_URL/READY_PATH polled until it answers 200 (a progress line every PROGRESS_EVERY s);
   then --check CMD (when not empty, hyperloom.ready; check.log sent) and, when it passed, --warmup
   N requests at once, answers discarded; an `engine` message then says `ready`, with the check's
   record (a non-zero exit: hyperloom measures nothing on this engine and stops it). A server that exits or is not ready in time: `failed`
   (exit 3), server.log sent first (hyperloom classifies the failure on it).
3. Requests, one JSON line each: `{"seq", "argv", "dir", "env", "between", "timeout_sec"}` runs
   `between` (sh -c) and then the client (argv, no shell, $HYPERLOOM_* expanded, in a process group
   of its own led by a second keeper, timed out after timeout_sec), its output copied live to this
   runner's stdout/stderr and, whole, to client.log. `dir` (and any argument or `env` value under
   it, e.g. HYPERLOOM_RESULT_FILE) stands for a private run folder here; when the client ends,
   every file of that folder is sent as `dir`'s, then what server.log gained, then the `done`
   answer. `{"stop": true}`, or the end of stdin, ends the loop.
   An engine that dies while a client runs: the client gets a short grace, the answer says
   `engine_alive: false`, the runner ends (exit 4); one that dies while idle ends it too.
4. The server's whole group is stopped (TERM, STOP_GRACE, KILL) and confirmed gone before this
   runner exits, so before the lease is released; the rest of server.log is sent, then the last
   `engine` message. SIGTERM/SIGINT/SIGHUP (the lease going, Ctrl-C): the client and the server
   are stopped the same way, exit 143. SIGKILL of this runner: the keepers kill both groups
   (their pipes' only writer is gone).

Messages (stdout, one line each, PROTO then JSON): {"engine": STATUS} (domain/Sweep/Runner.ts's
EngineStatus), {"file": PATH, "at": OFFSET, "data": BASE64} (bytes of hyperloom's file PATH from
OFFSET; at 0 the file starts anew), {"done": ANSWER}.
Standard library only; Python >= 3.8; Linux.
"""

import base64
import json
import os
import queue
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time

from hyperloom import clientrun, engine, keeper, procgroup, ready, sampler
from hyperloom.engine import NOT_READY_EXIT, SERVER_LOG, STOPPED_EXIT

PROTO = "\x1ehyperloom-sweep "
# A file's bytes per message: its base64 and the rest of the line stay under the lease's
# 64 KiB line (hyperloom.actor.MAX_LINE_BYTES).
FILE_CHUNK = 32 * 1024
ENGINE_DIED_EXIT = 4
CHECK_LOG = "check.log"
POLL_SEC = 0.01


def log(msg):
    sys.stderr.write("hyperloom-sweep: %s\n" % msg)
    sys.stderr.flush()


_out_lock = threading.Lock()


def emit(message):
    """One message to hyperloom: a PROTO line on stdout."""
    line = (PROTO + json.dumps(message, separators=(",", ":")) + "\n").encode()
    with _out_lock:
        try:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
        except (OSError, ValueError):
            pass  # hyperloom is gone: the lease ends this runner


def send_file(local, remote, at=0):
    """Sends the bytes of `local` from offset `at` as hyperloom's file `remote`; the new offset.
    A file that is not there sends nothing; an empty one is sent empty (so that it exists)."""
    try:
        f = open(local, "rb")
    except OSError:
        return at
    with f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return at  # only a regular file's bytes (never a device's endless ones)
        end = st.st_size  # what it holds now: a file still growing is sent again later
        f.seek(at)
        first = True
        while True:
            data = f.read(max(0, min(FILE_CHUNK, end - at)))
            if not data and not (first and at == 0):
                return at
            emit({"file": remote, "at": at, "data": base64.b64encode(data).decode("ascii")})
            at += len(data)
            first = False
            if not data:
                return at


def under(path, root):
    """`path` with `root` (a folder of hyperloom's host) replaced by None when it is not under it."""
    root = root.rstrip("/")
    if path == root:
        return ""
    if path.startswith(root + "/"):
        return path[len(root) + 1:]
    return None


def read_requests(into):
    """Requests from stdin, one JSON line each, into the queue; None at its end."""
    try:
        for raw in sys.stdin.buffer:
            raw = raw.strip()
            if not raw:
                continue
            try:
                req = json.loads(raw)
            except ValueError:
                log("not a request (ignored): %r" % raw[:200])
                continue
            if isinstance(req, dict):
                into.put(req)
    except (OSError, ValueError):
        pass
    into.put(None)


class Runner:
    def __init__(self, a):
        self.a = a
        self.log = log
        self.stop_requested = threading.Event()
        self.state = "starting"
        self.outcome = None
        self.gone = False
        self.node = {}
        # The seam for samplers around each client run (hyperloom.clientrun): (name, sampler) pairs.
        self.samplers = []
        self.engine_config = None  # what the engine reported after readiness (hyperloom.sampler)
        self.check = None  # the --check run after readiness (hyperloom.ready)
        self.warmup = None  # the --warmup requests after readiness
        # This node's own folder for the engine's and the runs' files; hyperloom gets their bytes.
        self.work = tempfile.mkdtemp(prefix="hyperloom-sweep-")
        self.server_log = os.path.join(self.work, SERVER_LOG)
        self.server_log_sent = 0
        self.cwd = a.cwd if os.path.isdir(a.cwd) else "/"
        self.engine = engine.Engine(a.server, self.cwd, self.server_log, "engine", log)
        self.requests = queue.Queue()

    def status(self):
        e = self.engine
        emit({"engine": {
            "version": 1, "state": self.state, "outcome": self.outcome, "port": e.port,
            "base_url": e.base_url, "ready_sec": e.ready_sec, "exit_code": e.exit_code,
            "runtime_sec": e.runtime_sec, "gone": self.gone, "node": self.node,
            **({"engine_config": self.engine_config} if self.engine_config is not None else {}),
            **({"check": self.check} if self.check is not None else {}),
            **({"warmup": self.warmup} if self.warmup is not None else {}),
        }})

    def send_server_log(self):
        """What server.log gained since it was last sent."""
        self.server_log_sent = send_file(self.server_log, os.path.join(self.a.dir, SERVER_LOG), self.server_log_sent)

    # -- one client run

    def run_between(self, cmd, env, run_dir):
        started = time.monotonic()
        with open(os.path.join(run_dir, "between.log"), "ab") as logf:
            group = keeper.Group()
            try:
                p = subprocess.Popen(["sh", "-c", cmd], stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                     env=env, cwd=self.cwd, close_fds=True, preexec_fn=group.join())
                while p.poll() is None and not self.stop_requested.wait(POLL_SEC):
                    pass
                code = procgroup.exit_code(p.returncode) if p.returncode is not None else None
            except OSError as e:
                logf.write(("cannot run --between: %s\n" % (e.strerror or e)).encode())
                code = 127
            finally:
                group.stop(0.5)
        return code, round(time.monotonic() - started, 3)

    def run_client(self, req, env, run_dir):
        """Runs one client (hyperloom.clientrun: the port check, its own group, the point timeout,
        the samplers); its hyperloom.clientrun.Result."""
        return clientrun.run(
            req["argv"], env, self.cwd, run_dir, self.engine, self.stop_requested, self.a.stop_grace, log,
            prefix="hyperloom-sweep", timeout=req.get("timeout_sec"), samplers=self.samplers,
        )

    def local_run(self, req, seq):
        """The request with its `dir` (and everything under it) moved to a folder of this node's."""
        remote = req["dir"]
        local = os.path.join(self.work, "runs", str(seq))

        def here(value):
            rel = under(value, remote)
            if rel is None:
                return value.replace(remote.rstrip("/") + "/", local + "/")
            return os.path.join(local, rel) if rel else local

        env = {k: here(str(v)) for k, v in (req.get("env") or {}).items()}
        argv = [here(str(x)) for x in req.get("argv") or []]
        return remote, local, dict(req, argv=argv, env=env)

    def send_run(self, local, remote):
        """Every file of the run's folder, as hyperloom's, under its `dir`."""
        for top, _, names in os.walk(local):
            for name in sorted(names):
                path = os.path.join(top, name)
                send_file(path, os.path.join(remote, os.path.relpath(path, local)))

    def next_request(self):
        """The next request; None when stopped (or the engine died: then self.state says so)."""
        while True:
            if self.stop_requested.is_set():
                return None
            if not self.engine.alive():
                log("the engine exited with code %s while idle" % self.engine.exit_code)
                self.state = "exited"
                return None
            try:
                return self.requests.get(timeout=POLL_SEC * 10)
            except queue.Empty:
                pass

    def serve_requests(self, env):
        threading.Thread(target=read_requests, args=(self.requests,), daemon=True).start()
        seq = 0
        while True:
            req = self.next_request()
            if self.stop_requested.is_set():
                return STOPPED_EXIT
            if self.state == "exited":
                return ENGINE_DIED_EXIT
            if req is None or req.get("stop"):
                return 0
            seq = req.get("seq", seq + 1)
            remote, run_dir, req = self.local_run(req, seq)
            os.makedirs(run_dir, exist_ok=True)
            run_env = dict(env)
            run_env.update(req["env"])
            between_code, between_sec = None, None
            if req.get("between"):
                between_code, between_sec = self.run_between(req["between"], run_env, run_dir)
            ran = None
            if between_code in (None, 0) and not self.stop_requested.is_set():
                ran = self.run_client(req, run_env, run_dir)
            if self.stop_requested.is_set():
                return STOPPED_EXIT
            alive = self.engine.alive()
            self.send_run(run_dir, remote)
            shutil.rmtree(run_dir, ignore_errors=True)
            self.send_server_log()
            answer = {
                "seq": seq, "exit_code": ran and ran.exit_code, "timed_out": bool(ran and ran.timed_out),
                "runtime_sec": ran.runtime_sec if ran else 0.0, "between_exit_code": between_code,
                "between_sec": between_sec, "engine_alive": alive, "engine_exit_code": self.engine.exit_code,
                "client_started": ran and ran.started, "client_ended": ran and ran.ended,
            }
            if ran is not None and ran.observations:
                answer["observations"] = ran.observations
            emit({"done": answer})
            if not alive:
                self.state = "exited"
                return ENGINE_DIED_EXIT

    def run(self):
        self.node = engine.node_facts()
        env = self.engine.environment()
        self.status()
        try:
            self.engine.start(env)
        except OSError as e:
            log("cannot start the engine: %s" % (e.strerror or e))
            self.state, self.outcome = "failed", "start_failed"
            return self.finish(NOT_READY_EXIT)
        why_not = self.engine.wait_ready(self.a.ready_path, self.a.ready_timeout, self.a.progress_every, self.stop_requested)
        if why_not is not None:
            self.outcome = why_not
            self.state = "stopped" if why_not == "stopped" else "failed"
            return self.finish(STOPPED_EXIT if why_not == "stopped" else NOT_READY_EXIT)
        self.state = "ready"
        # what the engine reports of its effective configuration (in the `ready` message), and the
        # samplers around each client run (their observations in each run's answer)
        self.engine_config = sampler.read_engine_config(self.engine.base_url, self.engine.log_path)
        self.samplers = sampler.run_samplers(self.engine.base_url, log=log)
        # once per engine start, before the `ready` message: the check (a failed one is said in
        # that message; hyperloom measures nothing on this engine and stops it), then the warm-up
        if self.a.check:
            local = os.path.join(self.work, CHECK_LOG)
            self.check = ready.check(self.a.check, env, self.cwd, local, self.stop_requested)
            send_file(local, os.path.join(self.a.dir, CHECK_LOG))
        if self.check is None or self.check["exit_code"] == 0:
            self.warmup = ready.warm_up(self.engine.base_url, self.a.warmup, log)
        self.status()
        code = self.serve_requests(env)
        if self.state == "ready":
            self.state = "stopped"
        return self.finish(code)

    def finish(self, code):
        self.gone = self.engine.stop(self.a.stop_grace)
        if not self.gone:
            log("could not confirm that the engine's process group is gone")
        self.send_server_log()
        self.status()
        shutil.rmtree(self.work, ignore_errors=True)
        return code


def main(argv):
    try:
        a = engine.parse("python PYDIR sweep", argv)
    except ValueError as e:
        log("usage: %s" % e)
        return 2
    runner = Runner(a)
    if runner.cwd != a.cwd:
        log("%s is not a folder on this node: the engine and the clients run in /" % a.cwd)

    def on_error():  # a bug here must still take the engine down
        runner.state = "failed" if runner.state == "starting" else "stopped"
        runner.finish(1)

    return engine.run_stoppable(runner, on_error)
