"""A cgroup v2 of one lease's own, where the host lets us make one: everything the command
starts is in it whatever process group or session it moves to, it is stopped as one
(`cgroup.kill`, Linux >= 5.14), and it tells when it is empty (`cgroup.events`). Made under the
cgroup the caller is in (a Ray worker's), removed once empty. Standard library only."""

import os
import time


def v2_mount(mountinfo="/proc/self/mountinfo"):
    """Where the cgroup v2 hierarchy is mounted, or None."""
    try:
        with open(mountinfo) as f:
            for line in f:
                parts = line.split()
                if "-" in parts:
                    sep = parts.index("-")
                    if len(parts) > sep + 1 and parts[sep + 1] == "cgroup2":
                        return parts[4].replace("\\040", " ")
    except OSError:
        pass
    return None


def own_path(pid="self"):
    """The process's cgroup v2 path ("/…"), or None."""
    try:
        with open("/proc/%s/cgroup" % pid) as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return None


class LeaseCgroup:
    def __init__(self, path):
        self.path = path

    @classmethod
    def create(cls, name):
        """(LeaseCgroup, None), or (None, why not) where the host does not allow it."""
        mount, own = v2_mount(), own_path()
        if mount is None or own is None:
            return None, "no cgroup v2 hierarchy"
        parent = os.path.join(mount, own.lstrip("/"))
        path = os.path.join(parent, name)
        try:
            os.mkdir(path)
        except OSError as e:
            return None, "cannot create a cgroup in %s: %s" % (parent, e.strerror or e)
        if not os.path.exists(os.path.join(path, "cgroup.kill")):
            cls(path).remove(0)
            return None, "this kernel's cgroups have no cgroup.kill"
        return cls(path), None

    def _file(self, name):
        return os.path.join(self.path, name)

    def join(self):
        """Moves the calling process in (for the command, before it runs)."""
        with open(self._file("cgroup.procs"), "w") as f:
            f.write("0")

    def pids(self):
        """The pids in it; None when it cannot be read."""
        try:
            with open(self._file("cgroup.procs")) as f:
                return [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            return None

    def populated(self):
        """True while anything is in it (zombies not counted); None when it cannot be read."""
        try:
            with open(self._file("cgroup.events")) as f:
                for line in f:
                    k, _, v = line.partition(" ")
                    if k == "populated":
                        return v.strip() != "0"
        except OSError:
            return None
        return None

    def signal(self, sig):
        for pid in self.pids() or []:
            try:
                os.kill(pid, sig)
            except OSError:
                pass

    def kill(self):
        """SIGKILL to everything in it, as one (also what is stopped or forking)."""
        try:
            with open(self._file("cgroup.kill"), "w") as f:
                f.write("1")
            return True
        except OSError:
            return False

    def remove(self, wait=2.0):
        """rmdir once empty (the kernel refuses while anything is in it); True when gone."""
        deadline = time.monotonic() + wait
        while True:
            try:
                os.rmdir(self.path)
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.02)
