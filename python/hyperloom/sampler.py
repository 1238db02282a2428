"""What the node sees of a measured run, for the validity checks (docs/design.md#samplers): the
engine's effective configuration once after readiness (`read_engine_config`), and around each client
run (`RunSampler`, hooked into hyperloom.clientrun's sampler seam) the client's CPU, the engine's own
view of the load from its Prometheus /metrics, and the lease's GPUs as the vendor tool reports
them. What it writes is src/domain/Observations.ts's schema; what cannot be sampled is named in
`not_checked`, never passed over. Nothing here touches the engine's hot path: one GET of /metrics
at the client's start, one at its end and at most one every INTERVAL_SEC between, from a thread of
the runner. Standard library only; Python >= 3.8; Linux.

Sources, per engine (checked against their code):
- vLLM v1 /metrics (vllm/v1/metrics/loggers.py PrometheusStatLogger, labels model_name and engine,
  one series per DP engine, summed): vllm:num_requests_running, vllm:num_requests_waiting (gauges),
  vllm:request_success_total{finished_reason} (stop and length counted, abort not),
  vllm:generation_tokens_total, vllm:prompt_tokens_total, and the histograms' sums
  vllm:e2e_request_latency_seconds_sum and vllm:request_queue_time_seconds_sum; its configuration:
  the info gauge vllm:cache_config_info (labels: CacheConfig's fields as str(), from
  vllm/config/cache.py `metrics_info`) and the startup log: "Initializing a V1 LLM engine (vX) with
  config: model=..., max_seq_len=..., quantization=..., ..." (vllm/v1/engine/core.py, VllmConfig's
  __str__), "Chunked prefill is enabled with max_num_batched_tokens=N.", "GPU KV cache size: N
  tokens", "Maximum concurrency for L tokens per request: X". Its "non-default args: {...}" line is
  what was ASKED and is not read as effective.
- SGLang (/metrics only with --enable-metrics; sglang/srt/metrics/collector.py): the scheduler's
  gauges sglang:num_running_reqs and sglang:num_queue_reqs (every TP rank reports the same: only
  tp_rank 0 and pp_rank 0 are summed), the tokenizer manager's counters sglang:num_requests_total,
  sglang:generation_tokens_total, sglang:prompt_tokens_total and the histograms' sums
  sglang:e2e_request_latency_seconds_sum, sglang:queue_time_seconds_sum; its configuration:
  /get_server_info (sglang/srt/entrypoints/http_server.py: the server args after ServerArgs'
  own adjustments at the top level, the scheduler's info, one internal state per DP rank whose
  effective_max_running_requests_per_dp is what the scheduler runs: sglang/srt/managers/
  tp_worker.py lowers the asked max_running_requests to what its request pool holds).
"""

import json
import os
import re
import threading
import time
import urllib.error
import urllib.request

NAME = "validity"  # the runs' observations[NAME] (hyperloom.clientrun's seam) is this module's
INTERVAL_SEC = 2.0  # at most one /metrics scrape and one GPU tool query per this many seconds
HTTP_TIMEOUT_SEC = 2.0
TOOL_TIMEOUT_SEC = 5.0

# ---------------------------------------------------------------------------------------------
# Prometheus text exposition


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$')
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


def _unescape(v):
    return v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")


