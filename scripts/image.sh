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
#   ./rollout-stream image build-compose [--base IMAGE]
#       The other images docker-compose.yml names, where no container registry
#       can be reached: localhost/rollout-stream-kafka:<kafka version> and
#       localhost/rollout-stream-registry:<apicurio version> (stand-ins for
#       apache/kafka and apicurio/apicurio-registry: the Debian base, Debian's
#       Java 17 for the broker, the Java 21+ scripts/local-kafka.sh runs the
#       registry with, and the jars it fetched from Maven Central), and
#       localhost/rollout-stream-trainer:<version> (Debian's python3, the
#       wheel of python/ and its dependencies from PyPI). Builds the
#       rollout-stream image too when it is missing. The base is the one
#       `build` makes (or --base).
#   ./rollout-stream image compose ...  runs podman-compose (docker-compose.yml)
#       with the engine config, the images of build-compose (unless
#       KAFKA_IMAGE, REGISTRY_IMAGE, ROLLOUT_STREAM_IMAGE, TRAINER_IMAGE say
#       otherwise), e.g. `image compose up -d`, `image compose logs trainer`.
#   ./rollout-stream image name        prints the image's name (with the version)
#   ./rollout-stream image can-run     status 0 when podman can be used here (present,
#       or installable: root with apt-get); else 1 and the reason on stdout
#   ./rollout-stream image podman ...  runs podman with the project's engine config
#
# podman, runc, debootstrap (and podman-compose for `compose`) are installed
# with apt-get when missing (as root; otherwise the command to run is
# printed). The engine config (.local/podman/containers.conf, used through
# CONTAINERS_CONF) selects runc (crun refuses hybrid cgroup hosts) and caps
# the containers' rlimits at this machine's hard limits (podman's defaults
# can exceed a sandbox's).
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

usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; }

# The tools of `build` (and "$@") that are not on PATH, into MISSING.
missing_tools() {
  MISSING=()
  local t
  for t in podman runc debootstrap "$@"; do command -v "$t" >/dev/null 2>&1 || MISSING+=("$t"); done
}

