#!/usr/bin/env bash
# Runs the whole test suite: installs dependencies when missing, builds warnings-as-errors, checks
# the thread-safety annotations with clang (scripts/thread_safety.sh), runs the unit tests (ctest),
# the end-to-end tests against the real binary on the embedded log and their commit-log tests on a
# real Kafka broker (pytest), the query corpus, the S3 client and bucket storage against a real
# S3-compatible test server (moto), the broker fault tests, the cluster fault harness, the
# benchmark drivers' smoke runs, the web UI in Chromium (tests/browser), the unit tests under
# ASan+UBSan and TSan, and each libFuzzer target for 10 s (scripts/fuzz.sh). Set
# SEDIMENT_SKIP_SANITIZERS=1 to skip the sanitizer and fuzz builds.
#
# Time budget: 35 minutes on 2 cores. Most of the process tests wait (on brokers, timers, fsync)
# rather than compute, so the suite runs three things at once after the unit tests:
#   - the sanitizer builds (started before the main build, at the lowest CPU priority) and their
#     test runs in the background: one clang++-16 tree for the ASan+UBSan unit tests and the
#     libFuzzer targets (scripts/asan_tree.sh), its tests, then the fuzz targets' short runs
#     alongside the TSan build, then the TSan tests;
#   - lane A in the background: the cluster fault harness, then the broker fault tests (the two
#     timing-sensitive process suites, one after the other);
#   - lane B in the foreground: S3, e2e (embedded), query corpus, browser tests, Kafka unit tests +
#     e2e commit-log tests on one broker, the broker scripts' tests, the benchmark smoke runs.
# Each background job has its own process group and log; a failure anywhere stops the others (the
# background pytest gets SIGINT, so its fixtures stop the brokers and servers they started) and
# prints the failed job's log. Logs: build/test-logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
# Section headers carry the suite's elapsed time (m:ss), also inside the background jobs.
SUITE_T0=$(date +%s)
export SUITE_T0
stamp() {
  local s=$(($(date +%s) - SUITE_T0))
  printf '%d:%02d' $((s / 60)) $((s % 60))
}
export -f stamp
scripts/install-deps.sh --test
# The S3 test server (moto's server mode) in a virtualenv; no network once installed.
python3 scripts/s3/moto.py install
export PYTHONDONTWRITEBYTECODE=1
PYTEST=(python3 -m pytest -q -p no:cacheprovider)
LOGS="$PWD/build/test-logs"
mkdir -p "$LOGS"

# The web UI's npm packages, once, before the main and sanitizer builds (each builds the UI
# bundle) could run `npm ci` in web/ at the same time (web/ensure-deps.mjs).
node web/ensure-deps.mjs

# ---- background jobs -------------------------------------------------------------------------
BG_NAMES=()
BG_PIDS=()   # pid (= process group id) while not yet reaped, else ""
BG_STATUS=() # exit status once reaped
BG_LOGS=()
KAFKA_DIR=""

# start_bg NAME LOG COMMAND...: runs COMMAND in its own process group (setsid) with SIGINT at its
# default disposition (bash ignores SIGINT in background jobs, and pytest would inherit that).
start_bg() {
  local name="$1" log="$2"
  shift 2
  setsid -w python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])' "$@" >"$log" 2>&1 &
  BG_NAMES+=("$name")
  BG_PIDS+=("$!")
  BG_STATUS+=("")
  BG_LOGS+=("$log")
}

# stop_bg: SIGINT to every background job still running (pytest runs its fixture teardowns, so
# brokers and servers are stopped by pid; ninja and ctest stop), SIGKILL to what is left after 90 s.
stop_bg() {
  local i pid deadline
  for pid in "${BG_PIDS[@]}"; do
    [[ -n "$pid" ]] && kill -INT -- -"$pid" 2>/dev/null || true
  done
  deadline=$((SECONDS + 90))
  for i in "${!BG_PIDS[@]}"; do
    pid="${BG_PIDS[$i]}"
    [[ -z "$pid" ]] && continue
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.5; done
    kill -KILL -- -"$pid" 2>/dev/null || true
    BG_PIDS[$i]=""
  done
}

