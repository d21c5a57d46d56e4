// formatTime(format, as, field=@timestamp, timezone=UTC): a millisecond time formatted
// strftime-style into a field. A per-record stage (transform.cc: FormatTime).
#include <optional>
#include <string>
#include <string_view>

#include "query/functions/list.h"
#include "query/text_util.h"

namespace sediment::query::functions {
namespace {

constexpr Param kParams[] = {
    {.name = "format", .type = Type::kString, .unnamed = true, .required = true},
    {.name = "as", .type = Type::kField, .required = true},
    {.name = "field", .type = Type::kField, .default_value = "@timestamp"},
    {.name = "timezone", .type = Type::kString, .default_value = "UTC"},
    {.name = "locale", .type = Type::kUnsupported},
    {.name = "unit", .type = Type::kUnsupported},
};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// "UTC", "Z" (GMT is taken as UTC) or a fixed offset "+HH:MM" / "+HHMM" / "+HH" normalized to
// "+HH:MM"; nullopt for anything else (named zones are not supported).
std::optional<std::string> NormalizeTimezone(std::string_view tz) {
  std::string up = Lower(tz);
  if (up == "utc" || up == "gmt") return std::string("UTC");
  if (up == "z") return std::string("Z");
  if (tz.size() < 3 || (tz[0] != '+' && tz[0] != '-')) return std::nullopt;
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
  int hours = (digits[0] - '0') * 10 + (digits[1] - '0');
  int minutes = (digits[2] - '0') * 10 + (digits[3] - '0');
  if (hours > 18 || minutes > 59) return std::nullopt;
  return std::string(1, tz[0]) + digits.substr(0, 2) + ":" + digits.substr(2, 2);
}

bool Build(Call& c, Stage* st) {
  st->kind = Stage::Kind::kFormatTime;
  st->format = c.String("format");
  st->as = c.String("as");
  st->field = c.String("field");
  std::optional<std::string> tz = NormalizeTimezone(c.String("timezone"));
  if (!tz) {
    c.BadParam("timezone", "UTC, Z or a fixed offset such as +02:00");
    return false;
  }
  st->timezone = *tz;
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

}  // namespace sediment::query::functions
