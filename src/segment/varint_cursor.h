// Block coding helpers shared by both segment formats (internal to the segment library): a
// bounds-checked sequential varint reader over decoded block bytes, and the position encoding.
// Never reads past `end`; a malformed or truncated varint clears `ok` and moves to `end`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/coding.h"
#include "common/types.h"

namespace sediment::segment_internal {

// A position as both formats store it: svarint offset, varint index.
inline void PutPosition(std::string* dst, Position p) {
  PutVarsint64(dst, p.offset.value);
  PutVarint32(dst, p.index);
}

struct Cursor {
  const char* p;
  const char* end;
  bool ok = true;

  // Inlined: decoding a block is a loop of varints, almost all of them one byte or (the lengths
  // of raw strings of 128 bytes to 16 KiB) two.
  __attribute__((always_inline)) uint64_t V() {
    if (p < end && static_cast<uint8_t>(*p) < 0x80) return static_cast<uint8_t>(*p++);
    if (end - p >= 2 && static_cast<uint8_t>(p[1]) < 0x80) {
      const uint64_t v = (static_cast<uint8_t>(p[0]) & 0x7f) | uint64_t{static_cast<uint8_t>(p[1])}
                                                                   << 7;
      p += 2;
      return v;
    }
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
