#!/usr/bin/env bash
# ./rollout-stream image: the container image, built here with podman from
# Debian's packages (no container registry needed).
#
#   ./rollout-stream image build [--tag T] [--base IMAGE] [--rebuild-base]
#       Builds the Dockerfile into podman's local storage as
#       localhost/rollout-stream:<version> (package.json) and, with --tag, as T.
#       Without --base, the base is localhost/rollout-stream-base:<debian>-node<v>,
#       made once from a debootstrap'd Debian bookworm (minbase, tini,
#       ca-certificates) and the pinned Node.js of scripts/node-env.sh.
#       With --base, any Debian-based image with Node.js 24 in /usr/local
#       (e.g. docker.io/library/node:24-bookworm-slim on a machine that can pull).
#   ./rollout-stream image name        prints the image's name (with the version)
#   ./rollout-stream image podman ...  runs podman with the project's engine config
#
# podman, runc and debootstrap are installed with apt-get when missing (as
# root; otherwise the command to run is printed). The engine config
# (.local/podman/containers.conf, used through CONTAINERS_CONF) selects runc
# (crun refuses hybrid cgroup hosts) and caps the containers' rlimits at this
# machine's hard limits (podman's defaults can exceed a sandbox's).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf '[image] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

VERSION="$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$ROOT/package.json" | head -n1)"
[[ -n "$VERSION" ]] || die "no version in package.json"
IMAGE="localhost/rollout-stream:$VERSION"
SUITE=bookworm
MIRROR="${RS_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE="${RS_IMAGE_CACHE:-$ROOT/.local/image}"
CONF_DIR="$ROOT/.local/podman"

usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; }

ensure_tools() {
  local missing=() t
  for t in podman runc debootstrap; do command -v "$t" >/dev/null 2>&1 || missing+=("$t"); done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ $(id -u) -ne 0 ]]; then
    die "missing ${missing[*]}; install them with: sudo apt-get install -y ${missing[*]}"
  fi
  command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get here: install them with your package manager"
  log "installing ${missing[*]} from Debian's packages (apt-get)…"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2; then
    DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2
  fi
}

# The engine config: runc, and rlimits this machine allows.
engine_config() {
  mkdir -p "$CONF_DIR"
  local nofile
  nofile="$(ulimit -Hn)"
  [[ "$nofile" == unlimited ]] && nofile=1048576
  cat >"$CONF_DIR/containers.conf" <<EOF
# Written by scripts/image.sh; used through CONTAINERS_CONF.
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=4096:4096"]
[engine]
runtime = "runc"
EOF
  export CONTAINERS_CONF="$CONF_DIR/containers.conf"
}

pm() { podman "$@"; }

# localhost/rollout-stream-base:<suite>-node<v>: debootstrap + pinned Node.
local_base() {
  local node_dir node_v tag rootfs
  node_dir="$(RS_NODE=pinned "$ROOT/scripts/node-env.sh" --print)"
  node_dir="$(cd "$node_dir/.." && pwd)"
  node_v="$("$node_dir/bin/node" --version)"
  tag="localhost/rollout-stream-base:$SUITE-node${node_v#v}"
  if [[ $REBUILD_BASE == 0 ]] && pm image exists "$tag"; then echo "$tag"; return 0; fi
  rootfs="$CACHE/rootfs-$SUITE"
  if [[ $REBUILD_BASE == 1 || ! -f "$rootfs/.rollout-stream-complete" ]]; then
    rm -rf "$rootfs"
    mkdir -p "$CACHE"
    log "debootstrap $SUITE (minbase, tini, ca-certificates) from $MIRROR (~1 min)…"
    debootstrap --variant=minbase --include=ca-certificates,tini "$SUITE" "$rootfs" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
      || { tail -n 20 "$CACHE/debootstrap.log" >&2; die "debootstrap failed (log: $CACHE/debootstrap.log)"; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    touch "$rootfs/.rollout-stream-complete"
  fi
  log "adding Node.js $node_v (the launcher's pinned build) under /usr/local…"
  rm -rf "$rootfs/usr/local/lib/node_modules"
  cp -a "$node_dir/bin/node" "$rootfs/usr/local/bin/node"
  mkdir -p "$rootfs/usr/local/lib"
  cp -a "$node_dir/lib/node_modules" "$rootfs/usr/local/lib/"
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
  log "importing the base as $tag…"
  tar --exclude=./.rollout-stream-complete --exclude=./proc/* --exclude=./sys/* --exclude=./dev/* \
    -C "$rootfs" -c . | pm import --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin' - "$tag" >/dev/null
  echo "$tag"
}

build() {
  cd "$ROOT"
  local tags=() base="" t0
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --tag) [[ $# -ge 2 ]] || die "--tag needs a value"; tags+=("$2"); shift 2 ;;
      --base) [[ $# -ge 2 ]] || die "--base needs a value"; base="$2"; shift 2 ;;
      --rebuild-base) REBUILD_BASE=1; shift ;;
      -h|--help) usage; exit 0 ;;
      *) die "unknown option '$1' (see ./rollout-stream image --help)" ;;
    esac
  done
  ensure_tools
  engine_config
  t0=$SECONDS
  [[ -n "$base" ]] || base="$(local_base)"
  local args=(build --network=host --format docker --build-arg "BASE=$base" -t "$IMAGE")
  # This machine's trust store for the build's downloads (npm), never copied into the image.
  local ca="${NODE_EXTRA_CA_CERTS:-${SSL_CERT_FILE:-}}"
  [[ -n "$ca" && -s "$ca" ]] && args+=(--secret "id=ca,src=$ca")
  for t in "${tags[@]}"; do args+=(-t "$t"); done
  log "building $IMAGE from $base…"
  pm "${args[@]}" -f Dockerfile . >&2
  log "built $IMAGE${tags[*]:+ (also ${tags[*]})} in $((SECONDS - t0)) s; run it with:"
  log "  ./rollout-stream image podman run --rm --network=host $IMAGE run --metrics-port 9464"
}

REBUILD_BASE=0
cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
  build) build "$@" ;;
  name) echo "$IMAGE" ;;
  podman) ensure_tools; engine_config; exec podman "$@" ;;
  ""|-h|--help|help) usage ;;
  *) die "unknown image command '$cmd' (build | name | podman; see ./rollout-stream image --help)" ;;
esac
