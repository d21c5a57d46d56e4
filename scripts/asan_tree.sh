#!/usr/bin/env bash
# Configures the one clang build tree shared by the ASan+UBSan unit tests (scripts/sanitize.sh
# asan) and the libFuzzer targets (scripts/fuzz.sh): clang++-16 (FUZZ_CXX overrides),
# -DSEDIMENT_FUZZ=ON (every library with libFuzzer's coverage, ASan and UBSan; undefined
# behaviour aborts), -O1 -g1. One tree instead of two: the suite compiles the libraries once for
# both. Prints the tree's directory (ASAN_BUILD_DIR, default build-asan). ccache is used when
# installed. Reconfigures only when the tree is missing or was made with another compiler.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${ASAN_BUILD_DIR:-build-asan}"
cxx="${FUZZ_CXX:-clang++-16}"
cc="${cxx/clang++/clang}"
command -v "$cxx" >/dev/null || {
  echo "$cxx is missing (scripts/install-deps.sh --test installs it)" >&2
  exit 1
}
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
stamp="$dir/asan-configured-with"
config="$cxx fuzz -O1 -g1"
if [[ -d "$dir" && "$(cat "$stamp" 2>/dev/null)" != "$config" ]]; then rm -rf "$dir"; fi
if [[ ! -f "$dir/build.ninja" ]]; then
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DSEDIMENT_FUZZ=ON -DSEDIMENT_WERROR=ON \
    "${launcher[@]}" >/dev/null
  echo "$config" >"$stamp"
fi
echo "$dir"
