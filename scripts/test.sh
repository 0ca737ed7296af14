#!/usr/bin/env bash
# ./rollout-stream test: every suite against a real broker and registry.
#   1. typecheck   2. TypeScript unit tests   3. local broker + registry up
#   (unless KAFKA_BROKERS is set)   4. TypeScript integration tests
#   5. the container image (built in the background from step 1 on) run with
#   podman   6. Python tests (unit + integration)   7. the cluster tier: a local
#   three-broker cluster (scripts/local-kafka-cluster.sh) and test/cluster/
# Ends with one line "tests: N passed, N failed" over all suites.
# Options: --unit (unit suites only, no broker), --keep (leave the brokers up),
#   --cluster (the cluster tier only), --no-cluster (all but the cluster tier).
# RS_BROKERS=3: steps 4-5 run against the local cluster too (replicated topics).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RESULTS="$ROOT/.local/test-results"
rm -rf "$RESULTS" && mkdir -p "$RESULTS"
UNIT_ONLY=0 KEEP=0 CLUSTER=1 CLUSTER_ONLY=0
for a in "$@"; do
  case "$a" in
    --unit) UNIT_ONLY=1; CLUSTER=0 ;;
    --keep) KEEP=1 ;;
    --cluster) CLUSTER_ONLY=1 ;;
    --no-cluster) CLUSTER=0 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $a (see ./rollout-stream test --help)" >&2; exit 2 ;;
  esac
done

failed=0
step() { printf '\n=== %s ===\n' "$*"; }
cluster_started=0 started_here=0
cleanup() {
  [[ $KEEP == 1 ]] && return 0
  if [[ $cluster_started == 1 ]]; then scripts/local-kafka.sh down --brokers 3; cluster_started=0; fi
  if [[ $started_here == 1 ]]; then scripts/local-kafka.sh down; started_here=0; fi
}
trap cleanup EXIT

# What the services said around a failure (CI keeps nothing else).
service_logs() {
  local f
  for f in "$@"; do
    [[ -f "$f" ]] || continue
    printf '\n--- last lines of %s ---\n' "$f"
    grep -E 'WARN|ERROR|Exception' "$f" | tail -25
  done
}

# The local three-broker cluster (started here when it is not up).
cluster_up() {
  if ! scripts/local-kafka.sh status --brokers 3 | grep -q "(3 of 3 nodes up)"; then cluster_started=1; fi
  RS_LOCAL_BROKER=1 scripts/local-kafka.sh up --brokers 3 || { echo "could not start the local cluster" >&2; exit 1; }
}

# Tier 6: the cluster tests (test/cluster, their own vitest project).
cluster_tier() {
  step "cluster tests (three brokers + registry, test/cluster)"
  cluster_up
  if ! RS_KEEP_CLUSTER=1 npx vitest run --project cluster --reporter=default --reporter=json --outputFile.json="$RESULTS/ts-cluster.json"; then
    failed=1
    service_logs "${RS_KAFKA_CLUSTER_STATE_DIR:-$ROOT/.local/kafka-cluster}"/node-*/broker.log "${RS_KAFKA_CLUSTER_STATE_DIR:-$ROOT/.local/kafka-cluster}/registry.log"
  fi
}

if [[ $CLUSTER_ONLY == 1 ]]; then
  cluster_tier
else
step "typecheck"
npx tsc --noEmit -p . || failed=1

# The Python environment first: the Python suite and the demo (run by the
# integration suite) both use it.
if [[ -x scripts/python-env.sh ]]; then
  step "Python environment"
  scripts/python-env.sh || { echo "could not prepare the Python environment" >&2; exit 1; }
fi
# NeMo-Gym's own venv (Python 3.12, nemo-gym from PyPI) for the collector's
# tests. Only the Python suite uses it, so it installs in the background (a
# first install is ~2.5 min, mostly download) while the TypeScript suites
# run; its log is printed, and its result checked, before the Python tests.
gym_pid=""
GYM_LOG="$RESULTS/gym-env.log"
if [[ $UNIT_ONLY == 0 && -x scripts/gym-env.sh ]]; then
  step "NeMo-Gym environment (in the background until the Python tests)"
  scripts/gym-env.sh >"$GYM_LOG" 2>&1 &
  gym_pid=$!
fi

# The container image builds in the background too (podman from Debian's
# packages; ~4 min the first time, mostly downloads); its tier runs after the
# integration tests. RS_SKIP_IMAGE=1 leaves it out (say why in the run's log).
# Where podman cannot be had (not installed, and not root or no apt-get to
# install it), the image and Kubernetes tests are skipped, saying so; where
# it can, a build that fails fails the run.
image_pid=""
image_skip=""
IMAGE_LOG="$RESULTS/image-build.log"
# (can-run failing without a reason is no reason: the build then runs and says why.)
if [[ $UNIT_ONLY == 0 && "${RS_SKIP_IMAGE:-0}" != 1 ]]; then image_skip="$(scripts/image.sh can-run)" || true; fi
if [[ $UNIT_ONLY == 0 && "${RS_SKIP_IMAGE:-0}" != 1 && -z "$image_skip" ]]; then
  step "container image (building in the background until the image tests)"
  # Then docker-compose.yml's other images (test/image/compose.test.ts builds them again, layer-cached).
  { scripts/image.sh build && { scripts/image.sh build-compose || echo "[image] build-compose failed (the compose test tries again)"; }; } >"$IMAGE_LOG" 2>&1 &
  image_pid=$!
fi

step "TypeScript unit tests"
npx vitest run --project unit --reporter=default --reporter=json --outputFile.json="$RESULTS/ts-unit.json" || failed=1

