"""The keeper: a forked child that SIGKILLs a whole process group (itself included) the moment
the process that forked it ends, however it ends, or the moment a watched owner ends.

It holds none of its parent's descriptors but the read end of a private pipe whose only writer
is the parent (EOF = the parent is gone), ignores TERM/INT/HUP, and, being in the group, keeps
the group id from being reused while it waits. The supervisor forks one into CMD's group; the
serving runner forks one that leads the server's group. Standard library only."""

import os
import select
import signal

from hyperloom import procgroup

IGNORED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGPIPE)


def start(pgid=None, owner=(None, None)):
    """Forks the keeper; returns (its pid, the write end of its pipe, which only the caller holds).

    `pgid` None: the keeper leads a new process group of its own (its pid is the group's id),
    for the caller to start processes in; otherwise it stays in the caller's group `pgid`.
    `owner` = (pid, start time) of a process on this host whose end also ends the group (the
    lease's bridge: its death ends the lease, so the group goes at that moment too)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid != 0:
        os.close(r)
        if pgid is None:
            try:
                os.setpgid(pid, pid)  # as the child does: whichever runs first
            except OSError:
                pass
        return pid, w
    try:
        if pgid is None:
            os.setpgid(0, 0)
            pgid = os.getpid()
        os.close(w)
        _detach(r)
        _wait(r, owner)
    finally:
        try:
            os.killpg(pgid, signal.SIGKILL)  # the group, this keeper included
        finally:
            os._exit(0)


def _detach(keep_fd):
    """Ignore the stop signals; hold nothing of the parent's but `keep_fd` (and null stdio)."""
    for s in IGNORED:
        signal.signal(s, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    try:
        top = os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        top = 65536
    os.closerange(3, keep_fd)
    os.closerange(keep_fd + 1, max(top, keep_fd + 2))


def _wait(r, owner):
    """Returns when the pipe's writer is gone or the owner ended."""
    watch = [r]
    owner_pid, owner_start = owner
    if owner_pid is not None and hasattr(os, "pidfd_open"):
        try:
            pidfd = os.pidfd_open(owner_pid)
        except ProcessLookupError:
            return  # the owner is already gone: the lease is over
        except OSError:
            pidfd = None  # no pidfds here: the pipe alone
        if pidfd is not None:
            if owner_start is not None and procgroup.start_time(owner_pid) != owner_start:
                return  # that pid is another process now: the owner is gone
            watch.append(pidfd)
    while True:
        try:
            ready, _, _ = select.select(watch, [], [])
        except InterruptedError:
            continue
        except OSError:
            return
        if len(watch) > 1 and watch[1] in ready:
            return  # the owner died
        try:
            if not os.read(r, 64):
                return  # EOF: the parent is gone
        except InterruptedError:
            continue
        except OSError:
            return
