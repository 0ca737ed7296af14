#!/usr/bin/env bash
# promtool (Prometheus's rule checker) from Debian's `prometheus` package,
# installed with apt-get when missing (as root; otherwise the command to run
# is printed). Arguments go to promtool:
#   scripts/promtool.sh test rules deploy/prometheus/alerts.test.yaml
set -euo pipefail
if ! command -v promtool >/dev/null 2>&1; then
  if [[ $(id -u) -ne 0 ]]; then echo "[promtool] missing; install it with: sudo apt-get install -y --no-install-recommends prometheus" >&2; exit 1; fi
  echo "[promtool] installing Debian's prometheus package (promtool; the server is not started)…" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends prometheus >&2 || { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends prometheus >&2; }
fi
exec promtool "$@"
