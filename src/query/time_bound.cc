#include <cctype>
#include <charconv>
#include <cstdint>
#include <string>

#include "common/time_parse.h"
#include "query/query.h"

namespace sediment::query {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Milliseconds per unit, 0 when `unit` is not a known unit name.
int64_t UnitMillis(const std::string& unit) {
  constexpr int64_t kSec = 1000, kMin = 60 * kSec, kHour = 60 * kMin, kDay = 24 * kHour;
  struct U {
    const char* names[6];
    int64_t ms;
  };
  static const U kUnits[] = {
      {{"ms", "millis", "millisecond", "milliseconds", "msec", "msecs"}, 1},
      {{"s", "sec", "secs", "second", "seconds", nullptr}, kSec},
      {{"m", "min", "mins", "minute", "minutes", nullptr}, kMin},
      {{"h", "hr", "hrs", "hour", "hours", nullptr}, kHour},
      {{"d", "day", "days", nullptr, nullptr, nullptr}, kDay},
      {{"w", "week", "weeks", nullptr, nullptr, nullptr}, 7 * kDay},
      {{"mon", "month", "months", nullptr, nullptr, nullptr}, 30 * kDay},
      {{"y", "yr", "yrs", "year", "years", nullptr}, 365 * kDay},
  };
  for (const U& u : kUnits) {
    for (const char* n : u.names) {
      if (n != nullptr && unit == n) return u.ms;
    }
  }
  return 0;
}

}  // namespace

Result<int64_t> ParseTimeBound(std::string_view input, int64_t now_ms) {
  std::string_view s = Trim(input);
  auto bad = [&]() {
    return Status::InvalidArgument("invalid time '" + std::string(input) +
                                   "': expected a relative time such as 15m or 24h, epoch "
                                   "milliseconds, or an ISO-8601 timestamp");
  };
  if (s.empty()) return bad();
  std::string lower = Lower(s);
  if (lower == "now") return now_ms;
  bool all_digits = true;
  for (char c : s) all_digits = all_digits && c >= '0' && c <= '9';
  if (all_digits) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) return bad();
    return v;
  }
  if (std::optional<int64_t> iso = ParseIso8601Millis(s)) return *iso;
  // Relative: <amount> [spaces] <unit> [spaces "ago"].
  std::string_view rest = lower;
  size_t i = 0;
  while (i < rest.size() && rest[i] >= '0' && rest[i] <= '9') ++i;
  if (i == 0) return bad();
  int64_t amount = 0;
  auto [p, ec] = std::from_chars(rest.data(), rest.data() + i, amount);
  if (ec != std::errc()) return bad();
  rest = Trim(rest.substr(i));
  if (rest.size() >= 3 && rest.substr(rest.size() - 3) == "ago") {
    rest = Trim(rest.substr(0, rest.size() - 3));
  }
  int64_t unit = UnitMillis(std::string(rest));
  if (unit == 0) return bad();
  if (amount > (INT64_MAX / 4) / unit) return bad();
  return now_ms - amount * unit;
}

Result<TimeRange> ParseTimeRange(std::string_view start, std::string_view end, int64_t now_ms) {
  TimeRange r;
  if (Trim(start).empty()) {
    r.start_ms = now_ms - 24LL * 3600 * 1000;
  } else {
    ASSIGN_OR_RETURN(r.start_ms, ParseTimeBound(start, now_ms));
  }
  if (Trim(end).empty()) {
    r.end_ms = now_ms;
  } else {
    ASSIGN_OR_RETURN(r.end_ms, ParseTimeBound(end, now_ms));
  }
  if (r.start_ms > r.end_ms) {
    return Status::InvalidArgument("time range start '" + std::string(start) +
                                   "' is after its end '" + std::string(end) + "'");
  }
  return r;
}

}  // namespace sediment::query
