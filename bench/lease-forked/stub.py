"""bench/lease.mjs --split only: the bridge's stand-in that the CLI starts (see zygote.py).

Hands its stdio, argv, environment and working directory to the zygote, forwards TERM, INT and
HUP to the forked bridge, and exits with the bridge's code (137 if it ended without one).

    python -S -E stub.py SOCKET PYDIR bridge [ARGS...]
"""

import json
import os
import signal
import socket
import sys

conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
conn.connect("\0" + sys.argv[1])
request = {"argv": sys.argv[4:], "env": dict(os.environ), "cwd": os.getcwd()}
socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
replies = conn.makefile("rb")
pid = json.loads(replies.readline())["pid"]


def forward(signum, _frame):
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(signum, forward)
last = replies.readline()
os._exit(json.loads(last)["exit"] if last else 137)
