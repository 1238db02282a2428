"""Whether anything of one lease still runs on this host, found by the lease's token alone.

A lease's resources are held by a placement group that its bridge owns, so that the death of the
lease's Ray worker does not free them (the raylet frees a dead worker's resources before anything
has stopped the command). The bridge removes the group only once this says the lease is gone.
It needs nothing the dead worker knew: the token is in the supervisor's argv (its keeper is a fork
of it: the same argv) and in the name of the lease's cgroup (`hyperloom-lease-<token>`), which
holds everything the command started whatever process group or session it moved to. Standard
library only: it runs in the bridge, or as a Ray task on the lease's node (`end`)."""

import os
import signal
import time

from hyperloom import cgroup, procgroup

CGROUP_PREFIX = "hyperloom-lease-"
POLL_SEC = 0.02
# How long a lease's end waits for its keepers on a node before it kills what is left itself, and
# how long it may take in all before the lease's resources are let go regardless (said on stderr):
# `end`'s patience and timeout wherever a lease ends (the actor, the bridges, the dead-lease sweep).
END_PATIENCE_SEC = 0.5
END_TIMEOUT_SEC = 30.0


def cgroup_name(token):
    return CGROUP_PREFIX + token


def _alive_with(token):
    """Pids of live processes (not zombies) whose argv names the token as one word."""
    want = token.encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                if want not in f.read().split(b"\0"):
                    continue
        except OSError:
            continue
        fields = procgroup.stat_fields(int(name))
        if fields and fields[0] not in ("Z", "X"):
            found.append(int(name))
    return found


def _cgroup_paths(token, mount=None):
    """The lease's cgroups, by name, anywhere under the v2 mount."""
    mount = mount or cgroup.v2_mount()
    if mount is None:
        return []
    target = cgroup_name(token)
    found = []
    for root, dirs, _ in os.walk(mount):
        if target in dirs:
            found.append(os.path.join(root, target))
        # A lease's cgroup holds no other lease's: never walk into one.
        dirs[:] = [d for d in dirs if not d.startswith(CGROUP_PREFIX)]
    return found


def _cgroups_with(token, mount=None):
    """The lease's cgroups that still hold a process (or cannot be read)."""
    return [p for p in _cgroup_paths(token, mount) if cgroup.LeaseCgroup(p).populated() is not False]


def leftovers(token, mount=None):
    """What of the lease still runs here, one phrase each (empty: nothing)."""
    left = ["pid %d (its supervisor or keeper)" % p for p in _alive_with(token)]
    left += ["cgroup %s" % p for p in _cgroups_with(token, mount)]
    return left


def wait_gone(token, timeout, mount=None):
    """Waits up to `timeout` seconds until nothing of the lease runs here; what is left then."""
    deadline = time.monotonic() + timeout
    while True:
        left = leftovers(token, mount)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(POLL_SEC)


def kill(token, mount=None):
    """SIGKILL whatever of the lease is left here, stopped processes too (cgroup.kill, then by pid)."""
    for path in _cgroups_with(token, mount):
        cgroup.LeaseCgroup(path).kill()
    for pid in _alive_with(token):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def end(token, patience, timeout, mount=None):
    """Ends the lease here once its worker is gone: waits `patience` seconds for its own keepers
    (the supervisor and the keeper stop everything the moment the worker dies), then SIGKILLs what
    is left itself (a keeper and a supervisor both frozen act on nothing), waiting up to `timeout`
    in all. Returns what is still left then (empty: the lease is gone)."""
    deadline = time.monotonic() + timeout
    left = wait_gone(token, min(patience, timeout), mount)
    while left and time.monotonic() < deadline:
        kill(token, mount)
        left = wait_gone(token, min(0.5, max(0.0, deadline - time.monotonic())), mount)
    for path in _cgroup_paths(token, mount):
        cgroup.LeaseCgroup(path).remove(0)
    return left
