"""The serving engine's life on the leased node, the one copy both runners use (hyperloom.serve:
one serving attempt; hyperloom.sweep: one server combination): their flags, the node's facts,
a free port, the engine started (`sh -c`) in a process group led by a keeper (hyperloom.keeper),
whether it is alive, the wait until GET BASE_URL/READY_PATH answers 200 from the engine itself
(hyperloom.listener), and its stop (TERM, grace, KILL) confirmed gone. Each runner keeps only
its loop and its status document. Standard library only; Python >= 3.8; Linux."""

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from hyperloom import keeper, listener, procgroup

SERVER_LOG = "server.log"
CLIENT_LOG = "client.log"
NOT_READY_EXIT = 3  # the engine never answered: it exited, timed out, or its port was taken
STOPPED_EXIT = 143  # SIGTERM/SIGINT/SIGHUP: the lease is going
# How often the wait for the engine looks at it (alive, its port, the ready probe).
READY_POLL_SEC = 0.1


# ---------------------------------------------------------------------------------------------
# The runners' flags


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ValueError(message)


def parse(prog, argv, client=False):
    """The runner's flags, every one required (their defaults live in hyperloom's
    domain/Serving.ts, which always passes them all), as one namespace (`a.dir`, `a.server`...);
    `client`: a client argv after `--` too (`a.client`). Raises ValueError (a usage error)."""
    p = _Parser(prog=prog, add_help=False, allow_abbrev=False)
    p.add_argument("--server", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--cwd", required=True)
    p.add_argument("--ready-path", required=True)
    p.add_argument("--ready-timeout", type=float, required=True)
    p.add_argument("--stop-grace", type=float, required=True)
    p.add_argument("--progress-every", type=float, required=True)
    p.add_argument("--check", required=True)  # '' for none (hyperloom.ready)
    p.add_argument("--warmup", type=int, required=True)
    if client:
        p.add_argument("client", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    if client:
        a.client = a.client[1:] if a.client[:1] == ["--"] else None
        if not a.server or not a.dir or not a.client:
            raise ValueError("--server, --dir and a client command after -- are required")
    if not a.ready_path.startswith("/"):
        a.ready_path = "/" + a.ready_path
    return a


def run_stoppable(runner, on_error):
    """Runs `runner.run()` with SIGTERM/SIGINT/SIGHUP setting `runner.stop_requested` (the lease
    going, Ctrl-C); a bug inside still takes the engine down (`on_error`), exit 1."""
    def on_stop(signum, frame):
        runner.stop_requested.set()

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_stop)
    try:
        return runner.run()
    except BaseException as e:
        runner.log("internal error: %r" % (e,))
        on_error()
        return 1


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
# Small helpers


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


def fmt(s):
    if s is None:
        return "?"
    return str(int(s)) if float(s).is_integer() else "%.1f" % s


# ---------------------------------------------------------------------------------------------
# The engine


class Engine:
    """One engine (`sh -c COMMAND` in `cwd`, its whole output in `log_path`) on a free port of
    127.0.0.1, in a process group led by a keeper: the group is SIGKILLed the moment this runner
    ends, however it ends. `noun` names it in the runner's stderr lines ("server", "engine")."""

    def __init__(self, command, cwd, log_path, noun, log):
        self.command = command
        self.cwd = cwd
        self.log_path = log_path
        self.noun = noun
        self.log = log
        self.port = None
        self.base_url = None
        self.group = None
        self.pgid = None
        self.proc = None
        self.started = None
        self.exit_code = None
        self.runtime_sec = None
        self.ready_sec = None
        self.stopped_with = None  # "TERM" or "KILL", whichever ended it at the stop

    @property
    def argv(self):
        return ["sh", "-c", self.command]

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    def environment(self):
        """Picks the engine's port: this runner's environment plus HYPERLOOM_PORT and
        HYPERLOOM_BASE_URL, for the engine and every client."""
        self.port = free_port("127.0.0.1")
        self.base_url = "http://127.0.0.1:%d" % self.port
        env = dict(os.environ)
        env["HYPERLOOM_PORT"] = str(self.port)
        env["HYPERLOOM_BASE_URL"] = self.base_url
        return env

    def start(self, env):
        """Starts the engine; raises OSError when it cannot (the group is then stopped by `stop`)."""
        # The keeper leads the engine's group; only we hold its pipe's write end, which closes
        # when we end, however.
        self.group = keeper.Group()
        self.pgid = self.group.pgid
        logf = open(self.log_path, "ab", buffering=0)
        try:
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                env=env, cwd=self.cwd, close_fds=True, preexec_fn=self.group.join(),
            )
        finally:
            logf.close()
        self.started = time.monotonic()

    def alive(self):
        """Whether the engine runs; its exit code and runtime are recorded when it is seen ended."""
        if self.proc is None:
            return False
        if self.proc.poll() is None:
            return True
        if self.exit_code is None:
            self.exit_code = procgroup.exit_code(self.proc.returncode)
            self.runtime_sec = round(time.monotonic() - self.started, 3)
        return False

    def stop(self, grace):
        """TERM the engine's group, `grace` seconds, KILL; True once none of it is left (False:
        /proc cannot tell)."""
        if self.group is None:
            return True
        how, gone = self.group.stop(grace, poll=self.alive)
        if how is not None:
            self.stopped_with = how
        self.alive()
        return gone

    def wait_ready(self, ready_path, ready_timeout, progress_every, stop_requested):
        """Polls GET BASE_URL/READY_PATH until it answers 200 from the engine itself, a progress
        line every `progress_every` seconds. None once ready (`ready_sec` set), else why not:
        "stopped", "port_taken" (another process took the engine's port: its answers are not the
        engine's), "server_exited", "ready_timeout"."""
        url = self.base_url + ready_path
        noun = self.noun
        self.log("%s started (pid %d, process group %d, port %d); waiting for %s to answer 200 (ready timeout %s s)"
                 % (noun, self.proc.pid, self.pgid, self.port, url, fmt(ready_timeout)))
        next_progress = time.monotonic() + progress_every
        port = listener.Watch(self.port, self.log_path)
        while True:
            if stop_requested.is_set():
                return "stopped"
            if port.check(self.proc.pid, self.pgid, now=not self.alive()):
                self.log(port.taken)
                return "port_taken"
            if not self.alive():
                self.log("the %s exited with code %d after %s s, before it was ready; server.log ends: %s"
                         % (noun, self.exit_code, fmt(self.runtime_sec), last_line(self.log_path)))
                return "server_exited"
            elapsed = time.monotonic() - self.started
            if probe(url) and not port.check(self.proc.pid, self.pgid, now=True):
                self.ready_sec = round(elapsed, 3)
                self.log("%s ready after %s s" % (noun, fmt(self.ready_sec)))
                return None
            if elapsed >= ready_timeout:
                self.log("the %s was not ready within %s s; stopping it; server.log ends: %s"
                         % (noun, fmt(ready_timeout), last_line(self.log_path)))
                return "ready_timeout"
            if time.monotonic() >= next_progress:
                next_progress = time.monotonic() + progress_every
                self.log("waiting for the %s: %s s; server.log: %s"
                         % (noun, fmt(round(elapsed)), last_line(self.log_path) or "(empty)"))
            stop_requested.wait(READY_POLL_SEC)
