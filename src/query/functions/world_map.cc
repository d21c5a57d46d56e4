// worldMap(ip=, lat=, lon=, magnitude=count(as=_count), precision=4): the points of a world map,
// bucketed by geohash. Each record's point is its `lat` and `lon` fields (degrees), or, with
// ip=, the location of the address in that field from the GeoIP city database
// (--geoip-city-db; query/geo.h). The output has one row per geohash cell of `precision`
// characters holding a point: _geohash (the cell), lat and lon (the cell's center, degrees) and
// the magnitude aggregate's field(s) over the cell's records (_count by default). Records
// without a point (missing or non-numeric coordinates, out of range, an address the database
// does not know) are left out. At most 20000 cells (groupBy's default limit), with a warning.
//
// Built as an aggregate of one subquery metric (compiled.h, Subquery): a per-record step that
// sets _geohash, a groupBy(_geohash, function=magnitude) keeping the partial states the nodes
// merge, and a step over its rows that adds the centers.
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/functions/util.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "ip", .type = Type::kField, .unnamed = true},
    {.name = "lat", .type = Type::kField},
    {.name = "lon", .type = Type::kField},
    {.name = "magnitude", .type = Type::kMetrics, .default_value = "count(as=_count)"},
    {.name = "precision", .type = Type::kLimit, .default_value = "4", .max = 12},
};

const std::string kGeohashField = "_geohash";

bool InRange(double lat, double lon) {
  return lat >= -90 && lat <= 90 && lon >= -180 && lon <= 180;
}

bool Build(Call& c, Stage* st) {
  const int64_t precision = c.Limit("precision");
  if (precision < 1) {
    c.BadParam("precision", "a number of characters from 1 to 12");
    return false;
  }
  const bool by_ip = c.Given("ip");
  if (by_ip && (c.Given("lat") || c.Given("lon"))) {
    c.Error(c.position(), "worldMap() takes either ip= or lat= and lon=, not both");
    return false;
  }
  if (!by_ip && (!c.Given("lat") || !c.Given("lon"))) {
    c.Error(c.position(), "worldMap() needs ip= or both lat= and lon=");
    return false;
  }
  auto sq = std::make_shared<Subquery>();
  sq->position = c.position();
  sq->collect = 1;
  sq->stages.reserve(3);  // the references below stay valid

  // 1. The record's cell.
  Stage& point = sq->stages.emplace_back();
  point.position = c.position();
  point.function = c.name();
  if (by_ip) {
    std::shared_ptr<const GeoDatabases> geo = RequireGeo(c, true);
    if (geo == nullptr) return false;
    const std::string ip = c.String("ip");
    SetRecordFunction(&point,
                      [geo, ip, precision](Record& r) {
                        std::string scratch;
                        std::optional<std::string_view> v = r.Get(ip, &scratch);
                        if (!v) return false;
                        std::optional<GeoLocation> loc = geo->Locate(*v);
                        if (!loc || !loc->lat || !loc->lon || !InRange(*loc->lat, *loc->lon))
                          return false;
                        r.Set(kGeohashField, Value(Geohash(*loc->lat, *loc->lon, precision)));
                        return true;
                      },
                      {ip, kGeohashField});
  } else {
    const std::string lat = c.String("lat"), lon = c.String("lon");
    SetRecordFunction(&point,
                      [lat, lon, precision](Record& r) {
                        std::optional<double> y = r.GetNumber(lat);
                        std::optional<double> x = r.GetNumber(lon);
                        if (!y || !x || !InRange(*y, *x)) return false;
                        r.Set(kGeohashField, Value(Geohash(*y, *x, precision)));
                        return true;
                      },
                      {lat, lon, kGeohashField});
  }

  // 2. The cells and their magnitudes.
  Stage& cells = sq->stages.emplace_back();
  cells.position = c.position();
  cells.function = c.name();
  cells.kind = Stage::Kind::kAggregate;
  cells.grouping = Stage::Grouping::kGroupBy;
  cells.fields = {kGeohashField};
  cells.limit = 20000;
  if (!SetMetrics(c, "magnitude", &cells)) return false;
  for (const Metric& m : cells.metrics) {
    for (const std::string& name : MetricOutputNames(m)) {
      if (name == kGeohashField || name == "lat" || name == "lon") {
        c.BadParam("magnitude", "aggregates whose output is not named _geohash, lat or lon");
        return false;
      }
    }
  }

  // 3. The cells' centers.
  Stage& centers = sq->stages.emplace_back();
  centers.position = c.position();
  centers.function = c.name();
  SetRecordFunction(&centers,
                    [](Record& r) {
                      std::string scratch;
                      std::optional<std::string_view> hash = r.Get(kGeohashField, &scratch);
                      if (!hash) return true;
                      std::optional<std::pair<double, double>> center = GeohashCenter(*hash);
                      if (!center) return true;
                      r.Set("lat", Value(center->first));
                      r.Set("lon", Value(center->second));
                      return true;
                    },
                    {kGeohashField, "lat", "lon"});

  Metric m;
  m.kind = Metric::Kind::kSubquery;
  m.position = c.position();
  m.subquery = std::move(sq);
  st->kind = Stage::Kind::kAggregate;
  st->grouping = Stage::Grouping::kNone;
  st->metrics = {std::move(m)};
  return true;
}

}  // namespace

std::optional<std::pair<double, double>> GeohashCenter(std::string_view hash) {
  static constexpr std::string_view kAlphabet = "0123456789bcdefghjkmnpqrstuvwxyz";
  if (hash.empty()) return std::nullopt;
  double lat_lo = -90, lat_hi = 90, lon_lo = -180, lon_hi = 180;
  bool even = true;  // the next bit halves the longitude
  for (char ch : hash) {
    const size_t v = kAlphabet.find(ch);
    if (v == std::string_view::npos) return std::nullopt;
    for (int bit = 4; bit >= 0; --bit) {
      double& lo = even ? lon_lo : lat_lo;
      double& hi = even ? lon_hi : lat_hi;
      const double mid = (lo + hi) / 2;
      if ((v >> bit) & 1) {
        lo = mid;
      } else {
        hi = mid;
      }
      even = !even;
    }
  }
  return std::make_pair((lat_lo + lat_hi) / 2, (lon_lo + lon_hi) / 2);
}

const Function kWorldMap = {
    .name = "worldMap",
    .kind = Kind::kCollector,
    .params = kParams,
    .doc = "points bucketed by geohash with a magnitude per cell, for a world map",
    .stage = &Build,
};

}  // namespace sediment::query::functions
