#!/usr/bin/env python3
"""The serving runner: one serving benchmark attempt (docs/design.md#serving-benchmarks), run as the
leased command.

hyperloom runs this module (`python PYDIR serve`, with the Python of the Ray installation) as the command of a serving
lease, so it runs on the leased node, inside the lease's process group, holding the lease's GPUs:

    python PYDIR serve --server 'SERVER CMD' --ready-path PATH --ready-timeout SEC --stop-grace SEC
        --progress-every SEC --dir ATTEMPT_DIR --cwd DIR -- CLIENT ARGV...

Every flag is required: their defaults live in one place, hyperloom's (domain/Serving.ts), which
always passes them all.

1. Picks a free TCP port on 127.0.0.1; the server and the client get HYPERLOOM_PORT and
   HYPERLOOM_BASE_URL (http://127.0.0.1:PORT) in their environment, besides everything given.
2. Starts the server, `sh -c 'SERVER CMD'`, in a process group of its own, its whole output in
   ATTEMPT_DIR/server.log.
3. Waits until GET BASE_URL/READY_PATH answers 200. While waiting it prints a progress line to stderr
   every PROGRESS_EVERY seconds: the elapsed time and the server log's last line. A server that
   exits, or is not ready within READY_TIMEOUT seconds, ends the attempt (exit 3).
4. Runs the client (argv, no shell, in this runner's process group; `$HYPERLOOM_PORT`,
   `${HYPERLOOM_BASE_URL}` and the other HYPERLOOM_* variables in its arguments are expanded, since
   the port is only known here); its stdout and stderr are copied live to this runner's stdout and
   stderr and, whole, to ATTEMPT_DIR/client.log.
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
     "ready_timeout" | "stopped" | "start_failed",
     "server": {"argv": [...], "pid": N, "pgid": N, "ready_sec": S|null, "exit_code": N|null,
                "runtime_sec": S, "stopped_with": "TERM"|"KILL"|null, "gone": true|false},
     "client": {"argv": [...], "exit_code": N|null, "runtime_sec": S|null} | null,
     "node": {"hostname", "python", "ray_version", "engines": {"vllm": "0.x", ...},
              "cuda_visible_devices", "gpus": ["NVIDIA H100 80GB HBM3", ...]}}
Standard library only; Python >= 3.8; Linux (process groups, /proc).
"""

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from hyperloom import jsonfile, keeper, listener, procgroup
from hyperloom.tee import Tee

STATUS_FILE = "serve.json"
SERVER_LOG = "server.log"
CLIENT_LOG = "client.log"
NOT_READY_EXIT = 3
STOPPED_EXIT = 143


def log(msg):
    sys.stderr.write("hyperloom-serve: %s\n" % msg)
    sys.stderr.flush()


# ---------------------------------------------------------------------------------------------
# Facts about the node (the session's environment record)


def node_facts():
    facts = {
        "hostname": socket.gethostname(),
        "python": sys.version.split()[0],
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "engines": {},
        "gpus": [],
    }
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        metadata = None
    if metadata is not None:
        for name in ("ray", "vllm", "sglang"):
            try:
                version = metadata.version(name)
            except Exception:
                continue
            if name == "ray":
                facts["ray_version"] = version
            else:
                facts["engines"][name] = version
    facts["gpus"] = gpu_models()
    facts["ray_node_id"] = os.environ.get("HYPERLOOM_RAY_NODE_ID")
    facts["gpu_driver"] = gpu_driver()
    facts["cpu_model"] = cpu_model()
    facts["cpu_count"] = os.cpu_count()
    return facts


def gpu_driver():
    """The NVIDIA driver's version (/proc/driver/nvidia/version), None when there is none."""
    try:
        with open("/proc/driver/nvidia/version") as f:
            m = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]+)", f.read())
            return m.group(1) if m else None
    except OSError:
        return None


def cpu_model():
    """The CPU's model name (/proc/cpuinfo), None when it does not say."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def gpu_models():
    """The accelerator models the host tells: the NVIDIA driver's /proc files, else nvidia-smi."""
    models = []
    base = "/proc/driver/nvidia/gpus"
    try:
        for bus in sorted(os.listdir(base)):
            try:
                with open(os.path.join(base, bus, "information")) as f:
                    for line in f:
                        if line.startswith("Model:"):
                            models.append(line.split(":", 1)[1].strip())
            except OSError:
                pass
    except OSError:
        pass
    if models:
        return models
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=10, check=False,
        )
        if out.returncode == 0:
            models = [l.strip() for l in out.stdout.decode("utf-8", "replace").splitlines() if l.strip()]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return models


# ---------------------------------------------------------------------------------------------
# Processes


HYPERLOOM_REF = re.compile(r"\$(?:\{(HYPERLOOM_[A-Z_]+)\}|(HYPERLOOM_[A-Z_]+))")


