// subnet(field, bits, as=_subnet): the IPv4 subnet of the address in a field, with the given
// number of prefix bits (subnet(ip, bits=23) of 10.1.3.7 is 10.1.2.0/23). A per-record stage.
//
// Choices where LogScale's documentation leaves room: the output is the network address followed
// by "/bits"; a field that is not a dotted-quad IPv4 address (or is missing) sets nothing.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "bits", .type = Type::kLimit, .required = true, .max = 32},
    {.name = "as", .type = Type::kField, .default_value = "_subnet"},
};

// A dotted-quad IPv4 address (four decimal numbers 0-255, no leading zeros but "0").
std::optional<uint32_t> ParseIpv4(std::string_view s) {
  uint32_t ip = 0;
  for (int part = 0; part < 4; ++part) {
    if (part > 0) {
      if (s.empty() || s[0] != '.') return std::nullopt;
      s.remove_prefix(1);
    }
    size_t n = 0;
    uint32_t v = 0;
    while (n < s.size() && n < 4 && s[n] >= '0' && s[n] <= '9') v = v * 10 + (s[n++] - '0');
    if (n == 0 || n > 3 || v > 255 || (n > 1 && s[0] == '0')) return std::nullopt;
    s.remove_prefix(n);
    ip = ip << 8 | v;
  }
  if (!s.empty()) return std::nullopt;
  return ip;
}

bool Build(Call& c, Stage* st) {
  std::string field = c.String("field");
  std::string as = c.String("as");
  const int64_t bits = c.Limit("bits");
  const uint32_t mask = bits == 0 ? 0 : ~uint32_t{0} << (32 - bits);
  std::vector<std::string> touched = {field, as};
  SetRecordFunction(
      st,
      [field, as, bits, mask](Record& r) {
        std::string scratch;
        std::optional<std::string_view> text = r.Get(field, &scratch);
        if (!text) return true;
        std::optional<uint32_t> ip = ParseIpv4(*text);
        if (!ip) return true;
        const uint32_t net = *ip & mask;
        std::string out;
        for (int k = 3; k >= 0; --k) {
          out += std::to_string(net >> (8 * k) & 0xff);
          out.push_back(k > 0 ? '.' : '/');
        }
        out += std::to_string(bits);
        r.Set(as, Value(std::move(out)));
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kSubnet = {
    .name = "subnet",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "the IPv4 subnet of an address with the given prefix bits",
    .stage = &Build,
};

}  // namespace sediment::query::functions
