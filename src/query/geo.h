// The GeoIP databases ipLocation(), asn() and worldMap(ip=) read: what the query library needs
// from its caller (the server opens MaxMind DB files, src/geoip). They reach a query the way
// lookup files do (lookup.h): the caller's LookupFiles answers Geo(), match()'s factory's
// counterparts take the databases while the query compiles and keep a shared reference in the
// compiled stage, so executing never looks anything up but the addresses themselves.
//
// Thread-safety: implementations are immutable once opened and Locate/Asn may be called from any
// number of threads at once (every query thread shares one instance).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sediment::query {

// What a city database knows of an address; a member it does not know is empty / nullopt.
struct GeoLocation {
  std::string country;  // ISO 3166-1 alpha-2 code ("DK")
  std::string city;     // English name
  std::optional<double> lat, lon;
};

// What an ASN database knows of an address.
struct AsnInfo {
  std::optional<int64_t> asn;
  std::string org;
};

class GeoDatabases {
 public:
  virtual ~GeoDatabases() = default;
  // Whether a city database (ipLocation(), worldMap(ip=)) / an ASN database (asn()) is open.
  virtual bool HasCity() const = 0;
  virtual bool HasAsn() const = 0;
  // The record of the network holding `ip` (IPv4 or IPv6 text); nullopt when `ip` is not an
  // address, when no network of the database holds it, or when the database is not open.
  virtual std::optional<GeoLocation> Locate(std::string_view ip) const = 0;
  virtual std::optional<AsnInfo> Asn(std::string_view ip) const = 0;
};

// The server flags naming the databases, for the messages of a query that needs one that is not
// open.
inline constexpr const char* kCityDatabaseFlag = "--geoip-city-db";
inline constexpr const char* kAsnDatabaseFlag = "--geoip-asn-db";

}  // namespace sediment::query
