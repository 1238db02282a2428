"""The heartbeat fence (docs/design.md#fencing-an-unreachable-node), one copy for both bridges: a
lease actor on a node other than its bridge's (a group's every rank, a single lease placed on
another host) hears from the bridge every BEAT_EVERY_SEC, and stops its command by itself (TERM,
the grace, KILL, as on any end) once it heard nothing for the heartbeat timeout, which is below
the time Ray takes to declare an unreachable node dead: the command is gone before the slot it
held can be granted again. Standard library only (Ray is handed in); pickled by value with the
actor class like the rest of the package.

Ray declares an unreachable node dead, and frees its slot, only after
`health_check_failure_threshold` health checks in a row failed, each after
`health_check_timeout_ms`, `health_check_period_ms` apart (5 x (10 s + 3 s) = 65 s by default,
measured 63-69 s); a bridge reads those values as the cluster has them (ray start
--system-config reaches drivers through the GCS)."""

import threading
import time

DEFAULT_NODE_DEATH_SEC = 65.0  # Ray 2.58's defaults: 5 x (10 s + 3 s)
DEFAULT_HEALTH_PERIOD_SEC = 3.0
# What a fencing actor needs beyond the stop grace to have its command gone: its watch's poll (at
# most 1 s) and the KILL and reaping after the grace. Measured on two hosts of their own
# (docs/multi-node.md): a rank whose heartbeat was 8 s had its command gone 9.8 s after the cut.
FENCE_SLACK_SEC = 2.0
# How often a bridge beats its actors: an actor's silence then starts at most this long before a
# cut, so a cut shorter than (heartbeat - BEAT_EVERY_SEC) never fences.
BEAT_EVERY_SEC = 1.0


def health_check(ray):
    """Ray's health checks as this connected driver has them: (failures in a row, period s,
    timeout s); Ray 2.58's documented defaults for a Ray without these settings."""
    try:
        config = ray._raylet.Config
        return (config.health_check_failure_threshold(), config.health_check_period_ms() / 1000.0,
                config.health_check_timeout_ms() / 1000.0)
    except Exception:
        return 5, DEFAULT_HEALTH_PERIOD_SEC, DEFAULT_NODE_DEATH_SEC / 5 - DEFAULT_HEALTH_PERIOD_SEC


def node_death_sec(ray):
    """How long Ray takes to declare an unreachable node dead: its failed health checks in a row,
    each one's timeout plus the period between them, as this connected driver has them."""
    threshold, period, timeout = health_check(ray)
    return threshold * (timeout + period)


def heartbeat_sec(death_sec, period_sec, grace_sec):
    """The heartbeat timeout: an actor that hears nothing for this long stops its command, which
    is then gone within the grace and FENCE_SLACK_SEC, before Ray can declare its node dead (at
    the earliest one health-check period before death_sec: the cut may fall just before a check)
    and grant its slot again. As late as that allows, so that a cut Ray survives, the run
    survives."""
    return max(1.0, death_sec - period_sec - grace_sec - FENCE_SLACK_SEC)


def timing(ray, grace_sec):
    """(heartbeat timeout, node-death time) for a connected driver whose actors stop with that grace."""
    threshold, period, timeout = health_check(ray)
    death = threshold * (timeout + period)
    return heartbeat_sec(death, period, grace_sec), death


def beat_every(heartbeat):
    """How often a bridge beats: every second, more often under a heartbeat below 5 s."""
    return min(BEAT_EVERY_SEC, heartbeat / 5.0)


def silent_line(who, silent):
    return "hyperloom %s: nothing from the bridge for %.0f s: stopping the command (fenced)" % (who, silent)


def watch(last_beat, heartbeat, done, on_silent):
    """Starts the watch, a daemon thread: once `last_beat()` (a time.monotonic()) is more than
    `heartbeat` seconds old, calls `on_silent(seconds silent)` once and ends; ends as well when
    `done` (a threading.Event) is set."""

    def run():
        while not done.wait(min(1.0, heartbeat / 5.0)):
            silent = time.monotonic() - last_beat()
            if silent > heartbeat:
                on_silent(silent)
                return

    threading.Thread(target=run, daemon=True).start()


def beat_loop(targets, every, over):
    """A bridge's heartbeat, run in a daemon thread: every `every` seconds until `over()`, calls
    `beat` on each actor `targets()` lists (fire and forget: a dead actor is its pump's news)."""
    while not over():
        for actor in targets():
            try:
                actor.beat.remote()
            except Exception:
                pass  # a dead actor: its pump reports it
        time.sleep(every)
