#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/README.md) and runs each for a while on its seed corpus.
#   scripts/fuzz.sh [--seconds N] [--build-only] [target...]
#     --seconds N    run time of each target (default 60); targets run one after the other
#     --build-only   build, run nothing
#     target...      some of the targets (default: all of them, fuzz/CMakeLists.txt)
# Prints per target the executions, the CPU time (user + system) and what it found. Exits non-zero
# when any target crashed, hung (-timeout), ran out of memory (-rss_limit_mb) or reported a
# sanitizer error; the input that did it is left in <build dir>/fuzz-artifacts/<target>/ and the
# log in <build dir>/fuzz-logs/<target>.log. Reproduce: <build dir>/fuzz/<target> <input file>.
# New inputs a run finds go to <build dir>/fuzz-corpus/<target>/ (kept between runs, never into
# the repo's fuzz/corpus/, which holds the seeds).
# Build tree: the one the ASan+UBSan unit tests use (scripts/asan_tree.sh: build-asan, clang++-16
# with -DSEDIMENT_FUZZ=ON; libFuzzer comes with libclang-rt-16-dev).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=60
build_only=0
targets=()
while (($# > 0)); do
  case "$1" in
    --seconds)
      seconds="$2"
      shift 2
      ;;
    --build-only)
      build_only=1
      shift
      ;;
    -*)
      echo "usage: $0 [--seconds N] [--build-only] [target...]" >&2
      exit 2
      ;;
    *)
      targets+=("$1")
      shift
      ;;
  esac
done
ALL=(ingest_fuzz query_fuzz event_fuzz segment_fuzz commit_log_fuzz ingest_message_fuzz
  global_codec_fuzz query_wire_fuzz internal_fuzz otlp_fuzz bulk_fuzz
  parser_fuzz)
((${#targets[@]} > 0)) || targets=("${ALL[@]}")

dir="$(scripts/asan_tree.sh)"
# Only the targets and the libraries they link (`fuzz`), not the rest of the tree.
ninja -C "$dir" -j"${JOBS:-$(nproc)}" fuzz
((build_only)) && exit 0

mkdir -p "$dir/fuzz-logs"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
failed=()
printf '%-20s %12s %10s %8s  %s\n' target executions cpu_s corpus result
for t in "${targets[@]}"; do
  bin="$dir/fuzz/$t"
  [[ -x "$bin" ]] || {
    echo "unknown target $t (known: ${ALL[*]})" >&2
    exit 2
  }
  work="$dir/fuzz-corpus/$t"
  artifacts="$dir/fuzz-artifacts/$t"
  log="$dir/fuzz-logs/$t.log"
  mkdir -p "$work" "$artifacts"
  # -timeout: one input taking longer is a hang. -rss_limit_mb: more is an out-of-memory finding
  # (the targets pass the server's limits, so the product would take such an input too).
  status=0
  TIMEFORMAT='%U %S'
  { time "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$work" "fuzz/corpus/$t" >"$log" 2>&1 || status=$?; } \
    2>"$log.time"
  read -r user sys <"$log.time"
  cpu=$(python3 -c "print(f'{$user + $sys:.1f}')")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  corpus=$(find "$work" -type f | wc -l)
  if ((status == 0)); then
    result=ok
  else
    result="FAILED (exit $status): $(sed -n 's/.*Test unit written to //p' "$log" | tail -n 1)"
    failed+=("$t")
  fi
  printf '%-20s %12s %10s %8s  %s\n' "$t" "${execs:-?}" "$cpu" "$corpus" "$result"
  if ((status != 0)); then
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written|==[0-9]+==' "$log" | head -n 20 >&2 || true
  fi
done
if ((${#failed[@]} > 0)); then
  echo "fuzz targets failed: ${failed[*]} (logs: $dir/fuzz-logs/, inputs: $dir/fuzz-artifacts/)" >&2
  exit 1
fi