# Why podman cannot be used on this machine, or nothing: the tools are
# here, or missing and installable (root, with apt-get). Status 1 with the
# reason on stdout when they cannot be had.
can_run() {
  missing_tools
  [[ ${#MISSING[@]} -eq 0 ]] && return 0
  if [[ $(id -u) -ne 0 ]]; then
    echo "${MISSING[*]} missing, and not root to install them (sudo apt-get install -y ${MISSING[*]})"
    return 1
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "${MISSING[*]} missing, and no apt-get here to install them (use your package manager)"
    return 1
  fi
  return 0
}

ensure_tools() {
  missing_tools "$@"
  [[ ${#MISSING[@]} -eq 0 ]] && return 0
  if [[ $(id -u) -ne 0 ]]; then
    die "missing ${MISSING[*]}; install them with: sudo apt-get install -y ${MISSING[*]}"
  fi
  command -v apt-get >/dev/null 2>&1 || die "missing ${MISSING[*]} and no apt-get here: install them with your package manager"
  log "installing ${MISSING[*]} from Debian's packages (apt-get)…"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${MISSING[@]}" >&2; then
    DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${MISSING[@]}" >&2
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

# The options of build and build-compose, into TAGS, BASE_IMAGE and REBUILD_BASE.
parse_build_options() {
  TAGS=()
  BASE_IMAGE=""
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --tag) [[ $# -ge 2 ]] || die "--tag needs a value"; TAGS+=("$2"); shift 2 ;;
      --base) [[ $# -ge 2 ]] || die "--base needs a value"; BASE_IMAGE="$2"; shift 2 ;;
      --rebuild-base) REBUILD_BASE=1; shift ;;
      -h|--help) usage; exit 0 ;;
      *) die "unknown option '$1' (see ./rollout-stream image --help)" ;;
    esac
  done
}

# The tools, the engine config, the base (BASE_IMAGE, else the local one) and
# the arguments every `podman build` here starts with (BUILD_ARGS). This
# machine's trust store for the builds' downloads (npm, pip) goes in as a
# secret, never copied into an image.
prepare_build() {
  ensure_tools
  engine_config
  [[ -n "$BASE_IMAGE" ]] || BASE_IMAGE="$(local_base)"
  BUILD_ARGS=(build --network=host --format docker --build-arg "BASE=$BASE_IMAGE")
  local ca="${NODE_EXTRA_CA_CERTS:-${SSL_CERT_FILE:-}}"
  if [[ -n "$ca" && -s "$ca" ]]; then BUILD_ARGS+=(--secret "id=ca,src=$ca"); fi
}

build() {
  cd "$ROOT"
  local t0 t args
  parse_build_options "$@"
  t0=$SECONDS
  prepare_build
  args=("${BUILD_ARGS[@]}" -t "$IMAGE")
  for t in "${TAGS[@]}"; do args+=(-t "$t"); done
  log "building $IMAGE from $BASE_IMAGE…"
  pm "${args[@]}" -f Dockerfile . >&2
  log "built $IMAGE${TAGS[*]:+ (also ${TAGS[*]})} in $((SECONDS - t0)) s; run it with:"
  log "  ./rollout-stream image podman run --rm --network=host $IMAGE run --metrics-port 9464"
}

POM="$ROOT/infra/kafka/pom.xml"
pom_version() { sed -n "s#.*<$1>\(.*\)</$1>.*#\1#p" "$POM" | head -n1; }
KAFKA_VERSION="$(pom_version kafka.version)"
APICURIO_VERSION="$(pom_version apicurio.version)"
KAFKA_IMAGE_LOCAL="localhost/rollout-stream-kafka:$KAFKA_VERSION"
REGISTRY_IMAGE_LOCAL="localhost/rollout-stream-registry:$APICURIO_VERSION"
TRAINER_IMAGE_LOCAL="localhost/rollout-stream-trainer:$VERSION"

# The Java 21+ home for the registry image: RS_REGISTRY_JAVA (a java binary),
# else the first of the JDKs scripts/local-kafka.sh looks for.
registry_java_home() {
  local j
  if [[ -n "${RS_REGISTRY_JAVA:-}" ]]; then j="$(readlink -f "$RS_REGISTRY_JAVA")"; echo "${j%/bin/java}"; return 0; fi
  for j in /usr/lib/jvm/temurin-25-jdk-amd64 /usr/lib/jvm/temurin-21-jdk-amd64 /usr/lib/jvm/java-21-openjdk-amd64; do
    [[ -x "$j/bin/java" ]] && { echo "$j"; return 0; }
  done
  return 1
}

# A build context under $CACHE: hard links where the file system allows (no copy of the jars).
link_tree() { rm -rf "$2"; mkdir -p "$(dirname "$2")"; cp -al "$1" "$2" 2>/dev/null || cp -a "$1" "$2"; }

build_compose() {
  cd "$ROOT"
  local t0 jhome ctx d
  parse_build_options "$@"
  [[ ${#TAGS[@]} -eq 0 ]] || die "--tag is an option of build only"
  t0=$SECONDS
  prepare_build
  pm image exists "$IMAGE" || build --base "$BASE_IMAGE"
  local common=("${BUILD_ARGS[@]}")

  log "the Kafka and Apicurio artifacts (scripts/local-kafka.sh install: Maven Central, first run only)…"
  "$ROOT/scripts/local-kafka.sh" install
  ctx="$CACHE/compose-kafka"
  link_tree "$ROOT/.local/kafka-libs" "$ctx/libs"
  rm -f "$ctx/libs/.stamp"
  cp "$ROOT/deploy/compose/kafka-run.sh" "$ctx/"
  log "building $KAFKA_IMAGE_LOCAL from $BASE_IMAGE…"
  pm "${common[@]}" -t "$KAFKA_IMAGE_LOCAL" -f "$ROOT/deploy/compose/kafka.Containerfile" "$ctx" >&2

  jhome="$(registry_java_home)" || die "the registry image needs a Java 21+ (Debian bookworm has none): set RS_REGISTRY_JAVA to its java binary"
  ctx="$CACHE/compose-registry"
  link_tree "$ROOT/.local/apicurio" "$ctx/apicurio"
  rm -rf "$ctx/jre"
  mkdir -p "$ctx/jre"
  for d in bin conf lib release; do
    if [[ -e "$jhome/$d" ]]; then link_tree "$jhome/$d" "$ctx/jre/$d"; fi
  done
  rm -f "$ctx/jre/lib/src.zip"
  log "building $REGISTRY_IMAGE_LOCAL from $BASE_IMAGE and the Java of $jhome…"
  pm "${common[@]}" -t "$REGISTRY_IMAGE_LOCAL" -f "$ROOT/deploy/compose/registry.Containerfile" "$ctx" >&2

  log "building $TRAINER_IMAGE_LOCAL from $BASE_IMAGE (python/ and its dependencies from PyPI)…"
  pm "${common[@]}" -t "$TRAINER_IMAGE_LOCAL" -f "$ROOT/deploy/compose/trainer.Containerfile" "$ROOT/python" >&2
  log "built $KAFKA_IMAGE_LOCAL, $REGISTRY_IMAGE_LOCAL, $TRAINER_IMAGE_LOCAL in $((SECONDS - t0)) s; run them with:"
  log "  ./rollout-stream image compose up -d"
}

compose() {
  cd "$ROOT"
  ensure_tools podman-compose
  engine_config
  export KAFKA_IMAGE="${KAFKA_IMAGE:-$KAFKA_IMAGE_LOCAL}" REGISTRY_IMAGE="${REGISTRY_IMAGE:-$REGISTRY_IMAGE_LOCAL}"
  export ROLLOUT_STREAM_IMAGE="${ROLLOUT_STREAM_IMAGE:-$IMAGE}" TRAINER_IMAGE="${TRAINER_IMAGE:-$TRAINER_IMAGE_LOCAL}"
  exec podman-compose "$@"
}

REBUILD_BASE=0
cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
  build) build "$@" ;;
  build-compose) build_compose "$@" ;;
  compose) compose "$@" ;;
  name) echo "$IMAGE" ;;
  can-run) can_run ;;
  podman) ensure_tools; engine_config; exec podman "$@" ;;
  ""|-h|--help|help) usage ;;
  *) die "unknown image command '$cmd' (build | build-compose | compose | name | can-run | podman; see ./rollout-stream image --help)" ;;
esac
