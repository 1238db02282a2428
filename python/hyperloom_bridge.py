#!/usr/bin/env python3
"""hyperloom lease bridge: holds one serving lease (a Ray actor) for hyperloom.

Ray actors can only be created by a Ray driver, and only Python (or Java/C++) provides one, so
hyperloom (TypeScript) starts this file with the Python of the Ray installation and talks to it
over stdio. Standard library and `ray` only; Python >= 3.9.

Usage
-----
    python hyperloom_bridge.py                     the bridge: JSON lines on stdin/stdout
    python hyperloom_bridge.py --supervise [--status-fd FD] [--parent PID] [--cwd DIR]
                               [--grace SEC] [--owner-pid PID [--owner-start TICKS]] -- ARGV...
                                                   the command supervisor alone (see below)

Protocol (version 1)
--------------------
One JSON object per line, UTF-8, both directions. stdout carries ONLY protocol lines: the bridge
moves file descriptor 1 onto stderr before importing Ray, so Ray's (and anyone's) prints land on
stderr, which is free-form diagnostics.

hyperloom -> bridge (stdin):

    {"op": "lease", "address": "host:port", "gpus": N, "serving_slot": true,
     "argv": ["cmd", "arg", ...], "env": {"K": "V", ...}, "cwd": "/dir",
     "name": "optional actor name", "namespace": "optional, default hyperloom",
     "stop_grace_sec": 3}
        At most one per bridge. `gpus` >= 0 (fractions allowed), `serving_slot` defaults to true,
        `env` is the command's whole environment (default: the bridge's), `cwd` defaults to the
        bridge's working directory.
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
    {"event": "output", "stream": "stdout"|"stderr", "line": "..."}   live, one per line (no
                                                           newline; lines over 64 KiB are split)
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
           "actor_died"    the actor died while the lease was pending or running
           "actor_failed"  the actor's method raised
           "internal"      a bug in this file
    {"event": "released"}                                  last line; the actor is killed, the
                                                           driver disconnected

Exit status of the bridge: 0 after a release with no error, 1 after an error event.
The actor is killed as soon as CMD's exit was reported (the slot frees at once); the bridge
itself stays until released so that hyperloom decides when it ends.

The actor, the supervisor and the keeper
----------------------------------------
The actor (class HyperloomLease, num_cpus=0, num_gpus=N, resources={"serving_slot": 1} unless
disabled, threaded so `stop` runs beside `run`) starts CMD through a tiny supervisor: a Python
process (`python -I -c SUPERVISOR_SOURCE ...`, the same code as `--supervise`) that leads its
own session/process group; CMD and everything it starts live in that group. CMD's environment is
the caller's `env` with the actor's own device variables (CUDA_VISIBLE_DEVICES,
HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, set by Ray for the actor's GPUs) laid over it: they win.
The supervisor reports to the actor on a private pipe: "pid N" (or "failed") then "exit N"; it
reports the exit only once CMD's whole group is gone (leftovers: TERM, grace, KILL), because the
exit ends the lease. `run` is a streaming generator yielding lists of protocol events (batched
when lines come faster than they are consumed); `stop` sends TERM to the supervisor, which
forwards it to the group and escalates to KILL after the grace.

Invariant (SPEC section 9): once the lease's resources are released in Ray, nothing of CMD's
process group runs. Every way the lease can end takes the group with it:

    hyperloom (the CLI) dies        the bridge sees EOF on stdin and releases normally (TERM,
                                    grace, KILL through the actor; the actor is killed after)
    the bridge (the driver) dies    the keeper, which watches the bridge's pid (a pidfd, when the
                                    actor runs on the bridge's host and pid namespace), SIGKILLs
                                    the group at once; Ray then kills the actor it owned (as
                                    below), but may free the slot ~0.1 s before the worker dies
    the actor's worker dies         the raylet SIGKILLs the worker's direct children, i.e. the
    (SIGKILL, ray.kill, ray stop)   supervisor; the supervisor also gets PR_SET_PDEATHSIG
                                    (SIGUSR1, checked against its parent pid) and SIGKILLs the
                                    group at once: the slot is already free, no grace
    the supervisor dies (SIGKILL)   the keeper SIGKILLs the group at once
    CMD's parent dies               CMD itself has PR_SET_PDEATHSIG=SIGKILL toward the supervisor

The keeper is a child the supervisor forks before starting CMD. It stays in CMD's process group
(so the group id cannot be reused while it waits), ignores TERM/INT/HUP, holds none of the
supervisor's descriptors except the read end of a private pipe whose only writer is the
supervisor, and SIGKILLs the whole group (itself included) on EOF, i.e. the moment the
supervisor ends however it ends, or the moment the lease's owner (the bridge, `--owner-pid`
with its start time against pid reuse) ends. Ray does not kill it with the worker, since it is
not the worker's direct child. What no mechanism here covers: a process that leaves the group itself
(setsid/setpgid) and a SIGKILL of the keeper together with the supervisor; the keeper's
wake-up (milliseconds) bounds how long the group can outlive a supervisor killed with the
worker, which is shorter than any new lease takes to start a command.
"""

