#!/usr/bin/env bash
# The quick start (`npm run quickstart`): on a fresh clone, one command that installs what is
# missing, runs a serving baseline (docs/design.md#serving-benchmarks) of the stand-in
# engine and load client under a serving lease on a local Ray head, shows the session's state and
# writes the HTML report.
#
#   1. `npm ci` when node_modules is missing; Ray core into .venv (scripts/setup-ray.sh);
#      `npm run build` when dist/ is missing or older than the sources.
#   2. `hyperloom baseline run --session sessions/quickstart-<time> --gpus 0
#      --server 'node examples/fake-engine.mjs …' -- node examples/fake-bench-client.mjs`: with no
#      Ray running, hyperloom starts a local head with the serving_slot resource itself (docs/design.md#ensuring-a-cluster);
#      a head that already answers is reused. The engine (an OpenAI-compatible stand-in, no GPU
#      needed) starts on a free port in its own process group, the client runs once it answers
#      /health, writes vLLM's result format, and the engine is stopped before the lease ends.
#   3. `hyperloom state show` on that session and `hyperloom report` into
#      sessions/quickstart-<time>/report.html (side by side).
#   4. A small sweep (docs/design.md#sweeps: 2 batch limits x 3 loads, the best under p99_ttft_ms<=1000) in
#      sessions/quickstart-<time>-sweep, and its report there.
#   5. Stops the Ray head again, but only if this script's run started it (nothing answered before)
#      and the host's only Ray daemons are that head's: `ray stop` ends every Ray process on the
#      host, so a head that was running before, or anyone else's Ray, is left alone.
#
# Extra arguments go to the engine, e.g. `npm run quickstart -- --fail=kv-oom-vllm` to watch a
# KV-cache out-of-memory classified and the stop rules, or `--fail=capped` (asked 512 running
# requests, the engine runs what its KV cache holds and says so), `--fail=wrong-fast`,
# `--fail=cold-start` (examples/fake-engine.mjs's header); the load client's failure modes go to the
# client instead: `--fail=cpu-bound`, `--fail=drop`, `--fail=overcount`
# (examples/fake-bench-client.mjs's header). Exits with `baseline run`'s exit code.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { printf 'quickstart: %s\n' "$*" >&2; }
started=$(date +%s)

if [ ! -d node_modules ]; then
  say "installing the npm dependencies (npm ci)"
  npm ci --no-audit --no-fund >&2
fi
bash scripts/setup-ray.sh
if [ ! -f dist/hyperloom.mjs ] || [ -n "$(find src scripts/build.mjs package-lock.json -newer dist/hyperloom.mjs -print -quit)" ]; then
  say "building the CLI (npm run build)"
  npm run --silent build >&2
fi

hyperloom() { node "$root/dist/hyperloom.mjs" "$@"; }
ray_bin="${HYPERLOOM_RAY:-$root/.venv/bin/ray}"

# Was a Ray cluster answering before we ran anything?
if hyperloom ray status --json >/dev/null 2>&1; then
  ray_before=yes
  say "a Ray cluster is already running: reusing it (it will be left running)"
else
  ray_before=no
fi

session="$root/sessions/quickstart-$(date +%Y%m%d-%H%M%S)"
say "running the serving baseline (stand-in engine and client) in $session"
set +e
# Its progress goes to stderr; its summary on stdout is what `state show` prints next.
engine="node $root/examples/fake-engine.mjs --load-sec 0.5 --token-rate 400"
client_fail=()
for a in "$@"; do
  case "$a" in
    --fail=cpu-bound | --fail=drop | --fail=overcount) client_fail+=("$a") ;;
    --fail=capped) engine="$engine --fail=capped --max-num-seqs 512 --max-model-len 4096" ;;
    *) engine="$engine $(printf '%q' "$a")" ;;
  esac
done
hyperloom baseline run --session "$session" --gpus 0 --server "$engine" --ready-timeout 120 \
  -- node examples/fake-bench-client.mjs --num-prompts 16 --max-concurrency 8 --output-len 64 ${client_fail[@]+"${client_fail[@]}"} >/dev/null
code=$?
set -e
say "baseline run exited with code $code"
# Neither needs Ray: the two run side by side (each is a Node start), state show's lines first.
hyperloom report --session "$session" --out "$session/report.html" >"$session/.report.out" 2>&1 &
report_pid=$!
hyperloom state show --session "$session" || true
wait "$report_pid" || true
cat "$session/.report.out" >&2 && rm -f "$session/.report.out"

# A small sweep on the stand-in engine: two batch limits x three loads, one engine per batch limit,
# the best under a p99 TTFT budget, and its report (README "Sweep vLLM" for the real thing). Four
# prompts are enough: at c=4 against a batch limit of 2, two of them queue behind a whole request
# and pay the model's queue cost (TTFT ~2 s against the 1000 ms budget), while c <= the batch
# limit stays near 100 ms.
sweep_session="$session-sweep"
say "running a small sweep (2 combinations x 3 loads) in $sweep_session"
set +e
hyperloom sweep run --session "$sweep_session" --gpus 0 \
  --server "node $root/examples/fake-engine.mjs --load-sec 0.2 --queue-ms 1500 --max-num-seqs {seqs}" --param seqs=2,4 \
  --load c=1,2,4 --slo 'p99_ttft_ms<=1000' --ready-timeout 120 \
  -- node examples/fake-bench-client.mjs --num-prompts 4 --max-concurrency '{c}' --output-len 16
sweep_code=$?
set -e
say "sweep run exited with code $sweep_code"
hyperloom report --session "$sweep_session" --out "$sweep_session/report.html" || true

if [ "$ray_before" = no ]; then
  # Stop the head only if it is the only Ray on the host (its gcs_server and raylets).
  verdict=$(hyperloom ray status --json 2>/dev/null | node -e '
    let text = ""
    process.stdin.on("data", (d) => (text += d)).on("end", () => {
      let s
      try { s = JSON.parse(text) } catch { console.log("none"); return }
      if (!s || typeof s.address !== "string") { console.log("none"); return }
      const port = s.address.slice(s.address.lastIndexOf(":") + 1)
      const procs = (s.daemons && s.daemons.processes) || []
      const ours = procs.every((d) =>
        d.kind === "gcs_server" ? String(d.port) === port : String(d.gcsAddress ?? "").endsWith(":" + port))
      console.log(ours ? "ours" : "shared")
    })' || echo none)
  case "$verdict" in
    ours)
      say "stopping the Ray head this run started"
      "$ray_bin" stop >/dev/null 2>&1 || "$ray_bin" stop --force >/dev/null 2>&1 || say "ray stop failed"
      ;;
    shared) say "other Ray daemons run on this host now: leaving Ray running (stop it with: $ray_bin stop)" ;;
    *) ;;
  esac
fi
say "done in $(($(date +%s) - started)) s; the session stays in $session (hyperloom state show --session $session; open $session/report.html)"
exit "$code"
