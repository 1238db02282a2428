"""Ends what a dead bridge left of its lease, then lets its resources go (`python PYDIR tidy`).

    python PYDIR tidy --address HOST:PORT --job JOB_HEX [--timeout SEC]

hyperloom runs this when its bridge (a lease's or a group's) died before it released: the lease's
placement group is detached, so it still holds the slot and the GPUs while a keeper may still be
killing the command (or, frozen, not). This waits until the GCS has the bridge's job dead, then
sweeps the job's lease groups (hyperloom.deadlease.sweep_dead_leases: what is left of each bundle's
rank on its node is ended by the lease's token, then the group is removed) until none is left or
--timeout passes. It prints one JSON line on stdout, its only output there:

    {"removed": N, "left": ["<placement group name>", ...]}

Exit status 0 when nothing of the job's is left, 1 when something is (named in "left"), 2 when
the cluster cannot be reached. Without it, the next lease's bridge sweeps the same groups.
"""

import argparse
import json
import logging
import os
import sys
import time

from hyperloom import deadlease, shipping
from hyperloom.endpoint import describe, probe_tcp

POLL_SEC = 0.2
JOB_DEATH_WAIT_SEC = 10.0


def job_dead(ray, job):
    try:
        return any(j.get("JobID") == job and j.get("IsDead") for j in ray._private.state.state.job_table())
    except Exception:
        return False


def tidy(ray, job, timeout):
    """(removed, left): the job's lease groups removed, and the names of those still there."""
    deadline = time.monotonic() + timeout
    dead_by = time.monotonic() + min(JOB_DEATH_WAIT_SEC, timeout)
    while not job_dead(ray, job) and time.monotonic() < dead_by:
        time.sleep(POLL_SEC)
    removed = 0
    while True:
        done, left = deadlease.sweep_dead_leases(ray, jobs={job})
        removed += done
        if not left or time.monotonic() >= deadline:
            return removed, left
        time.sleep(POLL_SEC)


def main(argv):
    parser = argparse.ArgumentParser(
        prog="python PYDIR tidy",
        description="End what a dead bridge's lease left running, then remove its placement group.",
    )
    parser.add_argument("--address", required=True, help="the GCS address (host:port)")
    parser.add_argument("--job", required=True, help="the dead bridge's Ray job id (hex)")
    parser.add_argument("--timeout", type=float, default=40.0, help="seconds at most (default 40)")
    args = parser.parse_args(argv)
    # stdout carries the one result line: everything else (Ray's prints too) goes to stderr.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    unreachable = probe_tcp(args.address)
    if unreachable is not None:
        sys.stderr.write("hyperloom tidy: cannot reach the GCS: %s\n" % unreachable)
        return 2
    import ray

    try:
        ray.init(address=args.address, namespace="hyperloom", logging_level=logging.ERROR, log_to_driver=False)
    except BaseException as e:
        sys.stderr.write("hyperloom tidy: %s\n" % describe(e))
        return 2
    shipping.register_by_value(ray)  # end_on_node may run gone.end as a task on another node
    removed, left = tidy(ray, args.job, args.timeout)
    out.write(json.dumps({"removed": removed, "left": left}) + "\n")
    out.flush()
    try:
        ray.shutdown()
    except Exception:
        pass
    return 0 if not left else 1
