#include "geoip/mmdb.h"

#include <maxminddb.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace sediment::geoip {
namespace {

// One opened database file; closed when destroyed.
class Mmdb {
 public:
  Mmdb() = default;
  Mmdb(const Mmdb&) = delete;
  Mmdb& operator=(const Mmdb&) = delete;
  ~Mmdb() {
    if (open_) MMDB_close(&db_);
  }

  Status Open(const std::string& path, const char* what, const char* flag) {
    const int rc = MMDB_open(path.c_str(), MMDB_MODE_MMAP, &db_);
    if (rc != MMDB_SUCCESS) {
      std::string reason = MMDB_strerror(rc);
      if (rc == MMDB_IO_ERROR && errno != 0) reason += std::string(": ") + std::strerror(errno);
      return Status::InvalidArgument(std::string(flag) + ": cannot open the GeoIP " + what +
                                     " database '" + path + "': " + reason);
    }
    open_ = true;
    return Status::OK();
  }
  bool open() const { return open_; }

  // The entry of the network holding `ip`; nullopt when `ip` is not an address or no network
  // holds it.
  std::optional<MMDB_entry_s> Find(std::string_view ip) const {
    if (!open_ || ip.empty() || ip.size() > 64) return std::nullopt;
    const std::string text(ip);  // NUL-terminated
    int gai_error = 0, mmdb_error = 0;
    MMDB_lookup_result_s r = MMDB_lookup_string(&db_, text.c_str(), &gai_error, &mmdb_error);
    if (gai_error != 0 || mmdb_error != MMDB_SUCCESS || !r.found_entry) return std::nullopt;
    return r.entry;
  }

 private:
  // MMDB_lookup_string takes a non-const MMDB_s but only reads it (libmaxminddb documents
  // lookups on one opened MMDB_s as thread-safe).
  mutable MMDB_s db_{};
  bool open_ = false;
};

// The value at `path` (NULL-terminated list of keys) in `entry`, when it has `type`.
template <typename... Keys>
std::optional<MMDB_entry_data_s> Get(MMDB_entry_s entry, uint32_t type, Keys... keys) {
  MMDB_entry_data_s data;
  if (MMDB_get_value(&entry, &data, keys..., static_cast<const char*>(nullptr)) != MMDB_SUCCESS ||
      !data.has_data || data.type != type) {
    return std::nullopt;
  }
  return data;
}

template <typename... Keys>
std::string GetString(MMDB_entry_s entry, Keys... keys) {
  auto d = Get(entry, MMDB_DATA_TYPE_UTF8_STRING, keys...);
  return d ? std::string(d->utf8_string, d->data_size) : std::string();
}

template <typename... Keys>
std::optional<double> GetDouble(MMDB_entry_s entry, Keys... keys) {
  if (auto d = Get(entry, MMDB_DATA_TYPE_DOUBLE, keys...)) return d->double_value;
  if (auto f = Get(entry, MMDB_DATA_TYPE_FLOAT, keys...))
    return static_cast<double>(f->float_value);
  return std::nullopt;
}

// An unsigned integer of any width the format has (writers pick the smallest that fits).
template <typename... Keys>
std::optional<int64_t> GetUnsigned(MMDB_entry_s entry, Keys... keys) {
  MMDB_entry_data_s data;
  if (MMDB_get_value(&entry, &data, keys..., static_cast<const char*>(nullptr)) != MMDB_SUCCESS ||
      !data.has_data) {
    return std::nullopt;
  }
  switch (data.type) {
    case MMDB_DATA_TYPE_UINT16:
      return data.uint16;
    case MMDB_DATA_TYPE_UINT32:
      return data.uint32;
    case MMDB_DATA_TYPE_INT32:
      return data.int32;
    case MMDB_DATA_TYPE_UINT64:
      return static_cast<int64_t>(data.uint64);
    default:
      return std::nullopt;
  }
}

class MmdbGeoDatabases final : public query::GeoDatabases {
 public:
  Status Open(const std::string& city_path, const std::string& asn_path) {
    if (!city_path.empty())
      RETURN_IF_ERROR(city_.Open(city_path, "city", query::kCityDatabaseFlag));
    if (!asn_path.empty()) RETURN_IF_ERROR(asn_.Open(asn_path, "ASN", query::kAsnDatabaseFlag));
    return Status::OK();
  }

  bool HasCity() const override { return city_.open(); }
  bool HasAsn() const override { return asn_.open(); }

  // The GeoIP2/GeoLite2 City layout: country.iso_code (else registered_country.iso_code),
  // city.names.en, location.latitude / location.longitude.
  std::optional<query::GeoLocation> Locate(std::string_view ip) const override {
    std::optional<MMDB_entry_s> e = city_.Find(ip);
    if (!e) return std::nullopt;
    query::GeoLocation loc;
    loc.country = GetString(*e, "country", "iso_code");
    if (loc.country.empty()) loc.country = GetString(*e, "registered_country", "iso_code");
    loc.city = GetString(*e, "city", "names", "en");
    loc.lat = GetDouble(*e, "location", "latitude");
    loc.lon = GetDouble(*e, "location", "longitude");
    return loc;
  }

  // The GeoLite2 ASN layout: autonomous_system_number, autonomous_system_organization.
  std::optional<query::AsnInfo> Asn(std::string_view ip) const override {
    std::optional<MMDB_entry_s> e = asn_.Find(ip);
    if (!e) return std::nullopt;
    query::AsnInfo info;
    info.asn = GetUnsigned(*e, "autonomous_system_number");
    info.org = GetString(*e, "autonomous_system_organization");
    return info;
  }

 private:
  Mmdb city_, asn_;
};

}  // namespace

Result<std::shared_ptr<const query::GeoDatabases>> OpenGeoDatabases(const std::string& city_path,
                                                                    const std::string& asn_path) {
  auto dbs = std::make_shared<MmdbGeoDatabases>();
  RETURN_IF_ERROR(dbs->Open(city_path, asn_path));
  return std::shared_ptr<const query::GeoDatabases>(std::move(dbs));
}

}  // namespace sediment::geoip
