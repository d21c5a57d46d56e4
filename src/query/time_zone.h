// TimeZone: a time zone of the query language (formatTime, parseTimestamp, findTimestamp, format,
// the time:* family, the formattime() expression function): UTC, a fixed offset, an IANA zone
// name (Europe/Berlin, America/New_York, ...) read from the system's tz database
// (/usr/share/zoneinfo, through Howard Hinnant's date library, libdate-tz), or one of Java's
// three-letter short ids that LogScale accepts (PST = America/Los_Angeles, CET, EST = -05:00, ...).
//
// Immutable and cheap to copy (an offset or a pointer into the process-wide tz database, which
// lives until exit); every method is const and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace date {
class time_zone;
}

namespace sediment::query {

class TimeZone {
 public:
  // UTC.
  TimeZone() = default;

  // "UTC", "GMT", "Z" (any case), optionally followed by an offset; an offset "+HH", "+HHMM",
  // "+HH:MM" (sign required, at most 18:00); an IANA zone name (case-sensitive, as the database
  // spells it); or a Java short id (PST, CET, ...). nullopt for anything else, and for names when
  // the system has no tz database.
  static std::optional<TimeZone> Parse(std::string_view text);

  // A fixed offset, in seconds east of UTC.
  static TimeZone Fixed(int32_t offset_seconds);

  bool named() const { return zone_ != nullptr; }
  // The fixed offset (meaningful only when !named()).
  int32_t fixed_offset() const { return fixed_; }

  // Seconds east of UTC in effect at the instant `utc_seconds` (seconds since the epoch).
  int32_t OffsetAt(int64_t utc_seconds) const;

  // Seconds east of UTC to subtract from the wall time `local_seconds` (seconds since
  // 1970-01-01T00:00 local) to get its instant. As java.time resolves a local time: in an
  // overlap (clocks set back) the earlier offset; in a gap (clocks set forward) the offset before
  // the gap, which moves the time forward by the gap's length.
  int32_t OffsetOfLocal(int64_t local_seconds) const;

  // What %Z prints at `utc_seconds`: "UTC" for UTC, "+HH:MM" for other fixed offsets, the zone's
  // abbreviation (PST, CEST, ...) for named zones.
  std::string Abbreviation(int64_t utc_seconds) const;

 private:
  int32_t fixed_ = 0;
  const date::time_zone* zone_ = nullptr;
};

}  // namespace sediment::query