import json
import os
import queue
import signal
import sys
import threading
import time

PROTOCOL_VERSION = 1
DEVICE_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
DEFAULT_NAMESPACE = "hyperloom"
DEFAULT_STOP_GRACE_SEC = 3.0
MAX_LINE_BYTES = 64 * 1024

# The supervisor: self-contained (runs under `python -I -c`, so it does not need this file on
# the actor's node), stdlib only. argv: [--status-fd FD] [--parent PID] [--cwd DIR] [--grace S]
# [--owner-pid PID [--owner-start TICKS]] -- ARGV...  Exit status: CMD's (128+signal if killed, 127 if it was not found, 126 if it could not be executed, 2 usage).
SUPERVISOR_SOURCE = r'''
import os, signal, subprocess, sys, threading, time

def _supervise(args):
    status_fd = None
    parent = None
    cwd = None
    grace = 3.0
    owner = (None, None)
    argv = []
    i = 0
    try:
        while i < len(args):
            a = args[i]
            if a == "--":
                argv = args[i + 1:]
                break
            if a == "--status-fd":
                status_fd = int(args[i + 1])
            elif a == "--parent":
                parent = int(args[i + 1])
            elif a == "--cwd":
                cwd = args[i + 1]
            elif a == "--grace":
                grace = float(args[i + 1])
            elif a == "--owner-pid":
                owner = (int(args[i + 1]), owner[1])
            elif a == "--owner-start":
                owner = (owner[0], int(args[i + 1]))
            else:
                raise ValueError(a)
            i += 2
    except (IndexError, ValueError) as e:
        sys.stderr.write("hyperloom supervisor: bad arguments (%s)\n" % e)
        return 2
    if not argv:
        sys.stderr.write("hyperloom supervisor: no command after --\n")
        return 2
    if parent is None:
        parent = os.getppid()

    # Lead a process group of our own: CMD and everything it starts live (and die) in it.
    if os.getpgrp() != os.getpid():
        try:
            os.setsid()
        except OSError:
            os.setpgid(0, 0)
    pgid = os.getpgrp()
    me = os.getpid()

    status = None
    if status_fd is not None:
        try:
            status = os.fdopen(status_fd, "w", buffering=1)
        except OSError:
            status = None

    def report(line):
        if status is not None:
            try:
                status.write(line + "\n")
                status.flush()
            except (OSError, ValueError):
                pass

    flags = {"stop": False, "stopping": False}

    def on_stop(signum, frame):
        # Also reached by our own killpg(TERM) while stopping: ignore that echo.
        if not flags["stopping"]:
            flags["stop"] = True

    def on_parent_death(signum, frame):
        # PR_SET_PDEATHSIG fires when the parent *thread* ends (a Ray worker thread may end
        # while the actor lives): only a changed parent process counts. The lease is over (Ray
        # has freed its resources): no grace, the whole group goes at once (us included).
        if os.getppid() != parent:
            os.killpg(pgid, signal.SIGKILL)

    # A Ray worker thread may have signals blocked; the mask is inherited: start clean.
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_stop)
    death_sig = signal.SIGUSR1
    signal.signal(death_sig, on_parent_death)
    libc = None
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(1, int(death_sig), 0, 0, 0) != 0:  # PR_SET_PDEATHSIG
            libc = None
    except Exception:
        libc = None  # not Linux: polling the parent below still works
    if os.getppid() != parent:  # died before the prctl took effect
        os.killpg(pgid, signal.SIGKILL)

    # The keeper: a forked child of ours that stays in the group and SIGKILLs the whole group the
    # moment we end, however we end (the raylet SIGKILLs a dying worker's direct children, i.e.
    # us, and our own cleanup never runs). It is not the worker's child, so Ray leaves it alone;
    # being in the group, it also keeps the group id from being reused while it waits.
    keeper_pid, keeper_fd = start_keeper(pgid, owner)

    def others_in_group():
        """Pids (not us, not the keeper, not zombies) in our group; None when /proc cannot tell."""
        try:
            entries = os.listdir("/proc")
        except OSError:
            return None
        found = []
        for e in entries:
            if not e.isdigit() or int(e) in (me, keeper_pid):
                continue
            try:
                with open("/proc/%s/stat" % e, "rb") as f:
                    stat = f.read().decode("ascii", "replace")
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
                found.append(int(e))
        return found

    def kill_group(wait_for):
        """TERM the group, give `wait_for()` the grace, then KILL it (us included)."""
        flags["stopping"] = True
        try:
            os.killpg(pgid, signal.SIGTERM)
        except OSError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and not wait_for():
            time.sleep(0.05)
        if not wait_for():
            os.killpg(pgid, signal.SIGKILL)

    if cwd and not os.path.isdir(cwd):
        sys.stderr.write("hyperloom: working directory does not exist: %s\n" % cwd)
        sys.stderr.flush()
        report("failed")
        report("exit 127")
        return 127
    def cmd_preexec():
        # CMD dies with us too (SIGKILL), should the keeper itself be gone.
        if libc is not None:
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != me:
            os.kill(os.getpid(), signal.SIGKILL)

    try:
        proc = subprocess.Popen(
            argv, cwd=cwd or None, stdin=subprocess.DEVNULL, close_fds=True, preexec_fn=cmd_preexec
        )
    except OSError as e:
        # As a shell, env or timeout do: 127 when CMD is not found, 126 when it cannot be executed.
        if isinstance(e, FileNotFoundError) and e.filename in (None, argv[0]):
            msg = "hyperloom: command not found: %s" % argv[0]
            code = 127
        else:
            msg = "hyperloom: cannot execute %s: %s" % (argv[0], e.strerror or e)
            code = 126
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()
        report("failed")
        report("exit %d" % code)
        return code
    report("pid %d" % proc.pid)

    done = threading.Event()

    def waiter():
        proc.wait()
        done.set()

    threading.Thread(target=waiter, daemon=True).start()

    while not done.wait(0.2):
        if os.getppid() != parent:
            os.killpg(pgid, signal.SIGKILL)  # the worker died: the lease is over, no grace
        if flags["stop"]:
            kill_group(done.is_set)  # KILLs us too when CMD outlives the grace
            done.wait()
            break

    rc = proc.returncode
    code = rc if rc >= 0 else 128 - rc
    # CMD is gone; whatever it left behind in the group goes too, BEFORE the exit is reported:
    # the exit ends the lease (the actor is killed, the slot frees).
    left = others_in_group()
    if left is None:
        flags["stopping"] = True
        try:
            os.killpg(pgid, signal.SIGTERM)
        except OSError:
            pass
    elif left:
        kill_group(lambda: not others_in_group())
    report("exit %d" % code)
    if status is not None:
        try:
            status.close()
        except OSError:
            pass
    return code  # our exit closes the keeper's pipe: it SIGKILLs whatever is left, then itself

def start_time(pid):
    """A process's start time (clock ticks since boot, /proc/PID/stat field 22); None if unknown."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
        return int(stat[stat.rfind(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None

def start_keeper(pgid, owner=(None, None)):
    """Forks the keeper; returns (its pid, the write end of its pipe, which only we hold).
    `owner` = (pid, start time) of the lease's driver (the bridge) when it runs on this host in
    this pid namespace: its death ends the lease (Ray kills the actors it owns), so the keeper
    ends the group at that moment too, before Ray gets round to freeing the slot."""
    r, w = os.pipe()
    pid = os.fork()
    if pid != 0:
        os.close(r)
        return pid, w
    try:
        os.close(w)
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGPIPE):
            signal.signal(s, signal.SIG_IGN)
        # Hold none of the supervisor's descriptors (its pipes to the actor, the status fd).
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        try:
            top = os.sysconf("SC_OPEN_MAX")
        except (ValueError, OSError):
            top = 65536
        os.closerange(3, r)
        os.closerange(r + 1, max(top, r + 2))
        watch = [r]
        owner_pid, owner_start = owner
        if owner_pid is not None and hasattr(os, "pidfd_open"):
            try:
                pidfd = os.pidfd_open(owner_pid)
            except ProcessLookupError:
                return  # the owner is already gone: the lease is over (finally: kill)
            except OSError:
                pidfd = None  # no pidfds here: the pipe alone
            if pidfd is not None:
                if owner_start is not None and start_time(owner_pid) != owner_start:
                    return  # that pid is another process now: the owner is gone
                watch.append(pidfd)
        import select
        while True:
            try:
                ready, _, _ = select.select(watch, [], [])
            except InterruptedError:
                continue
            except OSError:
                break
            if len(watch) > 1 and watch[1] in ready:
                break  # the owner (the bridge) died
            try:
                if not os.read(r, 64):
                    break  # EOF: the supervisor is gone
            except InterruptedError:
                continue
            except OSError:
                break
    finally:
        try:
            os.killpg(pgid, signal.SIGKILL)  # the group, this keeper included
        finally:
            os._exit(0)

if __name__ in ("__main__", "__hyperloom_supervisor__"):
    sys.stdout.flush()
    os._exit(_supervise(sys.argv[1:]))
'''


