// geography:distance(lat1, lon1, lat2, lon2, as=_distance): the great-circle distance in meters
// between two points given in decimal degrees by four fields (the haversine formula, as LogScale
// documents; altitude ignored). A per-record stage.
//
// Decided: LogScale does not state the earth radius of its "ideal earth surface"; sediment uses
// the mean radius 6371008.8 m (IUGG), so that results agree with LogScale's to well within the
// 0.5% it documents for the approximation. A missing or non-numeric coordinate, a latitude
// outside [-90, 90] or a longitude outside [-180, 180] sets nothing.
#include <cmath>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr double kEarthRadiusMeters = 6371008.8;

constexpr Param kParams[] = {
    {.name = "lat1", .type = Type::kField, .required = true},
    {.name = "lon1", .type = Type::kField, .required = true},
    {.name = "lat2", .type = Type::kField, .required = true},
    {.name = "lon2", .type = Type::kField, .required = true},
    {.name = "as", .type = Type::kField, .default_value = "_distance"},
};

double Haversine(double lat1, double lon1, double lat2, double lon2) {
  const double rad = std::numbers::pi / 180.0;
  const double dlat = (lat2 - lat1) * rad, dlon = (lon2 - lon1) * rad;
  const double a =
      std::sin(dlat / 2) * std::sin(dlat / 2) +
      std::cos(lat1 * rad) * std::cos(lat2 * rad) * std::sin(dlon / 2) * std::sin(dlon / 2);
  return 2 * kEarthRadiusMeters * std::asin(std::min(1.0, std::sqrt(a)));
}

bool Build(Call& c, Stage* st) {
  std::string lat1 = c.String("lat1"), lon1 = c.String("lon1");
  std::string lat2 = c.String("lat2"), lon2 = c.String("lon2");
  std::string as = c.String("as");
  std::vector<std::string> touched = {lat1, lon1, lat2, lon2, as};
  SetRecordFunction(
      st,
      [lat1, lon1, lat2, lon2, as](Record& r) {
        std::optional<double> a = r.GetNumber(lat1), b = r.GetNumber(lon1);
        std::optional<double> x = r.GetNumber(lat2), y = r.GetNumber(lon2);
        if (!a || !b || !x || !y) return true;
        if (std::fabs(*a) > 90 || std::fabs(*x) > 90 || std::fabs(*b) > 180 ||
            std::fabs(*y) > 180) {
          return true;
        }
        r.Set(as, Value(Haversine(*a, *b, *x, *y)));
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

const Function kGeographyDistance = {
    .name = "geography:distance",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "the great-circle distance in meters between two points",
    .stage = &Build,
};

}  // namespace sediment::query::functions
