// ipLocation(), asn() and worldMap() (functions/ip_location.cc, asn.cc, world_map.cc) over a
// GeoDatabases given through LookupFiles::Geo() (geo.h): the fields they set, the 400 without a
// database, and worldMap's cells. The MaxMind DB implementation: src/geoip (and
// tests/e2e/test_geoip.py end to end).
#include "query/geo.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "query/aggregate.h"
#include "query/compiled.h"
#include "query/lookup.h"
#include "query/query.h"
#include "query/record.h"

namespace sediment::query {
namespace {

// Two known addresses; anything else is unknown.
class FakeGeo final : public GeoDatabases {
 public:
  FakeGeo(bool city, bool asn) : city_(city), asn_(asn) {}
  bool HasCity() const override { return city_; }
  bool HasAsn() const override { return asn_; }
  std::optional<GeoLocation> Locate(std::string_view ip) const override {
    if (ip == "81.2.69.160") return GeoLocation{"GB", "London", 51.5142, -0.0931};
    if (ip == "2001:db8::1") return GeoLocation{"DE", "", 52.52, 13.405};
    if (ip == "1.2.3.4") return GeoLocation{"AU", "", std::nullopt, std::nullopt};
    return std::nullopt;
  }
  std::optional<AsnInfo> Asn(std::string_view ip) const override {
    if (ip == "81.2.69.160") return AsnInfo{20712, "Andrews & Arnold Ltd"};
    return std::nullopt;
  }

 private:
  bool city_, asn_;
};

class GeoFiles final : public LookupFiles {
 public:
  explicit GeoFiles(std::shared_ptr<const GeoDatabases> geo) : geo_(std::move(geo)) {}
  Result<std::string> Read(std::string_view) const override { return Status::NotFound("none"); }
  std::shared_ptr<const GeoDatabases> Geo() const override { return geo_; }

 private:
  std::shared_ptr<const GeoDatabases> geo_;
};

PositionedEvent Ev(int64_t ts, std::vector<Field> fields) {
  PositionedEvent pe;
  pe.pos = Position{Offset(ts), 0};
  pe.event.timestamp_ms = ts;
  pe.event.ingest_ms = ts;
  pe.event.raw = "e";
  pe.event.fields = std::move(fields);
  return pe;
}

ScanInput Input() {
  auto v = std::make_shared<std::vector<PositionedEvent>>();
  v->push_back(
      Ev(1, {{"ip", "81.2.69.160"}, {"lat", "51.5142"}, {"lon", "-0.0931"}, {"ms", "10"}}));
  v->push_back(Ev(2, {{"ip", "2001:db8::1"}, {"lat", "52.52"}, {"lon", "13.405"}, {"ms", "5"}}));
  v->push_back(Ev(3, {{"ip", "81.2.69.160"}, {"lat", "51.51"}, {"lon", "-0.09"}, {"ms", "30"}}));
  v->push_back(Ev(4, {{"ip", "1.2.3.4"}, {"lat", "95"}, {"lon", "0"}}));
  v->push_back(Ev(5, {{"ip", "10.0.0.1"}}));
  ScanInput in;
  BufferedSource b;
  b.datasource = Datasource{"web", {}};
  b.partition = PartitionId(0);
  b.events = v;
  in.buffered.push_back(b);
  return in;
}

Result<QueryResult> RunGeo(std::string_view q, const LookupFiles* files) {
  auto c = Compile(q, files);
  if (!c.ok()) return c.status();
  return Execute(Env::Default(), **c, TimeRange{0, 1000}, Input(), ExecOptions{});
}

// The row's columns other than those of every event, as name=value text.
std::map<std::string, std::string> Added(const Row& r) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : r) {
    if (k.starts_with('@') || k.starts_with('#') || k == "ip" || k == "lat" || k == "lon" ||
        k == "ms")
      continue;
    out[k] = ValueToString(v);
  }
  return out;
}

TEST(GeoFunctions, WithoutADatabaseTheCallIsA400NamingTheFlag) {
  const GeoFiles none(nullptr);
  const GeoFiles asn_only(std::make_shared<FakeGeo>(false, true));
  for (const LookupFiles* files :
       {static_cast<const LookupFiles*>(nullptr), static_cast<const LookupFiles*>(&none),
        static_cast<const LookupFiles*>(&asn_only)}) {
    auto c = Compile("x | ipLocation()", files);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(c.status().message(),
              "ipLocation() needs a GeoIP city database: start the server with --geoip-city-db "
              "FILE (a MaxMind DB file) at position 4");
    c = Compile("worldMap(ip=ip)", files);
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("--geoip-city-db"), std::string::npos);
  }
  const GeoFiles city_only(std::make_shared<FakeGeo>(true, false));
  auto c = Compile("asn()", &city_only);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "asn() needs a GeoIP ASN database: start the server with --geoip-asn-db FILE (a "
            "MaxMind DB file) at position 0");
  EXPECT_TRUE(Compile("ipLocation()", &city_only).ok());
  // worldMap over coordinates needs no database.
  EXPECT_TRUE(Compile("worldMap(lat=lat, lon=lon)", nullptr).ok());
}

