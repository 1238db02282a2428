"""The command supervisor: runs one lease's command (CMD) in a process group it leads, reports on
a private status fd ("pid N" or "failed", then "exit N"), and reports the exit only once CMD's
whole group is gone (leftovers: TERM, grace, KILL), because the exit ends the lease.

    python -I PYDIR supervise [--status-fd FD] [--parent PID] [--cwd DIR] [--grace SEC]
                              [--owner-pid PID [--owner-start TICKS]] -- ARGV...

Exit status: CMD's (128+signal if killed, 127 if it was not found, 126 if it could not be
executed, 2 usage). Standard library only: the lease actor runs it with `python -I` from the
package folder, or from a copy of it on a node that has only Ray (see hyperloom.actor).

How it ends with the lease (see the package's __init__ for the whole picture): TERM/INT/HUP stop
CMD's group (TERM, grace, KILL); the parent's death (PR_SET_PDEATHSIG, checked against the
parent's pid, and polled) KILLs the group at once; its own death, however, is seen by its keeper
(hyperloom.keeper), which KILLs the group; CMD gets PR_SET_PDEATHSIG=SIGKILL toward it."""

import argparse
import os
import signal
import subprocess
import sys
import threading

from hyperloom import keeper, procgroup

PR_SET_PDEATHSIG = 1


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write("hyperloom supervisor: bad arguments (%s)\n" % message)
        sys.exit(2)


def parse_args(args):
    p = _Parser(prog="hyperloom supervise", add_help=False, allow_abbrev=False)
    p.add_argument("--status-fd", type=int)
    p.add_argument("--parent", type=int)
    p.add_argument("--cwd")
    p.add_argument("--grace", type=float, default=3.0)
    p.add_argument("--owner-pid", type=int)
    p.add_argument("--owner-start", type=int)
    p.add_argument("argv", nargs=argparse.REMAINDER)
    ns = p.parse_args(args)
    if ns.argv[:1] == ["--"]:
        ns.argv = ns.argv[1:]
    elif ns.argv:
        p.error("unrecognized arguments: %s (the command goes after --)" % " ".join(ns.argv))
    return ns


def main(args):
    ns = parse_args(args)
    if not ns.argv:
        sys.stderr.write("hyperloom supervisor: no command after --\n")
        return 2
    return Supervisor(ns).run()


