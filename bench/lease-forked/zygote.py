"""bench/lease.mjs --split only: a measurement of a design hyperloom does not use.

A Python that has already imported Ray and hyperloom's bridge forks one bridge per lease: what a
trivial lease would cost if `import ray` were paid once per host instead of once per lease. The
stub (stub.py) hands it the CLI's stdio, argv, environment and working directory; the forked child
runs hyperloom.bridge.main with them and, as it exits, appends its own CPU (user + sys, itself and
its waited-for children) to TIMES, so that the bench counts what the lease cost wherever it ran.

    python zygote.py PYDIR SOCKET TIMES      (SOCKET: an abstract unix socket's name)
"""

import json
import os
import resource
import signal
import socket
import sys

PYDIR, NAME, TIMES = sys.argv[1:4]
sys.path.insert(0, PYDIR)

import ray.util.placement_group  # noqa: E402

import hyperloom.bridge  # noqa: E402

# Imported once, before any fork: the point of the measurement.
PRELOADED = (ray.util.placement_group, hyperloom.bridge)


def cpu_seconds():
    own = resource.getrusage(resource.RUSAGE_SELF)
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime


def child(conn, fds, request):
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    conn.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")
    real_exit = os._exit

    def exit_counted(code):
        with open(TIMES, "a") as f:
            f.write("%.3f\n" % cpu_seconds())
        try:
            conn.sendall(json.dumps({"exit": code}).encode() + b"\n")
        except OSError:
            pass
        real_exit(code)

    # The bridge ends with os._exit (no interpreter teardown): count it there, and on a return.
    os._exit = exit_counted
    code = 1
    try:
        code = hyperloom.bridge.main(request["argv"]) or 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    finally:
        sys.stdout.flush()
    exit_counted(code)


def main():
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind("\0" + NAME)
    server.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reaped by the kernel
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        if os.fork() == 0:
            server.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            child(conn, fds, json.loads(message))
        for fd in fds:
            os.close(fd)
        conn.close()


main()
