// Random identifiers (query ids, job ids, file-name suffixes): not secrets, just unlikely to
// collide. Thread-safe.
#pragma once

#include <cstddef>
#include <random>
#include <string>

namespace sediment {

// `bytes` random bytes from std::random_device as 2 * `bytes` lower-case hex digits.
inline std::string RandomHex(size_t bytes) {
  std::random_device rd;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (size_t i = 0; i < bytes; ++i) {
    const unsigned v = rd() & 0xff;
    out.push_back(kHex[v >> 4]);
    out.push_back(kHex[v & 15]);
  }
  return out;
}

}  // namespace sediment
