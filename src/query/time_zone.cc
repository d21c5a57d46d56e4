#include "query/time_zone.h"

#include <date/tz.h>

#include <chrono>
#include <exception>
#include <utility>

namespace sediment::query {
namespace {

bool EqualsIgnoreCaseAscii(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// "UTC"/"GMT"/"Z" with an optional offset, or an offset: seconds east of UTC.
std::optional<int32_t> ParseFixed(std::string_view tz) {
  if (tz.size() >= 3 && (EqualsIgnoreCaseAscii(tz.substr(0, 3), "utc") ||
                         EqualsIgnoreCaseAscii(tz.substr(0, 3), "gmt"))) {
    tz.remove_prefix(3);
  } else if (tz.size() == 1 && (tz[0] == 'Z' || tz[0] == 'z')) {
    tz.remove_prefix(1);
  }
  if (tz.empty()) return 0;
  if (tz[0] != '+' && tz[0] != '-') return std::nullopt;
  const int sign = tz[0] == '-' ? -1 : 1;
  tz.remove_prefix(1);
  auto digits2 = [](std::string_view s) -> int {
    if (s.size() < 2 || s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9') return -1;
    return (s[0] - '0') * 10 + (s[1] - '0');
  };
  const int h = digits2(tz);
  if (h < 0) return std::nullopt;
  tz.remove_prefix(2);
  int m = 0;
  if (!tz.empty()) {
    if (tz[0] == ':') tz.remove_prefix(1);
    m = digits2(tz);
    if (m < 0 || tz.size() != 2) return std::nullopt;
  }
  if (m >= 60 || h * 60 + m > 18 * 60) return std::nullopt;
  return sign * (h * 3600 + m * 60);
}

// java.time.ZoneId.SHORT_IDS: the three-letter ids Java (and so LogScale) accepts, as zone names
// or fixed offsets.
struct ShortId {
  std::string_view id;
  std::string_view zone;  // an IANA name, or a fixed offset
};
constexpr ShortId kShortIds[] = {
    {"ACT", "Australia/Darwin"},
    {"AET", "Australia/Sydney"},
    {"AGT", "America/Argentina/Buenos_Aires"},
    {"ART", "Africa/Cairo"},
    {"AST", "America/Anchorage"},
    {"BET", "America/Sao_Paulo"},
    {"BST", "Asia/Dhaka"},
    {"CAT", "Africa/Harare"},
    {"CNT", "America/St_Johns"},
    {"CST", "America/Chicago"},
    {"CTT", "Asia/Shanghai"},
    {"EAT", "Africa/Addis_Ababa"},
    {"ECT", "Europe/Paris"},
    {"EST", "-05:00"},
    {"HST", "-10:00"},
    {"IET", "America/Indiana/Indianapolis"},
    {"IST", "Asia/Kolkata"},
    {"JST", "Asia/Tokyo"},
    {"MIT", "Pacific/Apia"},
    {"MST", "-07:00"},
    {"NET", "Asia/Yerevan"},
    {"NST", "Pacific/Auckland"},
    {"PLT", "Asia/Karachi"},
    {"PNT", "America/Phoenix"},
    {"PRT", "America/Puerto_Rico"},
    {"PST", "America/Los_Angeles"},
    {"SST", "Pacific/Guadalcanal"},
    {"VST", "Asia/Ho_Chi_Minh"},
};

// The zone called `name` in the system's tz database, or null (no such zone, or no database).
const date::time_zone* Locate(std::string_view name) {
  if (name.empty() || name.size() > 64) return nullptr;
  try {
    return date::locate_zone(name);
  } catch (const std::exception&) {
    return nullptr;
  }
}

date::sys_seconds SysSeconds(int64_t s) { return date::sys_seconds(std::chrono::seconds(s)); }

}  // namespace

TimeZone TimeZone::Fixed(int32_t offset_seconds) {
  TimeZone z;
  z.fixed_ = offset_seconds;
  return z;
}

std::optional<TimeZone> TimeZone::Parse(std::string_view text) {
  if (std::optional<int32_t> fixed = ParseFixed(text)) return Fixed(*fixed);
  for (const ShortId& s : kShortIds) {
    if (text != s.id) continue;
    if (std::optional<int32_t> fixed = ParseFixed(s.zone)) return Fixed(*fixed);
    text = s.zone;
    break;
  }
  const date::time_zone* zone = Locate(text);
  if (zone == nullptr) return std::nullopt;
  TimeZone z;
  z.zone_ = zone;
  return z;
}

int32_t TimeZone::OffsetAt(int64_t utc_seconds) const {
  if (zone_ == nullptr) return fixed_;
  try {
    return static_cast<int32_t>(zone_->get_info(SysSeconds(utc_seconds)).offset.count());
  } catch (const std::exception&) {
    return 0;  // outside the years the library can represent
  }
}

int32_t TimeZone::OffsetOfLocal(int64_t local_seconds) const {
  if (zone_ == nullptr) return fixed_;
  try {
    const date::local_info info =
        zone_->get_info(date::local_seconds(std::chrono::seconds(local_seconds)));
    return static_cast<int32_t>(info.first.offset.count());
  } catch (const std::exception&) {
    return 0;
  }
}

std::string TimeZone::Abbreviation(int64_t utc_seconds) const {
  if (zone_ != nullptr) {
    try {
      return zone_->get_info(SysSeconds(utc_seconds)).abbrev;
    } catch (const std::exception&) {
      return "UTC";
    }
  }
  if (fixed_ == 0) return "UTC";
  const int32_t a = fixed_ < 0 ? -fixed_ : fixed_;
  std::string out(1, fixed_ < 0 ? '-' : '+');
  auto two = [&](int v) {
    out.push_back(static_cast<char>('0' + v / 10));
    out.push_back(static_cast<char>('0' + v % 10));
  };
  two(a / 3600);
  out.push_back(':');
  two(a / 60 % 60);
  return out;
}

}  // namespace sediment::query