def parse_prometheus(text):
    """Prometheus text format (0.0.4) -> [(name, {label: value}, float)]; comments, blank and
    malformed lines are skipped."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            continue
        labels = {}
        body = m.group(3) or ""
        pos = 0
        while pos < len(body):
            lm = _LABEL.match(body, pos)
            if lm is None:
                break
            labels[lm.group(1)] = _unescape(lm.group(2))
            pos = lm.end()
        try:
            value = float(m.group(4))
        except ValueError:
            continue
        out.append((m.group(1), labels, value))
    return out


def total(samples, name, where=None):
    """The sum of every series `name` (that `where(labels)` keeps); None when there is none."""
    hits = [v for n, labels, v in samples if n == name and (where is None or where(labels))]
    return sum(hits) if hits else None


def _rank0(labels):
    return labels.get("tp_rank", "0") == "0" and labels.get("pp_rank", "0") == "0"


def _finished(labels):
    return labels.get("finished_reason") != "abort"


# What each engine calls the figures (see the module's header for where they come from).
METRICS = {
    "vllm": {
        "running": ("vllm:num_requests_running", None),
        "waiting": ("vllm:num_requests_waiting", None),
        "requests": ("vllm:request_success_total", _finished),
        "generation": ("vllm:generation_tokens_total", None),
        "prompt": ("vllm:prompt_tokens_total", None),
        "e2e_sum": ("vllm:e2e_request_latency_seconds_sum", None),
        "queue_sum": ("vllm:request_queue_time_seconds_sum", None),
    },
    "sglang": {
        "running": ("sglang:num_running_reqs", _rank0),
        "waiting": ("sglang:num_queue_reqs", _rank0),
        "requests": ("sglang:num_requests_total", None),
        "generation": ("sglang:generation_tokens_total", None),
        "prompt": ("sglang:prompt_tokens_total", None),
        "e2e_sum": ("sglang:e2e_request_latency_seconds_sum", None),
        "queue_sum": ("sglang:queue_time_seconds_sum", None),
    },
}


def engine_of(samples):
    """Which engine's names the /metrics text has: "vllm", "sglang" or None."""
    for name, _, _ in samples:
        if name.startswith("vllm:"):
            return "vllm"
        if name.startswith("sglang:"):
            return "sglang"
    return None


def figures(samples, kind):
    """{figure: value or None} of one scrape, in the engine's names."""
    return {k: total(samples, name, where) for k, (name, where) in METRICS[kind].items()}


def http_get(url, timeout=HTTP_TIMEOUT_SEC):
    """(status, text) of a GET; (None, why) when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, ""
    except (OSError, ValueError) as e:
        return None, str(getattr(e, "reason", e))


# ---------------------------------------------------------------------------------------------
# The engine's effective configuration


def _scalar(text):
    """A value as an engine printed it (Python's str()/repr()) -> JSON: True/False/None, numbers,
    quoted strings unquoted, `torch.bfloat16` kept as text."""
    t = text.strip()
    if t in ("True", "true"):
        return True
    if t in ("False", "false"):
        return False
    if t in ("None", "null", ""):
        return None
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return t


def _top_level_pairs(text):
    """`a=1, b='x, y', c={"k": [1, 2]}` -> [("a", "1"), ("b", "'x, y'"), ("c", '{"k": [1, 2]}')]:
    split at the commas outside brackets and quotes."""
    parts, depth, quote, cur = [], 0, None, []
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    out = []
    for p in parts:
        k, eq, v = p.strip().partition("=")
        if eq and re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k.strip()):
            out.append((k.strip(), v.strip()))
    return out


_ENGINE_LINE = re.compile(r"Initializing a V1 LLM engine \([^)]*\) with config: (.*)$")
_CHUNKED = re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)")
_KV_SIZE = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
# The engine line's max_seq_len is what `--max-model-len` sets.
ALIASES = {"max_seq_len": "max_model_len"}


def parse_vllm_log(text):
    """The effective values in vLLM's startup lines (the last of each: a restart logs again)."""
    values = {}
    for line in text.splitlines():
        m = _ENGINE_LINE.search(line)
        if m:
            for k, v in _top_level_pairs(m.group(1)):
                if v[:1] in "{[(" or k.endswith("_config") and v[:1] not in "'\"":
                    continue  # nested configs: not one flag's value
                values[ALIASES.get(k, k)] = _scalar(v)
            continue
        m = _CHUNKED.search(line)
        if m:
            values["max_num_batched_tokens"] = int(m.group(1))
            continue
        m = _KV_SIZE.search(line)
        if m:
            values["kv_cache_size_tokens"] = int(m.group(1).replace(",", ""))
            continue
        m = _CONCURRENCY.search(line)
        if m:
            values["kv_cache_max_concurrency"] = float(m.group(2))
    return values


def cache_config_values(samples):
    """vllm:cache_config_info's labels (engine 0's) as values; {} without the gauge."""
    for name, labels, _ in samples:
        if name == "vllm:cache_config_info" and labels.get("engine", "0") in ("0", ""):
            return {k: _scalar(v) for k, v in labels.items() if k != "engine"}
    return {}


def server_info_values(doc):
    """SGLang's /get_server_info -> values: the top-level scalars (server args, scheduler info),
    and max_running_requests as the scheduler runs it (effective_max_running_requests_per_dp of
    the DP ranks, times dp_size under DP attention, where each rank runs its share)."""
    values = {k: v for k, v in doc.items() if isinstance(v, (str, int, float, bool)) or v is None}
    values.pop("version", None)
    states = doc.get("internal_states")
    if isinstance(states, list):
        per = [s.get("effective_max_running_requests_per_dp") for s in states if isinstance(s, dict)]
        per = [p for p in per if isinstance(p, int) and not isinstance(p, bool)]
        if per:
            ranks = doc.get("dp_size") if doc.get("enable_dp_attention") is True else 1
            values["max_running_requests"] = min(per) * (ranks if isinstance(ranks, int) and ranks > 0 else 1)
    return values


def read_engine_config(base_url, server_log):
    """The engine's effective configuration (Observations.ts EngineConfig), read once after
    readiness: /metrics first (which engine; vLLM's cache_config_info), then vLLM's startup log or
    SGLang's /get_server_info."""
    t0 = time.monotonic()
    values, sources, why = {}, {}, []

    def put(vals, source):
        for k, v in vals.items():
            values[k] = v
            sources[k] = source

    status, text = http_get(base_url + "/metrics")
    samples = parse_prometheus(text) if status == 200 else []
    kind = engine_of(samples)
    if kind == "vllm":
        try:
            with open(server_log, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - (4 << 20)))
                put(parse_vllm_log(f.read().decode("utf-8", "replace")), "startup log")
        except OSError as e:
            why.append("the startup log: %s" % (e.strerror or e))
        put(cache_config_values(samples), "/metrics vllm:cache_config_info")
    else:
        st, body = http_get(base_url + "/get_server_info")
        doc = None
        if st == 200:
            try:
                doc = json.loads(body)
            except ValueError:
                doc = None
        if isinstance(doc, dict):
            kind = kind or "sglang"
            put(server_info_values(doc), "/get_server_info")
        else:
            why.append("/metrics %s and /get_server_info %s"
                       % ("answered %s" % status if status else "did not answer",
                          "answered %s" % st if st else "did not answer"))
    out = {"engine": kind or "unknown", "values": values, "sources": sources,
           "read_s": round(time.monotonic() - t0, 3)}
    if not values:
        out["not_reported_reason"] = "; ".join(why) or "the engine reported no configuration"
    return out


