"""The command supervisor: runs one lease's command (CMD), reports on a private status fd
("containment cgroup|subreaper", "pid N" or "failed", then "exit N"), and reports the exit only
once everything CMD started is gone (leftovers: TERM, grace, KILL), because the exit ends the lease.

    python -I PYDIR supervise --grace SEC [--status-fd FD] [--parent PID] [--cwd DIR]
                              [--owner-pid PID [--owner-start TICKS]]
                              [--containment auto|subreaper] [--gpus IDS --gpu-clean-timeout S]
                              [--hold-fd FD] [--lease-token TOKEN] -- ARGV...

--hold-fd FD (a group rank): once the clean-GPU gate has passed, report "clean" and start CMD only
when a byte arrives on FD; EOF, TERM or the parent's or owner's death first: CMD never starts
("failed", "exit 143"). The group bridge sends that byte to every rank once every rank is clean,
so that no rank's command runs while another rank's GPUs are still held (all ranks or none).

Exit status: CMD's (128+signal if killed, 127 if it was not found, 126 if it could not be
executed, 2 usage). Standard library only: the lease actor runs it with `python -I` from the
package folder, or from a copy of it on a node that has only Ray (see hyperloom.actor).

Containment (docs/design.md#contained): the supervisor and its keeper lead a session and process
group of their own; CMD runs in a process group of its own (a signal CMD sends to its group does not
reach them). Everything CMD starts is found whatever group or session it moves to: in the lease's
cgroup (hyperloom.cgroup) where the host allows one ("containment cgroup"), and always as the
supervisor's descendants, since it is a child subreaper (orphans come back to it, not to init).
How it ends with the lease (see the package's text for the whole picture): TERM/INT/HUP stop
CMD (TERM, grace, KILL, every process of the lease); the parent's death (PR_SET_PDEATHSIG,
checked against the parent's pid, and polled) or the owner's (the bridge) KILLs everything at
once; its own death is seen by its keeper (hyperloom.keeper), which KILLs what it was told of.
Each wakes the other when it finds it stopped (SIGSTOP)."""

import argparse
import os
import select
import signal
import subprocess
import sys
import threading
import time

from hyperloom import cgroup, gone, gpus, keeper, procgroup

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
TICK_SEC = 0.2
KILL_WAIT_SEC = 5.0


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write("hyperloom supervisor: bad arguments (%s)\n" % message)
        sys.exit(2)


def parse_args(args):
    p = _Parser(prog="hyperloom supervise", add_help=False, allow_abbrev=False)
    p.add_argument("--status-fd", type=int)
    p.add_argument("--parent", type=int)
    p.add_argument("--cwd")
    # The grace and the clean-GPU wait are hyperloom's (TypeScript), passed down: no default here.
    p.add_argument("--grace", type=float, required=True)
    p.add_argument("--owner-pid", type=int)
    p.add_argument("--owner-start", type=int)
    p.add_argument("--containment", choices=("auto", "subreaper"), default="auto")
    p.add_argument("--gpus", type=gpus.parse_gpu_list, default=[])  # the leased GPUs (hyperloom.gpus)
    p.add_argument("--gpu-clean-timeout", type=float)  # required with --gpus
    p.add_argument("--hold-fd", type=int)  # a group rank: start CMD on the bridge's word (see above)
    # The lease's token (hyperloom.gone): in our argv (and our keeper's, a fork) and our cgroup's name.
    p.add_argument("--lease-token", type=_token)
    p.add_argument("argv", nargs=argparse.REMAINDER)
    ns = p.parse_args(args)
    if ns.argv[:1] == ["--"]:
        ns.argv = ns.argv[1:]
    elif ns.argv:
        p.error("unrecognized arguments: %s (the command goes after --)" % " ".join(ns.argv))
    if ns.gpus and ns.gpu_clean_timeout is None:
        p.error("--gpus needs --gpu-clean-timeout")
    return ns


