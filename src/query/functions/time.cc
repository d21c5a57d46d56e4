// The time:* family, registered with their namespaced names: time:year(field=@timestamp,
// as=_year, timezone=UTC), time:month, time:dayOfMonth, time:hour, time:minute, time:second,
// time:millisecond, time:dayOfWeek (1 = Monday .. 7 = Sunday), time:dayOfWeekName,
// time:monthName, time:dayOfYear, time:weekOfYear (ISO 8601). Per-record stages.
//
// The field holds milliseconds since the epoch. `timezone` takes UTC, a fixed offset or a zone
// name (TimeZone). Deviation: without it the time is read in UTC (LogScale uses the query's zone,
// which sediment does not have); timezoneField is not supported.
#include <cmath>
#include <string>

#include "query/functions/list.h"
#include "query/functions/transforms.h"
#include "query/time_zone.h"
#include "query/transform.h"

namespace sediment::query::functions {
namespace {

enum class Part {
  kYear,
  kMonth,
  kDayOfMonth,
  kHour,
  kMinute,
  kSecond,
  kMillisecond,
  kDayOfWeek,
  kDayOfWeekName,
  kMonthName,
  kDayOfYear,
  kWeekOfYear,
};

int64_t Int(std::string_view s) { return ParseInt(s).value_or(0); }

// ISO 8601 week of the year of a date with day-of-year `doy` (1-based), ISO weekday `dow`
// (1 = Monday) in `year`.
int64_t IsoWeek(int64_t year, int64_t doy, int64_t dow) {
  auto weeks_in = [](int64_t y) {
    // A year has 53 weeks when it starts on a Thursday, or on a Wednesday in a leap year.
    const int64_t jan1 = ((CivilDays(y, 1, 1) + 3) % 7 + 7) % 7 + 1;  // 1970-01-01: Thursday
    const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return (jan1 == 4 || (leap && jan1 == 3)) ? 53 : 52;
  };
  const int64_t w = (doy - dow + 10) / 7;
  if (w < 1) return weeks_in(year - 1);
  if (w > weeks_in(year)) return 1;
  return w;
}

template <Part P>
bool Build(Call& c, Stage* st) {
  std::optional<TimeZone> tz = TimeZone::Parse(c.String("timezone"));
  if (!tz) {
    c.BadParam("timezone", kTimezoneExpected);
    return false;
  }
  std::string field = c.String("field");
  std::string as = c.String("as");
  std::vector<std::string> touched = {field, as};
  SetRecordFunction(
      st,
      [field, as, tz = *tz](Record& r) {
        std::optional<Value> v = r.GetValue(field);
        if (!v) return true;
        int64_t ms = 0;
        if (const auto* i = std::get_if<int64_t>(&*v)) {
          ms = *i;
        } else {
          std::optional<double> d = ValueToNumber(*v);
          if (!d || !FitsInt64(std::floor(*d))) return true;
          ms = static_cast<int64_t>(std::floor(*d));
        }
        auto f = [&](const char* conv) { return FormatTime(conv, ms, tz); };
        auto dow = [&] {
          const int64_t w = Int(f("%u"));
          return w;
        };
        switch (P) {
          case Part::kYear:
            r.Set(as, Value(Int(f("%Y"))));
            break;
          case Part::kMonth:
            r.Set(as, Value(Int(f("%m"))));
            break;
          case Part::kDayOfMonth:
            r.Set(as, Value(Int(f("%d"))));
            break;
          case Part::kHour:
            r.Set(as, Value(Int(f("%H"))));
            break;
          case Part::kMinute:
            r.Set(as, Value(Int(f("%M"))));
            break;
          case Part::kSecond:
            r.Set(as, Value(Int(f("%S"))));
            break;
          case Part::kMillisecond:
            r.Set(as, Value(Int(f("%L"))));
            break;
          case Part::kDayOfWeek:
            r.Set(as, Value(dow()));
            break;
          case Part::kDayOfWeekName:
            r.Set(as, Value(f("%A")));
            break;
          case Part::kMonthName:
            r.Set(as, Value(f("%B")));
            break;
          case Part::kDayOfYear:
            r.Set(as, Value(Int(f("%j"))));
            break;
          case Part::kWeekOfYear:
            r.Set(as, Value(IsoWeek(Int(f("%Y")), Int(f("%j")), dow())));
            break;
        }
        return true;
      },
      std::move(touched));
  return true;
}

}  // namespace

#define SEDIMENT_TIME_PART(var, fname, out, part, text)                                        \
  namespace {                                                                                  \
  constexpr Param var##Params[] = {                                                            \
      {.name = "field", .type = Type::kField, .unnamed = true, .default_value = "@timestamp"}, \
      {.name = "as", .type = Type::kField, .default_value = out},                              \
      {.name = "timezone", .type = Type::kString, .default_value = "UTC"},                     \
      {.name = "timezoneField", .type = Type::kUnsupported},                                   \
  };                                                                                           \
  }                                                                                            \
  const Function var = {                                                                       \
      .name = fname,                                                                           \
      .kind = Kind::kTransform,                                                                \
      .params = var##Params,                                                                   \
      .doc = text,                                                                             \
      .stage = &Build<Part::part>,                                                             \
  };

SEDIMENT_TIME_PART(kTimeYear, "time:year", "_year", kYear, "the year of a time")
SEDIMENT_TIME_PART(kTimeMonth, "time:month", "_month", kMonth, "the month (1-12) of a time")
SEDIMENT_TIME_PART(kTimeDayOfMonth, "time:dayOfMonth", "_dayOfMonth", kDayOfMonth,
                   "the day of the month of a time")
SEDIMENT_TIME_PART(kTimeHour, "time:hour", "_hour", kHour, "the hour (0-23) of a time")
SEDIMENT_TIME_PART(kTimeMinute, "time:minute", "_minute", kMinute, "the minute of a time")
SEDIMENT_TIME_PART(kTimeSecond, "time:second", "_second", kSecond, "the second of a time")
SEDIMENT_TIME_PART(kTimeMillisecond, "time:millisecond", "_millisecond", kMillisecond,
                   "the millisecond (0-999) of a time")
SEDIMENT_TIME_PART(kTimeDayOfWeek, "time:dayOfWeek", "_dayOfWeek", kDayOfWeek,
                   "the day of the week (1 = Monday) of a time")
SEDIMENT_TIME_PART(kTimeDayOfWeekName, "time:dayOfWeekName", "_dayOfWeekName", kDayOfWeekName,
                   "the English name of the day of the week of a time")
SEDIMENT_TIME_PART(kTimeMonthName, "time:monthName", "_monthName", kMonthName,
                   "the English name of the month of a time")
SEDIMENT_TIME_PART(kTimeDayOfYear, "time:dayOfYear", "_dayOfYear", kDayOfYear,
                   "the day of the year (1-366) of a time")
SEDIMENT_TIME_PART(kTimeWeekOfYear, "time:weekOfYear", "_weekOfYear", kWeekOfYear,
                   "the ISO 8601 week of the year of a time")

#undef SEDIMENT_TIME_PART

}  // namespace sediment::query::functions
