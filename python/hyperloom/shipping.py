"""What travels with a lease to its actor's node: the package pickled by value (its code, not
an import of it: the node needs only Ray), and the files of the supervisor and of the runners,
which the node runs as `python -I PYDIR supervise|serve|sweep`, from the bridge's own PYDIR when
the node has it unchanged (the same host, or a shared file system), else from a private copy in
a folder of this user's under the node's temporary directory. Standard library only."""

import hashlib
import os
import tempfile

# What `python -I PYDIR supervise` imports, relative to PYDIR (stdlib besides these).
SUPERVISOR_FILES = (
    "__main__.py",
    "hyperloom/__init__.py",
    "hyperloom/cgroup.py",
    "hyperloom/gone.py",
    "hyperloom/procgroup.py",
    "hyperloom/keeper.py",
    "hyperloom/gpus.py",
    "hyperloom/supervisor.py",
)
# What `python -I PYDIR serve|sweep` imports, relative to PYDIR: the runners travel with the lease
# like the supervisor (a node without the package runs them from a copy).
RUNNER_FILES = (
    "__main__.py",
    "hyperloom/__init__.py",
    "hyperloom/cgroup.py",
    "hyperloom/procgroup.py",
    "hyperloom/keeper.py",
    "hyperloom/tee.py",
    "hyperloom/jsonfile.py",
    "hyperloom/listener.py",
    "hyperloom/engine.py",
    "hyperloom/gpus.py",
    "hyperloom/sampler.py",
    "hyperloom/clientrun.py",
    "hyperloom/ready.py",
    "hyperloom/serve.py",
    "hyperloom/sweep.py",
)


def register_by_value(ray):
    """Pickle this package by value (its functions' and classes' code, not an import of them):
    the actor's node then needs only Ray, never these files. Call before `ray.remote`."""
    import hyperloom

    ray.cloudpickle.register_pickle_by_value(hyperloom)


def package_dir():
    """PYDIR: the folder holding __main__.py and hyperloom/, on this host."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def package_files(names):
    """Files of this package as this host has them: (PYDIR, {relative path: bytes})."""
    root = package_dir()
    contents = {}
    for rel in names:
        with open(os.path.join(root, rel), "rb") as f:
            contents[rel] = f.read()
    return root, contents


def supervisor_files():
    """The supervisor's files as this host has them: (PYDIR, {relative path: bytes})."""
    return package_files(SUPERVISOR_FILES)


def is_own_entry(argv):
    """Is argv hyperloom's own Python entry on this host: [PYTHON, PYDIR, COMMAND, ...]?"""
    if not argv or len(argv) < 3:
        return False
    try:
        return os.path.samefile(argv[1], package_dir())
    except OSError:
        return False


def _holds(root, contents):
    """True when folder `root` holds exactly these files' bytes."""
    for rel, data in contents.items():
        try:
            with open(os.path.join(root, rel), "rb") as f:
                if f.read() != data:
                    return False
        except OSError:
            return False
    return True


def runnable_dir(files):
    """A PYDIR on this node that runs the supervisor: the bridge's own when this node has it
    unchanged (the same host, or a shared file system), else a private copy, written once per
    content (the folder's name is its digest) under this user's folder in the temporary directory."""
    root, contents = files
    if _holds(root, contents):
        return root
    digest = hashlib.sha256()
    for rel in sorted(contents):
        digest.update(rel.encode() + b"\0" + contents[rel] + b"\0")
    base = os.path.join(tempfile.gettempdir(), "hyperloom-py-%d" % os.getuid())
    target = os.path.join(base, digest.hexdigest()[:20])
    if _holds(target, contents):
        return target
    try:
        os.mkdir(base, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(base)
    if not os.path.isdir(base) or os.path.islink(base) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise RuntimeError("%s is not a private folder of this user's: cannot place the supervisor" % base)
    tmp = tempfile.mkdtemp(dir=base)
    for rel, data in contents.items():
        path = os.path.join(tmp, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    try:
        os.rename(tmp, target)
    except OSError:  # another lease placed it first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    if not _holds(target, contents):
        raise RuntimeError("cannot place the supervisor's files in %s" % target)
    return target
