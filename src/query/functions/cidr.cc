// cidr(field, subnet, negate=false): keeps the records whose field holds an IPv4 or IPv6 address
// inside one of the subnets. A per-record filtering step; `!cidr(...)` keeps exactly the records
// it drops (also those without the field), as the deprecated negate=true does.
//
// A subnet is "address/bits" or a single address (all bits); IPv4 subnets match IPv4 addresses and
// IPv6 subnets IPv6 addresses (the text forms inet_pton reads: dotted quads, RFC 4291 text).
// Choices where LogScale's documentation leaves room: an IPv4-mapped IPv6 address (::ffff:1.2.3.4)
// is IPv6; a value that is not an address does not match. Deviation: the subnets cannot be read
// from a lookup file (file=, column= are refused by name).
#include <arpa/inet.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "subnet", .type = Type::kRaw, .required = true},
    {.name = "negate", .type = Type::kBool, .default_value = "false"},
    {.name = "file", .type = Type::kUnsupported},
    {.name = "column", .type = Type::kUnsupported},
};

// An address: 4 (IPv4) or 16 (IPv6) bytes.
struct Address {
  std::array<uint8_t, 16> bytes{};
  int size = 0;
};

std::optional<Address> ParseAddress(std::string_view text) {
  if (text.empty() || text.size() > 45) return std::nullopt;
  char buf[46];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  Address a;
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

struct Subnet {
  Address network;
  int bits = 0;
  bool Contains(const Address& a) const {
    if (a.size != network.size) return false;
    int full = bits / 8;
    if (std::memcmp(a.bytes.data(), network.bytes.data(), full) != 0) return false;
    const int rest = bits % 8;
    if (rest == 0) return true;
    const uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
    return (a.bytes[full] & mask) == (network.bytes[full] & mask);
  }
};

std::optional<Subnet> ParseSubnet(std::string_view text) {
  Subnet s;
  const size_t slash = text.find('/');
  std::optional<Address> a = ParseAddress(text.substr(0, slash));
  if (!a) return std::nullopt;
  s.network = *a;
  s.bits = a->size * 8;
  if (slash != std::string_view::npos) {
    std::optional<int64_t> bits = ParseInt(text.substr(slash + 1));
    if (!bits || *bits < 0 || *bits > a->size * 8 || text[slash + 1] == '+') return std::nullopt;
    s.bits = static_cast<int>(*bits);
  }
  return s;
}

bool Build(Call& c, Stage* st) {
  std::vector<Subnet> subnets;
  const ArgValue* v = c.Value("subnet");
  for (const ArgValue* item : ItemsOf(*v)) {
    std::optional<Subnet> s;
    if (item->kind == ArgValue::Kind::kScalar) s = ParseSubnet(item->text);
    if (!s) {
      c.BadValue("subnet", *item, "an IPv4 or IPv6 subnet such as 192.0.2.0/24 or 2001:db8::/32");
      return false;
    }
    subnets.push_back(*s);
  }
  if (subnets.empty()) {
    c.BadParam("subnet", "one or more subnets");
    return false;
  }
  std::string field = c.String("field");
  const bool negate = c.Bool("negate");
  SetRecordFunction(
      st,
      [field, subnets, negate](Record& r) {
        std::string scratch;
        std::optional<std::string_view> text = r.Get(field, &scratch);
        bool in = false;
        if (text) {
          if (std::optional<Address> a = ParseAddress(*text)) {
            for (const Subnet& s : subnets) {
              if (s.Contains(*a)) {
                in = true;
                break;
              }
            }
          }
        }
        return in != negate;
      },
      std::vector<std::string>{field});
  return true;
}

}  // namespace

const Function kCidr = {
    .name = "cidr",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "keeps the records whose IP address is in one of the subnets",
    .stage = &Build,
    .negatable = true,
};

}  // namespace sediment::query::functions
