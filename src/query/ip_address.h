// IPv4 and IPv6 addresses and subnets as cidr() and match(mode=cidr) read them: the text forms
// inet_pton reads (dotted quads, RFC 4291 text), a subnet "address/bits" or a single address (all
// bits). An IPv4 subnet holds only IPv4 addresses, an IPv6 subnet only IPv6 ones (an IPv4-mapped
// ::ffff:1.2.3.4 is IPv6). Pure functions; reentrant.
#pragma once

#include <arpa/inet.h>

#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace sediment::query {

// An address: 4 (IPv4) or 16 (IPv6) bytes.
struct IpAddress {
  std::array<uint8_t, 16> bytes{};
  int size = 0;
};

inline std::optional<IpAddress> ParseIpAddress(std::string_view text) {
  if (text.empty() || text.size() > 45) return std::nullopt;
  char buf[46];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  IpAddress a;
  if (inet_pton(AF_INET, buf, a.bytes.data()) == 1) {
    a.size = 4;
    return a;
  }
  if (inet_pton(AF_INET6, buf, a.bytes.data()) == 1) {
    a.size = 16;
    return a;
  }
  return std::nullopt;
}

struct IpSubnet {
  IpAddress network;
  int bits = 0;
  bool Contains(const IpAddress& a) const {
    if (a.size != network.size) return false;
    const int full = bits / 8;
    if (std::memcmp(a.bytes.data(), network.bytes.data(), static_cast<size_t>(full)) != 0) {
      return false;
    }
    const int rest = bits % 8;
    if (rest == 0) return true;
    const uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
    return (a.bytes[full] & mask) == (network.bytes[full] & mask);
  }
};

// "address/bits" (bits 0..32 for IPv4, 0..128 for IPv6, digits only) or an address alone.
inline std::optional<IpSubnet> ParseIpSubnet(std::string_view text) {
  IpSubnet s;
  const size_t slash = text.find('/');
  std::optional<IpAddress> a = ParseIpAddress(text.substr(0, slash));
  if (!a) return std::nullopt;
  s.network = *a;
  s.bits = a->size * 8;
  if (slash != std::string_view::npos) {
    std::string_view digits = text.substr(slash + 1);
    int bits = -1;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), bits);
    if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size() || bits < 0 ||
        bits > a->size * 8) {
      return std::nullopt;
    }
    s.bits = bits;
  }
  return s;
}

}  // namespace sediment::query