def run_supervisor(args):
    """`--supervise ARGS...`: runs SUPERVISOR_SOURCE in this process (for tests and debugging)."""
    sys.argv = [sys.argv[0]] + list(args)
    exec(compile(SUPERVISOR_SOURCE, "<hyperloom supervisor>", "exec"), {"__name__": "__hyperloom_supervisor__"})


# ---------------------------------------------------------------------------------------------
# The actor (built lazily: only the bridge imports ray, never the supervisor)


def make_actor_class(ray):
    import subprocess

    class HyperloomLease:
        def __init__(self):
            self._proc = None
            self._stopped = False
            self._lock = threading.Lock()

        @ray.method(num_returns="streaming")
        def run(self, argv, env, cwd, grace, owner=None):
            merged = dict(env or {})
            for k in DEVICE_VARS:
                v = os.environ.get(k)
                if v is not None:
                    merged[k] = v
            r, w = os.pipe()
            cmd = [
                sys.executable, "-I", "-c", SUPERVISOR_SOURCE,
                "--status-fd", str(w), "--parent", str(os.getpid()), "--grace", str(grace),
            ]
            if cwd:
                cmd += ["--cwd", cwd]
            if owner and owner.get("pid") and owner.get("host") == host_identity():
                cmd += ["--owner-pid", str(owner["pid"])]
                if owner.get("start") is not None:
                    cmd += ["--owner-start", str(owner["start"])]
            cmd += ["--"] + [str(a) for a in argv]
            with self._lock:
                if self._stopped:  # released before CMD started: never start it
                    os.close(r)
                    os.close(w)
                    return
                try:
                    proc = subprocess.Popen(
                        cmd,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        env=merged,
                        start_new_session=True,
                        pass_fds=(w,),
                        close_fds=True,
                    )
                except BaseException:
                    os.close(r)
                    raise
                finally:
                    os.close(w)
                self._proc = proc
            events = queue.Queue()

            def read_stream(name, pipe):
                try:
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

            def read_status():
                try:
                    with os.fdopen(r, "rb") as f:
                        for raw in f:
                            parts = raw.decode("ascii", "replace").split()
                            if len(parts) == 2 and parts[0] in ("pid", "exit"):
                                events.put((parts[0], int(parts[1]), None))
                            elif parts == ["failed"]:
                                events.put(("pid", None, None))
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
                    elif kind == "eof":
                        open_streams.discard(a)
                    elif kind == "pid" and not started:
                        started = True
                        out.append(self._started_event(a, proc.pid))
                        out.extend(pending)
                        pending = []
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
                if out:
                    yield out
                if proc_rc is not None and not open_streams:
                    break
            if not started:
                yield [self._started_event(None, proc.pid)] + pending
            if exit_code is None:
                exit_code = proc_rc if proc_rc >= 0 else 128 - proc_rc
            yield [{"event": "exit", "code": exit_code}]

        def _started_event(self, pid, pgid):
            return {
                "event": "started",
                "pid": pid,
                "pgid": pgid,
                "actor_pid": os.getpid(),
                "node_id": ray.get_runtime_context().get_node_id(),
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            }

        def stop(self, grace):
            """TERM to the supervisor (it forwards to CMD's group, KILLs after `grace`)."""
            with self._lock:
                self._stopped = True
                proc = self._proc
            if proc is None:
                return None
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGTERM)
                except OSError:
                    pass
                try:
                    proc.wait(grace + 2.0)
                except subprocess.TimeoutExpired:
                    pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # leftovers, or a supervisor that hung
            except OSError:
                pass
            try:
                return proc.wait(2.0)
            except subprocess.TimeoutExpired:
                return None

    return HyperloomLease


