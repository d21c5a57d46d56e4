// MaxMind DB (.mmdb) files opened through libmaxminddb, as the query library's GeoDatabases
// (query/geo.h): the city database ipLocation() and worldMap(ip=) read and the ASN database asn()
// reads, each optional.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "query/geo.h"

namespace sediment::geoip {

// Opens the files named (an empty path: that database is absent). InvalidArgument naming the
// flag and the file when one cannot be opened or is not a MaxMind DB (libmaxminddb's reason
// included). The files are memory-mapped read-only for the life of the result.
//
// Thread-safety: the result is immutable; MMDB_lookup_string on an opened MMDB_s only reads it,
// so Locate/Asn may run on any number of threads at once.
Result<std::shared_ptr<const query::GeoDatabases>> OpenGeoDatabases(const std::string& city_path,
                                                                    const std::string& asn_path);

}  // namespace sediment::geoip
