#!/usr/bin/env bash
# Builds (installing dependencies when missing) and runs a single sediment node with the embedded
# commit log, data in ./sediment-data, listening on 127.0.0.1:8080. Arguments are passed to
# `sediment server` (see `build/src/cli/sediment server --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
exec build/src/cli/sediment server "$@"
