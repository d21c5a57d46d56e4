#!/usr/bin/env bash
# Builds the Kafka client library sediment links, librdkafka 2.8.0, from Debian 13's source package
# (its upstream tarball, checked against the SHA-256 below) into a prefix of its own:
# ${SEDIMENT_DEPS:-/opt/sediment-deps}/librdkafka-2.8.0 (static library, headers, CMake package;
# src/log/CMakeLists.txt finds it there). Idempotent: does nothing when that prefix is complete.
#
# Why not Debian 12's librdkafka (2.0.2): its client threads wait for their timers in whole
# milliseconds and poll the clock for the last fraction, up to 1 ms per timer (fixed upstream in
# 2.4.0). With a few clients per node that was most of an idle node's CPU on Kafka
# (src/log/README.md "Idle").
#
# The tarball comes from the Debian mirror this machine's apt uses (its pool holds every release's
# sources), or from the file SEDIMENT_LIBRDKAFKA_TARBALL names (a machine without the mirror).
# Needs what scripts/install-deps.sh installs: cmake, ninja, a C compiler, and the -dev packages of
# OpenSSL, Cyrus SASL, libcurl, zlib, zstd and lz4 (the features Debian's build has).
set -euo pipefail

VERSION=2.8.0
SHA256=5bd1c46f63265f31c6bfcedcde78703f77d28238eadf23821c2b43fc30be3e25
TARBALL_NAME="librdkafka_${VERSION}.orig.tar.gz"
PREFIX="${SEDIMENT_DEPS:-/opt/sediment-deps}/librdkafka-${VERSION}"
STAMP="$PREFIX/.complete"

if [[ -f "$STAMP" ]]; then
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

tarball="${SEDIMENT_LIBRDKAFKA_TARBALL:-}"
if [[ -z "$tarball" ]]; then
  # The base URI of the distribution's main archive as apt knows it (e.g. <mirror>/debian), from the
  # index targets of the release's own suite (by codename, else by a name like `stable`; not
  # -updates or -security, whose pools differ).
  codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
  uris="$(apt-get indextargets --format '$(URI)' 2>/dev/null || true)"
  base="$(sed -n "s#/dists/${codename}/main/.*##p" <<<"$uris" | head -1)"
  if [[ -z "$base" ]]; then
    base="$(sed -n 's#/dists/[^/-]*/main/.*##p' <<<"$uris" | grep -v -- '-security' | head -1 || true)"
  fi
  if [[ -z "$base" ]]; then
    echo "librdkafka.sh: no Debian mirror for '${codename}' in apt's sources;" \
      "set SEDIMENT_LIBRDKAFKA_TARBALL to a copy of ${TARBALL_NAME}" >&2
    exit 1
  fi
  tarball="$work/$TARBALL_NAME"
  echo "librdkafka.sh: fetching ${TARBALL_NAME} from the Debian mirror" >&2
  if ! curl -fsS --retry 3 -o "$tarball" "$base/pool/main/libr/librdkafka/$TARBALL_NAME"; then
    echo "librdkafka.sh: could not fetch $base/pool/main/libr/librdkafka/$TARBALL_NAME" >&2
    exit 1
  fi
fi
if ! echo "$SHA256  $tarball" | sha256sum -c --quiet - >/dev/null 2>&1; then
  echo "librdkafka.sh: $tarball is not librdkafka ${VERSION}'s tarball (SHA-256 differs)" >&2
  exit 1
fi

echo "librdkafka.sh: building librdkafka ${VERSION} into ${PREFIX}" >&2
tar -xzf "$tarball" -C "$work"
src="$work/librdkafka-${VERSION}"
# Release build of the C and C++ libraries, static, position-independent (sediment links them into
# its executables); no examples or tests. The features are Debian's: TLS, SASL (Cyrus: GSSAPI,
# and the built-in PLAIN, SCRAM, OAUTHBEARER with OIDC over libcurl), zlib, zstd, lz4.
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$PREFIX" -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DRDKAFKA_BUILD_STATIC=ON -DRDKAFKA_BUILD_EXAMPLES=OFF -DRDKAFKA_BUILD_TESTS=OFF \
  -DWITH_SSL=ON -DWITH_SASL=ON -DWITH_CURL=ON -DWITH_ZLIB=ON -DWITH_ZSTD=ON -DENABLE_LZ4_EXT=ON \
  >"$work/configure.log" 2>&1 || {
  cat "$work/configure.log" >&2
  exit 1
}
ninja -C "$work/build" -j"${JOBS:-$(nproc)}" >"$work/build.log" 2>&1 || {
  tail -50 "$work/build.log" >&2
  exit 1
}
$SUDO cmake --install "$work/build" >/dev/null
$SUDO touch "$STAMP"
echo "librdkafka.sh: installed librdkafka ${VERSION} in ${PREFIX}" >&2
