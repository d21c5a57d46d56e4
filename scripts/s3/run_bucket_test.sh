#!/usr/bin/env bash
# Runs bucket_test with its integration tests: starts two moto servers on loopback (a plain one,
# and one that verifies every SigV4 signature), runs the test binary against them, stops both by
# pid. Arguments go to the test binary (e.g. --gtest_filter='S3*').
#
#   scripts/s3/run_bucket_test.sh                       # binary: $BUILD_DIR/src/bucket/bucket_test
#   BUILD_DIR=build-bucket scripts/s3/run_bucket_test.sh --gtest_brief=1
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR="${BUILD_DIR:-build}"
BIN="${BUCKET_TEST_BIN:-$BUILD_DIR/src/bucket/bucket_test}"
if [[ ! -x "$BIN" ]]; then
  echo "no test binary at $BIN (build it: ninja -C $BUILD_DIR bucket_test)" >&2
  exit 1
fi
MOTO=(python3 scripts/s3/moto.py)
WORK="$(mktemp -d /tmp/sediment-bucket-test.XXXXXX)"
cleanup() {
  "${MOTO[@]}" kill --dir "$WORK/plain" >/dev/null 2>&1 || true
  "${MOTO[@]}" kill --dir "$WORK/sig" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

"${MOTO[@]}" install >/dev/null
ENDPOINT="$("${MOTO[@]}" start --dir "$WORK/plain" --ephemeral)"
AUTH_ENDPOINT="$("${MOTO[@]}" start --dir "$WORK/sig" --verify-signatures)"
CREDS="$("${MOTO[@]}" credentials --dir "$WORK/sig")"
AUTH_KEY="$(sed -n 's/^AWS_ACCESS_KEY_ID=//p' <<<"$CREDS")"
AUTH_SECRET="$(sed -n 's/^AWS_SECRET_ACCESS_KEY=//p' <<<"$CREDS")"
echo "moto at $ENDPOINT, signature-checking moto at $AUTH_ENDPOINT" >&2

SEDIMENT_S3_ENDPOINT="$ENDPOINT" \
  SEDIMENT_S3_AUTH_ENDPOINT="$AUTH_ENDPOINT" \
  SEDIMENT_S3_AUTH_ACCESS_KEY="$AUTH_KEY" \
  SEDIMENT_S3_AUTH_SECRET_KEY="$AUTH_SECRET" \
  "$BIN" "$@"
