"""The lease actor: it holds a lease's resources in Ray (its GPUs, the serving slot) while it
runs the lease's command through the supervisor (hyperloom.supervisor) and streams the command's
output and exit back to the bridge that owns it.

This module is pickled by value with the actor class (hyperloom.shipping.register_by_value): a
node that has only Ray runs it. The supervisor is started as `python -I PYDIR supervise ...`,
PYDIR being this package's folder when the node has it unchanged, else a copy of the
supervisor's files (which travel with the class: hyperloom.shipping) in a folder of this user's
under the node's temporary directory."""

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

from hyperloom import fence, gone, gpus, procgroup
from hyperloom.gone import END_PATIENCE_SEC, END_TIMEOUT_SEC
from hyperloom.shipping import RUNNER_FILES, package_files, runnable_dir, supervisor_files

DEVICE_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
MAX_LINE_BYTES = 64 * 1024


def supervisor_command(pydir, status_fd, grace, cwd, owner, argv, gpu_clean=None, hold_fd=None, token=None):
    """The supervisor's argv: its status pipe, its parent (this worker), the grace, CMD's cwd, the
    lease's owner when it runs on this host (its keeper watches it), the leased GPUs and the
    clean-GPU gate's timeout (`gpu_clean`: {"gpus": [ids], "timeout_sec": S}), the pipe a group
    rank's start waits on (`hold_fd`), the lease's token (hyperloom.gone), then CMD."""
    cmd = [
        sys.executable, "-I", pydir, "supervise",
        "--status-fd", str(status_fd), "--parent", str(os.getpid()), "--grace", str(grace),
    ]
    if token is not None:
        cmd += ["--lease-token", token]
    if hold_fd is not None:
        cmd += ["--hold-fd", str(hold_fd)]
    if gpu_clean and gpu_clean.get("gpus"):
        cmd += ["--gpus=" + ",".join(str(g) for g in gpu_clean["gpus"])]
        cmd += ["--gpu-clean-timeout", str(gpu_clean["timeout_sec"])]
    if cwd:
        cmd.append("--cwd=" + cwd)  # one word: a folder may start with "-"
    if owner and owner.get("pid") and owner.get("host") == host_identity():
        cmd += ["--owner-pid", str(owner["pid"])]
        if owner.get("start") is not None:
            cmd += ["--owner-start", str(owner["start"])]
    return cmd + ["--"] + [str(a) for a in argv]


def leased_gpus(ray, timeout_sec):
    """The clean-GPU gate's request for the supervisor: this actor's GPUs (as Ray assigned them,
    the indices CUDA_VISIBLE_DEVICES names) and the wait; None for a lease without GPUs."""
    try:
        ids = [int(g) for g in ray.get_gpu_ids() if str(g).isdigit()]
    except Exception:
        ids = []
    if not ids:
        return None
    return {"gpus": ids, "timeout_sec": float(timeout_sec)}


def command_env(ray, env):
    """CMD's environment: `env`, the node's Ray id (HYPERLOOM_RAY_NODE_ID, for what the command
    records of its node: a sweep's node facts), and this actor's device variables (set by Ray for
    its GPUs) laid over it: they win."""
    merged = dict(env or {})
    try:
        merged["HYPERLOOM_RAY_NODE_ID"] = ray.get_runtime_context().get_node_id()
    except Exception:
        pass
    for k in DEVICE_VARS:
        v = os.environ.get(k)
        if v is not None:
            merged[k] = v
    return merged


def read_output(events, name, pipe, raw_output):
    """CMD's `name` stream ("stdout", "stderr") as events on `events`: byte chunks exactly as CMD
    wrote them (`raw_output`), else lines without their end (at most MAX_LINE_BYTES each); then
    its end."""
    try:
        while raw_output:
            data = os.read(pipe.fileno(), MAX_LINE_BYTES)
            if not data:
                return
            events.put(("data", name, data))
        while True:
            raw = pipe.readline(MAX_LINE_BYTES)
            if not raw:
                break
            if raw.endswith(b"\n"):
                raw = raw[:-1]
                if raw.endswith(b"\r"):
                    raw = raw[:-1]
            events.put(("line", name, raw.decode("utf-8", "replace")))
    finally:
        events.put(("eof", name, None))


