"""Clean GPUs (docs/design.md#clean-gpus): who holds a lease's GPUs, the gate before its command
starts and the reclaim wait after it ended. Standard library only: the supervisor runs it under
`python -I` on the node that runs the command (a group rank on another node checks its own node).

    python -I PYDIR gpus [--json]     every holder of this node's GPUs (`ray doctor` asks this)

This module is the one place that reads who holds a GPU, in each of the three formats:

- open device files: a process whose /proc/PID/fd/* links to a GPU's own device file holds it:
  /dev/nvidia<N> (NVIDIA GPU N), /dev/dri/renderD<M> (DRM render node M-128, taken as GPU M-128),
  /dev/kfd (AMD's compute interface, which every AMD GPU shares). /dev/nvidiactl and
  /dev/nvidia-uvm are opened by every CUDA process whatever its GPU and say nothing about one.
  Root sees every process's descriptors; another user's are unreadable (counted as `unreadable`).
- `nvidia-smi --query-compute-apps=pid,process_name,gpu_uuid,used_memory --format=csv,noheader`
  (with `--query-gpu=index,uuid` to map each UUID to its index), where installed.
- `amd-smi process --json`, where installed; it may exit non-zero on an idle host ("No running
  processes detected"): the document decides, not the exit code.

A vendor tool that answered is taken as the truth for its own vendor's device files: monitors keep
those files open without a compute context or memory (nvidia-persistenced, DCGM, Ray's dashboard
agent through NVML), so a device-file holder the tool does not list is no holder then. Without the
tool every device-file holder counts, except the known monitors in MONITORS.

Formats, with their sources: test/fixtures/gpu/README.md."""

import os
import re
import sys
import time

# json and subprocess are imported where used: a lease without GPUs pays only for this module.

# The gate's wait (--gpu-clean-timeout) has no default here: hyperloom (TypeScript) holds it and
# passes it down (the bridge's request, the supervisor's argv).
# The reclaim wait's bound: after the command ended, how long the release waits for the lease's
# own processes to let go of their GPU device files (and a tool to stop listing a dead one).
RECLAIM_TIMEOUT_SEC = 10.0
POLL_SEC = 0.25
TOOL_TIMEOUT_SEC = 10.0
MONITORS = frozenset(("nvidia-persistenced", "nv-hostengine", "nv-fabricmanager", "nvidia-smi", "amd-smi"))

_NVIDIA = re.compile(r"^/dev/nvidia([0-9]+)$")
_RENDER = re.compile(r"^/dev/dri/renderD([0-9]+)$")
KFD = "/dev/kfd"
SHARED = "shared"  # a device every AMD GPU shares (/dev/kfd)


def parse_gpu_list(text):
    """`0,2` -> [0, 2]; UUIDs and MIG names are no indices and are skipped."""
    return [int(s) for s in (t.strip() for t in (text or "").split(",")) if s.isdigit()]


def gpu_of_device(target):
    """The GPU index a device file belongs to, SHARED for /dev/kfd, None for anything else."""
    m = _NVIDIA.match(target)
    if m:
        return int(m.group(1))
    m = _RENDER.match(target)
    if m:
        n = int(m.group(1)) - 128
        return n if n >= 0 else None
    if target == KFD:
        return SHARED
    return None


def vendor_of_device(target):
    return "nvidia" if target.startswith("/dev/nvidia") else "amd"


def has_gpu_devices(dev="/dev"):
    """Whether this node has any GPU device file or vendor tool at all (else no scan is needed)."""
    try:
        if any(_NVIDIA.match("/dev/" + n) for n in os.listdir(dev)) or os.path.exists(os.path.join(dev, "kfd")):
            return True
        if any(n.startswith("renderD") for n in os.listdir(os.path.join(dev, "dri"))):
            return True
    except OSError:
        pass
    return _which("nvidia-smi") is not None or _which("amd-smi") is not None


