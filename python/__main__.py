"""hyperloom's Python side, run as `python [-I] PYDIR COMMAND [ARGS...]` (PYDIR: this folder).

    bridge       one serving lease over JSON lines on stdin/stdout (hyperloom.bridge)
    gpus         who holds this node's GPUs, `--json` for `ray doctor` (hyperloom.gpus)
    group        one serving group over JSON lines (hyperloom.group)
    serve        the serving runner, a serving attempt's leased command (hyperloom.serve)
    sweep        the sweep runner, one server combination's leased command (hyperloom.sweep)
    supervise    the command supervisor the lease actor starts (hyperloom.supervisor)
    tidy         ends what a dead bridge's lease left, then frees its resources (hyperloom.tidy)

Running the folder puts it first on sys.path (also under -I), so the package imports without
an installation, PYTHONPATH or the caller's working directory."""

import argparse
import importlib
import os
import sys

COMMANDS = {
    "bridge": "hyperloom.bridge",
    "gpus": "hyperloom.gpus",
    "group": "hyperloom.group",
    "serve": "hyperloom.serve",
    "supervise": "hyperloom.supervisor",
    "sweep": "hyperloom.sweep",
    "tidy": "hyperloom.tidy",
}


def main(argv):
    parser = argparse.ArgumentParser(prog="python PYDIR", description="hyperloom's Python side")
    parser.add_argument("command", choices=sorted(COMMANDS))
    # Only the first word is ours: the rest is the command's own (its options, `--`, an argv).
    ns = parser.parse_args(argv[:1])
    return importlib.import_module(COMMANDS[ns.command]).main(argv[1:])


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip the interpreter's teardown: daemon threads (output copies, Ray calls) may still run.
    os._exit(code if isinstance(code, int) else 1)
