// Helpers shared by the fuzz targets.
#pragma once

#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/checksum.h"
#include "common/coding.h"

namespace sediment::fuzz {

// Logging off: libraries log what they repair or reject, which would flood the fuzzer's output
// and slow every execution down.
inline void QuietLogs() { spdlog::set_level(spdlog::level::off); }

inline std::string_view Bytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Formats protected by a CRC32C over "everything before the last 4 bytes" (Global events and
// snapshots, query wire bodies): `body` with its correct CRC appended, so that mutations reach
// the decoder behind the checksum test instead of failing it.
inline std::string WithTrailingCrc(std::string_view body) {
  std::string out(body);
  PutFixed32(&out, Crc32c(body));
  return out;
}

}  // namespace sediment::fuzz
