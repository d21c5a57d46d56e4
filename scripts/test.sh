#!/usr/bin/env bash
# Runs the whole test suite: installs dependencies when missing, builds warnings-as-errors, runs
# the unit tests (ctest), the end-to-end tests against the real binary (pytest), the benchmark
# driver's smoke run, and the unit tests of the storage libraries under ASan+UBSan.
# Set SEDIMENT_SKIP_SANITIZERS=1 to skip the sanitizer build.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test

echo "== build"
BUILD_DIR=build scripts/build.sh -DSEDIMENT_WERROR=ON

echo "== unit tests"
ctest --test-dir build --output-on-failure -j2 --timeout 300

echo "== end-to-end tests"
SEDIMENT_BIN="$PWD/build/src/cli/sediment" python3 -m pytest -q tests/e2e -p no:cacheprovider

if [[ -f bench/run_benchmarks.py ]]; then
  echo "== benchmark driver smoke run"
  python3 bench/run_benchmarks.py --build-dir build --smoke --work-dir "$(mktemp -d)"
fi

if [[ "${SEDIMENT_SKIP_SANITIZERS:-0}" != "1" ]]; then
  echo "== unit tests under ASan+UBSan"
  BUILD_DIR=build-asan scripts/build.sh -DSEDIMENT_SANITIZE=address,undefined >/dev/null
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j2 --timeout 600
fi
echo "== all tests passed"
