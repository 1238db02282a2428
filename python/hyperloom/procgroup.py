"""Process groups on Linux, read from /proc: who is in a group, when a process started, and the
TERM-grace-KILL stop. The one toolkit the supervisor, its keeper and the serving runner share.
Standard library only (the supervisor runs it under `python -I`)."""

import os
import signal
import time


def stat_fields(pid):
    """/proc/PID/stat after the command name: [state, ppid, pgrp, session, ...]; None if gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].decode("ascii", "replace").split()


def start_time(pid):
    """A process's start time (clock ticks since boot, /proc/PID/stat field 22); None if unknown."""
    fields = stat_fields(pid)
    try:
        return int(fields[19])
    except (TypeError, ValueError, IndexError):
        return None


def group_members(pgid, exclude=()):
    """Live (not zombie) pids in process group `pgid`, less `exclude`; None when /proc cannot tell."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    found = []
    for e in entries:
        if not e.isdigit() or int(e) in exclude:
            continue
        fields = stat_fields(int(e))
        if fields is not None and len(fields) > 2 and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            found.append(int(e))
    return found


def processes():
    """{pid: (state, ppid, pgrp)} of every process /proc shows now; None when it cannot tell."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    found = {}
    for e in entries:
        if e.isdigit():
            fields = stat_fields(int(e))
            if fields is not None and len(fields) > 2:
                found[int(e)] = (fields[0], int(fields[1]), int(fields[2]))
    return found


def descendants(root, exclude=(), table=None):
    """Live (not zombie) descendants of `root`, less `exclude` and theirs; None when /proc cannot tell."""
    table = processes() if table is None else table
    if table is None:
        return None
    children = {}
    for pid, (state, ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid in exclude:
            continue
        if table[pid][0] not in ("Z", "X"):
            found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def pidfd(pid, start=None):
    """A pidfd (readable once the process has ended) for `pid` with start time `start`; "gone"
    when that process has ended already; None when pidfds are not available here."""
    if pid is None or not hasattr(os, "pidfd_open"):
        return None
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return "gone"
    except OSError:
        return None
    if start is not None and start_time(pid) != start:
        os.close(fd)
        return "gone"  # that pid is another process now
    return fd


def is_stopped(pid):
    """True when the process is stopped (SIGSTOP, SIGTSTP, a tracer)."""
    fields = stat_fields(pid)
    return fields is not None and fields[0] in ("T", "t")


def killpg(pgid, sig):
    """killpg that tells whether the group still existed."""
    try:
        os.killpg(pgid, sig)
        return True
    except OSError:
        return False


def stop_group(pgid, grace, gone, poll=None):
    """TERM the group, wait up to `grace` seconds for `gone()`, then KILL it. Returns "TERM" when
    it went within the grace, "KILL" when it had to be killed, None when the group was gone already.
    `poll()` runs while waiting (e.g. to reap a child)."""
    if not killpg(pgid, signal.SIGTERM):
        return None
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not gone():
        if poll is not None:
            poll()
        time.sleep(0.05)
    if gone():
        return "TERM"
    killpg(pgid, signal.SIGKILL)
    return "KILL"


def reap(pid, timeout):
    """Waits up to `timeout` seconds for our child `pid` to end and reaps it; True once it has."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return True
        if done:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def exit_code(returncode):
    """A Popen return code as a shell reports it: 128+signal for a process killed by a signal."""
    return returncode if returncode >= 0 else 128 - returncode