# ---------------------------------------------------------------------------------------------
# The bridge


class ProtocolError(Exception):
    pass


class JsonLinesEndpoint:
    """The protocol's plumbing, shared by this bridge and the group bridge (hyperloom_group.py):
    protocol lines out on `out` (one writer at a time; a closed stdout is an inbox event), JSON
    objects in from stdin, and TERM/INT/HUP, all as events on one inbox. And the life both lead:
    import Ray, read the one request (op `OP`, checked by `parse`), `start` it (which may
    `connect`), `serve` its events until an end (`on_control`), `release` (`free` what the
    request holds, disconnect, say `released`)."""

    OP = None  # the request's op ("lease", "group")

    def __init__(self, out):
        self.out = out
        self.out_lock = threading.Lock()
        # SimpleQueue: its put() is reentrant, so signal handlers may use it.
        self.inbox = queue.SimpleQueue()
        self.stdout_gone = False
        self.ray = None
        self.connected = False
        self.grace = DEFAULT_STOP_GRACE_SEC
        self.releasing = False

    # -- to be provided by each bridge

    def parse(self, msg):
        """The request's fields, checked; raises ProtocolError."""
        raise NotImplementedError

    def start(self, spec):
        """Starts what the request asks for. None on success (then `serve`), else the exit status."""
        raise NotImplementedError

    def serve(self):
        """Relays events until the end; returns the exit status (from `release`)."""
        raise NotImplementedError

    def free(self):
        """Stops what the request holds (commands, actors, placement group), for `release`."""
        raise NotImplementedError

    # -- lifecycle

    def main(self):
        threading.Thread(target=self.read_stdin, daemon=True).start()
        self.install_signal_handlers()
        try:
            import ray
        except Exception as e:  # ImportError, or a broken installation
            self.emit_error("ray_import", "cannot import ray in %s: %s" % (sys.executable, e))
            return self.release(1)
        self.ray = ray

        kind, payload = self.inbox.get()
        if kind != "msg":
            return self.release(1 if kind == "bad" else 0, bad=payload if kind == "bad" else None)
        op = payload.get("op")
        if op == "release":
            return self.release(0)
        if op != self.OP:
            return self.release(1, bad="expected op %s or release, got %r" % (self.OP, op))
        try:
            spec = self.parse(payload)
        except ProtocolError as e:
            return self.release(1, bad=str(e))
        code = self.start(spec)
        if code is not None:
            return self.release(code)
        return self.serve()

    def connect(self, spec):
        """ray.init to the request's cluster, then `connected`. None on success, else the exit status."""
        ray = self.ray
        import logging

        # ray.init retries a dead address for minutes: a plain TCP connect answers at once.
        unreachable = probe_tcp(spec["address"])
        if unreachable is not None:
            self.emit_error("ray_init", "cannot reach the GCS: %s" % unreachable)
            return 1
        try:
            ray.init(
                address=spec["address"],
                namespace=spec["namespace"],
                logging_level=logging.ERROR,
                log_to_driver=False,
            )
        except BaseException as e:  # ConnectionError, RuntimeError, KeyboardInterrupt...
            self.emit_error("ray_init", describe(e))
            return 1
        self.connected = True
        self.install_signal_handlers()  # ray.init installs its own (SIGTERM -> sys.exit)
        self.emit("connected", job_id=ray.get_runtime_context().get_job_id())
        return None

    def on_control(self, kind, payload):
        """What a serve loop does with the inbox events every bridge treats alike (a request
        after the first, a bad line, EOF, a signal, stdout closed): releases, returns the status."""
        if kind == "msg":
            if payload.get("op") == "release":
                return self.release(0)
            return self.release(1, bad="unexpected op %r after %s" % (payload.get("op"), self.OP))
        if kind == "bad":
            return self.release(1, bad=payload)
        return self.release(0)  # eof, signal, stdout_closed

    def inbox_until(self, timeout, done):
        """After a stop: the inbox's events, one by one, until `done()` or `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                event = self.inbox.get(timeout=left)
            except queue.Empty:
                return
            yield event

    def release(self, code, bad=None):
        self.releasing = True
        if bad is not None:
            self.emit_error("protocol", bad)
            code = 1
        self.free()
        if self.connected:
            t = threading.Thread(target=self.ray.shutdown, daemon=True)
            t.start()
            t.join(10.0)
        self.emit("released")
        return code

    # -- output

    def emit(self, event, **fields):
        line = json.dumps(dict(event=event, **fields), ensure_ascii=True, separators=(",", ":"))
        with self.out_lock:
            if self.stdout_gone:
                return
            try:
                self.out.write(line + "\n")
                self.out.flush()
            except (OSError, ValueError):
                self.stdout_gone = True
                self.inbox.put(("stdout_closed", None))

    def emit_error(self, kind, message):
        text = " ".join(str(message).split()) or kind
        if len(text) > 2000:
            text = text[:2000] + "..."
        self.emit("error", kind=kind, message=text)

    # -- input

    def read_stdin(self):
        stdin = sys.stdin.buffer
        try:
            for raw in stdin:
                text = raw.decode("utf-8", "replace").strip()
                if not text:
                    continue
                try:
                    msg = json.loads(text)
                except ValueError:
                    self.inbox.put(("bad", "not JSON: %s" % text[:200]))
                    continue
                if not isinstance(msg, dict):
                    self.inbox.put(("bad", "not a JSON object: %s" % text[:200]))
                    continue
                self.inbox.put(("msg", msg))
        except (OSError, ValueError):
            pass
        self.inbox.put(("eof", None))

    def on_signal(self, signum, frame):
        self.inbox.put(("signal", signum))

    def install_signal_handlers(self):
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, self.on_signal)


class Bridge(JsonLinesEndpoint):
    OP = "lease"

    def __init__(self, out):
        super().__init__(out)
        self.actor = None
        self.started = False
        self.exited = False

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
        try:
            cls = ray.remote(make_actor_class(ray))
            options = actor_options(spec)
            if spec["name"]:
                options["name"] = spec["name"]
            self.actor = cls.options(**options).remote()
        except Exception as e:
            self.emit_error("actor_creation", describe(e))
            return 1
        self.emit("submitted", actor_id=self.actor._actor_id.hex())
        try:
            gen = self.actor.run.remote(spec["argv"], spec["env"], spec["cwd"], self.grace, owner_info())
        except Exception as e:
            self.emit_error("actor_failed", describe(e))
            return 1
        threading.Thread(target=self.pump, args=(gen,), daemon=True).start()
        return None

    def pump(self, gen):
        """Moves the actor's streamed event batches into the inbox (blocks while pending)."""
        ray = self.ray
        try:
            for ref in gen:
                self.inbox.put(("batch", ray.get(ref)))
            self.inbox.put(("pump_done", None))
        except BaseException as e:
            self.inbox.put(("pump_error", e))

    def serve(self):
        ray = self.ray
        while True:
            kind, payload = self.inbox.get()
            if kind == "batch":
                self.relay(payload)
                if self.exited:
                    self.kill_actor()  # frees the slot now; release still ends the bridge
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
            elif name == "exit":
                self.exited = True
            self.emit(name, **ev)

    def kill_actor(self):
        actor, self.actor = self.actor, None
        if actor is None:
            return
        try:
            self.ray.kill(actor, no_restart=True)
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


