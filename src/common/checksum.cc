#include "common/checksum.h"

#include <nmmintrin.h>
#include <xxhash.h>

#include <array>
#include <cstring>

namespace sediment {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reversed Castagnoli polynomial

std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[i] = c;
  }
  return t;
}

uint32_t Crc32cTable(const uint8_t* p, size_t n, uint32_t crc) {
  static const std::array<uint32_t, 256> table = MakeTable();
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

__attribute__((target("sse4.2"))) uint32_t Crc32cHw(const uint8_t* p, size_t n, uint32_t crc) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n > 0) {
    c32 = _mm_crc32_u8(c32, *p++);
    --n;
  }
  return c32;
}

bool HaveSse42() { return __builtin_cpu_supports("sse4.2"); }

}  // namespace

uint32_t Crc32c(const void* data, size_t n, uint32_t init) {
  static const bool hw = HaveSse42();
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t crc = ~init;
  crc = hw ? Crc32cHw(p, n, crc) : Crc32cTable(p, n, crc);
  return ~crc;
}

uint64_t Hash64(const void* data, size_t n, uint64_t seed) { return XXH64(data, n, seed); }

}  // namespace sediment