def expand(arg, env):
    """$HYPERLOOM_X / ${HYPERLOOM_X} in a client argument, from env (the client runs without a
    shell, and the port is only known here); any other text, and unknown names, stay as they are."""
    def one(m):
        name = m.group(1) or m.group(2)
        return env.get(name, m.group(0))
    return HYPERLOOM_REF.sub(one, arg)


def free_port(host):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def last_line(path, limit=4096):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [l.strip() for l in data.replace("\r", "\n").split("\n") if l.strip()]
    return lines[-1][:300] if lines else ""


def probe(url, timeout=1.0):
    """True when GET url answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False
    except Exception:
        return False


class Runner:
    def __init__(self, args):
        self.args = args
        self.stop_requested = threading.Event()
        self.server_group = None
        self.server = None
        self.server_started = None
        self.server_pgid = None
        self.server_exit = None
        self.server_runtime = None
        self.ready_sec = None
        self.stopped_with = None
        self.client = None
        self.client_exit = None
        self.client_runtime = None
        self.outcome = None
        self.port = None
        self.base_url = None
        self.node = {}

    # -- status

    def write_status(self, gone):
        a = self.args
        doc = {
            "version": 1,
            "port": self.port,
            "base_url": self.base_url,
            "outcome": self.outcome,
            "server": {
                "argv": ["sh", "-c", a["server"]],
                "pid": self.server.pid if self.server else None,
                "pgid": self.server_pgid,
                "ready_sec": self.ready_sec,
                "exit_code": self.server_exit,
                "runtime_sec": self.server_runtime,
                "stopped_with": self.stopped_with,
                "gone": gone,
            },
            "client": None
            if self.client is None
            else {"argv": a["client"], "exit_code": self.client_exit, "runtime_sec": self.client_runtime},
            "node": self.node,
        }
        path = os.path.join(a["dir"], STATUS_FILE)
        try:
            jsonfile.write(path, doc)
        except OSError as e:
            log("cannot write %s: %s" % (path, e))

    # -- the server

    def start_server(self, env):
        a = self.args
        # The keeper leads the server's group; only we hold its pipe's write end, which closes
        # when we end, however.
        self.server_group = keeper.Group()
        self.server_pgid = self.server_group.pgid
        logf = open(os.path.join(a["dir"], SERVER_LOG), "ab", buffering=0)

        try:
            self.server = subprocess.Popen(
                ["sh", "-c", a["server"]], stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                env=env, cwd=a["cwd"], close_fds=True, preexec_fn=self.server_group.join(),
            )
        finally:
            logf.close()
        self.server_started = time.monotonic()

    def server_alive(self):
        if self.server is None:
            return False
        if self.server.poll() is None:
            return True
        if self.server_exit is None:
            rc = self.server.returncode
            self.server_exit = procgroup.exit_code(rc)
            self.server_runtime = round(time.monotonic() - self.server_started, 3)
        return False

    def stop_server(self):
        """TERM the server's group, grace, KILL; returns once none of it is left (or /proc cannot tell)."""
        if self.server_group is None:
            return True
        # "TERM" or "KILL", whichever ended it (None: nothing was left to stop)
        how, gone = self.server_group.stop(self.args["stop_grace"], poll=self.server_alive)
        if how is not None:
            self.stopped_with = how
        self.server_alive()
        return gone

    # -- the client

    def run_client(self, env):
        a = self.args
        tee = Tee(os.path.join(a["dir"], CLIENT_LOG), log)
        started = time.monotonic()
        try:
            self.client = subprocess.Popen(
                [expand(x, env) for x in a["client"]], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=env, cwd=a["cwd"], close_fds=True,
            )
        except OSError as e:
            msg = "hyperloom-serve: cannot start the client %s: %s\n" % (a["client"][0], e.strerror or e)
            tee.note(msg.encode())
            tee.close()
            sys.stderr.write(msg)
            self.client_exit = 127
            self.client_runtime = 0.0
            self.client = subprocess.Popen(["true"])  # a record of it; exits at once
            self.client.wait()
            return

        tee.start(self.client)
        while self.client.poll() is None:
            if self.stop_requested.wait(0.1):
                # Stopped: TERM the client, and stop the server at the same time (the lease's
                # grace covers both together); the client is KILLed after that if still there.
                try:
                    self.client.terminate()
                except OSError:
                    pass
                self.stop_server()
                try:
                    self.client.wait(0.5)
                except subprocess.TimeoutExpired:
                    self.client.kill()
                    self.client.wait()
                break
        tee.close()
        rc = self.client.returncode
        self.client_exit = procgroup.exit_code(rc)
        self.client_runtime = round(time.monotonic() - started, 3)

    # -- the whole attempt

    def run(self):
        a = self.args
        self.node = node_facts()
        self.port = free_port("127.0.0.1")
        self.base_url = "http://127.0.0.1:%d" % self.port
        env = dict(os.environ)
        env["HYPERLOOM_PORT"] = str(self.port)
        env["HYPERLOOM_BASE_URL"] = self.base_url
        try:
            self.start_server(env)
        except OSError as e:
            log("cannot start the server: %s" % (e.strerror or e))
            self.outcome = "start_failed"
            self.stop_server()
            self.write_status(True)
            return NOT_READY_EXIT
        url = self.base_url + a["ready_path"]
        log("server started (pid %d, process group %d, port %d); waiting for %s to answer 200 (ready timeout %s s)"
            % (self.server.pid, self.server_pgid, self.port, url, fmt(a["ready_timeout"])))
        self.write_status(False)
        next_progress = time.monotonic() + a["progress_every"]
        port = listener.Watch(self.port, os.path.join(a["dir"], SERVER_LOG))
        while True:
            if self.stop_requested.is_set():
                return self.finish("stopped", STOPPED_EXIT)
            if port.check(self.server.pid, self.server_pgid, now=not self.server_alive()):
                log(port.taken)  # another process took the engine's port: its answers are not the engine's
                return self.finish("port_taken", NOT_READY_EXIT)
            if not self.server_alive():
                log("the server exited with code %d after %s s, before it was ready; server.log ends: %s"
                    % (self.server_exit, fmt(self.server_runtime), last_line(os.path.join(a["dir"], SERVER_LOG))))
                return self.finish("server_exited", NOT_READY_EXIT)
            elapsed = time.monotonic() - self.server_started
            if probe(url) and not port.check(self.server.pid, self.server_pgid, now=True):
                self.ready_sec = round(elapsed, 3)
                log("server ready after %s s" % fmt(self.ready_sec))
                break
            if elapsed >= a["ready_timeout"]:
                log("the server was not ready within %s s; stopping it; server.log ends: %s"
                    % (fmt(a["ready_timeout"]), last_line(os.path.join(a["dir"], SERVER_LOG))))
                return self.finish("ready_timeout", NOT_READY_EXIT)
            if time.monotonic() >= next_progress:
                next_progress = time.monotonic() + a["progress_every"]
                log("waiting for the server: %s s; server.log: %s"
                    % (fmt(round(elapsed)), last_line(os.path.join(a["dir"], SERVER_LOG)) or "(empty)"))
            self.stop_requested.wait(0.25)
        self.write_status(False)
        self.run_client(env)
        if self.stop_requested.is_set():
            return self.finish("stopped", STOPPED_EXIT)
        if not self.server_alive():
            log("the server exited with code %d while the client ran" % self.server_exit)
        return self.finish("client_exited", self.client_exit)

    def finish(self, outcome, code):
        self.outcome = outcome
        gone = self.stop_server()
        if not gone:
            log("could not confirm that the server's process group %s is gone" % self.server_pgid)
        self.write_status(gone)
        return code


