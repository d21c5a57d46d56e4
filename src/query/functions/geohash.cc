// geohash(lat=ip.lat, lon=ip.lon, precision=12, as=_geohash): the geohash (base-32 text of
// `precision` characters) of a point given by two fields in degrees. A per-record stage.
//
// The standard geohash: longitude and latitude intervals halved in turn (longitude first), one bit
// per halving, five bits per character of "0123456789bcdefghjkmnpqrstuvwxyz". Greenwich
// (51.477928, 0.0) is gcpuzgrbxvrc. Choices where LogScale's documentation leaves room: precision
// is 1 to 12; a missing or non-numeric coordinate, a latitude outside [-90, 90] or a longitude
// outside
// [-180, 180] sets nothing.
#include <optional>
#include <string>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "lat", .type = Type::kField, .default_value = "ip.lat"},
    {.name = "lon", .type = Type::kField, .default_value = "ip.lon"},
    {.name = "precision", .type = Type::kLimit, .default_value = "12", .max = 12},
    {.name = "as", .type = Type::kField, .default_value = "_geohash"},
};

bool Build(Call& c, Stage* st) {
  const int64_t precision = c.Limit("precision");
  if (precision < 1) {
    c.BadParam("precision", "a number of characters from 1 to 12");
    return false;
  }
  std::string lat = c.String("lat");
  std::string lon = c.String("lon");
  std::string as = c.String("as");
  std::vector<std::string> touched = {lat, lon, as};
  SetRecordFunction(
      st,
      [lat, lon, as, precision](Record& r) {
        std::optional<double> y = r.GetNumber(lat);
        std::optional<double> x = r.GetNumber(lon);
        if (!y || !x || !(*y >= -90 && *y <= 90) || !(*x >= -180 && *x <= 180)) return true;
        r.Set(as, Value(Geohash(*y, *x, precision)));
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

std::string Geohash(double lat, double lon, int64_t precision) {
  static constexpr char kAlphabet[] = "0123456789bcdefghjkmnpqrstuvwxyz";
  double lat_lo = -90, lat_hi = 90, lon_lo = -180, lon_hi = 180;
  std::string out;
  bool even = true;  // the next bit halves the longitude
  while (static_cast<int64_t>(out.size()) < precision) {
    int ch = 0;
    for (int bit = 0; bit < 5; ++bit) {
      double& lo = even ? lon_lo : lat_lo;
      double& hi = even ? lon_hi : lat_hi;
      const double x = even ? lon : lat;
      const double mid = (lo + hi) / 2;
      ch <<= 1;
      if (x > mid) {
        ch |= 1;
        lo = mid;
      } else {
        hi = mid;
      }
      even = !even;
    }
    out.push_back(kAlphabet[ch]);
  }
  return out;
}

const Function kGeohash = {
    .name = "geohash",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "the geohash of a latitude and a longitude",
    .stage = &Build,
};

}  // namespace sediment::query::functions
