#!/usr/bin/env bash
# Builds the unit tests under a sanitizer and runs them.
#   scripts/sanitize.sh asan|tsan [all|build|test]   (default all; the suite builds both in the
#   background at the lowest CPU priority and runs each one's tests as soon as it is built, while
#   its process tests run: scripts/test.sh)
#   scripts/sanitize.sh asan   AddressSanitizer + UndefinedBehaviorSanitizer, every library's tests,
#                              built with clang++-16 in the tree the fuzz targets share
#                              (scripts/asan_tree.sh), which `build` also builds the targets of
#   scripts/sanitize.sh tsan   ThreadSanitizer, the tests of the concurrent code (commit log,
#                              Global, digest, the query executor's workers and limits, HTTP
#                              server, membership, storage, merges, the coordinator's jobs,
#                              leaf and call pool, maintenance, fault-injecting Env, HEC
#                              acknowledgements, metrics)
# Build dirs: build-asan (scripts/asan_tree.sh) / build-tsan.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-asan}"
step="${2:-all}"
case "$step" in
  all | build | test) ;;
  *)
    echo "usage: $0 asan|tsan [all|build|test]" >&2
    exit 2
    ;;
esac
case "$mode" in
  asan)
    tests=(common_test model_test log_test segment_test global_test ingest_test digest_test
           parser_test transform_test aggregate_test query_test query_wire_test http_test
           cluster_test storage_test uploader_test merge_test bucket_test functions_test
           coordinator_test maintenance_test api_test cli_flags_test server_test config_test
           elastic_bulk_test hec_acks_test metrics_test parsers_test webui_test alerts_test)
    export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    ;;
  tsan)
    sanitize="thread"
    tests=(common_test log_test global_test digest_test query_test http_test cluster_test
           storage_test uploader_test merge_test bucket_test coordinator_test maintenance_test
           hec_acks_test metrics_test)
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp"
    ;;
  *)
    echo "usage: $0 asan|tsan [all|build|test]" >&2
    exit 2
    ;;
esac
if [[ "$mode" == "asan" ]]; then
  dir="$(scripts/asan_tree.sh)"
  tests+=(fuzz)
else
  # -g1 gives line numbers in reports; -O1: TSan at -O0 saves little build time and its tests are
  # the slower part.
  dir="build-$mode"
  if [[ "$step" != "test" ]]; then
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
      -DSEDIMENT_SANITIZE="$sanitize" >/dev/null
  fi
fi
if [[ "$step" != "test" ]]; then
  # The build log is shown only on failure: under TSan, GCC warns (-Wtsan) that the
  # std::atomic_thread_fence used inside Boost.Asio is not modelled, once per translation unit.
  log="$dir/sanitize-build.log"
  if ! ninja -C "$dir" -j"$(nproc)" "${tests[@]}" >"$log" 2>&1; then
    cat "$log"
    exit 1
  fi
fi
[[ "$step" == "build" ]] && exit 0
ctest --test-dir "$dir" --output-on-failure -j2 --timeout 900 -E 'NOT_BUILT|^bench_|Kafka|IngestPerf'
