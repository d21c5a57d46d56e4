#include "common/cidr.h"

#include <arpa/inet.h>

#include <cstring>
#include <optional>

namespace sediment {
namespace {

struct Address {
  bool v4 = false;
  std::array<uint8_t, 16> bytes{};
};

std::optional<Address> ParseAddress(const std::string& s) {
  Address a;
  if (inet_pton(AF_INET, s.c_str(), a.bytes.data()) == 1) {
    a.v4 = true;
    return a;
  }
  if (inet_pton(AF_INET6, s.c_str(), a.bytes.data()) == 1) {
    static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(a.bytes.data(), kMapped, 12) == 0) {  // ::ffff:a.b.c.d is IPv4
      std::memmove(a.bytes.data(), a.bytes.data() + 12, 4);
      std::memset(a.bytes.data() + 4, 0, 12);
      a.v4 = true;
    }
    return a;
  }
  return std::nullopt;
}

// The address of "ADDRESS", "[V6]:PORT", "V4:PORT" (a bare IPv6 address has several ':').
std::optional<Address> ParseHostPort(std::string_view text) {
  std::string s(text);
  if (!s.empty() && s.front() == '[') {
    const size_t close = s.find(']');
    if (close == std::string::npos) return std::nullopt;
    return ParseAddress(s.substr(1, close - 1));
  }
  if (auto a = ParseAddress(s)) return a;
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || s.find(':') != colon) return std::nullopt;
  return ParseAddress(s.substr(0, colon));
}

}  // namespace

Result<Cidr> Cidr::Parse(std::string_view text) {
  const std::string s(text);
  const size_t slash = s.find('/');
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("'" + s + "' is not a CIDR range (" + why + ")");
  };
  const std::string addr_text = s.substr(0, slash);
  // A range is IPv6 when written so (::ffff:a.b.c.d/n stays an IPv6 range), else IPv4.
  Address a;
  a.v4 = addr_text.find(':') == std::string::npos;
  if (inet_pton(a.v4 ? AF_INET : AF_INET6, addr_text.c_str(), a.bytes.data()) != 1) {
    return bad("expected ADDRESS/BITS with an IPv4 or IPv6 address");
  }
  const int max_bits = a.v4 ? 32 : 128;
  int bits = max_bits;
  if (slash != std::string::npos) {
    const std::string b = s.substr(slash + 1);
    if (b.empty() || b.size() > 3 || b.find_first_not_of("0123456789") != std::string::npos) {
      return bad("BITS must be a number");
    }
    bits = std::stoi(b);
    if (bits > max_bits) return bad("BITS must be at most " + std::to_string(max_bits));
  }
  Cidr c;
  c.v4_ = a.v4;
  c.bytes_ = a.bytes;
  c.bits_ = bits;
  c.text_ = s;
  return c;
}

bool Cidr::Contains(std::string_view address) const {
  std::optional<Address> a = ParseHostPort(address);
  if (!a || a->v4 != v4_) return false;
  int left = bits_;
  for (size_t i = 0; left > 0; ++i, left -= 8) {
    const uint8_t mask = left >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - left));
    if ((a->bytes[i] & mask) != (bytes_[i] & mask)) return false;
  }
  return true;
}

}  // namespace sediment