def _prctl():
    """libc's prctl, or None (not Linux, no ctypes): polling the parent still works then."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl
    except Exception:
        return None


def _release_stdin():
    """Points fd 0 at /dev/null: once CMD is gone, a writer to its stdin gets EPIPE, not a block."""
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
    except OSError:
        pass


class Supervisor:
    def __init__(self, ns):
        self.ns = ns
        self.parent = ns.parent if ns.parent is not None else os.getppid()
        self.me = os.getpid()
        self.stop_asked = False
        self.stopping = False
        self.status = None
        self.keeper_pid = None
        self.prctl = None

    # -- reporting

    def open_status(self):
        if self.ns.status_fd is not None:
            try:
                self.status = os.fdopen(self.ns.status_fd, "w", buffering=1)
            except OSError:
                self.status = None

    def report(self, line):
        if self.status is not None:
            try:
                self.status.write(line + "\n")
                self.status.flush()
            except (OSError, ValueError):
                pass

    # -- signals

    def on_stop(self, signum, frame):
        # Also reached by our own killpg(TERM) while stopping: ignore that echo.
        if not self.stopping:
            self.stop_asked = True

    def on_parent_death(self, signum, frame):
        # PR_SET_PDEATHSIG fires when the parent *thread* ends (a Ray worker thread may end
        # while the actor lives): only a changed parent process counts. The lease is over (Ray
        # has freed its resources): no grace, the whole group goes at once (us included).
        if os.getppid() != self.parent:
            os.killpg(self.pgid, signal.SIGKILL)

    def install_signals(self):
        # A Ray worker thread may have signals blocked; the mask is inherited: start clean.
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, self.on_stop)
        signal.signal(signal.SIGUSR1, self.on_parent_death)
        prctl = _prctl()
        if prctl is not None and prctl(PR_SET_PDEATHSIG, int(signal.SIGUSR1), 0, 0, 0) == 0:
            self.prctl = prctl
        if os.getppid() != self.parent:  # died before the prctl took effect
            os.killpg(self.pgid, signal.SIGKILL)

    # -- the group

    def others(self):
        """Pids in our group but us and the keeper; None when /proc cannot tell."""
        return procgroup.group_members(self.pgid, exclude=(self.me, self.keeper_pid))

    def stop_group(self, gone):
        """TERM the group, give `gone()` the grace, then KILL it (us included)."""
        self.stopping = True
        procgroup.stop_group(self.pgid, self.ns.grace, gone)

    # -- the run

    def run(self):
        # Lead a process group of our own: CMD and everything it starts live (and die) in it.
        if os.getpgrp() != os.getpid():
            try:
                os.setsid()
            except OSError:
                os.setpgid(0, 0)
        self.pgid = os.getpgrp()
        self.open_status()
        self.install_signals()
        # The keeper: the raylet SIGKILLs a dying worker's direct children (us), and our own
        # cleanup never runs then; the keeper is not the worker's child, so Ray leaves it alone.
        owner = (self.ns.owner_pid, self.ns.owner_start)
        self.keeper_pid, _keeper_fd = keeper.start(self.pgid, owner)
        code = self.run_command()
        if self.status is not None:
            try:
                self.status.close()
            except OSError:
                pass
        return code  # our exit closes the keeper's pipe: it SIGKILLs whatever is left, then itself

    def not_started(self, message, code):
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
        self.report("failed")
        self.report("exit %d" % code)
        return code

    def run_command(self):
        argv, cwd = self.ns.argv, self.ns.cwd
        if cwd and not os.path.isdir(cwd):
            return self.not_started("hyperloom: working directory does not exist: %s" % cwd, 127)
        prctl, me = self.prctl, self.me

        def cmd_preexec():
            # CMD dies with us too (SIGKILL), should the keeper itself be gone.
            if prctl is not None:
                prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
            if os.getppid() != me:
                os.kill(os.getpid(), signal.SIGKILL)

        try:
            # CMD reads our stdin (the lease's forwarded stdin, or /dev/null), which we then let go.
            proc = subprocess.Popen(argv, cwd=cwd or None, close_fds=True, preexec_fn=cmd_preexec)
        except OSError as e:
            # As a shell, env or timeout do: 127 when CMD is not found, 126 when it cannot be executed.
            if isinstance(e, FileNotFoundError) and e.filename in (None, argv[0]):
                return self.not_started("hyperloom: command not found: %s" % argv[0], 127)
            return self.not_started("hyperloom: cannot execute %s: %s" % (argv[0], e.strerror or e), 126)
        self.report("pid %d" % proc.pid)
        _release_stdin()

        done = threading.Event()

        def waiter():
            proc.wait()
            done.set()

        threading.Thread(target=waiter, daemon=True).start()
        while not done.wait(0.2):
            if os.getppid() != self.parent:
                os.killpg(self.pgid, signal.SIGKILL)  # the worker died: the lease is over, no grace
            if self.stop_asked:
                self.stop_group(done.is_set)  # KILLs us too when CMD outlives the grace
                done.wait()
                break

        code = procgroup.exit_code(proc.returncode)
        # CMD is gone; whatever it left behind in the group goes too, BEFORE the exit is reported:
        # the exit ends the lease (the actor is killed, the slot frees).
        left = self.others()
        if left is None:
            self.stopping = True
            procgroup.killpg(self.pgid, signal.SIGTERM)
        elif left:
            self.stop_group(lambda: not self.others())
        self.report("exit %d" % code)
        return code