if [[ $UNIT_ONLY == 0 ]]; then
  if [[ "${RS_BROKERS:-1}" == 3 && ( -z "${KAFKA_BROKERS:-}" || "${RS_LOCAL_BROKER:-}" == 1 ) ]]; then
    step "local three-broker cluster and its schema registry (RS_BROKERS=3)"
    cluster_up
    export KAFKA_BROKERS="$(scripts/local-kafka.sh bootstrap --brokers 3)"
    export SCHEMA_REGISTRY_URL="$(scripts/local-kafka.sh registry-url --brokers 3)"
    export RS_LOCAL_BROKER=1
  elif [[ -z "${KAFKA_BROKERS:-}" || "${RS_LOCAL_BROKER:-}" == 1 ]]; then
    step "local Kafka broker and schema registry"
    if ! scripts/local-kafka.sh status | grep -q "kafka .* up"; then started_here=1; fi
    scripts/local-kafka.sh up || { echo "could not start the local broker/registry" >&2; exit 1; }
    # Every suite (TS, Python, child processes) talks to this broker.
    export KAFKA_BROKERS="127.0.0.1:${RS_KAFKA_PORT:-9092}"
    export SCHEMA_REGISTRY_URL="http://127.0.0.1:${RS_REGISTRY_PORT:-8081}/apis/ccompat/v7"
    export RS_LOCAL_BROKER=1
  fi

  step "TypeScript integration tests (real broker + registry)"
  # On the cluster, the SASL/TLS tests have no listeners to talk to (they
  # live on the single broker only).
  exclude=()
  [[ "${RS_BROKERS:-1}" == 3 ]] && exclude=(--exclude test/integration/security.test.ts)
  if ! npx vitest run --project integration "${exclude[@]}" --reporter=default --reporter=json --outputFile.json="$RESULTS/ts-integration.json"; then
    failed=1
    state="${RS_KAFKA_STATE_DIR:-$ROOT/.local/kafka}"
    service_logs "$state/broker.log" "$state/registry.log"
  fi
fi

if [[ -n "$image_pid" ]]; then
  step "container image tests (podman, host network, the local broker)"
  if wait "$image_pid"; then
    tail -n 3 "$IMAGE_LOG"
    npx vitest run --project image --reporter=default --reporter=json --outputFile.json="$RESULTS/ts-image.json" || failed=1
  else
    cat "$IMAGE_LOG"; echo "the container image did not build (log above)" >&2; failed=1
  fi
elif [[ -n "$image_skip" ]]; then
  step "container image tests"
  echo "container image and Kubernetes tests skipped: podman cannot be used on this machine: $image_skip"
elif [[ $UNIT_ONLY == 0 ]]; then
  echo "container image tests skipped: RS_SKIP_IMAGE=1"
fi

if [[ -n "$gym_pid" ]]; then
  step "NeMo-Gym environment (waiting for the background install)"
  if ! wait "$gym_pid"; then cat "$GYM_LOG"; echo "could not prepare NeMo-Gym's environment" >&2; exit 1; fi
  cat "$GYM_LOG"
fi

if [[ -d python/tests ]]; then
  step "Python tests"
  marks=()
  [[ $UNIT_ONLY == 1 ]] && marks=(-m "not integration and not transferqueue")
  .venv/bin/python -m pytest python/tests -q "${marks[@]}" --junitxml="$RESULTS/python.xml" || failed=1
fi

if [[ $CLUSTER == 1 ]]; then
  # The single broker is not needed any more: give its memory and CPU to the cluster.
  if [[ $started_here == 1 && $KEEP == 0 ]]; then scripts/local-kafka.sh down; started_here=0; fi
  cluster_tier
fi
fi

node --input-type=module -e '
import { readFileSync, readdirSync } from "node:fs";
const dir = process.argv[1];
let passed = 0, failedN = 0, skipped = 0, failedFiles = 0;
const retried = [];
for (const f of readdirSync(dir)) {
  const text = readFileSync(`${dir}/${f}`, "utf8");
  if (f.endsWith(".json")) {
    const r = JSON.parse(text);
    passed += r.numPassedTests; failedN += r.numFailedTests; skipped += r.numPendingTests + (r.numTodoTests ?? 0);
    // A file whose setup hook fails reports its tests as skipped, not failed: count the file.
    for (const s of r.testResults ?? []) if (s.status === "failed" && !(s.assertionResults ?? []).some((a) => a.status === "failed")) failedFiles++;
    // Passed, but only on a retry: say so, so a flaky test never hides in "passed".
    for (const s of r.testResults ?? []) for (const a of s.assertionResults ?? []) if (a.status === "passed" && (a.failureMessages ?? []).length > 0) retried.push(a.fullName ?? a.title);
  } else if (f.endsWith(".xml")) {
    const m = text.match(/<testsuite [^>]*>/);
    if (m) {
      const attr = (n) => Number((m[0].match(new RegExp(`${n}="(\\d+)"`)) ?? [0, 0])[1]);
      const tests = attr("tests"), fail = attr("failures") + attr("errors"), skip = attr("skipped");
      passed += tests - fail - skip; failedN += fail; skipped += skip;
    }
  }
}
for (const t of retried) console.log(`passed only on a retry: ${t}`);
console.log(`\ntests: ${passed} passed, ${failedN} failed${skipped ? `, ${skipped} skipped` : ""}${retried.length ? ` (${retried.length} only on a retry)` : ""}${failedFiles ? `, ${failedFiles} test file(s) failed outside any test (setup or teardown)` : ""}`);
' "$RESULTS"
exit $failed
