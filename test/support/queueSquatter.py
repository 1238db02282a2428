"""A foreign local user's tries at the host queue, for test/services/HostQueue.test.ts (run as
uid 65534 through setpriv by the test; the host's own python3).

    python3 queueSquatter.py ticket DIR NAME RECORD_JSON   make DIR/NAME 0644 with RECORD_JSON, lock it
    python3 queueSquatter.py hold PATH                      open PATH read-only and lock it (waits)

`{pid}` in NAME and RECORD_JSON is this process's pid. Prints `locked` once it holds the
exclusive flock(2), then stays until killed.
"""
import fcntl
import os
import sys
import time

mode = sys.argv[1]
pid = str(os.getpid())
if mode == "ticket":
    path = os.path.join(sys.argv[2], sys.argv[3].replace("{pid}", pid))
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    os.fchmod(fd, 0o644)
    os.write(fd, (sys.argv[4].replace("{pid}", pid) + "\n").encode())
else:
    fd = os.open(sys.argv[2], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked %s" % pid, flush=True)
time.sleep(600)
