// IPv4 and IPv6 address ranges in CIDR notation ("10.0.0.0/8", "::1/128", or one address).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace sediment {

class Cidr {
 public:
  // "ADDRESS/BITS" or "ADDRESS" (all bits). InvalidArgument naming the text when it is neither an
  // IPv4 nor an IPv6 range, or BITS is out of range. Host bits set in ADDRESS are ignored.
  static Result<Cidr> Parse(std::string_view text);
  // Whether `address` (an IP address; "ADDRESS:PORT", "[V6]:PORT" and IPv4-mapped IPv6 addresses
  // "::ffff:a.b.c.d" are accepted too) is inside the range. False for text that is no address.
  bool Contains(std::string_view address) const;
  std::string ToString() const { return text_; }

 private:
  bool v4_ = false;
  std::array<uint8_t, 16> bytes_{};  // IPv4: the first 4
  int bits_ = 0;
  std::string text_;
};

}  // namespace sediment
