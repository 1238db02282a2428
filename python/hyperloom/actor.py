"""The lease actor: it holds a lease's resources in Ray (its GPUs, the serving slot) while it
runs the lease's command through the supervisor (hyperloom.supervisor) and streams the command's
output and exit back to the bridge that owns it.

This module is pickled by value with the actor class (see `register_by_value`): a node that has
only Ray runs it. The supervisor is started as `python -I PYDIR supervise ...`, PYDIR being this
package's folder when the node has it unchanged, else a copy of the supervisor's files (which
travel with the class) in a folder of this user's under the node's temporary directory."""

import hashlib
import json
import os
import re
import queue
import signal
import sys
import tempfile
import threading
import time

from hyperloom import gone, gpus, procgroup

DEVICE_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
MAX_LINE_BYTES = 64 * 1024
# How long a lease's end waits for its keepers on a node before it kills what is left itself, and
# how long it may take in all before the lease's resources are let go regardless (said on stderr).
END_PATIENCE_SEC = 0.5
END_TIMEOUT_SEC = 30.0
# What `python -I PYDIR supervise` imports, relative to PYDIR (stdlib besides these).
SUPERVISOR_FILES = (
    "__main__.py",
    "hyperloom/__init__.py",
    "hyperloom/cgroup.py",
    "hyperloom/gone.py",
    "hyperloom/procgroup.py",
    "hyperloom/keeper.py",
    "hyperloom/gpus.py",
    "hyperloom/supervisor.py",
)
# What `python -I PYDIR serve|sweep` imports, relative to PYDIR: the runners travel with the lease
# like the supervisor (a node without the package runs them from a copy).
RUNNER_FILES = (
    "__main__.py",
    "hyperloom/__init__.py",
    "hyperloom/cgroup.py",
    "hyperloom/procgroup.py",
    "hyperloom/keeper.py",
    "hyperloom/tee.py",
    "hyperloom/jsonfile.py",
    "hyperloom/listener.py",
    "hyperloom/engine.py",
    "hyperloom/serve.py",
    "hyperloom/sweep.py",
)


def register_by_value(ray):
    """Pickle this package by value (its functions' and classes' code, not an import of them):
    the actor's node then needs only Ray, never these files. Call before `ray.remote`."""
    import hyperloom

    ray.cloudpickle.register_pickle_by_value(hyperloom)


def package_dir():
    """PYDIR: the folder holding __main__.py and hyperloom/, on this host."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def package_files(names):
    """Files of this package as this host has them: (PYDIR, {relative path: bytes})."""
    root = package_dir()
    contents = {}
    for rel in names:
        with open(os.path.join(root, rel), "rb") as f:
            contents[rel] = f.read()
    return root, contents


def supervisor_files():
    """The supervisor's files as this host has them: (PYDIR, {relative path: bytes})."""
    return package_files(SUPERVISOR_FILES)


def is_own_entry(argv):
    """Is argv hyperloom's own Python entry on this host: [PYTHON, PYDIR, COMMAND, ...]?"""
    if not argv or len(argv) < 3:
        return False
    try:
        return os.path.samefile(argv[1], package_dir())
    except OSError:
        return False


def _holds(root, contents):
    """True when folder `root` holds exactly these files' bytes."""
    for rel, data in contents.items():
        try:
            with open(os.path.join(root, rel), "rb") as f:
                if f.read() != data:
                    return False
        except OSError:
            return False
    return True


