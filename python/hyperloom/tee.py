"""A client's output, copied live to this runner's stdout and stderr and, whole, to its log file
(client.log): the one copy loop the serving runner (hyperloom.serve) and the sweep runner
(hyperloom.sweep) share.

The client's pipes are drained to their end whatever happens to the log: a write that fails (a
full disk: ENOSPC, or any other error) stops the logging, with one line through `log`, never the
copying. A pipe nobody reads blocks the client, and a blocked client holds the lease forever.
The bytes pass unchanged (lines are read up to 64 KiB at a time, never decoded). Standard
library only."""

import sys
import threading

CHUNK = 64 * 1024


class Tee:
    def __init__(self, path, log):
        """Opens `path` for appending; `log(message)` tells once that the log stopped."""
        self.log = log
        self.path = path
        self.lock = threading.Lock()
        self.failed = None
        self.threads = []
        try:
            self.logf = open(path, "ab")
        except OSError as e:
            self.logf = None
            self._fail(e)

    def _fail(self, e):
        self.failed = e
        self.log("%s: %s; the client's output is no longer logged there" % (self.path, getattr(e, "strerror", None) or e))

    def note(self, data):
        """Appends `data` (bytes) to the log alone, unless the log has failed."""
        with self.lock:
            if self.failed is not None:
                return
            try:
                self.logf.write(data)
                self.logf.flush()
            except (OSError, ValueError) as e:
                self._fail(e)

    def start(self, proc):
        """Copies `proc`'s stdout and stderr (pipes) in two threads until their ends."""
        for pipe, out in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr)):
            t = threading.Thread(target=self._copy, args=(pipe, out), daemon=True)
            t.start()
            self.threads.append(t)

    def _copy(self, pipe, out):
        for raw in iter(lambda: pipe.readline(CHUNK), b""):
            self.note(raw)
            try:
                out.buffer.write(raw)
                out.buffer.flush()
            except (OSError, ValueError):
                pass

    def close(self, timeout=2.0):
        """Waits up to `timeout` seconds for each copy to end, then closes the log."""
        for t in self.threads:
            t.join(timeout)
        if self.logf is not None:
            try:
                self.logf.close()
            except OSError:
                pass  # the same full disk: already said
