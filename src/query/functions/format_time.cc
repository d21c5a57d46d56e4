// formatTime(format, as, field=@timestamp, timezone=UTC): a millisecond time formatted
// strftime-style into a field. A per-record stage; also holds FormatTime (transform.h), which the
// formattime() expression function uses too.
//
// Choice where LogScale's documentation leaves room: the Java Formatter conventions LogScale
// documents: %e is not padded, %p is "am"/"pm", %Z is "UTC" or the offset ("+02:00"); %A %B %h
// %k %l %N %Q %C %D %R %u (ISO weekday, 1 = Monday) are supported too. The source value is
// milliseconds; without `as` the source field is replaced.
#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/text_util.h"
#include "query/transform.h"

namespace sediment::query {
namespace functions {
namespace {

constexpr Param kParams[] = {
    {.name = "format", .type = Type::kString, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .required = true},
    {.name = "field", .type = Type::kField, .default_value = "@timestamp"},
    {.name = "timezone", .type = Type::kString, .default_value = "UTC"},
    {.name = "locale", .type = Type::kString},
    {.name = "unit", .type = Type::kString, .default_value = "milliseconds"},
};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// "UTC", "Z" (GMT is taken as UTC) or a fixed offset "+HH:MM" / "+HHMM" / "+HH" normalized to
// "+HH:MM"; a named zone (TimeZone::Parse) as given; nullopt for anything else.
std::optional<std::string> NormalizeTimezone(std::string_view tz) {
  std::string up = Lower(tz);
  if (up == "utc" || up == "gmt") return std::string("UTC");
  if (up == "z") return std::string("Z");
  std::optional<TimeZone> zone = TimeZone::Parse(tz);
  if (!zone) return std::nullopt;
  if (zone->named()) return std::string(tz);
  if (tz.size() < 3 || (tz[0] != '+' && tz[0] != '-')) return std::string(tz);
  std::string_view rest = tz.substr(1);
  std::string digits;
  if (rest.size() == 5 && rest[2] == ':') {
    digits = std::string(rest.substr(0, 2)) + std::string(rest.substr(3, 2));
  } else if (rest.size() == 4 || rest.size() == 2) {
    digits = std::string(rest) + (rest.size() == 2 ? "00" : "");
  } else {
    return std::nullopt;
  }
  for (char c : digits) {
    if (!IsDigit(c)) return std::nullopt;
  }
  return std::string(1, tz[0]) + digits.substr(0, 2) + ":" + digits.substr(2, 2);
}

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kFormatTime;
  st->format = c.String("format");
  st->as = c.String("as");
  st->field = c.String("field");
  std::optional<std::string> tz = NormalizeTimezone(c.String("timezone"));
  if (!tz) {
    c.BadParam("timezone", kTimezoneExpected);
    return false;
  }
  st->timezone = *tz;
  const std::string unit = Lower(c.String("unit"));
  if (unit == "seconds") {
    st->time_unit_ms = 1000;
  } else if (unit != "milliseconds") {
    c.BadParam("unit", "milliseconds or seconds");
    return false;
  }
  // Names of days and months are English: only English locales give LogScale's output.
  const std::string locale = Lower(c.String("locale"));
  if (c.Given("locale") && locale != "en" && !locale.starts_with("en_") &&
      !locale.starts_with("en-")) {
    c.BadParam("locale",
               "an English locale (en, en_US, en_GB, ...): day and month names are English");
    return false;
  }
  return true;
}

}  // namespace

const Function kFormatTime = {
    .name = "formatTime",
    .kind = Kind::kTransform,
    .params = kParams,
    .doc = "formats a millisecond time into a field",
    .stage = &Build,
};

// ---- per-record implementation ----

namespace {

const std::string kTimestampField = "@timestamp";

// Days since 1970-01-01 of a proleptic Gregorian date, and back (H. Hinnant's algorithms).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

void CivilFromDays(int64_t z, int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = static_cast<int64_t>(yoe) + era * 400 + (*m <= 2);
}

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t FloorMod(int64_t a, int64_t b) { return a - FloorDiv(a, b) * b; }

void AppendPadded(std::string* out, int64_t v, int width) {
  char buf[24];
  char* end = std::to_chars(buf, buf + sizeof(buf), v < 0 ? -v : v).ptr;
  if (v < 0) out->push_back('-');
  for (int pad = width - static_cast<int>(end - buf); pad > 0; --pad) out->push_back('0');
  out->append(buf, end);
}

constexpr std::string_view kDayShort[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
constexpr std::string_view kDayLong[] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                         "Thursday", "Friday", "Saturday"};
constexpr std::string_view kMonShort[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
constexpr std::string_view kMonLong[] = {"January",   "February", "March",    "April",
                                         "May",       "June",     "July",     "August",
                                         "September", "October",  "November", "December"};

}  // namespace

int64_t CivilDays(int64_t year, unsigned month, unsigned day) {
  return DaysFromCivil(year, month, day);
}

std::optional<int32_t> ParseTimezone(std::string_view tz) {
  std::optional<TimeZone> zone = TimeZone::Parse(tz);
  if (!zone || zone->named()) return std::nullopt;
  return zone->fixed_offset();
}

void ApplyFormatTime(const Stage& st, Record& r) {
  const std::string& field = FieldOr(st.field, kTimestampField);
  std::optional<Value> v = r.GetValue(field);
  if (!v) return;
  int64_t ms = 0;
  std::optional<int64_t> exact;
  if (const auto* i = std::get_if<int64_t>(&v.value())) {
    exact = *i;
  } else if (const auto* s = std::get_if<std::string>(&v.value())) {
    exact = ParseInt(*s);
  }
  const int64_t unit = st.time_unit_ms > 0 ? st.time_unit_ms : 1;
  if (exact && (unit == 1 || (*exact > -9223372036854775 && *exact < 9223372036854775))) {
    ms = *exact * unit;
  } else {
    std::optional<double> d = ValueToNumber(*v);
    if (!d || !FitsInt64(std::floor(*d * static_cast<double>(unit)))) return;
    ms = static_cast<int64_t>(std::floor(*d * static_cast<double>(unit)));
  }
  r.Set(FieldOr(st.as, field), Value(FormatTime(st.format, ms, st.timezone)));
}

}  // namespace functions

// The public strftime-style formatter of transform.h (formatTime() and the formattime()
// expression function).
using functions::AppendPadded;
using functions::CivilFromDays;
using functions::DaysFromCivil;
using functions::FloorDiv;
using functions::FloorMod;
using functions::kDayLong;
using functions::kDayShort;
using functions::kMonLong;
using functions::kMonShort;

std::string FormatTime(std::string_view format, int64_t ms, std::string_view timezone) {
  return FormatTime(format, ms, TimeZone::Parse(timezone).value_or(TimeZone()));
}

std::string FormatTime(std::string_view format, int64_t ms, const TimeZone& zone) {
  const int64_t secs_utc = FloorDiv(ms, 1000);
  const int32_t offset = zone.OffsetAt(secs_utc);
  const int64_t millis = FloorMod(ms, 1000);
  const int64_t secs = secs_utc + offset;
  const int64_t days = FloorDiv(secs, 86400);
  const int64_t sod = FloorMod(secs, 86400);
  int64_t year = 0;
  unsigned month = 0, mday = 0;
  CivilFromDays(days, &year, &month, &mday);
  const int64_t hour = sod / 3600, minute = sod / 60 % 60, second = sod % 60;
  const int64_t wday = FloorMod(days + 4, 7);  // 1970-01-01 was a Thursday
  const int64_t yday = days - DaysFromCivil(year, 1, 1) + 1;
  const int64_t hour12 = hour % 12 == 0 ? 12 : hour % 12;

  std::string out;
  out.reserve(format.size() + 16);
  auto zone_offset = [&](bool colon) {
    const int32_t a = offset < 0 ? -offset : offset;
    out.push_back(offset < 0 ? '-' : '+');
    AppendPadded(&out, a / 3600, 2);
    if (colon) out.push_back(':');
    AppendPadded(&out, a / 60 % 60, 2);
  };
  auto year4 = [&] { AppendPadded(&out, year, 4); };
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if (c != '%' || i + 1 == format.size()) {
      out.push_back(c);
      continue;
    }
    const char conv = format[++i];
    switch (conv) {
      case 'Y':
        year4();
        break;
      case 'C':
        AppendPadded(&out, FloorDiv(year, 100), 2);
        break;
      case 'y':
        AppendPadded(&out, FloorMod(year, 100), 2);
        break;
      case 'm':
        AppendPadded(&out, month, 2);
        break;
      case 'd':
        AppendPadded(&out, mday, 2);
        break;
      case 'e':
        AppendPadded(&out, mday, 1);
        break;
      case 'u':
        AppendPadded(&out, wday == 0 ? 7 : wday, 1);
        break;
      case 'j':
        AppendPadded(&out, yday, 3);
        break;
      case 'H':
        AppendPadded(&out, hour, 2);
        break;
      case 'k':
        AppendPadded(&out, hour, 1);
        break;
      case 'I':
        AppendPadded(&out, hour12, 2);
        break;
      case 'l':
        AppendPadded(&out, hour12, 1);
        break;
      case 'M':
        AppendPadded(&out, minute, 2);
        break;
      case 'S':
        AppendPadded(&out, second, 2);
        break;
      case 'L':
        AppendPadded(&out, millis, 3);
        break;
      case 'N':
        AppendPadded(&out, millis * 1000000, 9);
        break;
      case 'p':
        out.append(hour < 12 ? "am" : "pm");
        break;
      case 'a':
        out.append(kDayShort[wday]);
        break;
      case 'A':
        out.append(kDayLong[wday]);
        break;
      case 'b':
      case 'h':
        out.append(kMonShort[month - 1]);
        break;
      case 'B':
        out.append(kMonLong[month - 1]);
        break;
      case 'Z':
        out.append(zone.Abbreviation(secs_utc));
        break;
      case 'z':
        zone_offset(false);
        break;
      case 's':
        AppendPadded(&out, secs_utc, 1);
        break;
      case 'Q':
        AppendPadded(&out, ms, 1);
        break;
      case 'F':
        year4();
        out.push_back('-');
        AppendPadded(&out, month, 2);
        out.push_back('-');
        AppendPadded(&out, mday, 2);
        break;
      case 'D':
        AppendPadded(&out, month, 2);
        out.push_back('/');
        AppendPadded(&out, mday, 2);
        out.push_back('/');
        AppendPadded(&out, FloorMod(year, 100), 2);
        break;
      case 'T':
      case 'R':
        AppendPadded(&out, hour, 2);
        out.push_back(':');
        AppendPadded(&out, minute, 2);
        if (conv == 'T') {
          out.push_back(':');
          AppendPadded(&out, second, 2);
        }
        break;
      case '%':
        out.push_back('%');
        break;
      default:
        out.push_back('%');
        out.push_back(conv);
        break;
    }
  }
  return out;
}

}  // namespace sediment::query
