#!/usr/bin/env bash
# Checks the clang thread-safety annotations (src/common/thread_annotations.h): compiles the
# library sources that use them with clang, -Wthread-safety -Werror, syntax only (no code
# generated, nothing linked). Fails on any violation (a GUARDED_BY field touched without its
# Mutex, a REQUIRES function called without it, a lock not released, ...) or any other clang
# warning in those sources.
#   scripts/thread_safety.sh          the sources under src/ that include common/mutex.h,
#                                     common/thread_annotations.h or common/background_loop.h
#                                     (themselves or through their own header); the analysis has
#                                     nothing to check in the others
#   scripts/thread_safety.sh --all    every source under src/, unit tests included
# Compiler: clang++-16 (TSA_CXX overrides): Debian 12's default clang 14 cannot capture
# structured bindings in lambdas, which the tree does. Build dir (CMake configured with it, for
# the compile commands): build-tsa.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${TSA_BUILD_DIR:-build-tsa}"
all=0
[[ "${1:-}" == "--all" ]] && all=1
cxx="${TSA_CXX:-clang++-16}"
cc="${cxx/clang++/clang}"
command -v "$cxx" >/dev/null || {
  echo "$cxx is missing (scripts/install-deps.sh --test installs it)" >&2
  exit 1
}
# Configured once per compiler (a dir configured with another one is started afresh); again when
# a CMakeLists.txt changed (sources added).
stamp="$dir/tsa-configured-with"
if [[ -d "$dir" && "$(cat "$stamp" 2>/dev/null)" != "$cxx" ]]; then rm -rf "$dir"; fi
if [[ ! -f "$dir/compile_commands.json" ||
  -n "$(find . -path './build*' -prune -o -name CMakeLists.txt -newer "$dir/compile_commands.json" \
    -print)" ]]; then
  cmake -S . -B "$dir" -G Ninja -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
  echo "$cxx" >"$stamp"
fi
# One clang command per source: the configured one, syntax only, with the analysis as an error.
python3 - "$dir/compile_commands.json" "$PWD/src/" "$all" >"$dir/tsa-commands.txt" <<'PY'
import json, os, shlex, sys
entries, src, check_all = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3] == "1"
MARKERS = ("common/mutex.h", "common/thread_annotations.h", "common/background_loop.h")

def uses_annotations(f):
    for path in (f, f[:-3] + ".h"):
        if os.path.exists(path) and any(m in open(path, errors="replace").read() for m in MARKERS):
            return True
    return False

seen = set()
for e in entries:
    f = e["file"]
    if not f.startswith(src) or f in seen:
        continue
    if not check_all and (f.endswith("_test.cc") or not uses_annotations(f)):
        continue
    seen.add(f)
    args = shlex.split(e["command"])
    out = [a for i, a in enumerate(args) if a not in ("-c", "-o") and args[i - 1] != "-o"]
    out += ["-fsyntax-only", "-Wthread-safety", "-Werror"]
    print(shlex.join(out))
PY
n=$(wc -l <"$dir/tsa-commands.txt")
# -P: one clang per core; each line is a whole command.
if ! (cd "$dir" && xargs -P "$(nproc)" -I{} sh -c '{}' <tsa-commands.txt); then
  echo "thread-safety analysis failed (clang -Wthread-safety -Werror)" >&2
  exit 1
fi
echo "thread-safety analysis: $n sources clean"