stop_kafka() {
  if [[ -n "$KAFKA_DIR" ]]; then
    python3 scripts/kafka/cluster.py stop --dir "$KAFKA_DIR" >/dev/null 2>&1 || true
    rm -rf "$KAFKA_DIR"
    KAFKA_DIR=""
  fi
}
trap 'stop_kafka; stop_bg' EXIT

# reap_bg I [wait]: records job I's exit status if it has ended (or, with "wait", once it ends).
reap_bg() {
  local i="$1" pid="${BG_PIDS[$1]}" status=0
  [[ -n "$pid" ]] || return 0
  [[ "${2:-}" == "wait" ]] || ! kill -0 "$pid" 2>/dev/null || return 0
  wait "$pid" || status=$?
  BG_PIDS[$i]=""
  BG_STATUS[$i]="$status"
}

# fail_bg I: prints job I's log and exits 1 (the EXIT trap stops everything else).
fail_bg() {
  cat "${BG_LOGS[$1]}"
  echo "${BG_NAMES[$1]} failed (exit ${BG_STATUS[$1]}); log: ${BG_LOGS[$1]}" >&2
  exit 1
}

# check_bg: fails the suite at once when a background job has already failed.
check_bg() {
  local i
  for i in "${!BG_NAMES[@]}"; do
    reap_bg "$i"
    [[ -z "${BG_STATUS[$i]}" || "${BG_STATUS[$i]}" == 0 ]] || fail_bg "$i"
  done
}

# finish_bg NAME: waits for the job and prints its log; exits 1 when it failed.
finish_bg() {
  local i
  for i in "${!BG_NAMES[@]}"; do
    [[ "${BG_NAMES[$i]}" == "$1" ]] || continue
    reap_bg "$i" wait
    [[ "${BG_STATUS[$i]}" == 0 ]] || fail_bg "$i"
    cat "${BG_LOGS[$i]}"
  done
}

# ---- sanitizer builds and tests (background) ------------------------------------------------
# The builds run at the lowest CPU priority from the start (they use what the main build and the
# process tests leave idle); their test runs at normal priority, as soon as each build is done.
# With the kernel's autogroup scheduling (sched_autogroup_enabled=1) a process's nice value only
# counts inside its session's group, and setsid makes a new one, so the group's own nice value is
# set too (/proc/self/autogroup; lowering it again needs root, hence the fallback).
if [[ "${SEDIMENT_SKIP_SANITIZERS:-0}" != "1" ]]; then
  start_bg sanitizers "$LOGS/sanitizers.log" bash -c '
    set -euo pipefail
    low() { echo 19 >/proc/self/autogroup 2>/dev/null || true; }
    normal() { echo 0 >/proc/self/autogroup 2>/dev/null || true; }
    low
    echo "== [$(stamp)] sanitizer build: ASan+UBSan unit tests and the libFuzzer targets (one clang++-16 tree)"
    nice -n 19 scripts/sanitize.sh asan build
    normal
    echo "== [$(stamp)] unit tests under ASan+UBSan"
    scripts/sanitize.sh asan test
    # The fuzz runs (one core, normal priority: setsid gives them their own autogroup, so a slow
    # input is not starved into a false hang) go on while the TSan build takes what is left.
    echo "== [$(stamp)] fuzz targets, 10 s each (output below, after the TSan tests)"
    setsid scripts/fuzz.sh --seconds 10 >"'"$LOGS"'/fuzz.log" 2>&1 &
    fuzz_pid=$!
    trap "kill -INT -- -$fuzz_pid 2>/dev/null || true" EXIT
    trap "exit 130" INT TERM
    low
    echo "== [$(stamp)] sanitizer build: TSan"
    nice -n 19 scripts/sanitize.sh tsan build
    normal
    echo "== [$(stamp)] concurrency tests under TSan"
    scripts/sanitize.sh tsan test
    fuzz_status=0
    wait "$fuzz_pid" || fuzz_status=$?
    echo "== [$(stamp)] fuzz targets (exit $fuzz_status)"
    cat "'"$LOGS"'/fuzz.log"
    exit "$fuzz_status"'
