#!/usr/bin/env bash
# Runs the whole test suite: installs dependencies when missing, builds warnings-as-errors, runs
# the unit tests (ctest), the end-to-end tests against the real binary on the embedded log and on a
# real Kafka broker (pytest), the S3 client and bucket storage against a real S3-compatible test
# server (moto), the broker fault tests, the cluster fault harness, the benchmark
# drivers' smoke runs, and the unit tests under ASan+UBSan and TSan. Set SEDIMENT_SKIP_SANITIZERS=1 to skip the sanitizer build.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
# The S3 test server (moto's server mode) in a virtualenv; no network once installed.
python3 scripts/s3/moto.py install
export PYTHONDONTWRITEBYTECODE=1
PYTEST=(python3 -m pytest -q -p no:cacheprovider)

echo "== build"
BUILD_DIR=build scripts/build.sh -DSEDIMENT_WERROR=ON

echo "== unit tests"
ctest --test-dir build --output-on-failure -j2 --timeout 300 -E '^bench_(kafka_)?smoke$|Kafka'

# The sanitizer builds compile in the background at the lowest CPU priority while the process
# tests below run (those mostly wait on brokers, timers and fsync), in their own process group so
# that a failing run stops them; their tests run at the end. This keeps the suite in its budget.
SAN_PID=""
SAN_LOG="$PWD/build/sanitizer-builds.log"
stop_sanitizer_builds() { [[ -n "$SAN_PID" ]] && kill -- -"$SAN_PID" 2>/dev/null || true; }
if [[ "${SEDIMENT_SKIP_SANITIZERS:-0}" != "1" ]]; then
  setsid -w nice -n 19 bash -c 'scripts/sanitize.sh asan build && scripts/sanitize.sh tsan build' \
    >"$SAN_LOG" 2>&1 &
  SAN_PID=$!
  trap stop_sanitizer_builds EXIT
fi

echo "== S3 client against moto (one plain server, one that verifies every SigV4 signature)"
BUILD_DIR=build scripts/s3/run_bucket_test.sh --gtest_brief=1
"${PYTEST[@]}" scripts/s3

echo "== end-to-end tests, embedded commit log"
export SEDIMENT_BIN="$PWD/build/src/cli/sediment"
"${PYTEST[@]}" tests/e2e

echo "== Kafka: one broker for the commit-log tests"
scripts/kafka/fetch.sh >/dev/null
KAFKA_DIR="$(mktemp -d /tmp/sediment-test-kafka.XXXXXX)"
stop_kafka() { python3 scripts/kafka/cluster.py stop --dir "$KAFKA_DIR" >/dev/null 2>&1 || true; rm -rf "$KAFKA_DIR"; }
trap 'stop_kafka; stop_sanitizer_builds' EXIT
BOOTSTRAP="$(python3 scripts/kafka/cluster.py start --dir "$KAFKA_DIR" --brokers 1 | tail -n 1)"
echo "broker at $BOOTSTRAP"
SEDIMENT_TEST_KAFKA="$BOOTSTRAP" ctest --test-dir build --output-on-failure --timeout 300 -R 'Kafka'

echo "== end-to-end tests, Kafka commit log"
SEDIMENT_E2E_KAFKA="$BOOTSTRAP" "${PYTEST[@]}" tests/e2e
stop_kafka
trap stop_sanitizer_builds EXIT

echo "== Kafka broker faults (1 and 3 brokers) and the broker scripts"
"${PYTEST[@]}" tests/kafka
"${PYTEST[@]}" tests/kafka_harness

echo "== cluster fault harness (3 nodes on one broker: kill, pause, restart, wipe)"
"${PYTEST[@]}" tests/cluster

echo "== benchmark drivers, smoke runs"
ctest --test-dir build --output-on-failure --timeout 300 -R '^bench_(kafka_)?smoke$'

if [[ "${SEDIMENT_SKIP_SANITIZERS:-0}" != "1" ]]; then
  echo "== sanitizer builds (started in the background after the unit tests)"
  if ! wait "$SAN_PID"; then
    SAN_PID=""
    cat "$SAN_LOG"
    echo "sanitizer builds failed" >&2
    exit 1
  fi
  SAN_PID=""
  echo "== unit tests under ASan+UBSan"
  scripts/sanitize.sh asan test
  echo "== concurrency tests under TSan"
  scripts/sanitize.sh tsan test
fi
echo "== all tests passed"
