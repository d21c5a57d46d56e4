// LogScale functions that need a database sediment does not have: ioc:lookup() (CrowdStrike's
// indicator-of-compromise feed). It is registered so that a query using it is refused with a
// message saying why (400, naming the function and its position), instead of "unknown function";
// any arguments are accepted. (ipLocation(), asn() and worldMap() read the GeoIP databases the
// server is started with: ip_location.cc, asn.cc, world_map.cc.)
#include <string>

#include "query/functions/list.h"

namespace sediment::query::functions {
namespace {

// Every parameter of ioc:lookup() as LogScale documents them, taken raw: the call is
// refused whatever they hold.
constexpr Param kIocParams[] = {
    {.name = "field", .type = Type::kRaw, .unnamed = true},
    {.name = "type", .type = Type::kRaw},
    {.name = "confidenceThreshold", .type = Type::kRaw},
    {.name = "prefix", .type = Type::kRaw},
    {.name = "strict", .type = Type::kRaw},
    {.name = "include", .type = Type::kRaw},
};
bool RefuseIoc(Call& c, Stage*) {
  c.Error(c.position(),
          "ioc:lookup() needs an indicator-of-compromise database, which sediment "
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
}  // namespace sediment::query::functions
