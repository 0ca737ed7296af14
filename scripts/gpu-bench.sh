#!/usr/bin/env bash
# One prepared run of the trainer client's GPU benchmark on a lent GPU box
# (PyTorch installed; no Node, no network; run from the repo root or anywhere).
# Installs nothing: it only puts python/src and python/bench on PYTHONPATH. Then it runs
#   python -m rollout_stream bench --device $DEVICE
# for a text-only group shape and a routed-experts shape, and writes the
# combined output to $OUT/gpu-bench.txt when $OUT is set (stdout always).
#
# Source of the groups (SOURCE, default auto): "records" builds Confluent-framed
# packed records and decodes them (needs numpy, fastavro, confluent-kafka);
# "synth" builds the same decoded fields with torch alone. auto picks records
# when all three import, else synth — so a bare PyTorch box works; nothing is
# vendored. When pytest, numpy, fastavro and confluent-kafka are importable it
# also runs the CUDA-only tests of python/tests/test_device.py (RUN_TESTS=0 skips).
#
#   scripts/gpu-bench.sh                 # DEVICE=cuda
#   DEVICE=cpu scripts/gpu-bench.sh      # the same script on a machine without a GPU (smaller sizes)
#   PYTHON=python3 REPEAT=20 ROUTES=48x8 scripts/gpu-bench.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DEVICE="${DEVICE:-cuda}"
SOURCE="${SOURCE:-auto}"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]] && "$ROOT/.venv/bin/python" -c 'import torch' 2>/dev/null; then
    PYTHON="$ROOT/.venv/bin/python"
  else
    PYTHON="$(command -v python3 || command -v python)"
  fi
fi
export PYTHONPATH="$ROOT/python/src:$ROOT/python/bench${PYTHONPATH:+:$PYTHONPATH}"
if [[ "$DEVICE" == cpu ]]; then  # 2 shared cores: keep it to seconds
  TEXT_GROUPS="${TEXT_GROUPS:-2}" ROUTES_GROUPS="${ROUTES_GROUPS:-1}" REPEAT="${REPEAT:-3}"
else
  TEXT_GROUPS="${TEXT_GROUPS:-8}" ROUTES_GROUPS="${ROUTES_GROUPS:-4}" REPEAT="${REPEAT:-10}"
fi
ROUTES="${ROUTES:-48x8}"  # [tokens, layers, topk] int16: e.g. 48 MoE layers, top-8

REPORT="$(mktemp)"
FAILED=0
finish() {  # the report reaches $OUT even when a step failed
  if [[ -n "${OUT:-}" ]]; then
    mkdir -p "$OUT" && cp "$REPORT" "$OUT/gpu-bench.txt" && echo "wrote $OUT/gpu-bench.txt" >&2
  fi
  rm -f "$REPORT"
}
trap finish EXIT
say() { printf '%s\n' "$*" | tee -a "$REPORT"; }
run() {  # runs one step, keeps going on failure (exit status at the end)
  say "\$ $*"
  local rc=0
  "$@" > >(tee -a "$REPORT") 2> >(grep -v is_fx_tracing | tee -a "$REPORT" >&2) || rc=$?
  wait
  if (( rc )); then say "!! exit $rc"; FAILED=1; fi
}

say "# rollout-stream gpu-bench $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
run "$PYTHON" - <<'PY'
import importlib.util, platform, torch
print(f"python {platform.python_version()}, torch {torch.__version__}, cuda {torch.version.cuda}, "
      f"gpus {torch.cuda.device_count()} {[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]}")
print("importable:", {m: importlib.util.find_spec(m) is not None for m in ("numpy", "fastavro", "confluent_kafka", "pytest")})
PY
common=(--device "$DEVICE" --source "$SOURCE" --rows 16 --min-tokens 4096 --max-tokens 32768 --repeat "$REPEAT")
say "## text-only (input_ids, logprobs, token_mask + dense fields)"
run "$PYTHON" -m rollout_stream bench "${common[@]}" --groups "$TEXT_GROUPS"
say "## routed experts $ROUTES int16"
run "$PYTHON" -m rollout_stream bench "${common[@]}" --groups "$ROUTES_GROUPS" --routed-experts "$ROUTES"

if [[ "${RUN_TESTS:-1}" == 1 && "$DEVICE" != cpu ]]; then
  if "$PYTHON" -c 'import pytest, numpy, fastavro, confluent_kafka' 2>/dev/null; then
    say "## CUDA-only tests (python/tests/test_device.py)"
    run "$PYTHON" -m pytest -q -p no:cacheprovider python/tests/test_device.py -k "cuda" -rs
  else
    say "## CUDA-only tests skipped: pytest/numpy/fastavro/confluent_kafka not all importable here"
  fi
fi
exit "$FAILED"
