#!/usr/bin/env bash
# The Python check (`npm run lint`, `npm test`, .ci/run): every Python file of the package, the
# tests and the benches compiles with the Python that runs them (Ray's, else python3), and
# pyflakes finds nothing (unused imports, undefined names, redefinitions). pyflakes comes from,
# in this order: HYPERLOOM_PYFLAKES (a command), a pyflakes the system python3 has, a dev-only
# virtualenv .venv-lint/ made here on first use (pip, the local package index), Debian's
# python3-pyflakes (as root). Without pyflakes it checks compilation only and says so; under
# CI=true that fails.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
mapfile -t files < <(find python test bench -name '*.py' -not -path '*/node_modules/*' -not -path '*/__pycache__/*' | sort)
if [ "${#files[@]}" -eq 0 ]; then
  echo "lint-python: no Python files found" >&2
  exit 1
fi
python="${HYPERLOOM_RAY_PYTHON:-}"
[ -n "$python" ] || { [ -x .venv/bin/python ] && python=.venv/bin/python; } || python=python3

# 1. Compiles (in memory: no __pycache__ left behind).
"$python" - "${files[@]}" <<'PY' || exit 1
import sys
bad = 0
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        source = f.read()
    try:
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as e:
        print("%s:%s:%s: %s" % (path, e.lineno, e.offset, e.msg), file=sys.stderr)
        bad += 1
sys.exit(1 if bad else 0)
PY

# 2. pyflakes.
venv="$here/.venv-lint"
pyflakes=()
if [ -n "${HYPERLOOM_PYFLAKES:-}" ]; then
  read -r -a pyflakes <<<"$HYPERLOOM_PYFLAKES"
elif python3 -m pyflakes --version >/dev/null 2>&1; then
  pyflakes=(python3 -m pyflakes)
elif [ -x /usr/bin/python3 ] && /usr/bin/python3 -m pyflakes --version >/dev/null 2>&1; then
  pyflakes=(/usr/bin/python3 -m pyflakes)
else
  if [ ! -x "$venv/bin/pyflakes" ]; then
    { python3 -m venv "$venv" && "$venv/bin/pip" install --quiet --retries 0 --timeout 5 pyflakes; } >&2 2>/dev/null ||
      rm -rf "$venv"
  fi
  if [ -x "$venv/bin/pyflakes" ]; then
    pyflakes=("$venv/bin/pyflakes")
  elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    { apt-get install -y -q python3-pyflakes || { apt-get update -q && apt-get install -y -q python3-pyflakes; }; } >&2 &&
      pyflakes=(/usr/bin/python3 -m pyflakes)
  fi
fi
if [ "${#pyflakes[@]}" -eq 0 ]; then
  echo "lint-python: pyflakes is not available: compiled ${#files[@]} files only" >&2
  [ "${CI:-}" = true ] && exit 1
  exit 0
fi
"${pyflakes[@]}" "${files[@]}" || exit 1
echo "lint-python: ${#files[@]} files compile, pyflakes clean" >&2
