#!/usr/bin/env bash
# ./rollout-stream test: every suite against a real broker and registry.
#   1. typecheck   2. TypeScript unit tests   3. local broker + registry up
#   (unless KAFKA_BROKERS is set)   4. TypeScript integration tests
#   5. Python tests (unit + integration)
# Ends with one line "tests: N passed, N failed" over all suites.
# Options: --unit (unit suites only, no broker), --keep (leave the broker up).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RESULTS="$ROOT/.local/test-results"
rm -rf "$RESULTS" && mkdir -p "$RESULTS"
UNIT_ONLY=0 KEEP=0
for a in "$@"; do
  case "$a" in
    --unit) UNIT_ONLY=1 ;;
    --keep) KEEP=1 ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $a (see ./rollout-stream test --help)" >&2; exit 2 ;;
  esac
done

failed=0
step() { printf '\n=== %s ===\n' "$*"; }

step "typecheck"
npx tsc --noEmit -p . || failed=1

# The Python environment first: the Python suite and the demo (run by the
# integration suite) both use it.
if [[ -x scripts/python-env.sh ]]; then
  step "Python environment"
  scripts/python-env.sh || { echo "could not prepare the Python environment" >&2; exit 1; }
fi

step "TypeScript unit tests"
npx vitest run --project unit --reporter=default --reporter=json --outputFile.json="$RESULTS/ts-unit.json" || failed=1

started_here=0
if [[ $UNIT_ONLY == 0 ]]; then
  if [[ -z "${KAFKA_BROKERS:-}" || "${RS_LOCAL_BROKER:-}" == 1 ]]; then
    step "local Kafka broker and schema registry"
    if ! scripts/local-kafka.sh status | grep -q "kafka .* up"; then started_here=1; fi
    scripts/local-kafka.sh up || { echo "could not start the local broker/registry" >&2; exit 1; }
    # Every suite (TS, Python, child processes) talks to this broker.
    export KAFKA_BROKERS="127.0.0.1:${RS_KAFKA_PORT:-9092}"
    export SCHEMA_REGISTRY_URL="http://127.0.0.1:${RS_REGISTRY_PORT:-8081}/apis/ccompat/v7"
    export RS_LOCAL_BROKER=1
  fi
  cleanup() { if [[ $started_here == 1 && $KEEP == 0 ]]; then scripts/local-kafka.sh down; fi; }
  trap cleanup EXIT

  step "TypeScript integration tests (real broker + registry)"
  if ! npx vitest run --project integration --reporter=default --reporter=json --outputFile.json="$RESULTS/ts-integration.json"; then
    failed=1
    # What the services said around the failure (CI keeps nothing else).
    state="${RS_KAFKA_STATE_DIR:-$ROOT/.local/kafka}"
    for f in broker registry; do
      [[ -f "$state/$f.log" ]] || continue
      printf '\n--- last lines of %s ---\n' "$state/$f.log"
      grep -E 'WARN|ERROR|Exception' "$state/$f.log" | tail -25
    done
  fi
fi

if [[ -d python/tests ]]; then
  step "Python tests"
  marks=()
  [[ $UNIT_ONLY == 1 ]] && marks=(-m "not integration and not transferqueue")
  .venv/bin/python -m pytest python/tests -q "${marks[@]}" --junitxml="$RESULTS/python.xml" || failed=1
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
