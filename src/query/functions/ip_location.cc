// ipLocation(field=ip, as=<field>): the location of the IPv4 or IPv6 address in `field`, from the
// city database the server was started with (--geoip-city-db, a MaxMind DB such as GeoLite2
// City; query/geo.h). Sets <as>.country (ISO 3166-1 alpha-2 code), <as>.city (English name),
// <as>.lat and <as>.lon (degrees), each only when the database knows it. A record whose field is
// missing, is not an address or lies in no network of the database gets no field (it is kept).
// Without a city database the query does not compile (400 naming the flag).
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/lookup.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "field", .type = Type::kField, .unnamed = true, .default_value = "ip"},
    {.name = "as", .type = Type::kString},
};

bool Build(Call& c, Stage* st) {
  std::shared_ptr<const GeoDatabases> geo = RequireGeo(c, true);
  if (geo == nullptr) return false;
  const std::string field = c.String("field");
  const std::string as = c.Given("as") && !c.String("as").empty() ? c.String("as") : field;
  const std::string country = as + ".country", city = as + ".city", lat = as + ".lat",
                    lon = as + ".lon";
  SetRecordFunction(st,
                    [geo, field, country, city, lat, lon](Record& r) {
                      std::string scratch;
                      std::optional<std::string_view> ip = r.Get(field, &scratch);
                      if (!ip) return true;
                      std::optional<GeoLocation> loc = geo->Locate(*ip);
                      if (!loc) return true;
                      if (!loc->country.empty()) r.Set(country, Value(loc->country));
                      if (!loc->city.empty()) r.Set(city, Value(loc->city));
                      if (loc->lat) r.Set(lat, Value(*loc->lat));
                      if (loc->lon) r.Set(lon, Value(*loc->lon));
                      return true;
                    },
                    {field, country, city, lat, lon});
  return true;
}

}  // namespace

std::shared_ptr<const GeoDatabases> RequireGeo(Call& c, bool city) {
  const LookupFiles* files = CurrentLookupFiles();
  std::shared_ptr<const GeoDatabases> geo = files != nullptr ? files->Geo() : nullptr;
  if (geo != nullptr && (city ? geo->HasCity() : geo->HasAsn())) return geo;
  c.Error(
      c.position(),
      c.name() + "() needs " +
          (city ? std::string("a GeoIP city database: start the server with ") + kCityDatabaseFlag
                : std::string("a GeoIP ASN database: start the server with ") + kAsnDatabaseFlag) +
          " FILE (a MaxMind DB file)");
  return nullptr;
}

const Function kIpLocation = {
    .name = "ipLocation",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "the country, city, latitude and longitude of an IP address (GeoIP city database)",
    .stage = &Build,
};

}  // namespace sediment::query::functions
