// Timestamp parsing shared by ingest (event timestamps) and query (time ranges).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sediment {

// ISO-8601 / RFC 3339 date-time with a 'Z' or +hh:mm / -hhmm offset, 'T' or space separator,
// optional fractional seconds (any digits, truncated to ms). A date-time without an offset is read
// as UTC. Returns ms since the epoch, or nullopt when `s` is not such a timestamp.
std::optional<int64_t> ParseIso8601Millis(std::string_view s);

// Formats ms since epoch as "2024-01-02T03:04:05.678Z".
std::string FormatIso8601Millis(int64_t ms);

// Days since 1970-01-01 for a proleptic Gregorian date.
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d);

}  // namespace sediment