# ---------------------------------------------------------------------------------------------
# GPUs: nvidia-smi and amd-smi


NVIDIA_FIELDS = "index,uuid,clocks.sm,{reasons},temperature.gpu,power.draw"
# NVML's clocks event (throttle) reason bits (nvml.h nvmlClocksEventReason*).
REASON_BITS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)


def _number(v):
    v = (v or "").strip()
    if v == "" or v.startswith("["):
        return None
    m = re.match(r"^(-?[0-9.]+)", v)
    return float(m.group(1)) if m else None


def reasons_of(mask):
    """`0x0000000000000020` -> ["sw_thermal_slowdown"]; [] for no reason; None when unreadable."""
    try:
        bits = int(mask.strip(), 16)
    except (ValueError, AttributeError):
        return None
    return [name for bit, name in REASON_BITS if bits & bit]


def parse_nvidia_gpus(csv):
    """`nvidia-smi --query-gpu=index,uuid,clocks.sm,clocks_event_reasons.active,temperature.gpu,
    power.draw --format=csv,noheader,nounits` -> [{index, uuid, sm_clock_mhz, throttle_reasons,
    temperature_c, power_w}]; `[N/A]` and the like are null."""
    out = []
    for line in csv.splitlines():
        f = [x.strip() for x in line.split(",")]
        if len(f) != 6 or not f[0].isdigit():
            continue
        clock = _number(f[2])
        out.append({
            "index": int(f[0]),
            "uuid": f[1] or None,
            "sm_clock_mhz": None if clock is None else int(round(clock)),
            "throttle_reasons": reasons_of(f[3]) or [],
            "temperature_c": _number(f[4]),
            "power_w": _number(f[5]),
        })
    return out


def _amd_value(v):
    if isinstance(v, dict):
        v = v.get("value")
    if isinstance(v, bool):
        return None
    return float(v) if isinstance(v, (int, float)) else None