fi

echo "== [$(stamp)] build"
BUILD_DIR=build scripts/build.sh -DSEDIMENT_WERROR=ON

echo "== [$(stamp)] thread-safety analysis (clang -Wthread-safety -Werror, syntax only, the sources using annotations)"
scripts/thread_safety.sh

echo "== [$(stamp)] unit tests"
ctest --test-dir build --output-on-failure -j2 --timeout 300 -E '^bench_(kafka_)?smoke$|Kafka'

export SEDIMENT_BIN="$PWD/build/src/cli/sediment"
# Kafka's jars, once, before two lanes could resolve them at the same time.
scripts/kafka/fetch.sh >/dev/null

# ---- lane A (background): cluster fault harness, then broker fault tests ----------------------
start_bg "lane A (cluster harness, broker faults)" "$LOGS/lane-a.log" bash -c '
  set -euo pipefail
  echo "== [$(stamp)] cluster fault harness (3 nodes on one broker: kill, pause, restart, wipe; replication; bucket; 2 seeded chaos runs on 3 brokers)"
  python3 -m pytest -q -p no:cacheprovider tests/cluster
  echo "== [$(stamp)] Kafka broker faults (1 and 3 brokers)"
  python3 -m pytest -q -p no:cacheprovider tests/kafka'

# ---- lane B (foreground) ---------------------------------------------------------------------
echo "== [$(stamp)] S3 client against moto (one plain server, one that verifies every SigV4 signature)"
BUILD_DIR=build scripts/s3/run_bucket_test.sh --gtest_brief=1
"${PYTEST[@]}" scripts/s3
check_bg

echo "== [$(stamp)] end-to-end tests, embedded commit log"
"${PYTEST[@]}" tests/e2e
check_bg

if [[ -d tests/query ]]; then
  echo "== [$(stamp)] query corpus (events in segments, then the same cases on unflushed buffers)"
  "${PYTEST[@]}" tests/query
  QUERY_CORPUS_STORAGE=buffers "${PYTEST[@]}" tests/query
  check_bg
fi

echo "== [$(stamp)] browser tests: the web UI in Debian's Chromium (Selenium), against real servers"
"${PYTEST[@]}" tests/browser
check_bg

echo "== [$(stamp)] Kafka: one broker for the Kafka unit tests and the e2e commit-log tests"
KAFKA_DIR="$(mktemp -d /tmp/sediment-test-kafka.XXXXXX)"
BOOTSTRAP="$(python3 scripts/kafka/cluster.py start --dir "$KAFKA_DIR" --brokers 1 | tail -n 1)"
echo "broker at $BOOTSTRAP"
SEDIMENT_TEST_KAFKA="$BOOTSTRAP" ctest --test-dir build --output-on-failure --timeout 300 -R 'Kafka'
check_bg

echo "== [$(stamp)] end-to-end tests, Kafka commit log (the tests marked commit_log; the rest skip)"
SEDIMENT_E2E_KAFKA="$BOOTSTRAP" "${PYTEST[@]}" tests/e2e
stop_kafka
check_bg

echo "== [$(stamp)] Kafka broker scripts"
"${PYTEST[@]}" tests/kafka_harness
check_bg

echo "== [$(stamp)] benchmark drivers, smoke runs"
ctest --test-dir build --output-on-failure --timeout 300 -R '^bench_(kafka_)?smoke$'

echo "== [$(stamp)] waiting for lane A"
finish_bg "lane A (cluster harness, broker faults)"
if [[ "${SEDIMENT_SKIP_SANITIZERS:-0}" != "1" ]]; then
  echo "== [$(stamp)] waiting for the sanitizer builds and tests"
  finish_bg sanitizers
fi
echo "== [$(stamp)] all tests passed"
