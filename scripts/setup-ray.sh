#!/usr/bin/env bash
# Creates (idempotently) the project-local virtualenv holding Ray core, used by
# development, tests and CI. Set HYPERLOOM_RAY to use an existing `ray` instead.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${HYPERLOOM_VENV:-$here/.venv}"
version="${HYPERLOOM_RAY_VERSION:-2.58.0}"
python="${PYTHON:-python3}"

if [ -x "$venv/bin/ray" ] && "$venv/bin/python" -c "import ray, sys; sys.exit(0 if ray.__version__ == '$version' else 1)" 2>/dev/null; then
  echo "setup-ray: ray $version already in $venv" >&2
  exit 0
fi
echo "setup-ray: installing ray==$version into $venv" >&2
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
# --retries 0 keeps pip from waiting on indexes it cannot reach.
"$venv/bin/pip" install --quiet --retries 0 --timeout 5 "ray==$version" >&2
"$venv/bin/ray" --version >&2