def read_status(events, fd, containment):
    """The supervisor's status pipe (`fd`) as events: "pid N" or "failed", "gpu_busy"/"gpu_wait"
    (hyperloom.gpus.supervisor_gate), "clean", "exit N"; then its end. How CMD is contained
    ("cgroup" or "subreaper") goes to containment[0]."""
    try:
        with os.fdopen(fd, "rb") as f:
            for raw in f:
                text = raw.decode("utf-8", "replace")
                word = text.split(" ", 1)[0]
                if word in ("gpu_busy", "gpu_wait"):
                    events.put((word, json.loads(text[len(word) + 1 :]), None))
                    continue
                parts = text.split()
                if len(parts) == 2 and parts[0] in ("pid", "exit"):
                    events.put((parts[0], int(parts[1]), None))
                elif len(parts) == 2 and parts[0] == "containment":
                    containment[0] = parts[1]
                elif parts == ["failed"]:
                    events.put(("pid", None, None))
                elif parts == ["clean"]:
                    events.put(("clean", None, None))
    finally:
        events.put(("eof", "status", None))


def watch_supervisor(proc, status_fd, raw_output):
    """Everything the supervisor tells, as one queue of (kind, a, b) events, each source read by
    a thread of its own: CMD's stdout and stderr, the status pipe, the supervisor's own exit
    ("proc_exit"). And the list whose one item becomes the containment it reports."""
    events = queue.Queue()
    containment = [None]

    def wait_proc():
        events.put(("proc_exit", proc.wait(), None))

    for target, args in (
        (read_output, (events, "stdout", proc.stdout, raw_output)),
        (read_output, (events, "stderr", proc.stderr, raw_output)),
        (read_status, (events, status_fd, containment)),
        (wait_proc, ()),
    ):
        threading.Thread(target=target, args=args, daemon=True).start()
    return events, containment


