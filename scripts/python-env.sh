#!/usr/bin/env bash
# Creates (idempotently) the Python environment of the trainer client:
#   <repo>/.venv with `pip install -e './python[torch,test]'` and, when it
#   installs on this machine, the `tq` extra (transferqueue + tensordict).
# The install re-runs only when python/pyproject.toml changed (sha256 stamp
# in .venv/.rollout-stream-stamp) or the venv is missing/broken.
# All progress goes to stderr, so commands whose stdout is data can call this.
#
#   scripts/python-env.sh            # ensure the env, print nothing on stdout
#   scripts/python-env.sh --print    # ... then print the venv's python path
#   PYTHON=python3.12 scripts/python-env.sh   # choose the interpreter (>= 3.10)
#   RS_PY_SKIP_TQ=1 scripts/python-env.sh     # do not try the tq extra
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PYPROJECT="$ROOT/python/pyproject.toml"
STAMP="$VENV/.rollout-stream-stamp"

log() { printf '[python-env] %s\n' "$*" >&2; }

pick_python() {
  local cand
  for cand in "${PYTHON:-}" python3 python3.12 python3.11 python3.10; do
    [[ -n "$cand" ]] || continue
    command -v "$cand" >/dev/null 2>&1 || continue
    if "$cand" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
      echo "$cand"; return 0
    fi
  done
  log "no Python >= 3.10 found (set PYTHON=...)"; return 1
}

want="$(sha256sum "$PYPROJECT" | cut -c1-16)"
if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(head -n1 "$STAMP")" == "$want" ]] \
   && "$VENV/bin/python" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("rollout_stream") is None)' 2>/dev/null; then
  [[ "${1:-}" == "--print" ]] && echo "$VENV/bin/python"
  exit 0
fi

if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import sys' 2>/dev/null; then
  py="$(pick_python)"
  log "creating $VENV with $("$py" --version 2>&1)"
  rm -rf "$VENV"
  "$py" -m venv "$VENV"
fi

start=$SECONDS
log "installing ./python[torch,test] (first time downloads torch, several GB)"
"$VENV/bin/python" -m pip install --disable-pip-version-check -q --upgrade pip >&2
"$VENV/bin/python" -m pip install --disable-pip-version-check -e "$ROOT/python[torch,test]" >&2

tq="skipped"
if [[ "${RS_PY_SKIP_TQ:-0}" != "1" ]]; then
  log "installing the optional tq extra (transferqueue + tensordict, brings Ray)"
  if "$VENV/bin/python" -m pip install --disable-pip-version-check -e "$ROOT/python[torch,test,tq]" >&2; then
    tq="installed"
  else
    tq="failed"
    log "WARNING: the tq extra did not install; the TransferQueue sink and its test are unavailable"
  fi
fi

printf '%s\ntq=%s\n' "$want" "$tq" > "$STAMP"
log "ready in $((SECONDS - start))s (tq extra: $tq)"
[[ "${1:-}" == "--print" ]] && echo "$VENV/bin/python"
exit 0
