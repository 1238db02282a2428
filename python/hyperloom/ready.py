"""After readiness, before measuring: the two things both runners do once per engine start
(docs/trust.md#is-the-number-valid): the user's `--check` command, and `--warmup` requests.

`check(command, env, cwd, log_path, stop_requested, timeout)` runs `sh -c COMMAND` with the engine's
HYPERLOOM_BASE_URL/HYPERLOOM_PORT in `env`, its whole output in LOG_PATH (check.log), and returns
{"exit_code", "runtime_sec", "last_line", "log"}: a non-zero exit means the engine answers wrong
and nothing is measured on it (the runner's caller records the combination `check_failed`).

`warm_up(base_url, n, log)` sends N short completions at once to the engine's OpenAI-compatible
/v1/completions (the model from /v1/models, which vLLM and SGLang both serve), request i asking for
i + 1 tokens, and waits for them; their answers are discarded. Returns {"requests", "ok", "failed", "sec"}. Why N at once: both
engines compile and capture their CUDA graphs before /health answers (vLLM's
compile_or_warm_up_model; SGLang's graph capture, then its own one warm-up request), so what is
still cold after readiness is per shape: a prefill of several sequences, the sampler at batch sizes
above one, the first JIT'd kernels; N requests together meet a multi-sequence prefill, then, one
finishing per step, every decode batch size from N down to 1.
Standard library only; Python >= 3.8."""

import json
import os
import subprocess
import threading
import time
import urllib.request

from hyperloom import engine

WARMUP_MAX_TOKENS = 16  # request i asks for min(i + 1, this) tokens
WARMUP_TIMEOUT_SEC = 120.0


def check(command, env, cwd, log_path, stop_requested, timeout=None, poll=0.05):
    """Runs the check; returns its record (exit_code None when it was stopped or timed out)."""
    started = time.monotonic()
    with open(log_path, "ab", buffering=0) as logf:
        proc = subprocess.Popen(
            ["sh", "-c", command], stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
            env=env, cwd=cwd, close_fds=True, start_new_session=True,
        )
    code = None
    while True:
        rc = proc.poll()
        if rc is not None:
            code = rc if rc >= 0 else 128 - rc
            break
        if stop_requested.wait(poll) or (timeout is not None and time.monotonic() - started >= timeout):
            try:
                os.killpg(proc.pid, 15)
                proc.wait(2)
            except (OSError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, 9)
                except OSError:
                    pass
                proc.wait()
            break
    return {
        "exit_code": code,
        "runtime_sec": round(time.monotonic() - started, 3),
        "last_line": engine.last_line(log_path),
        "log": os.path.basename(log_path),
    }


def _get_json(url, timeout):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read().decode("utf-8", "replace"))


def _model(base_url):
    try:
        data = _get_json(base_url + "/v1/models", 10).get("data") or []
        return data[0].get("id") if data else None
    except (OSError, ValueError, AttributeError):
        return None


def _one(base_url, model, results, i):
    body = {"prompt": "Warm-up request %d: count from one to ten." % i, "max_tokens": min(i + 1, WARMUP_MAX_TOKENS),
            "temperature": 0, "stream": False}
    if model is not None:
        body["model"] = model
    req = urllib.request.Request(base_url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=WARMUP_TIMEOUT_SEC) as r:
            r.read()
            results[i] = 200 <= r.status < 300
    except (OSError, ValueError):
        results[i] = False


def warm_up(base_url, n, log):
    """N completions at once, answers discarded; returns their record (None when N is 0)."""
    if n <= 0:
        return None
    started = time.monotonic()
    model = _model(base_url)
    results = [False] * n
    threads = [threading.Thread(target=_one, args=(base_url, model, results, i), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WARMUP_TIMEOUT_SEC)
    ok = sum(1 for x in results if x)
    sec = round(time.monotonic() - started, 3)
    log("warm-up: %d request%s in %.2f s (%d failed), discarded" % (n, "" if n == 1 else "s", sec, n - ok))
    return {"requests": n, "ok": ok, "failed": n - ok, "sec": sec}
