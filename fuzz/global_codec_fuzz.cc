// Fuzz target: the Global codec (global/FORMAT.md): DecodeGlobalEvent (records of the global
// partition, read from the commit log) and DecodeGlobalState (snapshots: files, the bucket, and
// the snapshot a peer serves).
// Input: byte 0 = flags, the rest = the encoding. Flags bit 0: snapshot (else event); bit 1: the
// target appends the correct trailing CRC32C, so that mutations reach the body decoder.
// What decodes must re-encode to bytes that decode and re-encode to the same bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_util.h"
#include "global/global.h"

using namespace sediment;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view in = fuzz::Bytes(data + 1, size - 1);
  const std::string bytes = (data[0] & 2) ? fuzz::WithTrailingCrc(in) : std::string(in);
  if (data[0] & 1) {
    auto state = DecodeGlobalState(bytes);
    if (!state.ok()) return 0;
    const std::string once = EncodeGlobalState(*state);
    auto back = DecodeGlobalState(once);
    if (!back.ok() || EncodeGlobalState(*back) != once) __builtin_trap();
  } else {
    auto event = DecodeGlobalEvent(bytes);
    if (!event.ok()) return 0;
    const std::string once = EncodeGlobalEvent(*event);
    auto back = DecodeGlobalEvent(once);
    if (!back.ok() || EncodeGlobalEvent(*back) != once) __builtin_trap();
  }
  return 0;
}
