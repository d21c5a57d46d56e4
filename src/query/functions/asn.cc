// asn(field=ip, as=<field>): the autonomous system of the IPv4 or IPv6 address in `field`, from
// the ASN database the server was started with (--geoip-asn-db, a MaxMind DB such as GeoLite2
// ASN; query/geo.h). Sets <as>.asn (the number) and <as>.org (the organization), each only when
// the database knows it. A record whose field is missing, is not an address or lies in no
// network of the database gets no field (it is kept). Without an ASN database the query does not
// compile (400 naming the flag).
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .default_value = "ip"},
    {.name = "as", .type = Type::kString},
};

bool Build(Call& c, Stage* st) {
  std::shared_ptr<const GeoDatabases> geo = RequireGeo(c, false);
  if (geo == nullptr) return false;
  const std::string field = c.String("field");
  const std::string as = c.Given("as") && !c.String("as").empty() ? c.String("as") : field;
  const std::string asn = as + ".asn", org = as + ".org";
  SetRecordFunction(st,
                    [geo, field, asn, org](Record& r) {
                      std::string scratch;
                      std::optional<std::string_view> ip = r.Get(field, &scratch);
                      if (!ip) return true;
                      std::optional<AsnInfo> info = geo->Asn(*ip);
                      if (!info) return true;
                      if (info->asn) r.Set(asn, Value(*info->asn));
                      if (!info->org.empty()) r.Set(org, Value(info->org));
                      return true;
                    },
                    {field, asn, org});
  return true;
}

}  // namespace

const Function kAsn = {
    .name = "asn",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "the autonomous system number and organization of an IP address (GeoIP ASN database)",
    .stage = &Build,
};

}  // namespace sediment::query::functions