def actor_options(spec, **extra):
    """The lease actor's options (each group rank's too): no CPU, the request's GPUs and serving
    slot, no restarts or retries (a dead actor ends the lease), room for `stop` beside `run`."""
    options = dict(num_cpus=0, num_gpus=spec["gpus"], max_concurrency=4, max_restarts=0, max_task_retries=0, **extra)
    if spec["serving_slot"]:
        options["resources"] = {"serving_slot": 1}
    return options


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
    start = None
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
        start = int(stat[stat.rfind(b")") + 2:].split()[19])  # field 22, as the keeper reads it
    except (OSError, ValueError, IndexError):
        pass
    return {"pid": pid, "start": start, "host": host}


def probe_tcp(address, timeout=3.0):
    """None when something accepts TCP connections at host:port, else the reason."""
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None  # not host:port: let ray.init judge it
    host = host.strip("[]")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
        return None
    except OSError as e:
        return e.strerror or str(e) or type(e).__name__


def describe(e):
    """One line: the exception's type and its last meaningful line (Ray's are multi-line),
    without Ray's generic advice, at most 500 characters."""
    text = str(e).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    if len(lines) > 1 and len(last) < 40:
        last = " ".join(lines[-2:])
    cut = last.find(" Some common causes include")
    if cut > 0:
        last = last[:cut]
    if len(last) > 500:
        last = last[:500] + "..."
    name = type(e).__name__
    return "%s: %s" % (name, last) if last else name


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
    namespace = msg.get("namespace") or DEFAULT_NAMESPACE
    need(isinstance(namespace, str), "namespace must be a string")
    grace = msg.get("stop_grace_sec", DEFAULT_STOP_GRACE_SEC)
    need(isinstance(grace, (int, float)) and not isinstance(grace, bool) and grace >= 0, "stop_grace_sec must be >= 0")
    return {
        "address": address.strip(),
        "gpus": gpus,
        "serving_slot": slot,
        "argv": argv,
        "env": env,
        "cwd": cwd,
        "name": name,
        "namespace": namespace,
        "stop_grace_sec": float(grace),
    }


def serve_stdio(make_bridge):
    """Runs a bridge (this file's, or the group bridge) on stdio and ends the process with its code."""
    # stdout is the protocol channel only: keep a private handle on it and point fd 1 at stderr
    # so that nothing else (Ray, its C++ core, stray prints) can write there.
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    out = os.fdopen(proto_fd, "w", buffering=1, encoding="utf-8")
    bridge = make_bridge(out)
    try:
        code = bridge.main()
    except BaseException as e:  # a bug here must still end the lease cleanly
        bridge.emit_error("internal", describe(e))
        try:
            code = bridge.release(1)
        except BaseException:
            code = 1
    try:
        out.flush()
    except (OSError, ValueError):
        pass
    sys.stderr.flush()
    # Skip the interpreter's teardown: daemon threads may still sit in Ray calls.
    os._exit(code)


def main(argv):
    if argv[:1] == ["--supervise"]:
        rest = argv[1:]
        run_supervisor(rest)
        return 0  # not reached: the supervisor exits the process
    if argv:
        sys.stderr.write("usage: hyperloom_bridge.py [--supervise [opts] -- ARGV...]\n")
        return 2
    serve_stdio(Bridge)


if __name__ == "__main__":
    main(sys.argv[1:])