def fmt(s):
    if s is None:
        return "?"
    return str(int(s)) if float(s).is_integer() else "%.1f" % s


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ValueError(message)


def add_runner_flags(p):
    """The flags both runners (this one and hyperloom.sweep) take, every one required: their
    defaults live in hyperloom's domain/Serving.ts, which always passes them all."""
    p.add_argument("--server", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--cwd", required=True)
    p.add_argument("--ready-path", required=True)
    p.add_argument("--ready-timeout", type=float, required=True)
    p.add_argument("--stop-grace", type=float, required=True)
    p.add_argument("--progress-every", type=float, required=True)


def parse(argv):
    p = _Parser(prog="python PYDIR serve", add_help=False, allow_abbrev=False)
    add_runner_flags(p)
    p.add_argument("client", nargs=argparse.REMAINDER)
    ns = p.parse_args(argv)
    client = ns.client[1:] if ns.client[:1] == ["--"] else None
    if not ns.server or not ns.dir or not client:
        raise ValueError("--server, --dir and a client command after -- are required")
    a = vars(ns)
    a["client"] = client
    if not a["ready_path"].startswith("/"):
        a["ready_path"] = "/" + a["ready_path"]
    return a


def main(argv):
    try:
        args = parse(argv)
    except ValueError as e:
        log("usage: %s" % e)
        return 2
    os.makedirs(args["dir"], exist_ok=True)
    runner = Runner(args)

    def on_stop(signum, frame):
        runner.stop_requested.set()

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_stop)
    try:
        code = runner.run()
    except BaseException as e:  # a bug here must still take the server down
        log("internal error: %r" % (e,))
        runner.outcome = runner.outcome or "stopped"
        runner.write_status(runner.stop_server())
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return code