def _token(text):
    if not text or len(text) > 64 or not all(c.isalnum() or c in "-_" for c in text):
        raise argparse.ArgumentTypeError("a lease token is 1-64 letters, digits, - or _")
    return text


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
        self.parent_start = procgroup.start_time(self.parent)
        self.stop_asked = False
        self.status = None
        self.keeper_pid = None
        self.keeper_fd = None
        self.keeper_lines = []  # what the keeper was told, for a new keeper should it die
        self.prctl = None
        self.cg = None
        self.cmd_pid = None
        self.tracked = {}  # descendant pid -> start time, told to the keeper
        self.reaped = set()  # our children the reaper thread has waited for (the keeper among them)

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
        self.stop_asked = True

    def on_parent_death(self, signum, frame):
        # PR_SET_PDEATHSIG fires when the parent *thread* ends (a Ray worker thread may end
        # while the actor lives): only a changed parent process counts. The lease is over (Ray
        # has freed its resources): no grace, everything goes at once.
        if os.getppid() != self.parent:
            self.kill_all()

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
        if prctl is not None:
            prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    # -- the keeper

    def start_keeper(self):
        owner = (self.ns.owner_pid, self.ns.owner_start)
        # The keeper also watches our parent (the Ray worker): Ray frees the lease's resources as
        # the worker dies, and we may be stopped (SIGSTOP) then, with our PR_SET_PDEATHSIG pending.
        worker = (self.parent, self.parent_start)
        self.keeper_pid, self.keeper_fd = keeper.start(self.pgid, owner, watch=[worker])
        for line in self.keeper_lines:
            keeper.tell(self.keeper_fd, line)

    def tell_keeper(self, line):
        self.keeper_lines.append(line)
        keeper.tell(self.keeper_fd, line)

    def watch_keeper(self, reaped):
        """Wakes a stopped keeper; forks a new one when it died (it is our child: `reaped`)."""
        if self.keeper_pid is None:
            return
        if self.keeper_pid in reaped:
            os.close(self.keeper_fd)
            self.start_keeper()
        elif procgroup.is_stopped(self.keeper_pid):
            try:
                os.kill(self.keeper_pid, signal.SIGCONT)
            except OSError:
                pass

    def retire_keeper(self, gone):
        """Once the lease is empty: SIGKILL the keeper and wait (bounded) until `gone()` says it
        was reaped, so that nothing of ours outlives the exit report (left to end on our exit's
        EOF, it was still running, a fork of us, after the lease had ended). While anything of
        the lease is left, the keeper stays: our exit is its cue to KILL what is left."""
        if self.keeper_pid is None or not self.empty():
            return
        try:
            os.kill(self.keeper_pid, signal.SIGKILL)
        except OSError:
            pass
        deadline = time.monotonic() + KILL_WAIT_SEC
        while not gone() and time.monotonic() < deadline:
            time.sleep(0.01)
        try:
            os.close(self.keeper_fd)
        except OSError:
            pass
        self.keeper_pid = None

    # -- the lease's processes

    def members(self, table=None):
        """Live processes of the lease (CMD and all it started), whatever group they are in."""
        found = set(procgroup.descendants(self.me, exclude=(self.keeper_pid,), table=table) or [])
        if self.cg is not None:
            found.update(self.cg.pids() or [])
        if self.cmd_pid is not None:
            found.update(procgroup.group_members(self.cmd_pid) or [])
        found.discard(self.me)
        found.discard(self.keeper_pid)
        return sorted(found)

    def empty(self):
        if self.cg is not None and self.cg.populated():
            return False
        return not self.members()

    def signal_all(self, sig):
        if sig == signal.SIGKILL and self.cg is not None:
            self.cg.kill()
        for pid in self.members():
            try:
                os.kill(pid, sig)
            except OSError:
                pass
            if sig == signal.SIGTERM and procgroup.is_stopped(pid):
                try:
                    os.kill(pid, signal.SIGCONT)  # a stopped process cannot act on TERM
                except OSError:
                    pass

    def kill_all(self):
        self.signal_all(signal.SIGKILL)

    def stop_all(self, grace):
        """TERM every process of the lease, `grace` seconds, KILL; until none is left (bounded).

        The main loop's guard duties go on during the grace: a stopped keeper is woken and a dead
        one replaced (the release is when Ray is likeliest to SIGKILL us: a worker running the
        stop call of a bridge that dies exits at once and kills its children, and a keeper left
        frozen then guards nothing), and the end of the worker or the bridge cuts the grace short."""
        if self.empty():
            return
        self.signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and not self.empty():
            self.watch_keeper(self.reaped)
            if os.getppid() != self.parent or self.owner_gone():
                break  # the lease is over: no grace
            time.sleep(0.05)
        deadline = time.monotonic() + KILL_WAIT_SEC
        while not self.empty() and time.monotonic() < deadline:
            self.kill_all()
            time.sleep(0.02)

    def track(self):
        """Without a cgroup: tell the keeper each descendant (it kills them should we die)."""
        for pid in self.members():
            if pid not in self.tracked:
                start = procgroup.start_time(pid)
                if start is not None:
                    self.tracked[pid] = start
                    self.tell_keeper("pid %d %d" % (pid, start))

    def watch_owner(self):
        """A thread: the moment the owner (the bridge) ends, KILL the lease and wake the keeper.
        Ray frees the lease's resources as the bridge's job ends, so this cannot wait for the
        next tick; the keeper watches the owner too, but may be stopped (SIGSTOP)."""
        fd = procgroup.pidfd(self.ns.owner_pid, self.ns.owner_start)
        if fd is None:
            return  # no pidfds here: the loop polls the owner
        while fd != "gone":
            try:
                ready, _, _ = select.select([fd], [], [])
            except InterruptedError:
                continue
            if ready:
                break
        self.kill_all()
        if self.keeper_pid is not None and procgroup.is_stopped(self.keeper_pid):
            try:
                os.kill(self.keeper_pid, signal.SIGCONT)
            except OSError:
                pass

    def owner_gone(self):
        pid = self.ns.owner_pid
        if pid is None:
            return False
        start = procgroup.start_time(pid)
        return start is None or (self.ns.owner_start is not None and start != self.ns.owner_start)

    # -- the run

    def run(self):
        # A session and process group of our own (us and the keeper); CMD gets another group.
        if os.getpgrp() != os.getpid():
            try:
                os.setsid()
            except OSError:
                os.setpgid(0, 0)
        self.pgid = os.getpgrp()
        self.open_status()
        self.install_signals()
        if os.getppid() != self.parent:  # died before the prctl took effect
            return 137
        why = "asked for" if self.ns.containment == "subreaper" else None
        if why is None:
            if self.ns.lease_token is not None:
                name = gone.cgroup_name(self.ns.lease_token)
            else:
                name = gone.cgroup_name("%d-%d" % (self.me, procgroup.start_time(self.me) or 0))
            self.cg, why = cgroup.LeaseCgroup.create(name)
        # The keeper: the raylet SIGKILLs a dying worker's direct children (us), and our own
        # cleanup never runs then; the keeper is not the worker's child, so Ray leaves it alone.
        self.start_keeper()
        if self.cg is not None:
            self.tell_keeper("cgroup %s" % self.cg.path)
        try:
            code = self.run_command()
        finally:
            if self.cg is not None and not self.cg.remove():
                sys.stderr.write("hyperloom supervisor: cannot remove %s\n" % self.cg.path)
        if self.status is not None:
            try:
                self.status.close()
            except OSError:
                pass
        return code  # our exit closes the keeper's pipe: it SIGKILLs whatever is left, then itself

    def not_started(self, message, code):
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
        self.retire_keeper(lambda: procgroup.reap(self.keeper_pid, 0))
        self.report("failed")
        self.report("exit %d" % code)
        return code

    def hold(self, fd):
        """A group rank's GPUs are clean: say so, then wait for the word to start CMD (a byte on
        `fd`). False when the lease ended first (EOF, TERM, the worker or the owner gone)."""
        self.report("clean")
        go = False
        try:
            while not self.stop_asked and os.getppid() == self.parent and not self.owner_gone():
                ready, _, _ = select.select([fd], [], [], TICK_SEC)
                if ready:
                    go = os.read(fd, 1) != b""
                    break
        except OSError:
            go = False
        finally:
            try:
                os.close(fd)
            except OSError:
                pass
        return go and not self.stop_asked

    def run_command(self):
        argv, cwd = self.ns.argv, self.ns.cwd
        if cwd and not os.path.isdir(cwd):
            return self.not_started("hyperloom: working directory does not exist: %s" % cwd, 127)
        prctl, me, cg = self.prctl, self.me, self.cg
        # Clean GPUs (hyperloom.gpus): no process outside the lease holds the leased GPUs.
        own = (self.me, self.keeper_pid)
        refused = gpus.supervisor_gate(self.ns.gpus, self.ns.gpu_clean_timeout, own, lambda: self.stop_asked, self.report)
        if refused is not None:
            return refused
        if self.ns.hold_fd is not None and not self.hold(self.ns.hold_fd):
            self.retire_keeper(lambda: procgroup.reap(self.keeper_pid, 0))
            self.report("failed")
            self.report("exit 143")
            return 143  # released before it started: as a command stopped by TERM

        def cmd_preexec():
            if cg is not None:
                try:
                    cg.join()
                except OSError:
                    pass  # seen below: the supervisor falls back to the subreaper alone
            os.setpgid(0, 0)  # a group of CMD's own: its signals to its group stay there
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
        self.cmd_pid = proc.pid
        self.tell_keeper("pgid %d" % proc.pid)
        fields = procgroup.stat_fields(proc.pid)  # not proc.poll(): the reaper alone waits
        alive = fields is not None and fields[0] not in ("Z", "X")
        if self.cg is not None and alive and proc.pid not in (self.cg.pids() or []):
            self.cg.remove(0)  # could not join it (a cgroup we may make but not move into)
            self.cg = None
        self.report("containment %s" % ("cgroup" if self.cg is not None else "subreaper"))
        self.report("pid %d" % proc.pid)
        _release_stdin()

        # We reap every child: CMD, the keeper, and (a subreaper) every orphan of the lease.
        done = threading.Event()
        result = {"status": None}
        reaped = self.reaped

        def reaper():
            while True:
                try:
                    # WUNTRACED: a child that is stopped is reported too, so a keeper SIGSTOPped
                    # is woken the moment it stops, not at the next tick.
                    pid, status = os.waitpid(-1, os.WUNTRACED)
                except ChildProcessError:
                    time.sleep(0.05)
                    continue
                except InterruptedError:
                    continue
                if os.WIFSTOPPED(status):
                    if pid == self.keeper_pid:
                        try:
                            os.kill(pid, signal.SIGCONT)
                        except OSError:
                            pass
                    continue
                reaped.add(pid)
                if pid == proc.pid:
                    result["status"] = status
                    proc.returncode = os.waitstatus_to_exitcode(status)
                    done.set()

        threading.Thread(target=reaper, daemon=True).start()
        if self.ns.owner_pid is not None:
            threading.Thread(target=self.watch_owner, daemon=True).start()
        while not done.wait(TICK_SEC):
            if os.getppid() != self.parent or self.owner_gone():
                self.kill_all()  # the worker or the bridge died: the lease is over, no grace
            self.watch_keeper(reaped)
            if self.cg is None:
                self.track()
            if self.stop_asked:
                self.stop_all(self.ns.grace)
                done.wait(KILL_WAIT_SEC)
                break

        code = procgroup.exit_code(proc.returncode if proc.returncode is not None else -signal.SIGKILL)
        # CMD is gone; whatever it left behind goes too, BEFORE the exit is reported: the exit
        # ends the lease (the actor is killed, the slot frees).
        self.stop_all(self.ns.grace)
        gpus.supervisor_reclaim(self.ns.gpus, self.pgid, self.me)  # the lease's GPUs let go
        keeper_pid = self.keeper_pid
        self.retire_keeper(lambda: keeper_pid in reaped)
        self.report("exit %d" % code)
        return code
