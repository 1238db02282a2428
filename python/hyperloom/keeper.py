"""The keeper: a forked child that SIGKILLs what it keeps the moment the process that forked it
ends, however it ends, or the moment a watched owner ends.

It holds none of its parent's descriptors but the read end of a private pipe whose only writer
is the parent (EOF = the parent is gone), and ignores every signal it can. What it kills then:
its own process group (the supervisor's, or the server group it leads for the serving runner)
and whatever the parent told it on the pipe, one line each: "cgroup PATH" (the lease's cgroup,
by cgroup.kill, then removed once empty), "pgid N" (the command's process group), "pid N START" (a descendant, if it
still has that start time). While it waits it also wakes its parent should it find it stopped
(SIGSTOP), so that one frozen process does not leave the lease unguarded. Standard library only."""

import os
import select
import signal
import time

from hyperloom import cgroup, procgroup

# Every signal but those that cannot be caught and SIGCHLD.
IGNORED = [
    s
    for s in signal.valid_signals()
    if s not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD) and s < getattr(signal, "SIGRTMAX", 64) + 1
]
PATROL_SEC = 0.25
CGROUP_REMOVE_SEC = 1.0


def start(pgid=None, owner=(None, None), watch=()):
    """Forks the keeper; returns (its pid, the write end of its pipe, which only the caller holds).

    `pgid` None: the keeper leads a new process group of its own (its pid is the group's id),
    for the caller to start processes in; otherwise it stays in the caller's group `pgid`.
    `owner` = (pid, start time) of a process on this host whose end also ends what is kept (the
    lease's bridge: its death ends the lease, so the command goes at that moment too). `watch`:
    more (pid, start time) pairs whose end ends it too, at once (the supervisor's Ray worker: Ray
    frees the lease's resources as the worker dies, so the command must go at that moment, even
    while the supervisor is stopped)."""
    r, w = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid != 0:
        os.close(r)
        if pgid is None:
            try:
                os.setpgid(pid, pid)  # as the child does: whichever runs first
            except OSError:
                pass
        return pid, w
    targets = {"cgroup": None, "pgids": set(), "pids": {}}
    try:
        if pgid is None:
            os.setpgid(0, 0)
            pgid = os.getpid()
        os.close(w)
        _detach(r)
        _wait(r, [owner] + list(watch), parent, targets)
    finally:
        try:
            _kill(targets)
            os.killpg(pgid, signal.SIGKILL)  # the group, this keeper included
        finally:
            os._exit(0)


def tell(fd, line):
    """The parent's side: one target line to its keeper (False when the keeper is gone)."""
    try:
        os.write(fd, (line + "\n").encode())
        return True
    except OSError:
        return False


def _detach(keep_fd):
    """Ignore the signals; hold nothing of the parent's but `keep_fd` (and null stdio)."""
    for s in IGNORED:
        try:
            signal.signal(s, signal.SIG_IGN)
        except (OSError, ValueError, RuntimeError):
            pass
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    try:
        top = os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        top = 65536
    os.closerange(3, keep_fd)
    os.closerange(keep_fd + 1, max(top, keep_fd + 2))


def _note(targets, line):
    parts = line.split(" ", 1)
    try:
        if parts[0] == "cgroup" and len(parts) == 2:
            targets["cgroup"] = parts[1]
        elif parts[0] == "pgid":
            targets["pgids"].add(int(parts[1]))
        elif parts[0] == "pid":
            pid, start = parts[1].split()
            targets["pids"][int(pid)] = int(start)
    except (ValueError, IndexError):
        pass


def _kill(targets):
    cg = cgroup.LeaseCgroup(targets["cgroup"]) if targets["cgroup"] else None
    if cg is not None:
        cg.kill()
    for g in targets["pgids"]:
        procgroup.killpg(g, signal.SIGKILL)
    for pid, start in targets["pids"].items():
        if procgroup.start_time(pid) == start:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    if cg is not None:
        # Once what it held has died, the cgroup goes too: left behind, every lease that ended
        # this way would leave an empty folder in the host's hierarchy.
        cg.remove(CGROUP_REMOVE_SEC)


def _wait(r, watched, parent, targets):
    """Returns when the pipe's writer is gone or a watched process ended; notes the targets meanwhile."""
    watch = [r]
    for pid, start in watched:
        fd = procgroup.pidfd(pid, start)
        if fd == "gone":
            return  # already over
        if fd is not None:
            watch.append(fd)
    buf = b""
    while True:
        try:
            ready, _, _ = select.select(watch, [], [], PATROL_SEC)
        except InterruptedError:
            continue
        except OSError:
            return
        if not ready:
            if procgroup.is_stopped(parent):
                try:
                    os.kill(parent, signal.SIGCONT)  # frozen: wake it to do its work
                except OSError:
                    pass
            continue
        if any(fd in ready for fd in watch[1:]):
            return  # the owner or a watched process ended
        try:
            data = os.read(r, 4096)
        except InterruptedError:
            continue
        except OSError:
            return
        if not data:
            return  # EOF: the parent is gone
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            _note(targets, line.decode("utf-8", "replace"))


class Group:
    """A process group led by a keeper: killed whole when this runner ends, however it ends."""

    def __init__(self):
        self.pgid, self.keeper_w = start()

    def join(self):
        pgid = self.pgid
        return lambda: os.setpgid(0, pgid)

    def members(self):
        return procgroup.group_members(self.pgid, exclude=(self.pgid,)) or []

    def stop(self, grace, poll=None):
        """TERM, grace, KILL; then the keeper goes too. Returns (how, gone)."""
        how = None
        if self.members():
            how = procgroup.stop_group(self.pgid, grace, lambda: not self.members(), poll=poll)
        if self.keeper_w is not None:
            os.close(self.keeper_w)  # the keeper SIGKILLs the group, itself included
            self.keeper_w = None
        procgroup.killpg(self.pgid, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            left = procgroup.group_members(self.pgid)
            if left is None or not left:
                break
            time.sleep(0.02)
        procgroup.reap(self.pgid, 1.0)
        left = procgroup.group_members(self.pgid)
        return how, left is not None and not left