class LeaseActor:
    """The lease actor's behaviour (each group rank's too); `make_actor_class` makes the class Ray
    runs from it, with Ray itself (`_ray`), the supervisor's files (`_files`) and the runners'
    (`_runner`, or None) as class attributes."""

    _ray = None
    _files = None
    _runner = None

    def __init__(self):
        self._proc = None
        self._stopped = False
        self._lock = threading.Lock()
        self._spawned = threading.Event()  # run has started the supervisor (or never will)
        self._hold = None  # a group rank's word to start CMD: the write end of --hold-fd
        self._last_beat = time.monotonic()  # when the bridge was last heard from (`beat`)

    def beat(self):
        """The bridge is still there (the heartbeat fence: hyperloom.fence)."""
        self._last_beat = time.monotonic()

    def run(self, argv, env, cwd, grace, owner=None, stdin=False, raw_output=False, gpu_clean_timeout=None,
            hold=False, token=None, own_entry=False, heartbeat=None, beater_node=None):
        """Streams CMD's events. `stdin`: CMD reads a pipe that `feed` writes (else /dev/null).
        `raw_output`: output events carry byte chunks ({"data": bytes}) exactly as CMD wrote
        them, else lines decoded as UTF-8 (with replacement; lines over MAX_LINE_BYTES split).
        `gpu_clean_timeout`: the clean-GPU gate's wait before CMD starts (hyperloom.gpus).
        `hold` (a group rank): once the gate has passed, an event {"event": "gpu_clean"}, and
        CMD starts only on `go` (the group bridge says so once every rank is clean).
        `token`: the lease's token (hyperloom.gone), by which its bridge finds what is left of
        the lease on this node should this worker die. `own_entry` (a class made
        with_runner): argv is [PYTHON, PYDIR, COMMAND, ...] of the bridge's host; COMMAND runs
        with this node's Python and PYDIR (the bridge's own, or a copy of the runners' files).
        `heartbeat` (seconds): the fence (hyperloom.fence): with no `beat` for that long the
        bridge is unreachable, and CMD is stopped (TERM, the grace, KILL) before Ray can
        declare this node dead and grant its slot again; not when this actor runs on
        `beater_node`, the bridge's own node (no cut comes between them; the keeper watches
        the bridge there). None: no fence."""
        pydir = runnable_dir(self._files)
        if own_entry and self._runner is not None:
            argv = [sys.executable, "-I", runnable_dir(self._runner)] + list(argv[2:])
        gpu_clean = leased_gpus(self._ray, gpu_clean_timeout)
        merged = command_env(self._ray, env)
        spawned = self._spawn(
            lambda status_fd, hold_fd: supervisor_command(pydir, status_fd, grace, cwd, owner, argv, gpu_clean, hold_fd, token),
            merged, stdin, hold,
        )
        if spawned is None:
            return
        proc, r = spawned
        events, containment = watch_supervisor(proc, r, raw_output)
        done = threading.Event()
        if heartbeat and beater_node != self._ray.get_runtime_context().get_node_id():
            self._last_beat = time.monotonic()

            def on_silent(silent):
                line = fence.silent_line("lease", silent)
                sys.stderr.write(line + "\n")
                events.put(("fenced", line, None))
                self.stop(grace)

            fence.watch(lambda: self._last_beat, heartbeat, done, on_silent)

        started = False
        pending = []  # output seen before the supervisor said whether CMD started
        exit_code = None
        proc_rc = None
        open_streams = {"stdout", "stderr", "status"}
        drain_deadline = None
        left = None  # what gone.end left, once it ran (the supervisor died without reporting the end)
        fenced = None  # the fence's line, once it stopped CMD (the bridge went silent)
        while True:
            timeout = None
            if drain_deadline is not None:
                timeout = max(0.0, drain_deadline - time.monotonic())
            try:
                kind, a, b = events.get(timeout=timeout)
            except queue.Empty:
                break  # something outside the group still holds CMD's output open
            batch = [(kind, a, b)]
            while len(batch) < 1000:
                try:
                    batch.append(events.get_nowait())
                except queue.Empty:
                    break
            out = []
            for kind, a, b in batch:
                if kind == "line":
                    ev = {"event": "output", "stream": a, "line": b}
                    (out if started else pending).append(ev)
                elif kind == "data":
                    ev = {"event": "output", "stream": a, "data": b}
                    (out if started else pending).append(ev)
                elif kind == "eof":
                    open_streams.discard(a)
                elif kind == "pid" and not started:
                    started = True
                    out.append(self._started_event(a, proc.pid, containment[0]))
                    out.extend(pending)
                    pending = []
                elif kind == "gpu_busy":  # before "failed": the lease ends with class gpu_busy
                    # The holders' pids are this node's: name it (a group rank's may be remote).
                    out.append(dict(a, event="gpu_busy", **self._node()))
                elif kind == "clean":  # a held rank's GPUs are clean: it waits for `go`
                    out.append({"event": "gpu_clean"})
                elif kind == "fenced":  # the bridge went silent: CMD is being stopped
                    fenced = a
                    (out if started else pending).append({"event": "output", "stream": "stderr", "line": a})
                elif kind == "gpu_wait":  # told at once, not held back until the start
                    out.append({"event": "output", "stream": "stderr", "line": gpus.wait_line(a)})
                elif kind == "exit":
                    exit_code = a
                elif kind == "proc_exit":
                    proc_rc = a
                    drain_deadline = time.monotonic() + 2.0
            if proc_rc is not None and not started and "status" not in open_streams:
                # The supervisor ended without reporting a start (killed early).
                started = True
                out.insert(0, self._started_event(None, proc.pid))
                out.extend(pending)
                pending = []
            if proc_rc is not None and exit_code is None and "status" not in open_streams and left is None:
                # The supervisor died without reporting the end, and nothing else may stop what
                # is left (its keeper may be gone as well): end it now, by the token, so that
                # CMD's output closes at once instead of after the drain's wait.
                left = gone.end(token, END_PATIENCE_SEC, END_TIMEOUT_SEC) if token is not None else []
                drain_deadline = time.monotonic() + 2.0
            if out:
                yield out
            if proc_rc is not None and not open_streams:
                break
        done.set()
        self._let_go()
        if not started:
            yield [self._started_event(None, proc.pid)] + pending
        if exit_code is None:
            exit_code = procgroup.exit_code(proc_rc)
            if token is not None:
                # The exit ends the lease: what is left of it was ended above, or is now (the
                # drain ran out first); whatever still runs is said.
                if left is None or left:
                    left = gone.end(token, END_PATIENCE_SEC, END_TIMEOUT_SEC)
                if left:
                    line = "hyperloom: the lease ends with %s still running" % ", ".join(left)
                    yield [{"event": "output", "stream": "stderr", "line": line}]
        # A fenced end says so: for the bridge, its node was lost (cut off), not CMD's own end.
        yield [dict({"event": "exit", "code": exit_code}, **({"fenced": fenced} if fenced else {}))]

    def _spawn(self, command, env, stdin, hold):
        """Starts the supervisor, `command(status_fd, hold_fd)` its argv, in a session of its
        own: (its process, the read end of its status pipe); None when the lease was released
        first (CMD never starts). `hold`: a pipe whose read end the supervisor waits on."""
        r, w = os.pipe()
        hold_r, hold_w = os.pipe() if hold else (None, None)
        try:
            cmd = command(w, hold_r)
        except BaseException:
            for fd in (r, w, hold_r, hold_w):
                if fd is not None:
                    os.close(fd)
            raise
        with self._lock:
            if self._stopped:  # released before CMD started: never start it
                for fd in (r, w, hold_r, hold_w):
                    if fd is not None:
                        os.close(fd)
                self._spawned.set()
                return None
            try:
                proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=env,
                    start_new_session=True,
                    pass_fds=(w,) if hold_r is None else (w, hold_r),
                    close_fds=True,
                )
            except BaseException:
                os.close(r)
                if hold_w is not None:
                    os.close(hold_w)
                self._spawned.set()
                raise
            finally:
                os.close(w)
                if hold_r is not None:
                    os.close(hold_r)
            self._proc = proc
            self._hold = hold_w
            self._spawned.set()
        return proc, r

    def _node(self):
        try:
            address = self._ray.util.get_node_ip_address()
        except Exception:
            address = None
        return {"node_id": self._ray.get_runtime_context().get_node_id(), "node_address": address}

    def go(self):
        """A held rank (run's `hold`): start CMD now. False when it is no longer held."""
        with self._lock:
            fd, self._hold = self._hold, None
        if fd is None:
            return False
        try:
            os.write(fd, b"g")
            return True
        except OSError:
            return False
        finally:
            os.close(fd)

    def _let_go(self):
        """Closes a hold not given (EOF: the supervisor never starts CMD)."""
        with self._lock:
            fd, self._hold = self._hold, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def _started_event(self, pid, supervisor, containment=None):
        return {
            "event": "started",
            "pid": pid,
            "pgid": pid if pid is not None else supervisor,  # CMD leads a group of its own
            "containment": containment,
            "actor_pid": os.getpid(),
            "node_id": self._ray.get_runtime_context().get_node_id(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        }

    def feed(self, data):
        """Writes `data` (bytes) to CMD's stdin, or closes it (None: EOF). Waits until run has
        started the supervisor. False once CMD's stdin is gone (it ended, or closed it)."""
        self._spawned.wait()
        proc = self._proc
        if proc is None or proc.stdin is None:
            return False
        try:
            if data is None:
                proc.stdin.close()
                return False
            proc.stdin.write(data)
            proc.stdin.flush()
            return True
        except (OSError, ValueError):  # EPIPE: nobody reads it any more
            try:
                proc.stdin.close()
            except (OSError, ValueError):
                pass
            return False

    def stop(self, grace):
        """TERM to the supervisor (it stops every process of the lease, KILLs after `grace`)."""
        with self._lock:
            self._stopped = True
            proc = self._proc
            self._spawned.set()
        self._let_go()  # a held rank never starts CMD now
        if proc is None:
            return None
        # Popen's own send_signal: never to a pid already reaped (it may be another process's now).
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
            except OSError:
                pass
            try:
                proc.wait(grace + 2.0)
            except subprocess.TimeoutExpired:
                pass
        try:
            # A supervisor that hung: KILL it alone; its keeper then KILLs all of the lease.
            proc.kill()
        except OSError:
            pass
        try:
            return proc.wait(2.0)
        except subprocess.TimeoutExpired:
            return None


def make_actor_class(ray, with_runner=False):
    """The lease actor's class (each group rank's too), for `ray.remote`. Built here, on the
    bridge's host, with the supervisor's files read from this package: they travel with the
    class (this package is pickled by value), so the actor's node needs only Ray. `with_runner`:
    the runners' files too (a lease whose command is hyperloom's own runner: `run`'s own_entry)."""

    class HyperloomLease(LeaseActor):
        _ray = ray
        _files = supervisor_files()
        _runner = package_files(RUNNER_FILES) if with_runner else None

        @ray.method(num_returns="streaming")
        def run(self, *args, **kwargs):
            """LeaseActor.run, streamed by Ray."""
            yield from LeaseActor.run(self, *args, **kwargs)

    # Ray names actors by their class's qualified name: not "make_actor_class.<locals>.…".
    HyperloomLease.__qualname__ = "HyperloomLease"
    return HyperloomLease



def actor_options(spec, **extra):
    """The lease actor's options (each group rank's too): no CPU, the request's GPUs and serving
    slot, no restarts or retries (a dead actor ends the lease), room for `stop` beside `run`."""
    options = dict(num_cpus=0, num_gpus=spec["gpus"], max_concurrency=4, max_restarts=0, max_task_retries=0, **extra)
    if spec["serving_slot"]:
        options["resources"] = {"serving_slot": 1}
    return options


def lease_bundle(spec):
    """What a lease holds in Ray, as a placement group's bundle: its GPUs and the serving slot."""
    bundle = {}
    if spec["gpus"] > 0:
        bundle["GPU"] = spec["gpus"]
    if spec["serving_slot"]:
        bundle["serving_slot"] = 1
    return bundle


def host_identity():
    """This host's boot id and pid namespace: equal on both sides means the same pids."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        return "%s/%d" % (boot, os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return None


def owner_info():
    """Who owns the lease (this bridge), for the keeper to watch when it runs on the same host."""
    host = host_identity()
    if host is None:
        return None
    pid = os.getpid()
    return {"pid": pid, "start": procgroup.start_time(pid), "host": host}
