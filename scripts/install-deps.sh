#!/usr/bin/env bash
# Installs the Debian 12 packages sediment needs to build, run and test, and builds the Kafka client
# library (scripts/librdkafka.sh). Idempotent: does nothing when everything is installed. Run as
# root (or with sudo available).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config clang-format
  libboost-dev libsimdjson-dev libzstd-dev liblz4-dev libxxhash-dev libre2-dev
  libcurl4-openssl-dev libcli11-dev libspdlog-dev libfmt-dev libgtest-dev libbenchmark-dev
  zlib1g-dev zstd kcat python3 python3-pytest python3-requests python3-venv
  libprotobuf-dev protobuf-compiler
  libhowardhinnant-date-dev  # named time zones in queries (src/query/time_zone.h)
  nodejs  # the web UI's build (web/: npm ci, esbuild; src/webui embeds the bundle)
  libtomlplusplus-dev  # the config file (src/config), header-only
  libmaxminddb-dev  # the GeoIP databases of ipLocation()/asn()/worldMap() (src/geoip)
  # scripts/librdkafka.sh: fetches and builds librdkafka 2.8.0 with the features Debian's has.
  curl libssl-dev libsasl2-dev
)
# Debian's nodejs comes without npm; a nodejs from elsewhere (e.g. NodeSource) brings its own.
if ! command -v npm >/dev/null 2>&1; then PACKAGES+=(npm); fi
if [[ "${1:-}" == "--test" ]]; then
  # gdb: the fault harness prints the thread stacks of a node that hangs during its start.
  # clang-16: the thread-safety analysis (scripts/thread_safety.sh; the default clang, 14, cannot
  # compile the tree's lambdas that capture structured bindings).
  # libclang-rt-16-dev: clang-16's runtime libraries, libFuzzer among them (scripts/fuzz.sh).
  # syslog-ng-core, -mod-http, -scl: its elasticsearch-http() destination delivers a log file
  # in tests/e2e/test_elastic_bulk.py (run as a child process with its own config).
  PACKAGES+=(openjdk-17-jre-headless maven gdb clang-16 libclang-rt-16-dev)
  PACKAGES+=(syslog-ng-core syslog-ng-mod-http syslog-ng-scl)
  # The browser tests (tests/browser): Debian's Chromium and its WebDriver, driven by Selenium.
  PACKAGES+=(chromium chromium-driver python3-selenium)
  # python3-prometheus-client: the real Prometheus text parser reading /metrics
  # (tests/e2e/test_metrics.py, tests/cluster/test_metrics_lag.py).
  PACKAGES+=(python3-prometheus-client)
  # python3-pip, python3-netaddr: mmdb-writer below (it writes the MaxMind DB files of
  # tests/e2e/test_geoip.py; netaddr gives its networks).
  PACKAGES+=(python3-pip python3-netaddr)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} > 0)); then
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  echo "installing: ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# PyPI packages the tests need that Debian does not package, with pip (pinned).
if [[ "${1:-}" == "--test" ]] && ! python3 -c "import mmdb_writer" 2>/dev/null; then
  echo "installing from PyPI: mmdb-writer" >&2
  python3 -m pip install -q --break-system-packages "mmdb-writer==0.2.7"
fi

# The Kafka client library, built from source (scripts/librdkafka.sh says why).
"$(dirname "$0")/librdkafka.sh"
