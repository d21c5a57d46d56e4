// Bounds-checked sequential varint reader over decoded block bytes (internal to the segment
// library). Never reads past `end`; a malformed or truncated varint clears `ok` and moves to `end`.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/coding.h"

namespace sediment::segment_internal {

struct Cursor {
  const char* p;
  const char* end;
  bool ok = true;

  // Inlined: decoding a block is a loop of varints, almost all of them one byte.
  __attribute__((always_inline)) uint64_t V() {
    if (p < end && static_cast<uint8_t>(*p) < 0x80) return static_cast<uint8_t>(*p++);
    return VSlow();
  }
  __attribute__((noinline)) uint64_t VSlow() {
    std::string_view in(p, static_cast<size_t>(end - p));
    uint64_t v = 0;
    if (!GetVarint64(&in, &v)) {
      ok = false;
      p = end;
      return 0;
    }
    p = in.data();
    return v;
  }
  int64_t S() {
    uint64_t x = V();
    return static_cast<int64_t>((x >> 1) ^ (~(x & 1) + 1));
  }
  size_t left() const { return static_cast<size_t>(end - p); }
};

}  // namespace sediment::segment_internal
