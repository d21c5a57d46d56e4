#!/usr/bin/env bash
# Configures and builds sediment with Ninja into BUILD_DIR (default: build).
# Extra arguments go to cmake (e.g. -DSEDIMENT_SANITIZE=address,undefined).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
if [[ ! -f "$BUILD_DIR/build.ninja" ]] || (($# > 0)); then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
fi
ninja -C "$BUILD_DIR" -j"${JOBS:-$(nproc)}"