def parse_amd_metric(text):
    """`amd-smi metric --json` (a list, or {"gpu_data": [...]} in newer versions; values as
    {value, unit} or bare numbers; "N/A" where unknown) -> the same dicts as parse_nvidia_gpus:
    the gfx_0 clock, power.throttle_status THROTTLED as ["throttled"], the hotspot (else edge)
    temperature, power.socket_power. None when the text is not that document."""
    from hyperloom import gpus as gputools

    gpus = gputools.amd_smi_gpus(text)
    if gpus is None:
        return None
    out = []
    for g in gpus:
        if not isinstance(g, dict) or not isinstance(g.get("gpu"), int):
            continue
        power = g.get("power") if isinstance(g.get("power"), dict) else {}
        clock = g.get("clock") if isinstance(g.get("clock"), dict) else {}
        gfx = clock.get("gfx_0") if isinstance(clock.get("gfx_0"), dict) else {}
        temp = g.get("temperature") if isinstance(g.get("temperature"), dict) else {}
        mhz = _amd_value(gfx.get("clk"))
        hot = _amd_value(temp.get("hotspot"))
        status = power.get("throttle_status")
        out.append({
            "index": g["gpu"],
            "uuid": None,
            "sm_clock_mhz": None if mhz is None else int(round(mhz)),
            "throttle_reasons": ["throttled"] if status == "THROTTLED" else [],
            "temperature_c": hot if hot is not None else _amd_value(temp.get("edge")),
            "power_w": _amd_value(power.get("socket_power")),
        })
    return out


def _run(argv):
    """(returncode, stdout, cpu seconds) of a tool run; None when it is not there or hangs. It is
    reaped here with wait4, so its CPU is known: the sampler's own cost, kept out of the client's
    figure (the runner's children's rusage holds both)."""
    import subprocess

    try:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError:
        return None
    timer = threading.Timer(TOOL_TIMEOUT_SEC, p.kill)
    timer.start()
    try:
        out = p.stdout.read()
        p.stdout.close()
        _, status, ru = os.wait4(p.pid, 0)
    except OSError:
        return None
    finally:
        timer.cancel()
    p.returncode = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    if not os.WIFEXITED(status):
        return None
    return p.returncode, out.decode("utf-8", "replace"), ru.ru_utime + ru.ru_stime


def _which(name):
    for d in os.environ.get("PATH", "").split(os.pathsep):
        p = os.path.join(d, name)
        if d and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


class GpuTool:
    """The lease's GPUs through nvidia-smi (else amd-smi): `sample(t_s)` -> sample dicts with the
    compute processes on each GPU, `in_lease` told by `is_ours(pid)`."""

    def __init__(self, gpus, is_ours):
        from hyperloom import gpus as gputools

        self.gputools = gputools
        self.gpus = list(gpus)
        self.is_ours = is_ours
        self.tool = "nvidia-smi" if _which("nvidia-smi") else ("amd-smi" if _which("amd-smi") else None)
        self.reasons_field = "clocks_event_reasons.active"
        self.cpu_s = 0.0

    def _query(self, argv):
        got = _run(argv)
        if got is not None:
            self.cpu_s += got[2]
        return got

    def _processes(self, holders, index):
        out = []
        for h in holders:
            if h.get("gpu") != index and h.get("gpu") is not None:
                continue
            out.append({"pid": h["pid"], "name": h.get("command") or "?", "memory_mib": h.get("memory_mib"),
                        "in_lease": self.is_ours(h["pid"])})
        return out

    def sample(self, t_s):
        """Samples for the lease's GPUs at `t_s`, or None when the tool gave nothing usable."""
        if self.tool == "nvidia-smi":
            fields = NVIDIA_FIELDS.format(reasons=self.reasons_field)
            got = self._query(["nvidia-smi", "--query-gpu=" + fields, "--format=csv,noheader,nounits"])
            if got is not None and got[0] != 0 and self.reasons_field == "clocks_event_reasons.active":
                # drivers before 535 know the reasons by their older name
                self.reasons_field = "clocks_throttle_reasons.active"
                fields = NVIDIA_FIELDS.format(reasons=self.reasons_field)
                got = self._query(["nvidia-smi", "--query-gpu=" + fields, "--format=csv,noheader,nounits"])
            if got is None or got[0] != 0:
                return None
            rows = parse_nvidia_gpus(got[1])
            apps = self._query(["nvidia-smi", "--query-compute-apps=pid,process_name,gpu_uuid,used_memory",
                                "--format=csv,noheader"])
            index_of = {r["uuid"]: r["index"] for r in rows if r["uuid"]}
            holders = self.gputools.parse_nvidia_compute_apps(apps[1], index_of) if apps and apps[0] == 0 else []
        elif self.tool == "amd-smi":
            got = self._query(["amd-smi", "metric", "--json"])
            rows = parse_amd_metric(got[1]) if got is not None else None
            if not rows:
                return None
            procs = self._query(["amd-smi", "process", "--json"])
            holders = (self.gputools.parse_amd_smi_processes(procs[1]) or []) if procs is not None else []
        else:
            return None
        out = []
        for r in rows:
            if r["index"] not in self.gpus:
                continue
            out.append(dict(r, t_s=round(t_s, 3), processes=self._processes(holders, r["index"])))
        return out


