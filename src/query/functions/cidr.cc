// cidr(field, subnet, negate=false): keeps the records whose field holds an IPv4 or IPv6 address
// inside one of the subnets. A per-record filtering step; `!cidr(...)` keeps exactly the records
// it drops (also those without the field), as the deprecated negate=true does.
//
// Addresses and subnets as query/ip_address.h reads them. A value that is not an address does
// not match. Deviation: the subnets cannot be read
// from a lookup file (file=, column= are refused by name).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/ip_address.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .required = true},
    {.name = "subnet", .type = Type::kRaw, .required = true},
    {.name = "negate", .type = Type::kBool, .default_value = "false"},
    {.name = "file", .type = Type::kUnsupported},
    {.name = "column", .type = Type::kUnsupported},
};

bool Build(Call& c, Stage* st) {
  std::vector<IpSubnet> subnets;
  const ArgValue* v = c.Value("subnet");
  for (const ArgValue* item : ItemsOf(*v)) {
    std::optional<IpSubnet> s;
    if (item->kind == ArgValue::Kind::kScalar) s = ParseIpSubnet(item->text);
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
          if (std::optional<IpAddress> a = ParseIpAddress(*text)) {
            for (const IpSubnet& s : subnets) {
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
