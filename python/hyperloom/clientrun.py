"""One client run against the lease's engine: the one loop both runners use (hyperloom.serve: the
serving attempt's one client; hyperloom.sweep: each run a sweep asks for).

`run` checks, right before the client starts, that nothing but the lease's engine listens on the
engine's port (hyperloom.listener: a squatter's answers would be measured as the engine's; the
run is refused, exit PORT_TAKEN_EXIT, and the line naming the squatter goes to client.log, the
engine's server.log and stderr); runs the client (argv, no shell, $HYPERLOOM_* expanded) in a
process group of its own led by a keeper (hyperloom.keeper: killed whole when the runner ends,
however); copies its output live to the runner's stdout/stderr and, whole, to RUN_DIR/client.log
(hyperloom.tee); stops it (TERM, stop grace, KILL) when the runner is stopped, when it runs past
`timeout` seconds, or AFTER_DEATH_GRACE_SEC after the engine died under it; and returns a
`Result`.

Samplers: `samplers` is a list of (name, sampler) pairs; each sampler's `start(pid)` is called
right after the client started (its pid), its `stop()` right after the client ended, and what
`stop()` returns is the run's `observations[name]` (the runners put it in the run's answer). A
sampler that raises is logged and left out; it never fails the run.
Standard library only; Python >= 3.8; Linux."""

import os
import signal
import subprocess
import time

from hyperloom import engine, keeper, listener, procgroup
from hyperloom.engine import CLIENT_LOG
from hyperloom.tee import Tee

PORT_TAKEN_EXIT = 3  # a client run refused: a process outside the lease listens on the engine's port
POLL_SEC = 0.01
# A client still running this long after the engine died is stopped (the real clients end fast).
AFTER_DEATH_GRACE_SEC = 10.0


class Result:
    """One client run: `exit_code` (None when it timed out or was stopped before its end),
    `timed_out`, `runtime_sec`, `started`/`ended` (wall clock), `port_taken` (the line naming a
    squatter, the client then never ran), `start_error` (it could not be started: exit 127),
    `observations` ({name: what a sampler saw})."""

    def __init__(self, exit_code, runtime_sec, started, ended, timed_out=False, port_taken=None, start_error=None,
                 observations=None):
        self.exit_code = exit_code
        self.timed_out = timed_out
        self.runtime_sec = runtime_sec
        self.started = started
        self.ended = ended
        self.port_taken = port_taken
        self.start_error = start_error
        self.observations = observations or {}


def _samplers(samplers, method, log, *args):
    out = {}
    for name, sampler in samplers:
        try:
            got = getattr(sampler, method)(*args)
        except Exception as e:  # a sampler never fails the run
            log("sampler %s: %s failed: %r" % (name, method, e))
            continue
        if method == "stop" and got is not None:
            out[name] = got
    return out


def run(argv, env, cwd, run_dir, eng, stop_requested, stop_grace, log, prefix="hyperloom", timeout=None,
        on_stop=None, samplers=()):
    """Runs the client `argv` (its arguments expanded with `env`) in `cwd` against `eng` (a
    hyperloom.engine.Engine that is ready), its log in RUN_DIR/client.log. `stop_requested`: an
    Event (the runner being stopped); `on_stop()`: called once at a stop, right after the client was
    sent TERM (the serving runner stops its engine there, so that one grace covers both); `prefix`
    starts the lines this writes into client.log; `log(msg)`: the runner's stderr line."""
    argv = [engine.expand(x, env) for x in argv]
    tee = Tee(os.path.join(run_dir, CLIENT_LOG), log)
    t0 = time.time()
    started = time.monotonic()
    taken = listener.Watch(eng.port, eng.log_path).check(eng.pid, eng.pgid, now=True)
    if taken:  # the run would measure another process: the client does not run
        tee.note(("%s: %s\n" % (prefix, taken)).encode())
        tee.close()
        log(taken)
        return Result(PORT_TAKEN_EXIT, 0.0, t0, time.time(), port_taken=taken)
    group = keeper.Group()
    try:
        client = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, cwd=cwd, close_fds=True, preexec_fn=group.join(),
        )
    except OSError as e:
        why = "cannot start the client %s: %s" % (argv[0] if argv else "?", e.strerror or e)
        tee.note(("%s: %s\n" % (prefix, why)).encode())
        tee.close()
        log(why)
        group.stop(0.1)
        return Result(127, 0.0, t0, time.time(), start_error=why)

    tee.start(client)
    _samplers(samplers, "start", log, client.pid)
    timed_out = False
    stopped = False
    died_at = None
    while client.poll() is None:
        if stop_requested.wait(POLL_SEC):
            stopped = True
            break
        now = time.monotonic()
        if timeout is not None and now - started >= timeout:
            timed_out = True
            log("the client ran past the point timeout (%s s); stopping it" % timeout)
            break
        if died_at is None and not eng.alive():
            died_at = now
            log("the %s exited with code %s while the client ran" % (eng.noun, eng.exit_code))
        if died_at is not None and now - died_at >= AFTER_DEATH_GRACE_SEC:
            break
    if client.poll() is None:
        if stopped and on_stop is not None:
            procgroup.killpg(group.pgid, signal.SIGTERM)
            on_stop()
            group.stop(0.5)
        else:
            group.stop(stop_grace)
        client.wait()
    else:
        group.stop(0.2)  # whatever it left behind in its group
    tee.close()
    observations = _samplers(samplers, "stop", log)
    code = None if timed_out else procgroup.exit_code(client.returncode)
    return Result(code, round(time.monotonic() - started, 3), t0, time.time(), timed_out=timed_out,
                  observations=observations)
