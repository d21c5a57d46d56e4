// Internals shared by the parsers' files. Not part of the library's contract.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "model/event.h"
#include "parsers/parsers.h"

namespace sediment::parsers::internal {

// Sets (adds or replaces) a field of `e`.
void SetField(Event* e, std::string_view name, std::string_view value);
// @error=true and @error_msg=message (LogScale's convention for an event a parser failed on).
void SetError(Event* e, std::string_view message);
// ISO-8601 / RFC 3339, or an epoch number (|n| < 1e11 seconds, else milliseconds).
std::optional<int64_t> TimestampFromText(std::string_view s);

// The native built-ins (builtin_text.cc).
std::shared_ptr<const Parser> NewAccessLogParser();
std::shared_ptr<const Parser> NewSyslogParser();

// Apache/NGINX "10/Oct/2000:13:55:36 -0700" to ms since the epoch.
std::optional<int64_t> ParseClfTime(std::string_view s);
// RFC 3164 "Oct 11 22:14:15" (no year: the year of `now_ms` in UTC, or the year before when that
// would put it more than a day after `now_ms`), read as UTC.
std::optional<int64_t> ParseBsdTime(std::string_view s, int64_t now_ms);

}  // namespace sediment::parsers::internal
