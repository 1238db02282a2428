"""The serving runner's status document on disk (serve.json), written whole or not at all (the
sweep runner writes nothing on hyperloom's host: it sends what it keeps through the lease,
hyperloom.sweep). Standard library only."""

import json
import os


def write(path, doc):
    """Writes `doc` to `path` as JSON in one step: a temp file of this process's own beside it,
    flushed to disk, then renamed over `path`, so a reader sees the old document or the new one,
    never part of one. An OSError (a full disk) leaves `path` as it was and no temp file."""
    tmp = "%s.tmp-%d" % (path, os.getpid())
    try:
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read(path):
    """The JSON document at `path`; None when it is missing or not (yet) whole JSON."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
