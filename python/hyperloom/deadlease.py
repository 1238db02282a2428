"""The end of what a lease left on its nodes, and the sweep of dead bridges' leases: a lease's
placement group is removed only once hyperloom.gone finds nothing of the lease on each of its
bundles' nodes, checked here when the node is this driver's own, else by a Ray task on that node
(gone.end travels by value, like the actor). Used by the bridges and by hyperloom.tidy."""

import sys

from hyperloom import gone
from hyperloom.gone import END_PATIENCE_SEC, END_TIMEOUT_SEC
from hyperloom.leasename import tokens_of


def bundle_nodes(info, count):
    """The node of each of a placement group's `count` bundles, from its placement_group_table
    entry (keys are ints, or strings in some Ray versions); None for a bundle not placed."""
    nodes = info.get("bundles_to_node_id") or {}
    return [nodes.get(i, nodes.get(str(i))) or None for i in range(count)]


def end_on_node(ray, node_id, token, patience=END_PATIENCE_SEC, timeout=END_TIMEOUT_SEC):
    """Ends what is left of a lease on its node (hyperloom.gone.end): here when the node is this
    driver's own, else by a task on that node. What is left then, [] when gone; None when it could
    not be checked (the node is gone: so is all that ran on it)."""
    if node_id is None:
        return []
    try:
        own = ray.get_runtime_context().get_node_id()
    except Exception:
        own = None
    if node_id == own:
        return gone.end(token, patience, timeout)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    try:
        task = ray.remote(num_cpus=0, max_retries=0)(gone.end).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
        )
        return ray.get(task.remote(token, patience, timeout), timeout=timeout + 30.0)
    except Exception as e:
        sys.stderr.write("hyperloom: cannot check what is left of the lease on node %s: %s\n" % (node_id, e))
        return None


def end_before_letting_go(ray, node_id, token, who, whose):
    """end_on_node before `whose` resources are let go (by `who`, for the stderr line): says what
    still runs when the end ran out of time."""
    left = end_on_node(ray, node_id, token)
    if left:
        sys.stderr.write(
            "%s: letting %s resources go with %s still running after %g s\n" % (who, whose, ", ".join(left), END_TIMEOUT_SEC)
        )


def sweep_dead_leases(ray, patience=END_PATIENCE_SEC, timeout=5.0, jobs=None):
    """Removes the placement groups of leases whose bridge died, once nothing of them runs.

    A lease's group is detached: the death of its bridge (the job's driver) does not free it, as
    the GCS would at once, while the lease's own watchers are still stopping its command. Any
    bridge sweeps them up as it starts and while its own lease waits, and so does the CLI whose
    bridge died (hyperloom.tidy): a group named for a lease (hyperloom.leasename.hold_name), created by a job that
    is dead, goes once hyperloom.gone finds nothing of that lease on any of its bundles' nodes
    (after killing what this user may kill). One whose processes are still there (another
    user's, or not yet dead) is left for a later sweep. `jobs`: only those jobs' groups (hex ids).
    Returns (how many it removed, the names of those it left)."""
    from ray._raylet import PlacementGroupID
    from ray.util.placement_group import PlacementGroup, placement_group_table, remove_placement_group

    try:
        table = placement_group_table()
        dead = {j.get("JobID") for j in ray._private.state.state.job_table() if j.get("IsDead")}
    except Exception:
        return 0, []
    removed, left_ = 0, []
    for pgid, info in table.items():
        tokens = tokens_of(info.get("name"))
        # A placement group's id ends with its creator job's id.
        job = pgid[-8:]
        if tokens is None or info.get("state") == "REMOVED" or (jobs is not None and job not in jobs):
            continue
        if job not in dead:
            if jobs is not None:
                left_.append(info.get("name"))
            continue
        left = []
        if info.get("state") != "PENDING":
            for node, token in zip(bundle_nodes(info, len(tokens)), tokens):
                left = end_on_node(ray, node, token, patience, timeout)
                if left is None or left:
                    break
        if left is None or left:
            left_.append(info.get("name"))
            continue
        try:
            remove_placement_group(PlacementGroup(PlacementGroupID(bytes.fromhex(pgid))))
            removed += 1
        except Exception as e:
            left_.append(info.get("name"))
            sys.stderr.write("hyperloom: removing a dead lease's placement group failed: %s\n" % e)
    return removed, left_
