"""The names a lease goes by in Ray: its token (by which hyperloom.gone finds what is left of it
on a node), the name of the placement group that holds its resources (the lease's name and its
tokens, one per bundle), and the lease actor's own name, as whoever meets the holder of a busy
slot reads it. Standard library only."""

import os
import re
import time


def new_token():
    """A lease's token (hyperloom.gone): unique on every host, one word in an argv."""
    import secrets

    return "hl-" + secrets.token_hex(8)


# A lease's placement group is named for its lease and its tokens, one per bundle in bundle
# order (a single lease has one, a group one per rank): "<lease name> [hl-… hl-…]".
_TOKENS_IN_NAME = re.compile(r"\[(hl-[0-9a-f]{16}(?: hl-[0-9a-f]{16})*)\]$")


def hold_name(name, tokens):
    """The name of the placement group that holds a lease's resources: `tokens` (one, or one per
    bundle) are what is left of the lease is found by on each bundle's node (hyperloom.gone)."""
    if isinstance(tokens, str):
        tokens = [tokens]
    return "%s [%s]" % (name, " ".join(tokens))


def tokens_of(name):
    """The tokens in a lease's placement group's name (`hold_name`), one per bundle; None if none."""
    m = _TOKENS_IN_NAME.search(name or "")
    return m.group(1).split(" ") if m else None


def lease_name(argv, gpus, now=None, lease_id=None):
    """The lease actor's Ray name, as whoever sees the holder of a busy slot reads it (a waiting
    lease, `ray status`, `ray doctor`, `queue`): its command, user, GPUs, since when (its
    submission: a lease of this host's queue is submitted when its turn comes), and its bridge
    (host and pid), which also keeps the name unique; and its lease id in the host's queue, by
    which the waiters behind it see that it asked Ray (services/HostQueue.ts, programs/Queue.ts)."""
    import getpass
    import shlex
    import socket

    cmd = " ".join(shlex.quote(a) for a in argv)
    if len(cmd) > 80:
        cmd = cmd[:77] + "..."
    try:
        user = getpass.getuser()
    except Exception:
        user = "uid %d" % os.getuid()
    gpus_text = ("%g GPU" % gpus) + ("" if gpus == 1 else "s")
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(now))
    queued = "" if not lease_id else ", lease %s" % lease_id
    return "lease `%s` of %s, %s, since %s (bridge %s:%d%s)" % (
        cmd, user, gpus_text, since, socket.gethostname(), os.getpid(), queued)