def lease_gpus(env=None):
    """The lease's GPU indices: CUDA_VISIBLE_DEVICES (Ray sets it for the lease), else
    HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES; None when none is set."""
    from hyperloom import gpus as gputools

    env = os.environ if env is None else env
    for k in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        if k in env:
            return gputools.parse_gpu_list(env[k])
    return None


# ---------------------------------------------------------------------------------------------
# The client's CPU


def _proc_cpu(pid, proc="/proc"):
    """utime + stime of `pid` in seconds, or None."""
    try:
        with open("%s/%d/stat" % (proc, pid), "rb") as f:
            stat = f.read()
        f = stat[stat.rfind(b")") + 2:].split()
        return (int(f[11]) + int(f[12])) / float(os.sysconf("SC_CLK_TCK"))
    except (OSError, IndexError, ValueError):
        return None


def _children(pid, proc="/proc"):
    out = []
    try:
        for tid in os.listdir("%s/%d/task" % (proc, pid)):
            with open("%s/%d/task/%s/children" % (proc, pid, tid)) as f:
                out += [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        pass
    return out


def _tree(pid, proc="/proc"):
    """`pid` and its live descendants, `pid` first (a process gone meanwhile has no children)."""
    seen, order, todo = set(), [], [pid]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        order.append(p)
        todo += _children(p, proc)
    return order


def tree_cpu(pid, proc="/proc"):
    """CPU seconds of `pid` and its live descendants (utime + stime, and each one's reaped
    children), from /proc; None when `pid` is gone."""
    top = _proc_cpu(pid, proc)
    if top is None:
        return None
    rest = (_proc_cpu(c, proc) for c in _tree(pid, proc)[1:])
    return top + sum(v for v in rest if v is not None)


def _proc_sched(pid, proc="/proc"):
    """{tid: seconds} of `pid`'s threads on a CPU plus waiting on a run queue for one (the first
    two fields of /proc/PID/task/TID/schedstat, ns): the time each wanted a CPU; {} when gone."""
    out = {}
    try:
        tids = os.listdir("%s/%d/task" % (proc, pid))
    except OSError:
        return out
    for tid in tids:
        try:
            with open("%s/%d/task/%s/schedstat" % (proc, pid, tid)) as f:
                run_ns, wait_ns = f.read().split()[:2]
            out[int(tid)] = (int(run_ns) + int(wait_ns)) / 1e9
        except (OSError, IndexError, ValueError):
            continue
    return out


def tree_sched(pid, proc="/proc"):
    """`_proc_sched` of `pid` and its live descendants, {(pid, tid): seconds}; {} when `pid` is
    gone or the kernel keeps no schedstat."""
    out = {}
    for p in _tree(pid, proc):
        threads = _proc_sched(p, proc)
        if not threads and p == pid:
            return {}
        out.update({(p, t): v for t, v in threads.items()})
    return out


# ---------------------------------------------------------------------------------------------
# Around one client run


class RunSampler:
    """The sampler of hyperloom.clientrun's seam: `start(pid)` when the client started, `stop()`
    when it ended (and was reaped) -> the run's observations (Observations.ts Observations).

    - client_cpu: the client's whole CPU from the runner's reaped children (getrusage
      RUSAGE_CHILDREN over the run: the client and what it reaped, less the sampler's own tool
      runs), so nothing it did between two samples is lost; cores_max from /proc of its process
      tree every interval. Not the lease's cgroup: it holds the engine too (includes_engine).
      busiest_thread_runnable: the share of the time its busiest thread wanted a CPU (ran, or
      waited on a run queue for one; /proc/PID/task/TID/schedstat) between its first and last
      sample: a client whose event loop always wants the CPU is the bottleneck, even on a host too
      busy to give it one (one thread: the threads of a runtime each wait on a busy host, and their
      sum says more of the host than of the client).
    - engine_load: /metrics at start, every INTERVAL_SEC, and at stop: the gauges' means over
      the scrapes (start and stop included: the client's ramp is part of its run) unless the
      engine's e2e latency histogram is there, whose sum over the run divided by the run's
      length is the mean in flight (Little's law, exact, with no sampling gaps); the counters as
      stop minus start.
    - gpus: the lease's GPUs (lease_gpus) every interval and at stop, through nvidia-smi or
      amd-smi; a process on them is in the lease when the runner is among its ancestors.
    """

    def __init__(self, base_url, gpus=None, is_ours=None, interval=INTERVAL_SEC, log=None):
        self.base_url = base_url
        self.interval = interval
        self.log = log or (lambda m: None)
        self.gpu_list = lease_gpus() if gpus is None else gpus
        self.is_ours = is_ours or _descends_from(os.getpid())
        self.stopping = threading.Event()
        self.thread = None
        self.lock = threading.Lock()

    # -- the pieces

    def _scrape(self):
        st, text = http_get(self.base_url + "/metrics")
        if st != 200:
            return None, ("/metrics answered %s" % st) if st else ("/metrics did not answer: %s" % text)
        samples = parse_prometheus(text)
        kind = engine_of(samples)
        if kind is None:
            return None, "/metrics has neither vllm: nor sglang: metrics"
        return (kind, figures(samples, kind)), None

    def _tick(self, final=False, gpus=True):
        cpu0 = time.thread_time()
        try:
            self._sample(final, gpus)
        finally:
            self.own_cpu += time.thread_time() - cpu0

    def _sample(self, final, gpus):
        now = time.monotonic()
        t = now - self.t0
        scrape, why = self._scrape()
        with self.lock:
            if scrape is not None:
                self.scrapes.append((t, scrape))
            elif why and why not in self.metrics_why:
                self.metrics_why.append(why)
            cpu = tree_cpu(self.pid) if not final else None
            if cpu is not None:
                if self.last_cpu is not None and now > self.last_cpu[0]:
                    self.cores_max = max(self.cores_max, (cpu - self.last_cpu[1]) / (now - self.last_cpu[0]))
                self.last_cpu = (now, cpu)
                self.cpu_samples += 1
            for key, v in (tree_sched(self.pid) if not final else {}).items():
                self.first_sched.setdefault(key, (now, v))
                self.last_sched[key] = (now, v)
        if gpus and self.gpu_tool is not None:
            self._gpus(t)

    def _gpus(self, t):
        if self.gpu_tool is not None:
            got = self.gpu_tool.sample(t)
            with self.lock:
                if got is None:
                    self.gpu_failures += 1
                else:
                    self.gpu_samples += got

    def _loop(self):
        # the first GPU sample here, not in start(): a slow vendor tool must not hold the runner
        try:
            cpu0 = time.thread_time()
            self._gpus(time.monotonic() - self.t0)
            self.own_cpu += time.thread_time() - cpu0
        except Exception as e:  # a sampler never fails the run
            self.log("sampler: %r" % (e,))
        while not self.stopping.wait(self.interval):
            try:
                self._tick()
            except Exception as e:  # a sampler never fails the run
                self.log("sampler: %r" % (e,))

    # -- the seam

    def start(self, pid):
        self.pid = pid
        self.stopping = threading.Event()
        self.t0 = time.monotonic()
        self.own_cpu = 0.0  # this sampler's own CPU (its threads' time in _tick), tool runs apart
        self.rusage0 = os.times()
        self.scrapes, self.metrics_why = [], []
        self.last_cpu, self.cores_max, self.cpu_samples = None, 0.0, 0
        self.first_sched, self.last_sched = {}, {}
        self.gpu_samples, self.gpu_failures = [], 0
        self.gpu_tool = None
        if self.gpu_list:
            tool = GpuTool(self.gpu_list, self.is_ours)
            self.gpu_tool = tool if tool.tool is not None else None
        self._tick(gpus=False)  # the counters' baseline, at once (a GET of /metrics)
        self.thread = threading.Thread(target=self._loop, name="hyperloom-sampler", daemon=True)
        self.thread.start()

    def stop(self):
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(TOOL_TIMEOUT_SEC + HTTP_TIMEOUT_SEC)
        end = time.monotonic()
        self._tick(final=True)
        duration = end - self.t0
        not_checked = []
        tools_cpu = self.gpu_tool.cpu_s if self.gpu_tool is not None else 0.0

        r1 = os.times()
        client_s = (r1.children_user - self.rusage0.children_user) + (r1.children_system - self.rusage0.children_system)
        client_s = max(0.0, client_s - tools_cpu)
        client_cpu = None
        if duration > 0:
            client_cpu = {
                "cores_mean": round(client_s / duration, 4),
                "cores_max": round(max(self.cores_max, client_s / duration), 4),
                "cpu_seconds": round(client_s, 3),
                "source": "proc",
                "samples": self.cpu_samples,
                "includes_engine": False,
            }
            shares = [(v1 - v0) / (t1 - t0) for key, (t0, v0) in self.first_sched.items()
                      for t1, v1 in [self.last_sched[key]] if t1 - t0 >= 1.0]
            if shares:
                client_cpu["busiest_thread_runnable"] = round(max(shares), 4)

        engine_load = None
        if len(self.scrapes) >= 2:
            kind = self.scrapes[-1][1][0]
            runs = [s for _, (k, s) in self.scrapes if k == kind]
            first, last = runs[0], runs[-1]

            def delta(k):
                a, b = first.get(k), last.get(k)
                return None if a is None or b is None else round(b - a, 6)

            def mean(k):
                xs = [s[k] for s in runs if s.get(k) is not None]
                return sum(xs) / len(xs) if xs else 0.0

            def peak(k):
                xs = [s[k] for s in runs if s.get(k) is not None]
                return max(xs) if xs else 0.0

            e2e, queue = delta("e2e_sum"), delta("queue_sum")
            if e2e is not None and duration > 0:
                waiting = (queue or 0.0) / duration
                running = max(0.0, e2e / duration - waiting)
                means_from = "latency sums"
            else:
                running, waiting, means_from = mean("running"), mean("waiting"), "scrapes"
            engine_load = {
                "source": kind,
                "samples": len(runs),
                "running_mean": round(running, 3),
                "running_max": peak("running"),
                "waiting_mean": round(waiting, 3),
                "waiting_max": peak("waiting"),
                "requests_total_delta": delta("requests"),
                "generation_tokens_delta": delta("generation"),
                "prompt_tokens_delta": delta("prompt"),
                "means_from": means_from,
                "e2e_latency_sum_delta": e2e,
                "queue_time_sum_delta": queue,
            }
        else:
            not_checked.append("load_not_delivered, counts_disagree: the engine's /metrics could not be read (%s)"
                               % ("; ".join(self.metrics_why) or "fewer than two scrapes"))

        gpus = None
        if not self.gpu_list:
            not_checked.append("throttled, gpu_shared: the lease holds no GPU")
        elif self.gpu_tool is None:
            not_checked.append("throttled, gpu_shared: neither nvidia-smi nor amd-smi is on this node's PATH")
        elif not self.gpu_samples:
            not_checked.append("throttled, gpu_shared: %s answered nothing usable" % self.gpu_tool.tool)
        else:
            gpus = {"tool": self.gpu_tool.tool, "gpus": self.gpu_list, "samples": self.gpu_samples}

        return {
            "duration_s": round(duration, 3),
            "client_cpu": client_cpu,
            "engine_load": engine_load,
            "gpus": gpus,
            "not_checked": not_checked,
            "sampler_cpu_s": round(self.own_cpu + tools_cpu, 4),
        }


def run_samplers(base_url, log=None, env=None):
    """The (name, sampler) pairs the runner hands hyperloom.clientrun for each client run: the one
    RunSampler on the engine at `base_url`; none when HYPERLOOM_SAMPLERS is "0" in the runner's
    environment (a bench's and a diagnosis's switch, docs/design.md#samplers: the runs then carry
    no observations, so the validity checks have nothing to judge)."""
    env = os.environ if env is None else env
    if env.get("HYPERLOOM_SAMPLERS") == "0":
        return []
    return [(NAME, RunSampler(base_url, log=log))]


def _descends_from(root):
    """is_ours(pid): True when `root` (the runner) is among pid's ancestors; None when the pid is
    not in this node's /proc (another PID namespace: cannot tell)."""
    from hyperloom import gpus as gputools

    def is_ours(pid):
        if not os.path.exists("/proc/%d" % pid):
            return None
        return root in gputools.ancestors(pid)

    return is_ours
