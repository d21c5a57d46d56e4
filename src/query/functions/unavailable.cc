// LogScale functions that need a database sediment does not have: ioc:lookup() (CrowdStrike's
// indicator-of-compromise feed), ipLocation() and worldMap() (a GeoIP database). They are
// registered so that a query using them is refused with a message saying why (400, naming the
// function and its position), instead of "unknown function"; any arguments are accepted.
#include <string>

#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

// Every parameter of the three functions as LogScale documents them, taken raw: the call is
// refused whatever they hold.
constexpr Param kIocParams[] = {
    {.name = "field", .type = Type::kRaw, .unnamed = true},
    {.name = "type", .type = Type::kRaw},
    {.name = "confidenceThreshold", .type = Type::kRaw},
    {.name = "prefix", .type = Type::kRaw},
    {.name = "strict", .type = Type::kRaw},
    {.name = "include", .type = Type::kRaw},
};
constexpr Param kIpLocationParams[] = {
    {.name = "field", .type = Type::kRaw, .unnamed = true},
    {.name = "as", .type = Type::kRaw},
    {.name = "include", .type = Type::kRaw},
};
constexpr Param kWorldMapParams[] = {
    {.name = "ip", .type = Type::kRaw, .unnamed = true},
    {.name = "lat", .type = Type::kRaw},
    {.name = "lon", .type = Type::kRaw},
    {.name = "magnitude", .type = Type::kRaw},
    {.name = "precision", .type = Type::kRaw},
};

bool RefuseIoc(Call& c, Stage*) {
  c.Error(c.position(),
          "ioc:lookup() needs an indicator-of-compromise database, which sediment "
          "does not have");
  return false;
}
bool RefuseIpLocation(Call& c, Stage*) {
  c.Error(c.position(), "ipLocation() needs a GeoIP database, which sediment does not have");
  return false;
}
bool RefuseWorldMap(Call& c, Stage*) {
  c.Error(c.position(),
          "worldMap() needs a GeoIP database and a map widget, which sediment "
          "does not have");
  return false;
}

}  // namespace

const Function kIocLookup = {
    .name = "ioc:lookup",
    .kind = Kind::kTransform,
    .params = kIocParams,
    .doc = "refused: no IOC database",
    .stage = &RefuseIoc,
};
const Function kIpLocation = {
    .name = "ipLocation",
    .kind = Kind::kTransform,
    .params = kIpLocationParams,
    .doc = "refused: no GeoIP database",
    .stage = &RefuseIpLocation,
};
const Function kWorldMap = {
    .name = "worldMap",
    .kind = Kind::kCollector,
    .params = kWorldMapParams,
    .doc = "refused: no GeoIP database",
    .stage = &RefuseWorldMap,
};

}  // namespace sediment::query::functions
