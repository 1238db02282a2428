"""The JSON-lines endpoint both bridges are (hyperloom.bridge, hyperloom.group): protocol lines
out on a private copy of stdout, requests in from stdin, signals and a closed stdout as events
on one inbox, and the life both lead (import Ray, one request, serve its events, release).
Also the protocol's small helpers: a quick TCP probe before ray.init, Ray errors in one line."""

import json
import os
import queue
import signal
import sys
import threading
import time

from hyperloom import deadlease, shipping


# How often a waiting bridge sweeps up dead bridges' lease groups (JsonLinesEndpoint.sweep).
SWEEP_SEC = 1.0


class ProtocolError(Exception):
    pass


class JsonLinesEndpoint:
    """The protocol's plumbing, shared by this bridge and the group bridge (hyperloom.group):
    protocol lines out on `out` (one writer at a time; a closed stdout is an inbox event), JSON
    objects in from stdin, and TERM/INT/HUP, all as events on one inbox. And the life both lead:
    import Ray, read the one request (op `OP`, checked by `parse`), `start` it (which may
    `connect`), `serve` its events until an end (`on_control`), `release` (`free` what the
    request holds, disconnect, say `released`)."""

    OP = None  # the request's op ("lease", "group")
    WHO = None  # this bridge on stderr ("hyperloom bridge", "hyperloom group")

    def __init__(self, out):
        self.out = out
        self.out_lock = threading.Lock()
        # SimpleQueue: its put() is reentrant, so signal handlers may use it.
        self.inbox = queue.SimpleQueue()
        self.stdout_gone = False
        self.ray = None
        self.connected = False
        self.grace = None  # the request's stop_grace_sec: hyperloom (TypeScript) holds the default
        self.releasing = False

    # -- to be provided by each bridge

    def parse(self, msg):
        """The request's fields, checked; raises ProtocolError."""
        raise NotImplementedError

    def start(self, spec):
        """Starts what the request asks for. None on success (then `serve`), else the exit status."""
        raise NotImplementedError

    def serve(self):
        """Relays events until the end; returns the exit status (from `release`)."""
        raise NotImplementedError

    def free(self):
        """Stops what the request holds (commands, actors, placement group), for `release`."""
        raise NotImplementedError

    # -- lifecycle

    def main(self):
        threading.Thread(target=self.read_stdin, daemon=True).start()
        self.install_signal_handlers()
        try:
            import ray
        except Exception as e:  # ImportError, or a broken installation
            self.emit_error("ray_import", "cannot import ray in %s: %s" % (sys.executable, e))
            return self.release(1)
        self.ray = ray
        shipping.register_by_value(ray)  # before any ray.remote: the nodes need only Ray

        kind, payload = self.inbox.get()
        if kind != "msg":
            return self.release(1 if kind == "bad" else 0, bad=payload if kind == "bad" else None)
        op = payload.get("op")
        if op == "release":
            return self.release(0)
        if op != self.OP:
            return self.release(1, bad="expected op %s or release, got %r" % (self.OP, op))
        try:
            spec = self.parse(payload)
        except ProtocolError as e:
            return self.release(1, bad=str(e))
        code = self.start(spec)
        if code is not None:
            return self.release(code)
        return self.serve()

    def connect(self, spec):
        """ray.init to the request's cluster, then `connected`. None on success, else the exit status."""
        ray = self.ray
        import logging

        # ray.init retries a dead address for minutes: a plain TCP connect answers at once.
        unreachable = probe_tcp(spec["address"])
        if unreachable is not None:
            self.emit_error("ray_init", "cannot reach the GCS: %s" % unreachable)
            return 1
        try:
            ray.init(
                address=spec["address"],
                namespace=spec["namespace"],
                logging_level=logging.ERROR,
                log_to_driver=False,
            )
        except BaseException as e:  # ConnectionError, RuntimeError, KeyboardInterrupt...
            self.emit_error("ray_init", describe(e))
            return 1
        self.connected = True
        self.install_signal_handlers()  # ray.init installs its own (SIGTERM -> sys.exit)
        self.emit("connected", job_id=ray.get_runtime_context().get_job_id())
        return None

    def sweep(self, waiting):
        """Removes dead bridges' lease groups (deadlease.sweep_dead_leases) now and, while `waiting()`
        (one of them may hold what this bridge waits for), every SWEEP_SEC. Run in a thread."""
        while True:
            try:
                deadlease.sweep_dead_leases(self.ray)
            except Exception as e:
                sys.stderr.write("%s: sweeping dead leases failed: %s\n" % (self.WHO, describe(e)))
            if not waiting() or self.releasing:
                return
            time.sleep(SWEEP_SEC)

    def on_control(self, kind, payload):
        """What a serve loop does with the inbox events every bridge treats alike (a request
        after the first, a bad line, EOF, a signal, stdout closed): releases, returns the status."""
        if kind == "msg":
            if payload.get("op") == "release":
                return self.release(0)
            return self.release(1, bad="unexpected op %r after %s" % (payload.get("op"), self.OP))
        if kind == "bad":
            return self.release(1, bad=payload)
        return self.release(0)  # eof, signal, stdout_closed

    def inbox_until(self, timeout, done):
        """After a stop: the inbox's events, one by one, until `done()` or `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                event = self.inbox.get(timeout=left)
            except queue.Empty:
                return
            yield event

    def release(self, code, bad=None):
        self.releasing = True
        if bad is not None:
            self.emit_error("protocol", bad)
            code = 1
        self.free()
        if self.connected:
            t = threading.Thread(target=self.ray.shutdown, daemon=True)
            t.start()
            t.join(10.0)
        self.emit("released")
        return code

    # -- output

    def emit(self, event, **fields):
        line = json.dumps(dict(event=event, **fields), ensure_ascii=True, separators=(",", ":"))
        with self.out_lock:
            if self.stdout_gone:
                return
            try:
                self.out.write(line + "\n")
                self.out.flush()
            except (OSError, ValueError):
                self.stdout_gone = True
                self.inbox.put(("stdout_closed", None))

    def emit_error(self, kind, message):
        text = " ".join(str(message).split()) or kind
        if len(text) > 2000:
            text = text[:2000] + "..."
        self.emit("error", kind=kind, message=text)

    # -- input

    def read_stdin(self):
        stdin = sys.stdin.buffer
        try:
            for raw in stdin:
                text = raw.decode("utf-8", "replace").strip()
                if not text:
                    continue
                try:
                    msg = json.loads(text)
                except ValueError:
                    self.inbox.put(("bad", "not JSON: %s" % text[:200]))
                    continue
                if not isinstance(msg, dict):
                    self.inbox.put(("bad", "not a JSON object: %s" % text[:200]))
                    continue
                self.inbox.put(("msg", msg))
        except (OSError, ValueError):
            pass
        self.inbox.put(("eof", None))

    def on_signal(self, signum, frame):
        self.inbox.put(("signal", signum))

    def install_signal_handlers(self):
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, self.on_signal)


def probe_tcp(address, timeout=3.0):
    """None when something accepts TCP connections at host:port, else the reason."""
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None  # not host:port: let ray.init judge it
    host = host.strip("[]")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
        return None
    except OSError as e:
        return e.strerror or str(e) or type(e).__name__


def describe(e):
    """One line: the exception's type and its last meaningful line (Ray's are multi-line),
    without Ray's generic advice, at most 500 characters."""
    text = str(e).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    if len(lines) > 1 and len(last) < 40:
        last = " ".join(lines[-2:])
    cut = last.find(" Some common causes include")
    if cut > 0:
        last = last[:cut]
    if len(last) > 500:
        last = last[:500] + "..."
    name = type(e).__name__
    return "%s: %s" % (name, last) if last else name


def serve_stdio(make_bridge):
    """Runs a bridge (this file's, or the group bridge) on stdio and ends the process with its code."""
    # stdout is the protocol channel only: keep a private handle on it and point fd 1 at stderr
    # so that nothing else (Ray, its C++ core, stray prints) can write there.
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    out = os.fdopen(proto_fd, "w", buffering=1, encoding="utf-8")
    bridge = make_bridge(out)
    try:
        code = bridge.main()
    except BaseException as e:  # a bug here must still end the lease cleanly
        bridge.emit_error("internal", describe(e))
        try:
            code = bridge.release(1)
        except BaseException:
            code = 1
    try:
        out.flush()
    except (OSError, ValueError):
        pass
    sys.stderr.flush()
    # Skip the interpreter's teardown: daemon threads may still sit in Ray calls.
    os._exit(code)

