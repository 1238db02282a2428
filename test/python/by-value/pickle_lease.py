"""Pickles what a lease sends to its actor's node, as the bridge does (the package registered by
value): the lease actor's class, and the supervisor's placement and command line with the files
of a package folder that the loading side does not have (argv[2]). Writes the pickle to argv[1].
With argv[3] "by-reference" it skips the registration (the control: the loading side then fails)."""

import sys

import ray

from hyperloom import actor, shipping

out, missing_root = sys.argv[1], sys.argv[2]
if sys.argv[3:] != ["by-reference"]:
    shipping.register_by_value(ray)
_, contents = shipping.supervisor_files()
payload = {
    "actor_class": actor.make_actor_class(ray),
    "runnable_dir": shipping.runnable_dir,
    "supervisor_command": actor.supervisor_command,
    "files": (missing_root, contents),
}
with open(out, "wb") as f:
    ray.cloudpickle.dump(payload, f)
