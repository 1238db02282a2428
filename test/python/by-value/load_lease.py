"""Run with `python -I` from a folder without hyperloom: unpickles what pickle_lease.py wrote
(argv[1]) and runs `echo` through the supervisor placed from the pickled files. Prints one JSON
line: what it could import, where the supervisor ran from, the command's output and exit code."""

import importlib.util
import json
import os
import pickle
import subprocess
import sys

importable = importlib.util.find_spec("hyperloom") is not None  # must be False: no such package here

with open(sys.argv[1], "rb") as f:
    payload = pickle.load(f)  # cloudpickle output loads with the standard unpickler
cls = payload["actor_class"]
lease = cls()
pydir = payload["runnable_dir"](payload["files"])
r, w = os.pipe()
cmd = payload["supervisor_command"](pydir, w, 1.0, None, None, ["echo", "from the copy"])
proc = subprocess.run(cmd, stdout=subprocess.PIPE, pass_fds=(w,), check=False)
os.close(w)
with os.fdopen(r) as status:
    reported = status.read().split("\n")
print(
    json.dumps(
        {
            "importable": importable,
            "class": cls.__name__,
            "instance": type(lease).__name__,
            "in_modules": sorted(m for m in sys.modules if m.split(".")[0] == "hyperloom"),
            "pydir": pydir,
            "argv": cmd,
            "stdout": proc.stdout.decode(),
            "code": proc.returncode,
            "status": [s for s in reported if s and not s.startswith("containment ")],
        }
    )
)