TEST(GeoFunctions, IpLocationAndAsnSetWhatTheDatabaseKnows) {
  const GeoFiles files(std::make_shared<FakeGeo>(true, true));
  auto r = RunGeo("ipLocation() | asn()", &files);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->rows.size(), 5u);
  using M = std::map<std::string, std::string>;
  EXPECT_EQ(Added(r->rows[0]), (M{{"ip.country", "GB"},
                                  {"ip.city", "London"},
                                  {"ip.lat", "51.5142"},
                                  {"ip.lon", "-0.0931"},
                                  {"ip.asn", "20712"},
                                  {"ip.org", "Andrews & Arnold Ltd"}}));
  EXPECT_EQ(Added(r->rows[1]),
            (M{{"ip.country", "DE"}, {"ip.lat", "52.52"}, {"ip.lon", "13.405"}}));
  EXPECT_EQ(Added(r->rows[3]), (M{{"ip.country", "AU"}}));
  EXPECT_EQ(Added(r->rows[4]), M{});  // unknown: nothing set, the event kept
  r = RunGeo("ipLocation(ip, as=geo) | asn(field=ip, as=net) | ip=\"81.2.69.160\" | head(1)",
             &files);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->rows.size(), 1u);
  EXPECT_EQ(Added(r->rows[0]), (M{{"geo.country", "GB"},
                                  {"geo.city", "London"},
                                  {"geo.lat", "51.5142"},
                                  {"geo.lon", "-0.0931"},
                                  {"net.asn", "20712"},
                                  {"net.org", "Andrews & Arnold Ltd"}}));
  // A field that does not exist sets nothing.
  r = RunGeo("ipLocation(field=nosuch) | ipLocation(field=nosuch, as=x) | head(1)", &files);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Added(r->rows[0]), M{});
}

std::string Cells(const QueryResult& r) {
  std::string out;
  for (const Row& row : r.rows) {
    std::map<std::string, std::string> m;
    for (const auto& [k, v] : row) m[k] = ValueToString(v);
    for (const auto& [k, v] : m) out += k + "=" + v + " ";
    out += "| ";
  }
  return out;
}

TEST(GeoFunctions, WorldMapBucketsPointsByGeohash) {
  const GeoFiles files(std::make_shared<FakeGeo>(true, true));
  // Cells of 1 character: gcp... (London) and u33... (Berlin) are "g" and "u"; the centers of
  // "g" (lat 45..90, lon -45..0) and "u" (lat 45..90, lon 0..45).
  auto r = RunGeo("worldMap(ip=ip, precision=1)", &files);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->is_aggregate);
  EXPECT_EQ(Cells(*r),
            "_count=2 _geohash=g lat=67.5 lon=-22.5 | _count=1 _geohash=u lat=67.5 "
            "lon=22.5 | ");
  r = RunGeo("worldMap(ip=ip, precision=1, magnitude=[avg(ms), max(ms)])", &files);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Cells(*r),
            "_avg=20 _geohash=g _max=30 lat=67.5 lon=-22.5 | _avg=5 _geohash=u _max=5 "
            "lat=67.5 lon=22.5 | ");
  // Coordinates: the latitude 95 is out of range; the two London points share a cell of 4
  // characters (gcpv) and not one of 7.
  r = RunGeo("worldMap(lat=lat, lon=lon)", nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->rows.size(), 2u) << Cells(*r);
  EXPECT_NE(Cells(*r).find("_count=2 _geohash=gcpv"), std::string::npos) << Cells(*r);
  r = RunGeo("worldMap(lat=lat, lon=lon, precision=7)", nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rows.size(), 3u) << Cells(*r);
  // Parameters.
  for (const char* bad :
       {"worldMap()", "worldMap(lat=a)", "worldMap(ip=x, lat=a, lon=b)",
        "worldMap(lat=a, lon=b, precision=0)", "worldMap(lat=a, lon=b, precision=13)",
        "worldMap(lat=a, lon=b, magnitude=count(as=lat))"}) {
    EXPECT_FALSE(Compile(bad, &files).ok()) << bad;
  }
}

// As in a cluster: two nodes' partial states of the same worldMap() stage, one of them encoded
// and decoded (the wire), merged at the coordinator.
TEST(GeoFunctions, WorldMapStatesMergeAcrossTheWire) {
  const GeoFiles files(std::make_shared<FakeGeo>(true, true));
  auto c = Compile("worldMap(ip=ip, precision=1, magnitude=sum(ms))", &files);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const Stage& st = (*c)->stages.at(0);
  const CollectorContext ctx{TimeRange{0, 1000}};
  auto record = [](const std::string& ip, const std::string& ms) {
    Row row{{"ip", Value(ip)}, {"ms", Value(ms)}};
    return Record::FromRow(std::move(row), RecordKey{});
  };
  auto node1 = NewCollector(st, ctx);
  auto node2 = NewCollector(st, ctx);
  node1->Add(record("81.2.69.160", "10"));
  node1->Add(record("10.0.0.1", "1000"));  // unknown: left out
  node2->Add(record("81.2.69.160", "30"));
  node2->Add(record("2001:db8::1", "5"));
  std::string wire;
  node2->Encode(&wire);
  auto decoded = DecodeCollector(&st, ctx, wire);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  node1->Merge(**decoded);
  std::vector<std::string> warnings;
  QueryResult r;
  r.rows = node1->Finish(&warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(Cells(r),
            "_geohash=g _sum=40 lat=67.5 lon=-22.5 | _geohash=u _sum=5 lat=67.5 lon=22.5 | ");
}

}  // namespace
}  // namespace sediment::query
