"""Who listens on the engine's port (issue 27 item 1). hyperloom picks a free port and hands it to
the engine, but until the engine binds it (vLLM: after its imports, seconds after its start) any
local process of any user can bind it first and answer the readiness path; its numbers would be
measured as the engine's. So before the engine is called ready, and again before each client
run, every listening TCP socket on the port must belong to the lease's engine: a process in the
engine's process group or among the engine's descendants.

How: /proc/net/tcp and /proc/net/tcp6 give each listening socket's port, inode and uid; a process
holds the socket when one of its /proc/PID/fd links reads `socket:[INODE]`. Another user's
process cannot be looked into, so a socket no process of the lease holds is foreign, named by its
uid (and its pid when /proc shows it). Standard library only (the runners run under `python -I`).
"""

import os
import pwd
import time

from hyperloom import procgroup

LISTEN = "0A"


def listening_sockets(port, proc="/proc"):
    """[(inode, uid)] of the TCP sockets listening on `port` (IPv4 and IPv6), from /proc/net."""
    found = []
    for name in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc, "net", name)) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) < 10 or cols[3] != LISTEN:
                continue
            try:
                local_port = int(cols[1].rsplit(":", 1)[1], 16)
                uid, inode = int(cols[7]), int(cols[9])
            except (ValueError, IndexError):
                continue
            if local_port == port and inode != 0:
                found.append((inode, uid))
    return found


def socket_holders(inodes, proc="/proc"):
    """{inode: pid} for the sockets some process we may look into holds (the first one found)."""
    want = {"socket:[%d]" % i: i for i in inodes}
    held = {}
    if not want:
        return held
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return held
    for e in entries:
        fd_dir = os.path.join(proc, e, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue  # gone, or another user's
        for fd in fds:
            try:
                link = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if link in want and want[link] not in held:
                held[want[link]] = int(e)
    return held


def user_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return "uid %d" % uid


def command_of(pid, proc="/proc"):
    try:
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()[:200]
    except OSError:
        return ""


def lease_pids(server_pid, server_pgid):
    """The engine's processes: its process group and its descendants (and the engine itself)."""
    pids = {server_pid}
    table = procgroup.processes() or {}
    pids.update(pid for pid, (_, _, pgrp) in table.items() if pgrp == server_pgid)
    pids.update(procgroup.descendants(server_pid, table=table) or [])
    return pids


def foreign_listener(port, server_pid, server_pgid):
    """None when every socket listening on `port` is the engine's (or none listens yet); else one
    line naming the foreign listener: its pid (when /proc shows it), user and command."""
    sockets = listening_sockets(port)
    if not sockets:
        return None
    ours = lease_pids(server_pid, server_pgid)
    holders = socket_holders([inode for inode, _ in sockets])
    for inode, uid in sockets:
        pid = holders.get(inode)
        if pid is not None and pid in ours:
            continue
        who = "pid %d" % pid if pid is not None else "a process hyperloom cannot look into"
        cmd = command_of(pid) if pid is not None else ""
        return ("port_taken: port %d is served by %s of user %s%s, not by the lease's engine (pid %d); "
                "its answers are not the engine's, so nothing is measured"
                % (port, who, user_name(uid), " (%s)" % cmd if cmd else "", server_pid))
    return None


class Watch:
    """The check as the runners use it: while they wait for readiness at most every `every`
    seconds (it lists every process's fds), at once when `now` is asked (ready, a run about to
    start, the engine gone). `taken` is the first foreign listener's line; it is also appended to
    `log_path` (the engine's server.log, whose tail hyperloom reads back) so the failure names it."""

    def __init__(self, port, log_path, every=2.0):
        self.port, self.log_path, self.every = port, log_path, every
        self.next_at = 0.0
        self.taken = None

    def check(self, server_pid, server_pgid, now=False):
        t = time.monotonic()
        if self.taken is None and (now or t >= self.next_at):
            self.next_at = t + self.every
            self.taken = foreign_listener(self.port, server_pid, server_pgid)
            if self.taken is not None:
                try:
                    with open(self.log_path, "a") as f:
                        f.write("hyperloom: %s\n" % self.taken)
                except OSError:
                    pass
        return self.taken
