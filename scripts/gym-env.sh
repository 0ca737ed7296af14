#!/usr/bin/env bash
# Creates (idempotently) NeMo-Gym's environment for the collector tests and
# `demo --gym`: .local/gym-venv, a Python >= 3.12 venv with the `nemo-gym`
# package from PyPI and this checkout's ./python (editable). NeMo-Gym's own
# servers run from it (tools/gym/servers.py starts them without Ray or uv).
# Re-installs only when this script or python/pyproject.toml changed (stamp
# .local/gym-venv/.rollout-stream-stamp). Progress goes to stderr.
#
#   scripts/gym-env.sh            # ensure the env
#   scripts/gym-env.sh --print    # ... then print its python's path
#   PYTHON312=/path/to/python3.12 scripts/gym-env.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.local/gym-venv"
STAMP="$VENV/.rollout-stream-stamp"
NEMO_GYM_VERSION="0.4.0"

log() { printf '[gym-env] %s\n' "$*" >&2; }

want="$(cat "${BASH_SOURCE[0]}" "$ROOT/python/pyproject.toml" | sha256sum | cut -c1-16)"
if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
  [[ "${1:-}" == "--print" ]] && echo "$VENV/bin/python"
  exit 0
fi

pick_python() {
  local cand
  for cand in "${PYTHON312:-}" python3.13 python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python /root/.pyenv/versions/3.12*/bin/python; do
    [[ -n "$cand" ]] || continue
    command -v "$cand" >/dev/null 2>&1 || [[ -x "$cand" ]] || continue
    if "$cand" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
      echo "$cand"; return 0
    fi
  done
  log "NeMo-Gym needs Python >= 3.12 and none was found (set PYTHON312=...)"; return 1
}

if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
  py="$(pick_python)"
  log "creating $VENV with $("$py" --version 2>&1)"
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  "$py" -m venv "$VENV"
fi

start=$SECONDS
log "installing nemo-gym==$NEMO_GYM_VERSION and ./python (first time ~3 min, ~1.4 GB)"
"$VENV/bin/python" -m pip install --disable-pip-version-check -q --upgrade pip >&2
"$VENV/bin/python" -m pip install --disable-pip-version-check -q "nemo-gym==$NEMO_GYM_VERSION" -e "$ROOT/python" >&2
"$VENV/bin/python" -c 'import nemo_gym.rollout_collection, rollout_stream.gym' >&2
echo "$want" > "$STAMP"
log "ready in $((SECONDS - start))s"
[[ "${1:-}" == "--print" ]] && echo "$VENV/bin/python"
exit 0