def runnable_dir(files):
    """A PYDIR on this node that runs the supervisor: the bridge's own when this node has it
    unchanged (the same host, or a shared file system), else a private copy, written once per
    content (the folder's name is its digest) under this user's folder in the temporary directory."""
    root, contents = files
    if _holds(root, contents):
        return root
    digest = hashlib.sha256()
    for rel in sorted(contents):
        digest.update(rel.encode() + b"\0" + contents[rel] + b"\0")
    base = os.path.join(tempfile.gettempdir(), "hyperloom-py-%d" % os.getuid())
    target = os.path.join(base, digest.hexdigest()[:20])
    if _holds(target, contents):
        return target
    try:
        os.mkdir(base, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(base)
    if not os.path.isdir(base) or os.path.islink(base) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise RuntimeError("%s is not a private folder of this user's: cannot place the supervisor" % base)
    tmp = tempfile.mkdtemp(dir=base)
    for rel, data in contents.items():
        path = os.path.join(tmp, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    try:
        os.rename(tmp, target)
    except OSError:  # another lease placed it first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    if not _holds(target, contents):
        raise RuntimeError("cannot place the supervisor's files in %s" % target)
    return target


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


def make_actor_class(ray, with_runner=False):
    """The lease actor's class (each group rank's too), for `ray.remote`. Built here, on the
    bridge's host, with the supervisor's files read from this package: they travel with the
    class (this package is pickled by value), so the actor's node needs only Ray. `with_runner`:
    the runners' files too (a lease whose command is hyperloom's own runner: `run`'s own_entry)."""
    import subprocess

    files = supervisor_files()
    runner = package_files(RUNNER_FILES) if with_runner else None

    class HyperloomLease:
        def __init__(self):
            self._proc = None
            self._stopped = False
            self._lock = threading.Lock()
            self._spawned = threading.Event()  # run has started the supervisor (or never will)
            self._hold = None  # a group rank's word to start CMD: the write end of --hold-fd

        @ray.method(num_returns="streaming")
        def run(self, argv, env, cwd, grace, owner=None, stdin=False, raw_output=False, gpu_clean_timeout=None,
                hold=False, token=None, own_entry=False):
            """Streams CMD's events. `stdin`: CMD reads a pipe that `feed` writes (else /dev/null).
            `raw_output`: output events carry byte chunks ({"data": bytes}) exactly as CMD wrote
            them, else lines decoded as UTF-8 (with replacement; lines over MAX_LINE_BYTES split).
            `gpu_clean_timeout`: the clean-GPU gate's wait before CMD starts (hyperloom.gpus).
            `hold` (a group rank): once the gate has passed, an event {"event": "gpu_clean"}, and
            CMD starts only on `go` (the group bridge says so once every rank is clean).
            `token`: the lease's token (hyperloom.gone), by which its bridge finds what is left of
            the lease on this node should this worker die. `own_entry` (a class made
            with_runner): argv is [PYTHON, PYDIR, COMMAND, ...] of the bridge's host; COMMAND runs
            with this node's Python and PYDIR (the bridge's own, or a copy of the runners' files)."""
            pydir = runnable_dir(files)
            if own_entry and runner is not None:
                argv = [sys.executable, "-I", runnable_dir(runner)] + list(argv[2:])
            gpu_clean = leased_gpus(ray, gpu_clean_timeout)
            merged = dict(env or {})
            # The node's Ray id, for what the command records of its node (a sweep's node facts).
            try:
                merged["HYPERLOOM_RAY_NODE_ID"] = ray.get_runtime_context().get_node_id()
            except Exception:
                pass
            for k in DEVICE_VARS:
                v = os.environ.get(k)
                if v is not None:
                    merged[k] = v
            r, w = os.pipe()
            hold_r, hold_w = os.pipe() if hold else (None, None)
            try:
                cmd = supervisor_command(pydir, w, grace, cwd, owner, argv, gpu_clean, hold_r, token)
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
                    return
                try:
                    proc = subprocess.Popen(
                        cmd,
                        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        env=merged,
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
            events = queue.Queue()

            def read_stream(name, pipe):
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

            containment = [None]  # "cgroup" or "subreaper", as the supervisor reports it

            def read_status():
                try:
                    with os.fdopen(r, "rb") as f:
                        for raw in f:
                            text = raw.decode("utf-8", "replace")
                            word = text.split(" ", 1)[0]
                            if word in ("gpu_busy", "gpu_wait"):  # hyperloom.gpus.supervisor_gate
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

            def wait_proc():
                events.put(("proc_exit", proc.wait(), None))

            for target, args in (
                (read_stream, ("stdout", proc.stdout)),
                (read_stream, ("stderr", proc.stderr)),
                (read_status, ()),
                (wait_proc, ()),
            ):
                threading.Thread(target=target, args=args, daemon=True).start()

            started = False
            pending = []  # output seen before the supervisor said whether CMD started
            exit_code = None
            proc_rc = None
            open_streams = {"stdout", "stderr", "status"}
            drain_deadline = None
            left = None  # what gone.end left, once it ran (the supervisor died without reporting the end)
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
            yield [{"event": "exit", "code": exit_code}]

        def _node(self):
            try:
                address = ray.util.get_node_ip_address()
            except Exception:
                address = None
            return {"node_id": ray.get_runtime_context().get_node_id(), "node_address": address}

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
                "node_id": ray.get_runtime_context().get_node_id(),
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

    # Ray names actors by their class's qualified name: not "make_actor_class.<locals>.…".
    HyperloomLease.__qualname__ = "HyperloomLease"
    return HyperloomLease


# ---------------------------------------------------------------------------------------------
# The bridge


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


def new_token():
    """A lease's token (hyperloom.gone): unique on every host, one word in an argv."""
    import secrets

    return "hl-" + secrets.token_hex(8)


def bundle_nodes(info, count):
    """The node of each of a placement group's `count` bundles, from its placement_group_table
    entry (keys are ints, or strings in some Ray versions); None for a bundle not placed."""
    nodes = info.get("bundles_to_node_id") or {}
    return [nodes.get(i, nodes.get(str(i))) or None for i in range(count)]


def end_on_node(ray, node_id, token, patience=END_PATIENCE_SEC, timeout=END_TIMEOUT_SEC):
    """Ends what is left of a lease on its node (hyperloom.gone.end): here when the node is this
    driver's own, else by a task on that node. What is left then, [] when gone; None when it could
    not be checked (the node is gone: so is all that ran on it)."""
    if node_id is None:
        return []
    try:
        own = ray.get_runtime_context().get_node_id()
    except Exception:
        own = None
    if node_id == own:
        return gone.end(token, patience, timeout)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    try:
        task = ray.remote(num_cpus=0, max_retries=0)(gone.end).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
        )
        return ray.get(task.remote(token, patience, timeout), timeout=timeout + 30.0)
    except Exception as e:
        sys.stderr.write("hyperloom: cannot check what is left of the lease on node %s: %s\n" % (node_id, e))
        return None


def end_before_letting_go(ray, node_id, token, who, whose):
    """end_on_node before `whose` resources are let go (by `who`, for the stderr line): says what
    still runs when the end ran out of time."""
    left = end_on_node(ray, node_id, token)
    if left:
        sys.stderr.write(
            "%s: letting %s resources go with %s still running after %g s\n" % (who, whose, ", ".join(left), END_TIMEOUT_SEC)
        )


# A lease's placement group is named for its lease and its tokens, one per bundle in bundle
# order (a single lease has one, a group one per rank): "<lease name> [hl-… hl-…]".
_TOKENS_IN_NAME = re.compile(r"\[(hl-[0-9a-f]{16}(?: hl-[0-9a-f]{16})*)\]$")


def hold_name(name, tokens):
    """The name of the placement group that holds a lease's resources: `tokens` (one, or one per
    bundle) are what is left of the lease is found by on each bundle's node (hyperloom.gone)."""
    if isinstance(tokens, str):
        tokens = [tokens]
    return "%s [%s]" % (name, " ".join(tokens))


def tokens_of(name):
    """The tokens in a lease's placement group's name (`hold_name`), one per bundle; None if none."""
    m = _TOKENS_IN_NAME.search(name or "")
    return m.group(1).split(" ") if m else None


def sweep_dead_leases(ray, patience=END_PATIENCE_SEC, timeout=5.0, jobs=None):
    """Removes the placement groups of leases whose bridge died, once nothing of them runs.

    A lease's group is detached: the death of its bridge (the job's driver) does not free it, as
    the GCS would at once, while the lease's own watchers are still stopping its command. Any
    bridge sweeps them up as it starts and while its own lease waits, and so does the CLI whose
    bridge died (hyperloom.tidy): a group named for a lease (`hold_name`), created by a job that
    is dead, goes once hyperloom.gone finds nothing of that lease on any of its bundles' nodes
    (after killing what this user may kill). One whose processes are still there (another
    user's, or not yet dead) is left for a later sweep. `jobs`: only those jobs' groups (hex ids).
    Returns (how many it removed, the names of those it left)."""
    from ray._raylet import PlacementGroupID
    from ray.util.placement_group import PlacementGroup, placement_group_table, remove_placement_group

    try:
        table = placement_group_table()
        dead = {j.get("JobID") for j in ray._private.state.state.job_table() if j.get("IsDead")}
    except Exception:
        return 0, []
    removed, left_ = 0, []
    for pgid, info in table.items():
        tokens = tokens_of(info.get("name"))
        # A placement group's id ends with its creator job's id.
        job = pgid[-8:]
        if tokens is None or info.get("state") == "REMOVED" or (jobs is not None and job not in jobs):
            continue
        if job not in dead:
            if jobs is not None:
                left_.append(info.get("name"))
            continue
        left = []
        if info.get("state") != "PENDING":
            for node, token in zip(bundle_nodes(info, len(tokens)), tokens):
                left = end_on_node(ray, node, token, patience, timeout)
                if left is None or left:
                    break
        if left is None or left:
            left_.append(info.get("name"))
            continue
        try:
            remove_placement_group(PlacementGroup(PlacementGroupID(bytes.fromhex(pgid))))
            removed += 1
        except Exception as e:
            left_.append(info.get("name"))
            sys.stderr.write("hyperloom: removing a dead lease's placement group failed: %s\n" % e)
    return removed, left_


def lease_name(argv, gpus, now=None, lease_id=None):
    """The lease actor's Ray name, as whoever sees the holder of a busy slot reads it (a waiting
    lease, `ray status`, `ray doctor`, `queue`): its command, user, GPUs, since when (its
    submission: a lease of this host's queue is submitted when its turn comes), and its bridge
    (host and pid), which also keeps the name unique; and its lease id in the host's queue, by
    which the waiters behind it see that it asked Ray (services/HostQueue.ts, programs/Queue.ts)."""
    import getpass
    import shlex
    import socket

    cmd = " ".join(shlex.quote(a) for a in argv)
    if len(cmd) > 80:
        cmd = cmd[:77] + "..."
    try:
        user = getpass.getuser()
    except Exception:
        user = "uid %d" % os.getuid()
    gpus_text = ("%g GPU" % gpus) + ("" if gpus == 1 else "s")
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(now))
    queued = "" if not lease_id else ", lease %s" % lease_id
    return "lease `%s` of %s, %s, since %s (bridge %s:%d%s)" % (
        cmd, user, gpus_text, since, socket.gethostname(), os.getpid(), queued)


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