def _which(name):
    for d in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(d or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


# -- /proc


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def proc_user(pid, proc="/proc"):
    status = _read("%s/%d/status" % (proc, pid))
    if status is None:
        return None
    for line in status.decode("utf-8", "replace").splitlines():
        if line.startswith("Uid:"):
            uid = int(line.split()[1])
            try:
                import pwd

                return pwd.getpwuid(uid).pw_name
            except (ImportError, KeyError):
                return str(uid)
    return None


def proc_command(pid, proc="/proc"):
    raw = _read("%s/%d/cmdline" % (proc, pid))
    if raw:
        text = " ".join(a.decode("utf-8", "replace") for a in raw.rstrip(b"\0").split(b"\0"))
        return text if len(text) <= 200 else text[:197] + "..."
    comm = _read("%s/%d/comm" % (proc, pid))
    return comm.decode("utf-8", "replace").strip() if comm else None


def _comm(pid, proc="/proc"):
    comm = _read("%s/%d/comm" % (proc, pid))
    return comm.decode("utf-8", "replace").strip() if comm else None


def device_holders(proc="/proc"):
    """(holders, unreadable): every process with a GPU device file open, and how many processes'
    descriptors could not be read (another user's, without root)."""
    holders, unreadable = [], 0
    try:
        entries = os.listdir(proc)
    except OSError:
        return [], 0
    for e in entries:
        if not e.isdigit():
            continue
        pid = int(e)
        fd_dir = "%s/%d/fd" % (proc, pid)
        try:
            fds = os.listdir(fd_dir)
        except PermissionError:
            unreadable += 1
            continue
        except OSError:
            continue  # gone
        seen = set()
        for fd in fds:
            try:
                target = os.readlink(fd_dir + "/" + fd)
            except OSError:
                continue
            if target in seen:
                continue
            seen.add(target)
            gpu = gpu_of_device(target)
            if gpu is None:
                continue
            holders.append({"pid": pid, "gpu": None if gpu == SHARED else gpu, "via": target})
    return holders, unreadable


# -- the vendors' tools


def _run_tool(argv):
    """(returncode, stdout) of a tool, or None when it is not installed or did not answer in time."""
    import subprocess

    if _which(argv[0]) is None:
        return None
    try:
        p = subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=TOOL_TIMEOUT_SEC
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return p.returncode, p.stdout.decode("utf-8", "replace")


def parse_nvidia_gpu_index(csv):
    """`nvidia-smi --query-gpu=index,uuid --format=csv,noheader` -> {uuid: index}."""
    out = {}
    for line in csv.splitlines():
        f = [x.strip() for x in line.split(",")]
        if len(f) == 2 and f[0].isdigit() and f[1]:
            out[f[1]] = int(f[0])
    return out


def _not_available(v):
    return v == "" or (v.startswith("[") and v.endswith("]"))


def parse_nvidia_compute_apps(csv, index_of):
    """`nvidia-smi --query-compute-apps=pid,process_name,gpu_uuid,used_memory --format=csv,noheader`
    -> holders. A process name may itself hold ", ": pid first, uuid and memory last, the name
    between; `[N/A]`/`[Insufficient Permissions]` are no values. Other lines are skipped."""
    holders = []
    for line in csv.splitlines():
        f = [x.strip() for x in line.strip().split(",")]
        if len(f) < 4 or not f[0].isdigit():
            continue
        name = ", ".join(f[1:-2])
        mib = re.match(r"^([0-9]+)\s*MiB$", f[-1])
        holders.append(
            {
                "pid": int(f[0]),
                "gpu": index_of.get(f[-2]),
                "via": "nvidia-smi",
                "command": None if _not_available(name) else name,
                "memory_mib": int(mib.group(1)) if mib else None,
            }
        )
    return holders


_SCALE = {"B": 1, "KB": 1024, "KiB": 1024, "MB": 1 << 20, "MiB": 1 << 20, "GB": 1 << 30, "GiB": 1 << 30}


def _bytes(v):
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v
    if isinstance(v, dict) and isinstance(v.get("value"), (int, float)):
        return v["value"] * _SCALE.get(v.get("unit"), 1)
    return None


def amd_smi_gpus(text):
    """An `amd-smi ... --json` document's per-GPU list: the document itself (a list), or its
    "gpu_data" (newer versions); None when the text is not such a document."""
    import json

    try:
        doc = json.loads(text)
    except ValueError:
        return None
    gpus = doc if isinstance(doc, list) else (doc.get("gpu_data") if isinstance(doc, dict) else None)
    return gpus if isinstance(gpus, list) else None


def parse_amd_smi_processes(text):
    """`amd-smi process --json` -> holders, or None when the text is not that document (so "idle"
    and "could not tell" differ). `process_info` is an object per process, or the string "No
    running processes detected" on an idle GPU; memory from memory_usage.vram_mem (else mem_usage)."""
    gpus = amd_smi_gpus(text)
    if gpus is None:
        return None
    holders = []
    for g in gpus:
        if not isinstance(g, dict) or not isinstance(g.get("process_list"), list):
            continue
        for p in g["process_list"]:
            info = p.get("process_info") if isinstance(p, dict) else None
            if not isinstance(info, dict):
                continue
            pid = info.get("pid")
            if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
                continue
            vram = _bytes((info.get("memory_usage") or {}).get("vram_mem"))
            if vram is None:
                vram = _bytes(info.get("mem_usage"))
            name = info.get("name")
            holders.append(
                {
                    "pid": pid,
                    "gpu": g.get("gpu") if isinstance(g.get("gpu"), int) else None,
                    "via": "amd-smi",
                    "command": name if isinstance(name, str) and name.strip() else None,
                    "memory_mib": None if vram is None else int(round(vram / float(1 << 20))),
                }
            )
    return holders


def tool_holders():
    """(holders, vendors that answered): what nvidia-smi and amd-smi report, where installed."""
    holders, answered = [], set()
    apps = _run_tool(["nvidia-smi", "--query-compute-apps=pid,process_name,gpu_uuid,used_memory", "--format=csv,noheader"])
    if apps is not None and apps[0] == 0:
        index = _run_tool(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"])
        index_of = parse_nvidia_gpu_index(index[1]) if index is not None and index[0] == 0 else {}
        holders += parse_nvidia_compute_apps(apps[1], index_of)
        answered.add("nvidia")
    amd = _run_tool(["amd-smi", "process", "--json"])
    if amd is not None:
        parsed = parse_amd_smi_processes(amd[1])
        if parsed is not None:
            holders += parsed
            answered.add("amd")
    return holders, answered


# -- who holds what


def scan(proc="/proc"):
    """Every holder of this node's GPUs, merged per (pid, GPU) and enriched from /proc:
    ({"pid", "gpu" (None: every AMD GPU, /dev/kfd), "via", "user", "command", "memory_mib",
    "alive"}, ...), and the count of processes whose descriptors could not be read."""
    devices, unreadable = device_holders(proc)
    tools, answered = tool_holders()
    listed = set(h["pid"] for h in tools)
    merged = {}
    for h in tools + devices:
        if h["via"].startswith("/dev/"):
            if vendor_of_device(h["via"]) in answered:
                if h["pid"] not in listed:
                    continue  # the tool answered and does not list it: a monitor, no compute context
            elif _comm(h["pid"], proc) in MONITORS:
                continue
        key = (h["pid"], h["gpu"])
        before = merged.get(key)
        if before is None:
            merged[key] = dict(h)
        else:
            if h["via"] not in before["via"].split(", "):
                before["via"] += ", " + h["via"]
            for k in ("command", "memory_mib"):
                if before.get(k) is None:
                    before[k] = h.get(k)
    out = []
    for h in merged.values():
        alive = os.path.exists("%s/%d" % (proc, h["pid"]))
        command = proc_command(h["pid"], proc) if alive else None
        out.append(
            {
                "pid": h["pid"],
                "gpu": h["gpu"],
                "via": h["via"],
                "user": proc_user(h["pid"], proc) if alive else None,
                "command": command or h.get("command"),
                "memory_mib": h.get("memory_mib"),
                "alive": alive,
            }
        )
    out.sort(key=lambda h: (-1 if h["gpu"] is None else h["gpu"], h["pid"]))
    return out, unreadable


def on_gpus(holders, gpus):
    """The holders of any of `gpus` (a /dev/kfd holder holds every AMD GPU)."""
    return [h for h in holders if h["gpu"] is None or h["gpu"] in gpus]


def ancestors(pid, proc="/proc"):
    """`pid` and its ancestors (ppid chain), from /proc."""
    out = set()
    while pid and pid not in out:
        out.add(pid)
        stat = _read("%s/%d/stat" % (proc, pid))
        if stat is None:
            break
        try:
            pid = int(stat[stat.rfind(b")") + 2 :].split()[1])
        except (IndexError, ValueError):
            break
    return out


def describe(h):
    """One holder in words: `GPU 1: pid 51007 (user alice, VLLM::EngineCore, 71234 MiB; via nvidia-smi)`."""
    facts = [x for x in ("user %s" % h["user"] if h.get("user") else None, h.get("command"),
                         "%d MiB" % h["memory_mib"] if h.get("memory_mib") is not None else None) if x]
    where = "all AMD GPUs (/dev/kfd)" if h["gpu"] is None else "GPU %d" % h["gpu"]
    return "%s: pid %d (%s)" % (where, h["pid"], ", ".join(facts + ["via " + h["via"]]))


def wait_line(doc):
    """The stderr line a lease shows at once when the gate finds holders (a `gpu_wait` report)."""
    return "hyperloom: waiting up to %g s (--gpu-clean-timeout) for GPU(s) held outside this lease: %s" % (
        doc.get("timeout_sec", 0), "; ".join(describe(h) for h in doc.get("holders", [])))


# -- the gate and the reclaim wait


def gate(gpus, timeout, own, stopped=lambda: False, proc="/proc", on_wait=None):
    """Waits up to `timeout` seconds until no process outside `own` (the supervisor's own pids;
    its ancestors are added here) holds one of `gpus`. Returns [] when they are free (at once when
    the node has no GPU device file and no vendor tool), the holders when the time is up, None when
    `stopped()` became true. Never signals a holder. `on_wait(holders)` is called once, on the
    first look that finds some."""
    if not gpus or not has_gpu_devices():
        return []
    mine = set(own)
    for pid in list(own):
        mine |= ancestors(pid, proc)
    deadline = time.monotonic() + max(0.0, timeout)
    told = False
    while True:
        holders, _ = scan(proc)
        foreign = [h for h in on_gpus(holders, gpus) if h["pid"] not in mine]
        if not foreign:
            return []
        if not told and on_wait is not None:
            told = True
            on_wait(foreign)
        if time.monotonic() >= deadline:
            return foreign
        until = min(deadline, time.monotonic() + POLL_SEC)
        while time.monotonic() < until:
            if stopped():
                return None
            time.sleep(0.05)


def reclaim(gpus, is_ours, before, timeout=RECLAIM_TIMEOUT_SEC, proc="/proc"):
    """After the command ended: waits up to `timeout` seconds until none of the lease's own
    processes (`is_ours(pid)`) holds one of `gpus`, nor does a dead process a tool still lists
    that was not listed before the command started (`before`: pids; its memory is being freed).
    Returns the holders still there when the time ran out ([] when the GPUs were let go)."""
    if not gpus or not has_gpu_devices():
        return []
    deadline = time.monotonic() + timeout
    while True:
        holders, _ = scan(proc)
        left = [
            h for h in on_gpus(holders, gpus)
            if (h["alive"] and is_ours(h["pid"])) or (not h["alive"] and h["pid"] not in before)
        ]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(POLL_SEC)


def main(args):
    import json

    as_json = "--json" in args
    holders, unreadable = scan()
    if as_json:
        sys.stdout.write(json.dumps({"holders": holders, "unreadable": unreadable}) + "\n")
    else:
        for h in holders:
            sys.stdout.write(describe(h) + "\n")
        if not holders:
            sys.stdout.write("no process holds a GPU of this node\n")
    return 0


# -- the supervisor's hooks (hyperloom.supervisor calls these two, nothing else)

# Tool-listed pids at the gate, before the command started: a dead one the reclaim wait finds
# listed afterwards is the lease's only when it was not there before (one supervisor per process).
_listed_before = set()


def supervisor_gate(gpus, timeout, own, stopped, report):
    """Before the command starts: None to start it, else the exit code the supervisor ends with,
    having reported on its status pipe `gpu_busy {"holders": [...], "waited_sec": S}` (or nothing,
    when stopped while waiting), then `failed` and `exit N`. While it waits, `gpu_wait {...}`."""
    if not gpus:
        return None
    import json

    began = time.monotonic()
    holders = gate(
        gpus, timeout, own, stopped,
        on_wait=lambda hs: report("gpu_wait " + json.dumps({"holders": hs, "timeout_sec": timeout})),
    )
    if holders == []:
        if has_gpu_devices():
            _listed_before.update(h["pid"] for h in tool_holders()[0])
        return None
    if holders is None:
        code = 143  # released while waiting: as a command stopped by TERM
    else:
        code = 125
        report("gpu_busy " + json.dumps({"holders": holders, "waited_sec": round(time.monotonic() - began, 1)}))
    report("failed")
    report("exit %d" % code)
    return code


def supervisor_reclaim(gpus, pgid, me, proc="/proc"):
    """After the command's group is gone, before its exit is reported (which ends the lease): the
    reclaim wait. The lease's own processes: those in its process group or session and the
    supervisor's descendants. Writes one stderr line when some still hold a GPU after the bound."""
    if not gpus:
        return

    def is_ours(pid):
        stat = _read("%s/%d/stat" % (proc, pid))
        if stat is None:
            return False
        fields = stat[stat.rfind(b")") + 2 :].split()
        try:
            if int(fields[2]) == pgid or int(fields[3]) == pgid:
                return True
        except (IndexError, ValueError):
            return False
        return pid != me and me in ancestors(pid, proc)

    left = reclaim(gpus, is_ours, _listed_before, proc=proc)
    if left:
        sys.stderr.write(
            "hyperloom: after %d s the lease's process(es) still hold its GPU(s); releasing anyway: %s\n"
            % (RECLAIM_TIMEOUT_SEC, "; ".join(describe(h) for h in left))
        )
        sys.stderr.flush()
