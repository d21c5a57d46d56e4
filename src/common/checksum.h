// Checksums. CRC32C (Castagnoli, as in iSCSI/ext4/Kafka record batches) guards records and blocks;
// XXH64 is the whole-file content hash recorded in Global for segments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sediment {

// CRC32C of data, continuing from `init` (the CRC of the bytes before; 0 to start).
// Uses the SSE4.2 instruction when the CPU has it, a table otherwise.
uint32_t Crc32c(const void* data, size_t n, uint32_t init = 0);
inline uint32_t Crc32c(std::string_view s, uint32_t init = 0) {
  return Crc32c(s.data(), s.size(), init);
}

uint64_t Hash64(const void* data, size_t n, uint64_t seed = 0);
inline uint64_t Hash64(std::string_view s, uint64_t seed = 0) {
  return Hash64(s.data(), s.size(), seed);
}

}  // namespace sediment
